"""A pooled headline says that it is an average, how far it lags, and the line through its weeks
(issue 39, point 2): through the real ingest and judge, the selectors, the page and the API's
schema."""

import dataclasses
import re

import pytest
from django.test import Client

from dashboard.api import HeadlineOut
from dashboard.domain.trend import WeekPoint, pool_lag, pool_trend
from dashboard.selectors import figures as dashboard_figures
from tests.monitoring.dashboard_world import DashWorld, build_world
from tests.support.world import WorldBuilder

G, U = "GEDECKT", "UNGEDECKT"


@pytest.fixture
def world(world_builder: WorldBuilder, db: None) -> DashWorld:
    return build_world(world_builder)


def test_a_pooled_headline_carries_its_lag_and_the_line_through_its_weeks(
    world: DashWorld,
) -> None:
    # Four thin weeks (three judged answers each, the threshold 0.9): no week decides alone,
    # so the headline is the judge's 4-week view. The weeks fall; the last has more volume.
    weeks = world.weeks[-5:-1]
    scores = ([[G], [G], [G]], [[G], [G], [G]], [[G], [G], [G, U]], [[G], [G, U], [G]])
    for i, (week, verdicts) in enumerate(zip(weeks, scores, strict=True)):
        drawn, rest = world.ids(f"t{i}", 3, 3 + 3 * (i == 3))
        for external_id, v in zip(drawn, verdicts, strict=True):
            world.answer(external_id, week=week, verdicts=v)
        for external_id in rest:
            world.answer(external_id, week=week)
    figures = dashboard_figures.use_case_weeks(use_case=world.a, claims=False)
    last = figures[-2]
    assert last.label == weeks[-1].label and last.light == "grey"
    headline = dashboard_figures.use_case_headline(figures)
    assert (headline.scale, headline.view, headline.week, headline.weeks) == (
        "judge", "pooled", last.label, 4)
    # The line is the one through the four weeks' own estimates, moved from the pool's value.
    points = [WeekPoint(f.estimate.value, f.estimate.low, f.estimate.high, f.volume)
              for f in figures[-5:-1]]
    assert [p.volume for p in points] == [6, 6, 6, 9]
    expected = pool_trend(points, value=headline.value, low=headline.low, high=headline.high)
    assert expected is not None and headline.trend == expected
    assert expected.slope < 0
    # The volume-weighted centre: (0·6 + 1·6 + 2·6 + 3·9)/27 = 1.6667, 1.33 weeks behind.
    assert headline.lag == pytest.approx(pool_lag(points)) == pytest.approx(3 - 45 / 27)
    assert headline.trend_amber == (last.standard_pooled_light == "green"
                                    and expected.hides_fall(0.9))

    # The page says what the headline is.
    client = Client()
    client.force_login(world.users["lead_a"])
    page = client.get("/use-cases/auskunft/").content.decode()
    tile = re.search(r'<div class="stat headline" data-headline.*?</div>', page, re.S)
    assert tile is not None
    note = "Durchschnitt über 4 Wochen; er liegt etwa 1,3 Wochen hinter der letzten."
    assert note in tile.group(0)
    # And the API's schema carries it.
    out = HeadlineOut.model_validate(dataclasses.asdict(headline))
    assert out.lag == pytest.approx(headline.lag)
    assert out.trend is not None and out.trend.current == pytest.approx(expected.current)


def test_the_note_and_the_amber_are_rendered_where_a_fall_is_hidden() -> None:
    from django.template.loader import render_to_string

    from dashboard.domain.headline import EXPERTS, POOLED, Headline, with_trend
    from dashboard.domain.statistics.cells import z_value

    z = z_value(0.95)
    falling = [WeekPoint(v, v - z * 0.02, v + z * 0.02, 500) for v in (0.92, 0.90, 0.88, 0.86)]
    green = Headline(EXPERTS, POOLED, "2026-W40", 4, False, 0.89, 0.87, 0.91, 60, False, "green")
    h = with_trend(green, falling, 0.87)
    html = render_to_string("monitoring/_dash_headline.html", {"h": h})
    assert 'data-light="amber"' in html
    assert ("Gelb: die Wochen fallen um 0,02 je Woche, und nach dieser Linie liegt 2026-W40 bei "
            "etwa 0,86 (0,83–0,89), unter der Handlungsschwelle.") in re.sub(r"\s+", " ", html)
    # Not hidden (the line's week above the threshold): the note, no amber.
    html = render_to_string("monitoring/_dash_headline.html",
                            {"h": with_trend(green, falling, 0.85)})
    assert 'data-light="green"' in html and "Gelb:" not in html
    assert "Durchschnitt über 4 Wochen; er liegt etwa 1,5 Wochen hinter der letzten." in html


@pytest.mark.parametrize(("trend", "shown"), [
    ("up", "↑"), ("down", "↓"), ("flat", "→"),
    # Issue 41: "–" read as a stray dash; no comparison says so in words.
    ("none", "kein Vergleich"),
])
def test_the_trend_mark_reads_as_what_it_means(trend: str, shown: str) -> None:
    from django.template.loader import render_to_string
    from django.utils import translation

    with translation.override("de"):
        html = render_to_string("monitoring/_dash_trend.html", {"trend": trend})
    mark = re.sub(r"<[^>]+>", "", html).strip()
    assert shown in mark and "–" not in mark
