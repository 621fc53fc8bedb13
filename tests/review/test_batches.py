"""Weekly review batches (review.services.review_batch_create): which answers are drawn.

Answers are built through the real ingest and judged by the real judge service against the
local OpenAI-compatible server; most are abstentions (the judge finds no claim), which costs
one judge call each and still makes them judged answers with a score.
"""

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from common.domain.weeks import week_monday
from ingest import services as monitoring_services
from ingest.domain.sampling import random_draw
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, JudgeRun, UseCase
from review import services
from review.models import ReviewBatch, ReviewItem
from tests.review.conftest import (
    GENERATOR,
    JUDGE,
    ReviewWorld,
    batch_for,
    uncertain_logprobs,
    week_time,
)

# (year, month, day, hour, minute)
DateTuple = tuple[int, int, int, int, int]

BERLIN = ZoneInfo("Europe/Berlin")


def ingest(
    world: ReviewWorld,
    external_id: str,
    *,
    created_at: datetime,
    use_case: UseCase | None = None,
    flagged: bool = False,
    model: str = GENERATOR,
    judge: bool = True,
    claims: list[tuple[str, str]] | None = None,
) -> Answer:
    """Ingest one answer at `created_at`; if it is sampled and `judge`, run its judge run."""
    use_case = use_case or world.use_case
    text = f"Antwort {external_id}: Der Behälter wird alle 5 Jahre geprüft."
    body: dict[str, Any] = {
        "external_id": external_id, "use_case": use_case.slug,
        "question": f"Frage {external_id}?", "answer": text, "model": model,
        "chunks": [{"text": "Prüfintervall: 5 Jahre.", "score": 0.8}],
        "logprobs": uncertain_logprobs(text) if flagged else None,
        "created_at": created_at.isoformat(),
    }
    result = monitoring_services.answer_ingest(
        service=world.service, payload=AnswerIn.model_validate(body), raw=body
    )
    assert result.outcome == IngestOutcome.CREATED, result.errors
    answer = result.answer
    assert answer is not None
    assert answer.flagged == flagged
    run = answer.judge_runs.filter(status=JudgeRun.Status.PENDING).first()
    if run is not None and judge:
        world.judge.claims = [c for c, _ in claims or []]
        world.judge.verdicts.update(dict(claims or []))
        judge_run_execute(run_id=run.pk)
    answer.refresh_from_db()
    return answer


def judged(world: ReviewWorld, prefix: str, n: int, *, week: str, **kw: Any) -> list[Answer]:
    answers = [ingest(world, f"{prefix}{i}", created_at=week_time(week), **kw) for i in range(n)]
    assert all(a.status == Answer.Status.JUDGED for a in answers)
    return answers


def external_ids(world: ReviewWorld, prefix: str, count: int, *, in_sample: bool) -> list[str]:
    """External ids whose hash draw puts them in (or out of) the random sample at the use
    case's rate: the draw is a hash of (service, external id), so it can be chosen here."""
    rate = world.use_case.sample_rate
    found: list[str] = []
    i = 0
    while len(found) < count:
        eid = f"{prefix}{i}"
        if (random_draw(str(world.service.pk), eid) < rate) == in_sample:
            found.append(eid)
        i += 1
    return found


def drawn(batch: ReviewBatch) -> list[int]:
    return list(batch.items.order_by("position").values_list("answer_id", flat=True))


def test_drawn_only_from_the_judged_answers_of_the_week_before(review_world: ReviewWorld) -> None:
    w = review_world
    good = judged(w, "vorwoche-", 3, week="2026-W48")
    abstention = ingest(w, "leer", created_at=week_time("2026-W48", day=5))
    assert abstention.abstention and abstention.score == 1.0
    good.append(abstention)
    # Everything below must stay out of the 2026-W49 batch.
    earlier = judged(w, "w47-", 2, week="2026-W47")
    same_week = judged(w, "w49-", 2, week="2026-W49")
    queued = ingest(w, "wartet", created_at=week_time("2026-W48"), judge=False)
    assert queued.status == Answer.Status.QUEUED
    failed = ingest(w, "selbst", created_at=week_time("2026-W48"), model=JUDGE)
    assert failed.status == Answer.Status.FAILED  # the judge refuses to judge its own model
    other_use_case = judged(w, "fremd-", 2, week="2026-W48", use_case=w.other)

    result = services.review_batch_create(use_case=w.use_case, week="2026-W49")

    assert result.created
    batch = result.batch
    assert batch is not None
    assert batch.week == "2026-W49" and batch.source_week == "2026-W48"
    assert sorted(drawn(batch)) == sorted(a.pk for a in good)
    assert batch.available == 4
    assert batch.target_size == 20
    excluded = {a.pk for a in earlier + same_week + other_use_case + [queued, failed]}
    assert not excluded & set(drawn(batch))
    # Each item carries the judge run it was drawn with: the answer's current run.
    for item in batch.items.select_related("answer"):
        assert item.judge_run_id == item.answer.current_run_id
        assert item.status == ReviewItem.Status.OPEN and item.version == 0
        assert item.stratum == ReviewItem.Stratum.RANDOM
    assert sorted(batch.items.values_list("position", flat=True)) == [1, 2, 3, 4]
    # Due at the end of the review week: next Monday 0:00 in Berlin.
    assert batch.due_at == datetime(2026, 12, 7, tzinfo=BERLIN)
    assert not ReviewBatch.objects.filter(use_case=w.other).exists()


