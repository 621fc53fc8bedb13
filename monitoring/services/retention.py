"""Retention: anonymise the answers of a use case once they are older than its retention_days.

Why anonymise and not delete. The issue asks to "delete or anonymise answers older than N days,
keeping aggregated figures". Every figure of the dashboards and the estimates API is computed
from the answer rows at read time (counts per week, strata, π, scores, causes, judge calls and
cost from the runs, claim labels): deleting rows would change last year's weeks, and keeping
them would need a second, pre-aggregated store that every figure would have to read and that
could drift from the live one. Anonymising keeps the rows and blanks the content, so the
figures are the same by construction and the code that computes them stays one code path.
Nothing a person could ask about is left: what is removed is

- the answer's question, text, messages, metadata, token data and uncertain words;
- the chunks' texts (the rows stay with rank, similarity and source id: `chunk_count` and the
  similarity figures stay consistent with them, and a source id points into the company's own
  corpus, not at the person);
- the judge's claim texts, raw replies, decomposition and the raw replies in the call log (the
  log keeps each call's purpose, model, tokens and latency);
- the experts' comments, the claims they added and the claim texts copied into their
  submissions (labels stay: calibration pairs them with the judge's);
- the self-consistency investigations' re-asked answers, their comparison, the contradiction
  judge's reason and raw reply (whether the answers were consistent, calls and cost stay).

What stays: every number and flag (scores, labels, sampling, π, status, timestamps, chunk_count,
best_chunk_score, multi_part, min_content_probability, tokens, costs), the generator model, the
external id and the content hash (the idempotency key of the ingest API: a replay is still
answered as before, not stored a second time).

Answers are left alone while something still needs their text: a judge run waiting or running
(or the answer not yet scored), an investigation question waiting or running, or a review batch
that is not finished. They are anonymised by a later run.

The weekly review's and the investigations' rows are theirs to hold back and to blank: each app
registers its hold and its scrubber in monitoring/extensions.py, and this module calls them.
Each batch of BATCH_SIZE answers is its own transaction; running twice does nothing more
(`anonymised_at` is set once, and only rows without it are looked at).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from monitoring import extensions
from monitoring.domain.retention import BATCH_SIZE, retention_cutoff, scrub_call_log
from monitoring.models import Answer, AnswerKey, Chunk, Claim, DroppedMonth, JudgeRun, UseCase
from monitoring.services import partitions, rollups
from monitoring.services.rollup_rebuild import rollups_seal
from monitoring.services.segment_rollups import metadata_cleared

# A run in these states still reads the answer's text.
_OPEN_RUNS = (JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING)
_UNSCORED = (Answer.Status.QUEUED, Answer.Status.JUDGING)


@dataclass
class RetentionResult:
    use_case: str
    retention_days: int | None
    cutoff: datetime | None
    due: int = 0  # old answers still holding content when the run looked
    anonymised: int = 0  # in this run (0 on a dry run)
    held_in_review: int = 0  # in a review batch that is not finished
    held_for_judge: int = 0  # not yet scored, a judge run or investigation question open
    dry_run: bool = False


def _held(answer_ids: Sequence[int]) -> tuple[set[int], set[int]]:
    """(in an unfinished review batch, waiting for the judge or an investigation) among
    `answer_ids`: the registered holds (monitoring/extensions.py) and the judge's own."""
    in_review: set[int] = set()
    for_judge: set[int] = set()
    for hold, answers_held in extensions.registry.retention_holds.values():
        held = answers_held(answer_ids=answer_ids)
        (in_review if hold is extensions.Hold.IN_REVIEW else for_judge).update(held)
    for_judge |= set(
        JudgeRun.objects.filter(answer_id__in=answer_ids, status__in=_OPEN_RUNS)
        .values_list("answer_id", flat=True)
    ) | set(
        Answer.objects.filter(pk__in=answer_ids, status__in=_UNSCORED)
        .values_list("pk", flat=True)
    )
    return in_review, for_judge - in_review


