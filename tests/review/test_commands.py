"""`manage.py create_review_batches`, its Celery task and its place in the beat schedule."""

import io
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from celery.schedules import crontab
from django.core.management import CommandError, call_command
from django.utils import timezone

from common.domain.weeks import shift_week
from review import services, tasks
from review.models import ReviewBatch, ReviewItem
from tests.review.conftest import ReviewWorld, week_time
from tests.review.test_batches import drawn, ingest, judged

BERLIN = ZoneInfo("Europe/Berlin")


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("create_review_batches", *args, stdout=out)
    return out.getvalue()


def test_command_creates_one_batch_per_active_use_case(review_world: ReviewWorld) -> None:
    w = review_world
    judged(w, "a", 3, week="2026-W48")
    judged(w, "b", 2, week="2026-W48", use_case=w.other)

    out = run("--week", "2026-W49")

    assert ReviewBatch.objects.filter(week="2026-W49").count() == 2
    lines = out.splitlines()
    assert "recht 2026-W49: 3 Antworten aus 2026-W48 (angelegt)" in lines[-1]
    assert "nur 3 geprüfte Antworten, alle genommen" in lines[-1]
    assert "fremd 2026-W49: 2 Antworten aus 2026-W48 (angelegt)" in lines[0]


def test_command_twice_creates_nothing_new(review_world: ReviewWorld) -> None:
    w = review_world
    judged(w, "a", 4, week="2026-W48")
    run("--week", "2026-W49")
    items = list(ReviewItem.objects.order_by("pk").values_list("pk", "answer_id", "position"))
    judged(w, "spaet", 3, week="2026-W48")  # judged late: the batch stays as it was

    out = run("--week", "2026-W49")

    assert ReviewBatch.objects.count() == 1
    assert list(ReviewItem.objects.order_by("pk").values_list("pk", "answer_id", "position")) \
        == items
    assert "recht 2026-W49: 4 Antworten aus 2026-W48 (gab es schon)" in out


def test_inactive_use_case_gets_no_batch(review_world: ReviewWorld) -> None:
    w = review_world
    judged(w, "a", 2, week="2026-W48")
    judged(w, "b", 2, week="2026-W48", use_case=w.other)
    w.other.active = False
    w.other.save()

    out = run("--week", "2026-W49")

    assert list(ReviewBatch.objects.values_list("use_case__slug", flat=True)) == ["recht"]
    assert "fremd" not in out


def test_no_judged_answers_no_batch_and_a_clear_line(review_world: ReviewWorld) -> None:
    w = review_world
    ingest(w, "wartet", created_at=week_time("2026-W48"), judge=False)  # queued, not judged
    judged(w, "alt", 1, week="2026-W47")

    out = run("--week", "2026-W49")

    assert not ReviewBatch.objects.exists()
    lines = out.splitlines()
    assert len(lines) == 2
    for slug, line in zip(("fremd", "recht"), lines, strict=True):
        assert line.startswith(f"{slug} 2026-W49:")
        assert "keine geprüften Antworten in der Vorwoche" in line
        assert "keine Prüfung angelegt" in line


@pytest.mark.parametrize(
    "week", ["2026-W54", "2025-W53", "2026-49", "2026-W00", "2026W49", "x", "0001-W02", "0001-W01"]
)
def test_invalid_week_is_a_command_error(review_world: ReviewWorld, week: str) -> None:
    judged(review_world, "a", 1, week="2026-W48")
    with pytest.raises(CommandError) as error:
        run("--week", week)
    message = str(error.value)
    assert repr(week) in message
    assert "ISO week like 2026-W49" in message
    assert not ReviewBatch.objects.exists()


def test_empty_week_is_a_command_error(review_world: ReviewWorld) -> None:
    judged(review_world, "a", 1, week=shift_week(services.current_week(), -1))
    with pytest.raises(CommandError):
        run("--week", "")
    assert not ReviewBatch.objects.exists()


@pytest.mark.parametrize("spelling", [" 2026-W49", "2026-W49 ", "٢٠٢٦-W49"])
def test_another_spelling_of_the_week_creates_nothing_new(
    review_world: ReviewWorld, spelling: str
) -> None:
    judged(review_world, "a", 2, week="2026-W48")
    run("--week", "2026-W49")
    try:
        run("--week", spelling)
    except CommandError:
        pass  # refusing the spelling is fine too
    assert list(ReviewBatch.objects.values_list("week", flat=True)) == ["2026-W49"]