def test_random_stratum_preferred_when_it_has_twenty(review_world: ReviewWorld) -> None:
    w = review_world
    w.use_case.sample_rate = 0.5
    w.use_case.save()
    week = "2026-W48"
    random_ids = external_ids(w, "r", 22, in_sample=True)
    flagged_only = external_ids(w, "f", 6, in_sample=False)
    flagged_random = external_ids(w, "fr", 2, in_sample=True)
    not_sampled = external_ids(w, "n", 3, in_sample=False)
    at = week_time(week)
    random_answers = [ingest(w, e, created_at=at) for e in random_ids]
    flagged_answers = [ingest(w, e, created_at=at, flagged=True) for e in flagged_only]
    both = [ingest(w, e, created_at=at, flagged=True) for e in flagged_random]
    skipped = [ingest(w, e, created_at=at) for e in not_sampled]
    assert all(a.in_random_sample and a.status == "judged" for a in random_answers + both)
    assert all(not a.in_random_sample and a.status == "judged" for a in flagged_answers)
    assert all(a.status == Answer.Status.NOT_SAMPLED for a in skipped)

    batch = batch_for(use_case=w.use_case, week="2026-W49")

    assert batch.items.count() == 20
    assert batch.available == 30  # judged answers of the week: 22 + 6 + 2
    chosen = set(drawn(batch))
    assert chosen <= {a.pk for a in random_answers + both}
    assert not chosen & {a.pk for a in flagged_answers}  # no flagged-only answer
    assert not chosen & {a.pk for a in skipped}
    assert set(batch.items.values_list("stratum", flat=True)) == {ReviewItem.Stratum.RANDOM}


def test_too_few_random_ones_are_all_taken_and_flagged_ones_fill_up(
    review_world: ReviewWorld,
) -> None:
    w = review_world
    w.use_case.sample_rate = 0.5
    w.use_case.save()
    at = week_time("2026-W48")
    random_answers = [ingest(w, e, created_at=at) for e in external_ids(w, "r", 4, in_sample=True)]
    flagged_answers = [
        ingest(w, e, created_at=at, flagged=True)
        for e in external_ids(w, "f", 18, in_sample=False)
    ]

    batch = batch_for(use_case=w.use_case, week="2026-W49")

    items = list(batch.items.order_by("position"))
    assert len(items) == 20
    assert batch.available == 22
    by_answer = {i.answer_id: i for i in items}
    assert {a.pk for a in random_answers} <= set(by_answer)  # every random one
    assert all(by_answer[a.pk].stratum == ReviewItem.Stratum.RANDOM for a in random_answers)
    picked_flagged = [i for i in items if i.answer_id not in {a.pk for a in random_answers}]
    assert len(picked_flagged) == 16
    assert {i.answer_id for i in picked_flagged} <= {a.pk for a in flagged_answers}
    assert all(i.stratum == ReviewItem.Stratum.FLAGGED for i in picked_flagged)


def test_draw_is_random_not_the_first_ids(review_world: ReviewWorld) -> None:
    w = review_world
    w.use_case.review_batch_size = 8
    w.use_case.save()
    w.other.review_batch_size = 8
    w.other.save()
    # 60 candidates: 20 in each of two weeks of one use case, 20 of another use case.
    w47 = judged(w, "a", 20, week="2026-W47")
    w48 = judged(w, "b", 20, week="2026-W48")
    other = judged(w, "c", 20, week="2026-W48", use_case=w.other)

    def ranks(batch: ReviewBatch, answers: list[Answer]) -> frozenset[int]:
        order = sorted(a.pk for a in answers)
        return frozenset(order.index(pk) for pk in drawn(batch))

    b48 = batch_for(use_case=w.use_case, week="2026-W48")
    b49 = batch_for(use_case=w.use_case, week="2026-W49")
    b49_other = batch_for(use_case=w.other, week="2026-W49")
    for batch, answers in ((b48, w47), (b49, w48), (b49_other, other)):
        assert batch.items.count() == 8
        assert set(drawn(batch)) <= {a.pk for a in answers}
        ids = sorted(a.pk for a in answers)
        assert sorted(drawn(batch)) not in (ids[:8], ids[-8:])
        assert drawn(batch) != sorted(drawn(batch))  # positions are not in id order either
    # Seeded with use case and week: another week, or another use case, draws other answers
    # (compared by their rank in the week, since the answers themselves differ).
    assert len({ranks(b48, w47), ranks(b49, w48), ranks(b49_other, other)}) == 3


