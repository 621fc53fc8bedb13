"""The action signal: an alarm when a week's estimate is below the use case's action threshold
with enough answers judged; mailed to the team leads once; cleared when a later week recovers;
shown on the overview and the use-case page.

The weeks are built like in test_dashboard_pages (real ingest, real judge service against the
local OpenAI-compatible server): last week's estimate is 0.85 from 20 judged answers, below the
threshold of 0.9.
"""

import re
from typing import Any

import pytest
from django.core import mail
from django.utils import translation

from alarms.models import Alarm
from alarms.services import alarm_raise
from dashboard.selectors import figures as dashboard
from dashboard.services.action import action_alarms_check
from dashboard.tasks import check_action_alarms
from tests.monitoring.dashboard_world import DashWorld, G, U, client_for, de, text_of
from tests.monitoring.test_dashboard_pages import world  # noqa: F401  (the fixture)


def check(capture: Any) -> int:
    """The hourly task, with the mails it queues on commit sent."""
    with capture(execute=True):
        return check_action_alarms()


def action_alarms() -> list[Alarm]:
    return list(Alarm.objects.filter(kind=Alarm.Kind.ACTION).order_by("key"))


def test_alarm_is_raised_and_mailed_once(
    world: DashWorld, django_capture_on_commit_callbacks: Any  # noqa: F811
) -> None:
    world.last_week_scenario()
    assert check(django_capture_on_commit_callbacks) == 1
    [alarm] = action_alarms()
    assert (alarm.use_case, alarm.key, alarm.cleared_at) == (world.a, world.last_week.label, None)
    estimate = dashboard.use_case_weeks(use_case=world.a, claims=False)[-2].estimate
    assert alarm.details["estimate"] == pytest.approx(0.85)
    assert (alarm.details["n"], alarm.details["threshold"]) == (20, 0.9)
    assert alarm.message.startswith(
        f"Woche {world.last_week.label}: Die geschätzte Treue von „Auskunft“ liegt bei 0,85 "
        f"(95-%-Intervall {de(estimate.low)}–{de(estimate.high)}), unter der Handlungsschwelle "
        "von 0,90. Gemessen laut Prüfmodell an 20 geprüften von 50 Antworten."
    )
    assert "nicht die Wahrheit" in alarm.message
    assert "menschliche Freigabe" not in alarm.message

    assert len(mail.outbox) == 1
    sent = mail.outbox[0]
    assert sent.to == ["leitung-a@example.org"], "the team leads of A, nobody else"
    assert "Handlungssignal" in sent.subject and "Auskunft" in sent.subject
    assert alarm.message in sent.body
    alarm.refresh_from_db()
    assert alarm.mailed_at is not None

    # The next hourly check finds the same condition: no second alarm, no second mail.
    assert check(django_capture_on_commit_callbacks) == 0
    assert len(action_alarms()) == 1
    assert len(mail.outbox) == 1


def test_alarm_is_shown_on_both_pages(
    world: DashWorld, django_capture_on_commit_callbacks: Any  # noqa: F811
) -> None:
    world.last_week_scenario()
    check(django_capture_on_commit_callbacks)
    # Alarms of other kinds are shown too, on the use-case page and counted on the overview.
    alarm_raise(use_case=world.a, kind=Alarm.Kind.DRIFT, key="2026-W01",
                text=[("Die Kalibrierung driftet.", {})])
    [alarm] = action_alarms()
    overview = client_for(world, "lead_a").get("/overview/").content.decode()
    assert re.search(r'data-alarms="2"', overview)
    assert "2 offene Alarme" in text_of(overview)
    assert alarm.message in text_of(overview)
    page = text_of(client_for(world, "lead_a").get("/use-cases/auskunft/").content.decode())
    assert "Offene Alarme" in page
    assert f"Handlungssignal {alarm.message}" in page
    assert "Kalibrierungsdrift Die Kalibrierung driftet." in page
    # B's lead sees nothing of A's alarm.
    assert alarm.message not in client_for(world, "lead_b").get("/overview/").content.decode()


