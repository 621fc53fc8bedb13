"""Review alarms (review.services.review_alarms_check): drift by the 4-week bias and by the
CUSUM, a decomposition that is often wrong, a missed review; stored once, mailed once to the
use case's team leads, cleared when the condition recovers, shown on the calibration page.
How the drift alarms weigh their evidence is in test_calibration_alarms.py.

The weeks are relative to today, because the calibration figures look back from now.
"""

import math
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone, translation

from alarms.models import Alarm
from common.domain.weeks import shift_week
from review import services, tasks
from review.models import ReviewBatch, ReviewItem
from tests.review.conftest import ReviewWorld, batch_for

G, T, U = "GEDECKT", "TEILWEISE", "UNGEDECKT"
# A submit's alarm check runs as its task would, in-process (tests/review/conftest.py).
pytestmark = pytest.mark.usefixtures("alarm_worker")

# (judge's labels, expert's labels, decomposition marked wrong)
Spec = tuple[Sequence[str], Sequence[str], bool]


def batch_of(world: ReviewWorld, judge: Sequence[Sequence[str]], *, week: str,
             prefix: str) -> list[ReviewItem]:
    """A batch for `week` of answers from the week before, judged with the given labels; the
    items in the order of `judge`."""
    source = shift_week(week, -1)
    answers = [
        world.answer(f"{prefix}{i}", week=source,
                     claims=[(f"Aussage {k} von {prefix}{i}.", label)
                             for k, label in enumerate(labels, 1)])
        for i, labels in enumerate(judge)
    ]
    batch = batch_for(use_case=world.use_case, week=week)
    assert batch.items.count() == len(answers)
    by_answer = {item.answer_id: item for item in batch.items.select_related("judge_run")}
    return [by_answer[a.pk] for a in answers]


def review(item: ReviewItem, manual: Sequence[str], wrong: bool = False, *, user: Any) -> None:
    services.review_item_save(item=item, user=user, data=services.ItemInput(
        labels=dict(enumerate(manual, 1)), decomposition_wrong=wrong,
        problems=["merged"] if wrong else [],
    ))
    services.review_item_submit(item=item, user=user)


def reviewed(world: ReviewWorld, specs: Sequence[Spec], *, week: str, prefix: str,
             capture: Any) -> list[ReviewItem]:
    """Build a batch and submit every item, in order, as the expert; the submissions with
    their on-commit callbacks run (alarm mails). The answers are built before: their ingest
    would enqueue judge tasks on commit."""
    items = batch_of(world, [judge for judge, _, _ in specs], week=week, prefix=prefix)
    with capture(execute=True):
        for item, (_, manual, wrong) in zip(items, specs, strict=True):
            review(item, manual, wrong, user=world.users["expert"])
    return items


def alarms(world: ReviewWorld, kind: str) -> list[Alarm]:
    return list(Alarm.objects.filter(use_case=world.use_case, kind=kind).order_by("pk"))


def test_drift_by_the_four_week_bias(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any, mailoutbox: list,
    login: Any,
) -> None:
    w = review_world
    week = services.current_week()
    # Judge: UNGEDECKT (0.0); expert: TEILWEISE (0.5). Manual - automatic = +0.5 on all 12,
    # on the same side of the action threshold each time (so not a CUSUM disagreement).
    items = batch_of(w, [(U,)] * 12, week=week, prefix="d")
    for n, item in enumerate(items, 1):
        with django_capture_on_commit_callbacks(execute=True):
            review(item, (T,), user=w.users["expert"])
        # The test against the tolerance 0.1 (one-sided, 95 %), the reviews n of the
        # week's 12 answers: s̃² = 0.35²/n (the floor), V = (1 − n/12)·s̃²/n·(t/z)² with
        # t = t(0.95, n − 1). At n = 2: 0.5 − 1.645·√(0.8333·0.06125/2·14.73) = −0.51; at
        # n = 3: 0.5 − 1.645·√(0.75·0.04083/3·3.151) = 0.205 > 0.1.
        assert len(alarms(w, Alarm.Kind.DRIFT)) == (0 if n < 3 else 1), n

    drift = alarms(w, Alarm.Kind.DRIFT)
    assert len(drift) == 1
    alarm = drift[0]
    assert alarm.key == f"bias:{week}"
    assert alarm.cleared_at is None and alarm.mailed_at is not None
    assert alarm.details == {
        "bias": 0.5, "low": pytest.approx(0.20498, abs=1e-5),
        "high": pytest.approx(0.79502, abs=1e-5), "n": 3, "tolerance": 0.1,
        "direction": "strict",
    }
    assert alarm.message == (
        "Kalibrierungsdrift: In den letzten 4 Wochen weicht die manuelle Bewertung im Mittel "
        "um +0.50 von der automatischen ab (nach Stichprobe gewichtet, n = 3); mit 95 % "
        "Sicherheit ≥ +0.20, jenseits der Toleranz von ±0.10."
    )
    assert not Alarm.objects.exclude(kind=Alarm.Kind.DRIFT).exists()

    assert len(mailoutbox) == 1
    mail = mailoutbox[0]
    assert mail.to == ["leitung@example.org"]  # the team lead, not the experts
    assert mail.subject == "Treue-Alarm: Kalibrierungsdrift – Rechtsauskunft"
    assert alarm.message in mail.body and "(recht)" in mail.body

    with django_capture_on_commit_callbacks(execute=True):
        assert services.review_alarms_check(use_case=w.use_case) == []
        assert tasks.check_review_alarms() == 0
    assert len(mailoutbox) == 1  # nothing mailed twice
    assert len(alarms(w, Alarm.Kind.DRIFT)) == 1

    page = login(w.users["lead"]).get(f"/review/calibration/{w.use_case.slug}/")
    html = page.content.decode()
    assert "Kalibrierungsdrift</span> " + alarm.message in html
    assert 'class="open"' in html


