"""One verdict (issue 39, point 1): where the experts' scale leads, the overview card's light, its
place in the order, the use-case page's headline, the action alarm and its mail, /metrics and
the estimates API all read it, and a change of the threshold re-decides all of them at once.

The new user's case: the judge scores every answer of last week 1.0 (its week is green), while
the experts, reviewing 20 of them, give each 0.5: on the experts' scale the use case is far
below its action line of 0.85.
"""

import re
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from alarms.models import Alarm
from common.domain.weeks import shift_week
from dashboard.selectors import figures as dashboard_figures
from dashboard.selectors.overview import overview_rows
from dashboard.services.action import action_alarms_check
from monitoring.models import UseCase
from review import services
from tests.review.conftest import ReviewWorld
from tests.review.test_calibration_alarms import imported

G = "GEDECKT"


@pytest.fixture
def experts_below(review_world: ReviewWorld) -> ReviewWorld:
    """Last week: 20 answers the judge scores 1.0, each reviewed by the experts at 0.5."""
    imported(review_world, services.current_week(), [(G, 0.5)] * 20, prefix="h")
    return review_world


def lights(html: str) -> list[str]:
    return re.findall(r'data-light="(\w+)"', html)


def headline_tile(html: str) -> str:
    match = re.search(r"<div class=\"stat headline\" data-headline.*?</div>", html, re.S)
    assert match, "the page has a headline tile"
    return match.group(0)


def test_the_experts_scale_is_the_one_verdict_everywhere(
    experts_below: ReviewWorld, django_capture_on_commit_callbacks: Any,
) -> None:
    w = experts_below
    last_week = shift_week(services.current_week(), -1)
    weeks = dashboard_figures.use_case_weeks(use_case=w.use_case, claims=False)
    assert weeks[-2].label == last_week
    assert weeks[-2].light == "green"  # the judge's own week: every answer 1.0
    headline = dashboard_figures.use_case_headline(weeks)
    assert (headline.scale, headline.view, headline.week) == ("experts", "pooled", last_week)
    assert headline.value == pytest.approx(0.5, abs=0.02)
    assert headline.high is not None and headline.high < 0.85
    assert headline.light == "red"

    # The overview: the card's light and its place follow the experts' scale (the other use
    # case has nothing to decide: grey, after the red one).
    staff = w.users["staff"]
    rows = overview_rows(user=staff)
    assert [r.use_case.slug for r in rows] == ["recht", "fremd"]
    assert (rows[0].light, rows[0].headline) == ("red", headline)
    client = Client()
    client.force_login(staff)
    overview = client.get("/overview/").content.decode()
    card = overview[overview.index('data-use-case="recht"'):overview.index('data-use-case="fremd"')]
    assert "light-border-red" in overview[:overview.index('data-use-case="fremd"')]
    tile = headline_tile(card)
    assert 'data-scale="experts"' in tile and lights(tile) == ["red"]
    assert "0,50" in tile and "20 Prüfungen" in tile

    # The use-case page leads with the same figure and light.
    page = client.get("/use-cases/recht/").content.decode()
    tile = headline_tile(page)
    assert 'data-scale="experts"' in tile and lights(tile) == ["red"]
    assert page.index("data-headline") < page.index('data-week="this"')

    # The action alarm is raised on it, and its mail says which scale.
    with django_capture_on_commit_callbacks(execute=True):
        check = action_alarms_check(use_case=w.use_case)
    assert check.raised == [last_week]
    alarm = Alarm.objects.get(kind=Alarm.Kind.ACTION)
    assert (alarm.details["scale"], alarm.details["view"], alarm.details["light"]) == (
        "experts", "pooled", "red")
    assert alarm.details["estimate"] == pytest.approx(headline.value)
    assert (f"Gemessen auf der Skala der Fachexperten, Sammelsicht über 4 Wochen bis "
            f"{last_week}, mit 20 begutachteten Antworten.") in alarm.message

    # /metrics and the estimates API say the same, with scale and view.
    scraped = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(client.get("/metrics").content.decode())
        for s in family.samples
    }
    labels = (("scale", "experts"), ("use_case", "recht"), ("view", "pooled"))
    assert scraped["treue_headline_faithfulness", labels] == pytest.approx(headline.value)
    assert scraped["treue_headline_light", (("treue_headline_light", "red"),
                                            ("use_case", "recht"))] == 1
    assert scraped["treue_headline_light", (("treue_headline_light", "green"),
                                            ("use_case", "recht"))] == 0
    lead = Client()
    lead.force_login(w.users["lead"])
    answer = lead.get("/api/v1/use-cases/recht/estimates").json()
    assert answer["headline"]["scale"] == "experts" and answer["headline"]["light"] == "red"
    assert answer["headline"]["value"] == pytest.approx(headline.value)
    by_week = {week["week"]: week for week in answer["weeks"]}
    assert by_week[last_week]["headline"] == answer["headline"]
    assert by_week[last_week]["light"] == "green"  # the judge's week, as it was
    assert by_week[services.current_week()]["headline"] is None


def test_a_change_of_threshold_re_decides_every_reading_at_once(
    experts_below: ReviewWorld, django_capture_on_commit_callbacks: Any,
) -> None:
    w = experts_below
    with django_capture_on_commit_callbacks(execute=True):
        assert action_alarms_check(use_case=w.use_case).raised
    UseCase.objects.filter(pk=w.use_case.pk).update(action_threshold=0.40)
    w.use_case.refresh_from_db()
    [row] = [r for r in overview_rows(user=w.users["staff"]) if r.use_case.slug == "recht"]
    assert (row.headline.scale, row.light) == ("experts", "green")
    client = Client()
    client.force_login(w.users["lead"])
    assert lights(headline_tile(client.get("/use-cases/recht/").content.decode())) == ["green"]
    assert client.get("/api/v1/use-cases/recht/estimates").json()["headline"]["light"] == "green"
    with django_capture_on_commit_callbacks(execute=True):
        check = action_alarms_check(use_case=w.use_case)
    assert check.raised == [] and check.cleared == 1
    assert not Alarm.objects.filter(kind=Alarm.Kind.ACTION, cleared_at__isnull=True).exists()