def test_an_alarm_reads_in_the_readers_language_and_old_alarms_as_stored(
    world: DashWorld, django_capture_on_commit_callbacks: Any  # noqa: F811
) -> None:
    world.last_week_scenario()
    check(django_capture_on_commit_callbacks)
    [alarm] = action_alarms()
    # Stored (and mailed) in the site's language, German ...
    assert alarm.message.startswith(f"Woche {world.last_week.label}: Die geschätzte Treue")
    # ... read in English by a lead who chose English, numbers written the English way.
    client = client_for(world, "lead_a")
    client.cookies["django_language"] = "en"
    page = text_of(client.get("/use-cases/auskunft/").content.decode())
    assert f"Week {world.last_week.label}: the estimated faithfulness of “Auskunft” is 0.85" in page
    assert "below the action threshold of 0.90" in page
    assert "Die geschätzte Treue" not in page
    with translation.override("en"):
        assert alarm.text.startswith(f"Week {world.last_week.label}: ")
    with translation.override("de"):
        assert alarm.text == alarm.message
    # An alarm raised before alarms kept their message ids reads as it was stored.
    Alarm.objects.filter(pk=alarm.pk).update(message_parts=[])
    alarm.refresh_from_db()
    with translation.override("en"):
        assert alarm.text == alarm.message
    assert alarm.message in text_of(client.get("/use-cases/auskunft/").content.decode())


def test_alarm_clears_itself_when_a_later_week_recovers(
    world: DashWorld, django_capture_on_commit_callbacks: Any  # noqa: F811
) -> None:
    world.last_week_scenario()
    check(django_capture_on_commit_callbacks)
    drift = alarm_raise(use_case=world.a, kind=Alarm.Kind.DRIFT, key="2026-W01",
                        text=[("Die Kalibrierung driftet.", {})])
    assert drift is not None
    assert len(mail.outbox) == 1
    # This week: twelve judged answers, all supported: 1.0 - but an interval from below the
    # line to 1 decides nothing (grey), and the alarm stays: recovery needs evidence too.
    world.this_week_good()
    this = dashboard.use_case_weeks(use_case=world.a, claims=False)[-1]
    assert this.estimate.value == 1.0 and this.light == "grey"
    assert check(django_capture_on_commit_callbacks) == 0
    assert action_alarms()[0].cleared_at is None
    # Sixty more, all supported: the interval lies above the line (green), and it clears.
    world.this_week_good(drawn=60, not_drawn=0, prefix="mehr")
    this = dashboard.use_case_weeks(use_case=world.a, claims=False)[-1]
    assert this.light == "green"
    assert check(django_capture_on_commit_callbacks) == 0
    [alarm] = action_alarms()
    assert alarm.cleared_at is not None
    drift.refresh_from_db()
    assert drift.cleared_at is None, "only the action signal clears itself"
    assert len(mail.outbox) == 1, "clearing mails nobody"
    page = text_of(client_for(world, "lead_a").get("/use-cases/auskunft/").content.decode())
    assert alarm.message not in page
    # Checked again: last week is still below, but the newest week decides - nothing reopens.
    assert check(django_capture_on_commit_callbacks) == 0
    assert Alarm.objects.filter(kind=Alarm.Kind.ACTION, cleared_at__isnull=True).count() == 0