def test_no_alarm_when_expert_and_judge_agree(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any, mailoutbox: list
) -> None:
    w = review_world
    specs = [((G, U), (G, U), False), ((G,), (G,), False), ((T,), (T,), False)] * 2
    reviewed(w, specs, week=services.current_week(), prefix="ok",
             capture=django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        assert services.review_alarms_check(use_case=w.use_case) == []
    assert not Alarm.objects.exists()
    assert mailoutbox == []


def test_drift_by_cusum(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any, mailoutbox: list
) -> None:
    w = review_world
    week = services.current_week()
    # Every answer on different sides of the action threshold, alternately too strict and too
    # lenient: the mean bias stays near 0, so only the CUSUM can see it. Without reviews
    # before the watched weeks the in-control rate is the prior's cautious p0 = 0.212
    # (p1 = 0.312, limit 4.24 for 156 weeks): each disagreement adds ln(p1/p0) = 0.38642, the
    # limit is crossed by the 11th (10 x 0.38642 = 3.86; 11 x = 4.25). (Tuned to + 0.2 for 52
    # weeks, the 7th crossed 4.19; with the fixed p0 = 0.1 of before, the 6th crossed 6.0.)
    up, down = ((U,), (G,), False), ((G,), (U,), False)
    specs = [up, down] * 5 + [up]
    items = batch_of(w, [spec[0] for spec in specs], week=week, prefix="c")
    # The week had more answers than were reviewed: the mean bias of the 11 (1/11) is then no
    # evidence of a bias beyond the tolerance either (reviewing every answer of a week would
    # make their mean exact).
    w.unjudged("cx", 13, week=shift_week(week, -1))
    manual = [spec[1] for spec in specs]
    with django_capture_on_commit_callbacks(execute=True):
        for item, labels in zip(items[:10], manual[:10], strict=True):
            review(item, labels, user=w.users["expert"])
        assert alarms(w, Alarm.Kind.DRIFT) == []
        review(items[10], manual[10], user=w.users["expert2"])

    drift = alarms(w, Alarm.Kind.DRIFT)
    assert [a.key for a in drift] == [f"cusum:{week}"]
    assert drift[0].details["cusum"] == pytest.approx(11 * math.log(0.312 / 0.212), abs=1e-9)
    assert drift[0].details["limit"] == 4.24
    assert len(mailoutbox) == 1 and "Kalibrierungsdrift" in mailoutbox[0].subject


def test_a_second_cusum_crossing_after_a_handled_alarm_raises_again(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any, mailoutbox: list
) -> None:
    w = review_world
    current = services.current_week()
    earlier = shift_week(current, -2)
    up, down = ((U,), (G,), False), ((G,), (U,), False)
    w.unjudged("ex", 13, week=shift_week(earlier, -1))
    # Eleven disagreements in a row from the prior cross its limit (as above).
    reviewed(w, [up, down] * 5 + [up], week=earlier, prefix="e",
             capture=django_capture_on_commit_callbacks)
    first = alarms(w, Alarm.Kind.DRIFT)
    assert [a.key for a in first] == [f"cusum:{earlier}"]
    # The team lead looked into it and cleared it by hand (as in the admin).
    Alarm.objects.filter(pk=first[0].pk).update(cleared_at=timezone.now())

    # Weeks later the judge drifts again: agreement first, then eleven disagreements in a row
    # (measured from the restart, the week after the first alarm's, with the prior's p0).
    agree = ((G,), (G,), False)
    w.unjudged("nx", 9, week=shift_week(current, -1))
    reviewed(w, [agree] * 4 + [up, down] * 5 + [up], week=current, prefix="n",
             capture=django_capture_on_commit_callbacks)

    keys = [a.key for a in alarms(w, Alarm.Kind.DRIFT) if a.cleared_at is None]
    assert keys == [f"cusum:{current}"], (
        "the CUSUM restarts after an alarm; its next crossing is a new drift and must alarm"
    )


def test_decomposition_alarm_and_its_clearing(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any, mailoutbox: list
) -> None:
    w = review_world
    week = services.current_week()
    expert = w.users["expert"]
    items = batch_of(w, [(G,)] * 10, week=week, prefix="z")
    wrong = [True, True, True] + [False] * 7
    with django_capture_on_commit_callbacks(execute=True):
        for item, is_wrong in zip(items[:9], wrong[:9], strict=True):
            review(item, (G,), is_wrong, user=expert)
        # 3 of 9 wrong, but fewer than 10 reviewed answers: not enough to say.
        assert alarms(w, Alarm.Kind.DECOMPOSITION) == []
        review(items[9], (G,), False, user=expert)

    found = alarms(w, Alarm.Kind.DECOMPOSITION)
    assert len(found) == 1
    alarm = found[0]
    assert alarm.key == week and alarm.cleared_at is None
    assert alarm.details == {"share": 0.3, "n": 10}
    assert "30 %" in alarm.message and "n = 10" in alarm.message
    assert [m.subject for m in mailoutbox] == [
        "Treue-Alarm: Zerlegung oft falsch – Rechtsauskunft"
    ]
    assert alarms(w, Alarm.Kind.DRIFT) == []  # labels all agree

    # An expert corrects one answer: 2 of 10 = 20 % is not more than 20 %, the alarm clears.
    services.review_item_reopen(item=items[0], user=expert)
    with django_capture_on_commit_callbacks(execute=True):
        review(items[0], (G,), False, user=expert)
    alarm.refresh_from_db()
    assert alarm.cleared_at is not None
    assert len(mailoutbox) == 1


def test_missed_review_alarm_and_its_clearing(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any, mailoutbox: list,
    login: Any,
) -> None:
    w = review_world
    current = services.current_week()
    late_week = shift_week(current, -1)
    late = batch_of(w, [(G,), (G, T)], week=late_week, prefix="s")
    batch_of(w, [(G,)], week=current, prefix="t")  # this week's: not due yet
    due = ReviewBatch.objects.get(week=late_week).due_at
    assert due <= timezone.now()

    assert services.review_alarms_check(use_case=w.use_case, now=due - timedelta(minutes=1)) \
        == []
    with django_capture_on_commit_callbacks(execute=True):
        raised = services.review_alarms_check(use_case=w.use_case, now=due)
    assert [(a.kind, a.key) for a in raised] == [(Alarm.Kind.MISSED_REVIEW, late_week)]
    alarm = raised[0]
    assert f"Die Wochenprüfung {late_week} ist nicht rechtzeitig fertig geworden" in alarm.message
    assert "0 von 2 Antworten geprüft" in alarm.message
    assert [m.subject for m in mailoutbox] == [
        "Treue-Alarm: Wochenprüfung versäumt – Rechtsauskunft"
    ]
    assert mailoutbox[0].to == ["leitung@example.org"]
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.check_review_alarms() == 0  # found again, not raised again
    assert len(mailoutbox) == 1

    page = login(w.users["expert"]).get(f"/review/calibration/{w.use_case.slug}/")
    assert "Wochenprüfung versäumt</span> " + alarm.message in page.content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        review(late[0], (G,), user=w.users["expert"])
        alarm.refresh_from_db()
        assert alarm.cleared_at is None  # one of two: still missed
        review(late[1], (G, G), user=w.users["expert2"])
    alarm.refresh_from_db()
    assert alarm.cleared_at is not None
    assert ReviewBatch.objects.get(week=late_week).finished_at is not None
    assert len(mailoutbox) == 1
    assert alarms(w, Alarm.Kind.MISSED_REVIEW) == [alarm]  # none for this week's batch
    page = login(w.users["lead"]).get(f"/review/calibration/{w.use_case.slug}/")
    assert 'class="cleared"' in page.content.decode()


def test_alarms_of_one_use_case_go_to_its_own_team_leads(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any, mailoutbox: list
) -> None:
    w = review_world
    w.use_case.team_leads.add(w.users["staff"])  # a second lead, with an address too
    w.users["nobody"].email = ""
    w.users["nobody"].save()
    w.use_case.team_leads.add(w.users["nobody"])  # a lead without an address is skipped
    batch_of(w, [(G,)], week=shift_week(services.current_week(), -1), prefix="m")
    with django_capture_on_commit_callbacks(execute=True):
        tasks.check_review_alarms()
    assert len(mailoutbox) == 1
    assert mailoutbox[0].to == ["admin@example.org", "leitung@example.org"]
    assert not Alarm.objects.filter(use_case=w.other).exists()


def test_alarm_messages_are_stored_in_the_sites_language(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any
) -> None:
    # An expert working in English submits the answer that raises an alarm: it is stored (and
    # mailed, shown) in German all the same, as the team leads get every other alarm.
    w = review_world
    late_week = shift_week(services.current_week(), -1)
    batch_of(w, [(G,)], week=late_week, prefix="l")
    with translation.override("en"), django_capture_on_commit_callbacks(execute=True):
        [alarm] = services.review_alarms_check(use_case=w.use_case)
    assert alarm.message.startswith(f"Die Wochenprüfung {late_week} ist nicht rechtzeitig")