def test_batch_size_per_use_case_and_fewer_answers_than_the_size(
    review_world: ReviewWorld, login: Any
) -> None:
    w = review_world
    w.use_case.review_batch_size = 5
    w.use_case.save()
    judged(w, "a", 8, week="2026-W48")
    judged(w, "b", 3, week="2026-W48", use_case=w.other)

    results = {r.use_case.slug: r for r in services.review_batches_create(week="2026-W49")}

    big, small = results["recht"].batch, results["fremd"].batch
    assert big is not None and small is not None
    assert (big.items.count(), big.target_size, big.available) == (5, 5, 8)
    assert (small.items.count(), small.target_size, small.available) == (3, 20, 3)
    assert results["recht"].available == 8 and results["fremd"].available == 3
    # The queue says that the short batch holds all there were.
    page = login(w.users["other_expert"]).get("/review/").content.decode()
    assert "In 2026-W48 gab es nur 3 geprüfte Antworten" in page
    assert "Soll: 20" in page
    assert "0/3" in page
    page = login(w.users["expert"]).get("/review/").content.decode()
    assert "gab es nur" not in page
    assert "0/5" in page


def test_creating_twice_creates_nothing_new(review_world: ReviewWorld) -> None:
    w = review_world
    judged(w, "a", 4, week="2026-W48")
    first = services.review_batches_create(week="2026-W49")
    items = list(ReviewItem.objects.order_by("pk").values_list("pk", "answer_id", "position"))
    # More answers judged in the source week afterwards change nothing either.
    judged(w, "spaet", 2, week="2026-W48")

    second = services.review_batches_create(week="2026-W49")

    assert [r.created for r in first] == [False, True]  # fremd (no answers), recht
    assert [r.created for r in second] == [False, False]
    assert ReviewBatch.objects.count() == 1
    assert second[1].batch is not None and first[1].batch is not None
    assert second[1].batch.pk == first[1].batch.pk
    assert list(ReviewItem.objects.order_by("pk").values_list("pk", "answer_id", "position")) \
        == items
    assert services.review_batch_create(use_case=w.use_case, week="2026-W49").created is False


def test_no_judged_answer_no_batch_until_there_is_one(review_world: ReviewWorld) -> None:
    w = review_world
    ingest(w, "wartet", created_at=week_time("2026-W48"), judge=False)
    result = services.review_batch_create(use_case=w.use_case, week="2026-W49")
    assert (result.batch, result.created, result.available) == (None, False, 0)
    assert not ReviewBatch.objects.exists()
    judged(w, "a", 1, week="2026-W48")
    assert services.review_batch_create(use_case=w.use_case, week="2026-W49").created


@pytest.mark.parametrize(
    ("review_week", "inside", "outside"),
    [
        # Winter (CET, UTC+1): Monday 0:30 in Berlin is still Sunday in UTC.
        (
            "2026-W49",
            [(2026, 11, 23, 0, 30), (2026, 11, 29, 23, 30), (2026, 11, 26, 12, 0)],
            [(2026, 11, 22, 23, 30), (2026, 11, 30, 0, 30), (2026, 11, 30, 0, 0)],
        ),
        # Summer (CEST, UTC+2): Monday 1:30 in Berlin is Sunday 23:30 in UTC.
        (
            "2026-W27",
            [(2026, 6, 22, 1, 30), (2026, 6, 28, 23, 59)],
            [(2026, 6, 21, 23, 30), (2026, 6, 29, 1, 30)],
        ),
    ],
)
def test_week_boundaries_are_berlin_midnight(
    review_world: ReviewWorld, review_week: str,
    inside: list[DateTuple], outside: list[DateTuple],
) -> None:
    w = review_world
    ins = [ingest(w, f"in{i}", created_at=datetime(*t, tzinfo=BERLIN))
           for i, t in enumerate(inside)]
    outs = [ingest(w, f"out{i}", created_at=datetime(*t, tzinfo=BERLIN))
            for i, t in enumerate(outside)]
    batch = batch_for(use_case=w.use_case, week=review_week)
    assert sorted(drawn(batch)) == sorted(a.pk for a in ins)
    assert not set(drawn(batch)) & {a.pk for a in outs}
    next_monday = week_monday(review_week) + timedelta(weeks=1)
    assert batch.due_at == datetime(next_monday.year, next_monday.month, next_monday.day,
                                    tzinfo=BERLIN)
