"""A team lead tunes the use case in the app: the flag threshold (a tuner row's "use this
threshold" or the settings form), the sample rate and the action threshold. Each change is
recorded with who, when, old and new value, listed on the use-case page, marked in the week it
was made (weekly table, trend chart, the tuner, the estimates API), and made in the admin too."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest
from django.contrib.admin.sites import site
from django.core.exceptions import ValidationError
from django.test import Client, RequestFactory
from django.utils import translation

from dashboard.views.trends import setting_change_text
from monitoring.models import SettingChange, UseCase
from monitoring.services import tuning
from tests.monitoring.dashboard_world import DashWorld, client_for, figure, text_of
from tests.monitoring.test_dashboard_pages import world  # noqa: F401  (the fixture)

URL = "/use-cases/auskunft/settings/"
PAGE = "/use-cases/auskunft/"


def fresh(use_case: UseCase) -> UseCase:
    return UseCase.objects.get(pk=use_case.pk)


def test_the_service_records_each_change_and_only_changes(world: DashWorld) -> None:  # noqa: F811
    lead = world.users["lead_a"]
    a = world.a
    before = (a.logprob_threshold, a.sample_rate, a.action_threshold)
    changes = tuning.use_case_tune(use_case=a, user=lead, values={
        "logprob_threshold": 0.4, "sample_rate": before[1], "action_threshold": 0.8,
    }, note="Test")
    assert sorted((c.field, c.old_value, c.new_value) for c in changes) == [
        ("action_threshold", before[2], 0.8), ("logprob_threshold", before[0], 0.4)]
    assert all(c.changed_by == lead and c.note == "Test" for c in changes)
    a = fresh(a)
    assert (a.logprob_threshold, a.sample_rate, a.action_threshold) == (0.4, before[1], 0.8)
    # The same values again are no change.
    assert tuning.use_case_tune(use_case=a, user=lead, values={"logprob_threshold": 0.4}) == []
    assert SettingChange.objects.count() == 2


@pytest.mark.parametrize("values", [
    {"sample_rate": 0.0}, {"sample_rate": 1.5}, {"action_threshold": 1.2},
    {"logprob_threshold": float("nan")},
])
def test_a_bad_value_saves_nothing(world: DashWorld, values: dict[str, float]) -> None:  # noqa: F811
    a = world.a
    before = (a.logprob_threshold, a.sample_rate, a.action_threshold)
    with pytest.raises(ValidationError):
        tuning.use_case_tune(use_case=a, user=None, values={"logprob_threshold": 0.3, **values})
    a = fresh(a)
    assert (a.logprob_threshold, a.sample_rate, a.action_threshold) == before
    assert not SettingChange.objects.exists()
    with pytest.raises(ValueError, match="not tunable"):
        tuning.use_case_tune(use_case=a, user=None, values={"retention_days": 30})


def test_a_lead_changes_the_settings_and_reads_the_history(world: DashWorld) -> None:  # noqa: F811
    lead = client_for(world, "lead_a")
    assert world.a.sample_rate == 0.25
    response = lead.post(URL, {"logprob_threshold": "0.45", "sample_percent": "5",
                               "action_threshold": "", "note": "mehr Stichprobe"})
    assert (response.status_code, response["Location"]) == (302, PAGE + "#settings")
    a = fresh(world.a)
    assert (a.logprob_threshold, a.sample_rate) == (0.45, 0.05)
    html = lead.get(PAGE).content.decode()
    text = text_of(html)
    assert "Gespeichert: " in text
    assert "Stichprobenrate 25 % → 5 %" in text
    assert "Wahrscheinlichkeits-Schwelle 0,50 → 0,45" in text
    assert "leitung-a" in text and "mehr Stichprobe" in text
    # The week of the change is marked: the weekly table, when it has answers, and the chart.
    world.answer("nach-der-aenderung", week=world.this_week)
    html = lead.get(PAGE).content.decode()
    row = html.split(f'data-week="{world.this_week.label}"')[1].split("</tr>")[0]
    assert "Einstellung geändert" in row and "Stichprobenrate 25 % → 5 %" in row
    shapes = figure(html, "trend-figure")["layout"].get("annotations", [])
    # (Plotly's text, "%" written as an entity, which Plotly draws as "%").
    assert [a["text"] for a in shapes] == ["Einstellung geändert"]
    assert any("Stichprobenrate 25 % → 5 %" in unescape(a["hovertext"]) for a in shapes)


@pytest.mark.parametrize(("field", "old", "new", "shown"), [
    # Issue 41: "0,85 → 0,8" read as a cut-off number; both sides get the same digits.
    ("action_threshold", 0.85, 0.8, "Handlungsschwelle 0,85 → 0,80"),
    ("action_threshold", 0.8, 0.85, "Handlungsschwelle 0,80 → 0,85"),
    ("logprob_threshold", 0.5, 0.3, "Wahrscheinlichkeits-Schwelle 0,5 → 0,3"),
    ("sample_rate", 0.25, 0.125, "Stichprobenrate 25,0 % → 12,5 %"),
    ("sample_rate", 0.25, 0.05, "Stichprobenrate 25 % → 5 %"),
])
def test_a_changes_two_sides_have_the_same_digits(field: str, old: float, new: float,
                                                  shown: str) -> None:
    with translation.override("de"):
        assert setting_change_text(SettingChange(field=field, old_value=old,
                                                 new_value=new)) == shown


def test_a_tuner_row_sets_its_threshold(world: DashWorld) -> None:  # noqa: F811
    world.last_week_scenario()
    lead = client_for(world, "lead_a")
    html = lead.get(PAGE).content.decode()
    assert "Diese Schwelle verwenden" in html
    assert 'name="logprob_threshold" value="0.3"' in html
    response = lead.post(URL, {"logprob_threshold": "0.3", "note": "aus der Abwägung"})
    assert response.status_code == 302
    [change] = SettingChange.objects.all()
    assert (change.field, change.old_value, change.new_value) == ("logprob_threshold", 0.5, 0.3)
    # The tuner says that the weeks it reads had another setting.
    text = text_of(lead.get(PAGE).content.decode())
    assert f"In diesen Wochen geändert: {world.this_week.label}: Wahrscheinlichkeits-Schwelle " \
           "0,5 → 0,3" in text


@pytest.mark.parametrize(("post", "message"), [
    ({"action_threshold": "0,8x"}, "Bitte eine Zahl eingeben."),
    ({"action_threshold": "1,5"}, "kleiner oder gleich 1"),
    ({"action_threshold": "1.5"}, "kleiner oder gleich 1"),
    # The limits are written as the page writes numbers (issue 41: "0.01" beside "0,80").
    ({"sample_percent": "0"}, "größer oder gleich 0,01"),
    ({"note": "nur ein Anlass"}, "Keine Einstellung angegeben."),
])
def test_bad_input_is_a_400_with_the_form_and_saves_nothing(
    world: DashWorld, post: dict[str, str], message: str  # noqa: F811
) -> None:
    response = client_for(world, "lead_a").post(URL, post)
    assert response.status_code == 400
    assert message in text_of(response.content.decode())
    assert not SettingChange.objects.exists()
    assert fresh(world.a).action_threshold == world.a.action_threshold


@pytest.mark.parametrize(("language", "typed", "stored"), [
    # Issue 41: a German page writes "0,80"; typed into the form it became "080".
    ("de", {"action_threshold": "0,80", "sample_percent": "2,5"}, (0.8, 0.025)),
    ("de", {"action_threshold": "0.80", "sample_percent": "2.5"}, (0.8, 0.025)),
    ("en", {"action_threshold": "0.80", "sample_percent": "2.5"}, (0.8, 0.025)),
])
def test_numbers_are_read_in_the_pages_language(
    world: DashWorld, language: str, typed: dict[str, str], stored: tuple[float, float],  # noqa: F811
) -> None:
    lead = client_for(world, "lead_a")
    lead.cookies["django_language"] = language
    response = lead.post(URL, typed)
    assert response.status_code == 302, text_of(response.content.decode())[:300]
    a = fresh(world.a)
    assert (a.action_threshold, a.sample_rate) == stored


def test_the_form_shows_its_values_in_the_pages_language(world: DashWorld) -> None:  # noqa: F811
    lead = client_for(world, "lead_a")
    german = lead.get(PAGE).content.decode()
    field = re.search(r'<input[^>]*name="action_threshold"[^>]*>', german)
    assert field is not None
    assert 'value="0,9"' in field.group() and 'inputmode="decimal"' in field.group()
    # A number input would drop the comma a German reader types (Chromium: "0,80" -> "080").
    assert 'type="text"' in field.group()
    lead.cookies["django_language"] = "en"
    english = lead.get(PAGE).content.decode()
    assert re.search(r'<input[^>]*name="action_threshold"[^>]*value="0.9"', english)


def test_an_invalid_value_is_said_where_the_eye_is(world: DashWorld) -> None:  # noqa: F811
    lead = client_for(world, "lead_a")
    html = lead.get(PAGE).content.decode()
    assert f'action="{URL}#settings"' in html, "the page opens at the form after a save"
    response = lead.post(URL, {"logprob_threshold": "0,45", "action_threshold": "0,8x",
                               "note": "Quartalsziel"})
    assert response.status_code == 400
    html = response.content.decode()
    # A summary near the top of the page, before the long page, links to the field.
    summary = html.index('id="settings-errors"')
    assert summary < html.index('id="trend-chart"')
    link = html[summary:].split("</div>")[0]
    assert 'href="#id_action_threshold"' in link and "Handlungsschwelle" in link
    assert "Bitte eine Zahl eingeben." in text_of(link)
    # The field is marked and focused; what was typed, valid or not, is kept.
    field = re.search(r'<input[^>]*name="action_threshold"[^>]*>', html)
    assert field is not None
    assert 'aria-invalid="true"' in field.group() and "autofocus" in field.group()
    assert 'value="0,8x"' in field.group()
    assert 'aria-describedby="id_action_threshold_error' in field.group()
    assert 'id="id_action_threshold_error"' in html
    other = re.search(r'<input[^>]*id="id_logprob_threshold"[^>]*>', html)
    assert other is not None
    assert 'value="0,45"' in other.group() and "aria-invalid" not in other.group()
    assert 'value="Quartalsziel"' in html
    assert not SettingChange.objects.exists()


@pytest.mark.parametrize(("who", "status"), [
    ("expert_a", 403), ("lead_b", 404), ("nobody", 404), ("staff", 302),
])
def test_who_may_tune(world: DashWorld, who: str, status: int) -> None:  # noqa: F811
    response = client_for(world, who).post(URL, {"logprob_threshold": "0.4"})
    assert response.status_code == status
    assert SettingChange.objects.count() == (1 if status == 302 else 0)
    assert ("Diese Schwelle verwenden" in client_for(world, who).get(PAGE).content.decode()) \
        is (status == 302) or status == 404


def test_anonymous_and_get_are_refused(world: DashWorld) -> None:  # noqa: F811
    response = Client().post(URL, {"logprob_threshold": "0.4"})
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert client_for(world, "lead_a").get(URL).status_code == 405


def test_a_change_in_the_admin_is_recorded(world: DashWorld) -> None:  # noqa: F811
    staff = world.users["staff"]
    request = RequestFactory().post("/admin/")
    request.user = staff
    admin = site._registry[UseCase]
    a = fresh(world.a)
    a.action_threshold = 0.8
    admin.save_model(request, a, form=None, change=True)
    [change] = SettingChange.objects.all()
    assert (change.field, change.old_value, change.new_value, change.changed_by) == (
        "action_threshold", 0.9, 0.8, staff)
    assert (change.source, change.note) == ("admin", "")
    assert change.reason == "in der Verwaltung"


def test_where_a_change_was_made_is_named_in_the_readers_language(
    world: DashWorld,  # noqa: F811
) -> None:
    lead = client_for(world, "lead_a")
    # The tuner's "use this threshold" posts where it comes from, not a text.
    lead.post(URL, {"logprob_threshold": "0.3", "source": "tuner"})
    lead.post(URL, {"action_threshold": "0.8", "note": "Quartalsziel"})
    tuner, typed = SettingChange.objects.order_by("pk")
    assert (tuner.source, tuner.note) == ("tuner", "")
    assert (typed.source, typed.note) == ("settings", "Quartalsziel")
    page = "/use-cases/auskunft/"
    german = lead.get(page, HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert "<td>aus der Abwägung der Schwelle</td>" in german and "<td>Quartalsziel</td>" in german
    lead.cookies["django_language"] = "en"
    english = lead.get(page).content.decode()
    assert "<td>from weighing the threshold</td>" in english
    assert "Abwägung" not in english
    # A source that is no source is refused like any bad value.
    assert lead.post(URL, {"logprob_threshold": "0.2", "source": "x"}).status_code == 400


def test_the_estimates_api_lists_the_weeks_changes(world: DashWorld) -> None:  # noqa: F811
    lead = client_for(world, "lead_a")
    lead.post(URL, {"action_threshold": "0.8"})
    body: Any = lead.get("/api/v1/use-cases/auskunft/estimates").json()
    weeks = {w["week"]: w["setting_changes"] for w in body["weeks"]}
    [change] = weeks[world.this_week.label]
    assert (change["setting"], change["old"], change["new"], change["by"]) == (
        "action_threshold", 0.9, 0.8, "leitung-a")
    assert not any(weeks[w.label] for w in world.weeks[:-1] if w.label in weeks)