def test_week_2027_w01_draws_from_2026_w53(review_world: ReviewWorld, monkeypatch) -> None:
    w = review_world
    # 2026 has 53 ISO weeks; W53 runs from Monday 28 December 2026 to Sunday 3 January 2027.
    # Those days are in the future of this suite, so the clock is set to January 2027 (the
    # ingest refuses answers from more than a day ahead).
    monkeypatch.setattr(
        timezone, "now", lambda: datetime(2027, 1, 5, 9, 0, tzinfo=ZoneInfo("UTC"))
    )
    inside = [
        ingest(w, "mo", created_at=datetime(2026, 12, 28, 0, 30, tzinfo=BERLIN)),
        ingest(w, "silvester", created_at=datetime(2026, 12, 31, 12, 0, tzinfo=BERLIN)),
        ingest(w, "so", created_at=datetime(2027, 1, 3, 23, 30, tzinfo=BERLIN)),
    ]
    outside = [
        ingest(w, "w52", created_at=datetime(2026, 12, 27, 23, 30, tzinfo=BERLIN)),
        ingest(w, "w01", created_at=datetime(2027, 1, 4, 0, 30, tzinfo=BERLIN)),
    ]

    out = run("--week", "2027-W01")

    batch = ReviewBatch.objects.get(use_case=w.use_case)
    assert (batch.week, batch.source_week) == ("2027-W01", "2026-W53")
    assert sorted(drawn(batch)) == sorted(a.pk for a in inside)
    assert not set(drawn(batch)) & {a.pk for a in outside}
    assert batch.due_at == datetime(2027, 1, 11, tzinfo=BERLIN)
    assert "recht 2027-W01: 3 Antworten aus 2026-W53 (angelegt)" in out


def test_week_2026_w01_draws_from_2025_w52(review_world: ReviewWorld) -> None:
    w = review_world
    inside = [
        ingest(w, "mo", created_at=datetime(2025, 12, 22, 0, 30, tzinfo=BERLIN)),
        ingest(w, "so", created_at=datetime(2025, 12, 28, 23, 30, tzinfo=BERLIN)),
    ]
    outside = [
        ingest(w, "w51", created_at=datetime(2025, 12, 21, 23, 30, tzinfo=BERLIN)),
        ingest(w, "w01", created_at=datetime(2025, 12, 29, 0, 30, tzinfo=BERLIN)),
        ingest(w, "neujahr", created_at=datetime(2026, 1, 1, 12, 0, tzinfo=BERLIN)),
    ]

    run("--week", "2026-W01")

    batch = ReviewBatch.objects.get(use_case=w.use_case)
    assert (batch.week, batch.source_week) == ("2026-W01", "2025-W52")
    assert sorted(drawn(batch)) == sorted(a.pk for a in inside)
    assert not set(drawn(batch)) & {a.pk for a in outside}


def test_week_2021_w01_draws_from_2020_w53(review_world: ReviewWorld) -> None:
    w = review_world
    inside = ingest(w, "w53", created_at=datetime(2021, 1, 3, 23, 30, tzinfo=BERLIN))
    ingest(w, "w01", created_at=datetime(2021, 1, 4, 0, 30, tzinfo=BERLIN))
    run("--week", "2021-W01")
    batch = ReviewBatch.objects.get(use_case=w.use_case)
    assert batch.source_week == "2020-W53"
    assert drawn(batch) == [inside.pk]


def test_without_week_the_current_week_is_created(review_world: ReviewWorld) -> None:
    w = review_world
    current = services.current_week()
    judged(w, "a", 2, week=shift_week(current, -1))

    run()

    batch = ReviewBatch.objects.get(use_case=w.use_case)
    assert batch.week == current == services.current_week(now=timezone.now())
    assert batch.source_week == shift_week(current, -1)


def test_beat_runs_the_task_on_monday_morning_in_berlin() -> None:
    from treue_site.celery import app

    entries = [
        entry for entry in app.conf.beat_schedule.values()
        if entry["task"] == "review.tasks.create_review_batches"
    ]
    assert len(entries) == 1
    schedule = entries[0]["schedule"]
    assert isinstance(schedule, crontab)
    assert schedule.day_of_week == {1}  # Monday (crontab counts Sunday as 0)
    assert len(schedule.hour) == 1 and all(4 <= h <= 10 for h in schedule.hour)
    assert len(schedule.minute) == 1
    assert str(app.conf.timezone) == "Europe/Berlin"
    assert tasks.create_review_batches.name == "review.tasks.create_review_batches"
    # The alarms are checked on a schedule too (a missed review needs no one to submit).
    assert any(
        entry["task"] == tasks.check_review_alarms.name
        for entry in app.conf.beat_schedule.values()
    )


def test_task_run_directly_creates_the_current_weeks_batches(review_world: ReviewWorld) -> None:
    w = review_world
    current = services.current_week()
    judged(w, "a", 2, week=shift_week(current, -1))
    judged(w, "alt", 1, week=shift_week(current, -2))

    assert tasks.create_review_batches() == 1
    assert tasks.create_review_batches() == 0  # idempotent: a redelivered task does no harm

    batch = ReviewBatch.objects.get()
    assert (batch.use_case, batch.week) == (w.use_case, current)
    assert batch.items.count() == 2