def test_a_few_answers_raise_only_on_evidence(
    world: DashWorld, django_capture_on_commit_callbacks: Any  # noqa: F811
) -> None:
    # One judged answer at 0.75 this week: below the line (0.9), but with an interval across
    # it, too wide to decide
    # (grey). One noisy point raises nothing.
    (single,), others = world.ids("einzeln", 1, 9)
    world.answer(single, week=world.this_week, verdicts=[G, G, G, U])
    for external_id in others:
        world.answer(external_id, week=world.this_week)
    this = dashboard.use_case_weeks(use_case=world.a, claims=False)[-1]
    assert this.estimate.value == 0.75 and this.light == "grey"
    assert check(django_capture_on_commit_callbacks) == 0
    assert action_alarms() == [] and mail.outbox == []
    # Four answers last week, all unsupported: the whole interval is below the line, but on
    # four random answers (too few): alone, still one noisy point.
    hit, miss = world.ids("wenig", 4, 6)
    for external_id in hit:
        world.answer(external_id, week=world.last_week, verdicts=[U])
    for external_id in miss:
        world.answer(external_id, week=world.last_week)
    last = dashboard.use_case_weeks(use_case=world.a, claims=False)[-2]
    assert last.estimate.too_few and last.estimate.n == 4 and last.light == "red"
    assert last.pooled is not None and last.pooled.too_few
    assert check(django_capture_on_commit_callbacks) == 0
    assert action_alarms() == []
    # The week before was as bad: pooled, the four weeks to last week rest on enough random
    # answers and lie below the line as well, and the thin red week raises the alarm.
    hit, miss = world.ids("davor", 8, 2)
    for external_id in hit:
        world.answer(external_id, week=world.weeks[-3], verdicts=[U])
    for external_id in miss:
        world.answer(external_id, week=world.weeks[-3])
    last = dashboard.use_case_weeks(use_case=world.a, claims=False)[-2]
    assert last.light == "red" and last.pooled is not None and not last.pooled.too_few
    assert check(django_capture_on_commit_callbacks) == 1
    [alarm] = action_alarms()
    assert alarm.key == world.last_week.label and alarm.details["reason"] == "pooled_below"
    assert "aber auch die Sammelsicht über 4 Wochen" in alarm.message


def test_two_narrow_weeks_below_the_line_raise_it(
    world: DashWorld, django_capture_on_commit_callbacks: Any  # noqa: F811
) -> None:
    from dashboard.domain.alarms import action_decision
    from dashboard.domain.statistics.cells import Estimate

    # The rule itself, as the service applies it: two amber weeks in a row raise, one does not.
    amber = Estimate(0.88, 0.86, 0.93, 400, 2000, (100, 300), False)
    green = Estimate(0.95, 0.92, 0.97, 400, 2000, (100, 300), False)
    assert action_decision(current=amber, previous=amber, action_threshold=0.9).alarm
    assert not action_decision(current=amber, previous=green, action_threshold=0.9).alarm


def test_this_week_below_raises_its_own_alarm(
    world: DashWorld, django_capture_on_commit_callbacks: Any  # noqa: F811
) -> None:
    world.a.leaves_unreviewed = True
    world.a.sample_rate = 1.0
    world.a.save()
    for i in range(12):
        world.answer(f"jetzt-{i}", week=world.this_week, verdicts=[G, U])
    result = action_alarms_check(use_case=world.a)
    assert result.raised == [world.this_week.label]
    [alarm] = action_alarms()
    assert alarm.key == world.this_week.label
    assert "Die Antworten gehen ungeprüft nach außen: Sie brauchen eine menschliche Freigabe" \
        in alarm.message
    assert action_alarms_check(use_case=world.a).raised == []


def test_task_checks_every_active_use_case(
    world: DashWorld, django_capture_on_commit_callbacks: Any  # noqa: F811
) -> None:
    world.last_week_scenario()
    world.last_week_scenario(use_case=world.b, prefix="b")
    world.b.action_threshold = 0.9
    world.b.save()
    assert check(django_capture_on_commit_callbacks) == 2
    assert sorted(a.use_case.slug for a in action_alarms()) == ["auskunft", "vertrieb"]
    assert sorted(m.to[0] for m in mail.outbox) == ["leitung-a@example.org",
                                                    "leitung-b@example.org"]
    Alarm.objects.all().delete()
    world.b.active = False
    world.b.save()
    assert check(django_capture_on_commit_callbacks) == 1, "inactive use cases are left alone"


def test_beat_runs_the_check_hourly() -> None:
    from treue_site.celery import app

    entry = app.conf.beat_schedule["check-action-alarms"]
    assert entry == {"task": "monitoring.tasks.check_action_alarms", "schedule": 3600.0}
    assert "monitoring.tasks.check_action_alarms" in app.tasks