def answers_anonymise(*, answer_ids: Sequence[int], now: datetime | None = None) -> int:
    """Anonymise these answers in one transaction; returns how many were anonymised.

    The answers are locked first, and what holds them back is checked after the lock: a
    rescore or a review batch created a moment ago is seen (rescoring locks the answer too, and
    refuses an anonymised one). Answers already anonymised or held back are left out.
    """
    now = now or timezone.now()
    with transaction.atomic():
        locked = list(
            Answer.objects.select_for_update()
            .filter(pk__in=answer_ids, anonymised_at__isnull=True)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        if not locked:
            return 0
        in_review, for_judge = _held(locked)
        todo = [pk for pk in locked if pk not in in_review and pk not in for_judge]
        if not todo:
            return 0
        # The declared keys' segments of the metadata emptied now move to "none", as a
        # recount of the rollups would count them.
        metadata_cleared(
            Answer.objects.filter(pk__in=todo).exclude(metadata={})
            .values("use_case_id", "created_at", "flagged", "status", "score", "metadata")
        )
        count = Answer.objects.filter(pk__in=todo).update(
            question="", text="", messages=None, metadata={}, token_data=None,
            uncertain_tokens=[], anonymised_at=now,
        )
        Chunk.objects.filter(answer_id__in=todo).exclude(text="").update(text="")
        Claim.objects.filter(run__answer_id__in=todo).update(text="", raw_reply="")
        runs = list(JudgeRun.objects.filter(answer_id__in=todo).only("pk", "call_log"))
        for run in runs:
            run.call_log = scrub_call_log(run.call_log)
            run.decomposition_raw = ""
        JudgeRun.objects.bulk_update(runs, ["call_log", "decomposition_raw"], batch_size=500)
        for scrub in extensions.registry.retention_scrubbers.values():
            scrub(answer_ids=todo)
    return count


def _due_batches(
    use_case: UseCase, cutoff: datetime, batch_size: int
) -> Iterable[list[tuple[int, datetime]]]:
    """The use case's answers created before `cutoff` and not anonymised, oldest first, a batch
    at a time. Keyset pagination on (created_at, id) over the partial index
    answer_retention_due: answers held back are not read again in the same run."""
    after: tuple[datetime, int] | None = None
    while True:
        rows = Answer.objects.filter(
            use_case=use_case, anonymised_at__isnull=True, created_at__lt=cutoff
        )
        if after is not None:
            rows = rows.filter(
                Q(created_at__gt=after[0]) | Q(created_at=after[0], pk__gt=after[1])
            )
        batch = list(rows.order_by("created_at", "pk").values_list("pk", "created_at")[:batch_size])
        if not batch:
            return
        yield batch
        after = (batch[-1][1], batch[-1][0])


def use_case_retention_apply(
    *,
    use_case: UseCase,
    now: datetime | None = None,
    dry_run: bool = False,
    batch_size: int = BATCH_SIZE,
) -> RetentionResult:
    """Anonymise the use case's answers older than its retention (none when it keeps them
    forever). A dry run counts what would be done and writes nothing."""
    now = now or timezone.now()
    days = use_case.retention_days
    if days is None:
        return RetentionResult(use_case.slug, None, None, dry_run=dry_run)
    cutoff = retention_cutoff(now=now, days=days)
    result = RetentionResult(use_case.slug, days, cutoff, dry_run=dry_run)
    for batch in _due_batches(use_case, cutoff, batch_size):
        ids = [pk for pk, _ in batch]
        result.due += len(ids)
        in_review, for_judge = _held(ids)
        result.held_in_review += len(in_review)
        result.held_for_judge += len(for_judge)
        if not dry_run:
            result.anonymised += answers_anonymise(answer_ids=ids, now=now)
    return result


def retention_apply_all(
    *, now: datetime | None = None, dry_run: bool = False, slug: str | None = None
) -> list[RetentionResult]:
    """Retention for every use case with a retention period (or the one named by `slug`). Run
    `months_drop` first where months may be dropped whole."""
    use_cases = UseCase.objects.filter(retention_days__isnull=False).order_by("slug")
    if slug is not None:
        use_cases = UseCase.objects.filter(slug=slug)
    return [
        use_case_retention_apply(use_case=use_case, now=now, dry_run=dry_run)
        for use_case in use_cases
    ]


# --- whole months (answers partitioned by month, PostgreSQL) ---------------------------------


@dataclass
class MonthResult:
    month: date
    answers: int  # dropped (or that would be, on a dry run)
    runs: int
    dry_run: bool = False


def months_drop(*, now: datetime | None = None, dry_run: bool = False) -> list[MonthResult]:
    """Drop the monthly partitions that retention allows to delete whole: every use case with
    answers in the month deletes past its retention (`retention_deletes`), the whole month
    lies before each one's cutoff, and nothing holds it (a judge run waiting or running, an
    answer not yet scored, an expert review or investigation pointing at one of its answers).
    Its weeks' rollups are sealed first: the dashboards keep the month's figures. The judge
    runs and keys of its answers go in the same transaction; a replay of a dropped answer's
    external id is then a new answer. Months that do not qualify are anonymised as before."""
    if not partitions.enabled():
        return []
    now = now or timezone.now()
    deleting = {
        u.pk: retention_cutoff(now=now, days=u.retention_days)
        for u in UseCase.objects.filter(retention_deletes=True, retention_days__isnull=False)
        if u.retention_days is not None
    }
    if not deleting:
        return []
    latest = max(deleting.values())
    everyone = list(UseCase.objects.values_list("pk", flat=True))
    out = []
    for part in partitions.partitions("monitoring_answer"):
        if part.month is None:
            continue
        start = partitions.month_start(part.month)
        end = partitions.month_start(partitions.next_month(part.month))
        if end > latest:
            break  # the months are in order: none later lies past every retention
        answers = Answer.objects.filter(created_at__gte=start, created_at__lt=end)
        # A use case that keeps the month's answers holds it: one index probe each (not a
        # pass over the month's answers).
        keeping = [uc for uc in everyone if uc not in deleting or deleting[uc] < end]
        if not answers.exists() or any(
            answers.filter(use_case_id=uc).exists() for uc in keeping
        ) or _month_held(answers, start, end):
            continue
        runs = JudgeRun.objects.filter(answer__created_at__gte=start, answer__created_at__lt=end)
        result = MonthResult(part.month, answers.count(), runs.count(), dry_run)
        if not dry_run:
            _month_drop(part.month, start, end, runs, result.answers)
        out.append(result)
    return out


def _month_held(answers: QuerySet[Answer], start: datetime, end: datetime) -> bool:
    if answers.filter(status__in=_UNSCORED).exists() or JudgeRun.objects.filter(
        answer__created_at__gte=start, answer__created_at__lt=end, status__in=_OPEN_RUNS
    ).exists():
        return True
    return any(keeps(start=start, end=end)
               for keeps in extensions.registry.retention_keeps.values())


def _month_drop(
    month: date, start: datetime, end: datetime, runs: QuerySet[JudgeRun], answers: int
) -> None:
    q = connection.ops.quote_name
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '5s'")
        rollups_seal(start=start, end=end)
        DroppedMonth.objects.create(month=month, answers=answers)
        # Claims and progress go with their runs (Django's cascade); the answers' pointer to
        # their current run is checked at commit, when the month is gone.
        ids = list(runs.values_list("pk", flat=True))
        rollups.runs_dropped(ids)
        for first in range(0, len(ids), BATCH_SIZE):
            JudgeRun.objects.filter(pk__in=ids[first:first + BATCH_SIZE]).delete()
        AnswerKey.objects.filter(answer_created_at__gte=start, answer_created_at__lt=end).delete()
        with connection.cursor() as cursor:
            # The deferred checks of what was just changed (the answers' current run set to
            # null) run now: a table with checks still pending cannot be dropped.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            for table, _ in reversed(partitions.PARTITIONED):  # chunks first
                name = partitions.partition_name(table, month)
                cursor.execute(f"ALTER TABLE {q(table)} DETACH PARTITION {q(name)}")
                cursor.execute(f"DROP TABLE {q(name)}")
