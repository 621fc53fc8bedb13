"""Keeping the weekly rollups (monitoring/models/rollups.py) equal to what they count.

- `answers_added`: an ingest's new answers, in the ingest's transaction (`RollupDay`).
- `answer_judged`: a judge run's completion moves its answer's judged state (`RollupScore`):
  the state it had is subtracted (a rescore), the new one added, in the run's transaction.
- `rollups_rebuild`: recompute from the raw rows (after a COPY, a restore, a change of
  definition); `rollups_check`: where the stored rollups differ from a recount.

Writers aggregate in Python and send one statement per table: INSERT … ON CONFLICT DO UPDATE,
adding to what is there (the same text on PostgreSQL and SQLite), keys sorted so that two
transactions lock rows in one order. On PostgreSQL a writer holds a shared advisory lock on its
use case until it commits, and the rebuild an exclusive one while it recomputes, so that a
rebuild never misses nor counts twice an answer a writer is adding meanwhile.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Case, Count, IntegerField, Sum, Value, When
from django.db.models.functions import TruncDate
from django.utils import timezone

from monitoring.models import Answer, Claim, RollupDay, RollupScore, RollupState, UseCase
from monitoring.models.rollups import POINTS2, day_of, definition, rollups_ready, week_of

logger = logging.getLogger(__name__)

# pg_advisory_xact_lock's first key: the rollups' lock space (the second is the use case).
ROLLUP_LOCK = 22


@dataclass(frozen=True, slots=True)
class Judged:
    """An answer's judged state as the rollups count it."""

    score: float
    abstention: bool
    points2: int  # twice the supported points of its readable claims
    claims: int  # its readable claims


def judged_state(
    score: float | None, abstention: bool, labels: Iterable[str]
) -> Judged | None:
    """The state a judged answer has with this score and its current run's claim labels (None:
    not counted as judged, as the dashboards count: no score)."""
    if score is None:
        return None
    points = [p for p in map(POINTS2.get, labels) if p is not None]
    return Judged(float(score), bool(abstention), sum(points), len(points))


def run_labels(run_id: int | None) -> list[str]:
    """The claim labels of a run (its readable ones count)."""
    if run_id is None:
        return []
    return list(Claim.objects.filter(run_id=run_id).values_list("label", flat=True))


# --- writers --------------------------------------------------------------------------------


def answers_added(answers: Iterable[Answer]) -> None:
    """Count new answers (just inserted in this transaction) in their days."""
    counts = Counter(
        (a.use_case_id, day_of(a.created_at), bool(a.flagged)) for a in answers
    )
    if not counts:
        return
    _lock_shared({uc for uc, _, _ in counts})
    _add(RollupDay, ("use_case", "day", "flagged"), counts)


def answer_judged(
    *, use_case_id: int, created_at: datetime, flagged: bool, in_random_sample: bool,
    before: Judged | None, after: Judged | None,
) -> None:
    """Move one answer from its judged state `before` (None: it was not judged) to `after`."""
    week = week_of(created_at)
    delta: Counter[tuple[Any, ...]] = Counter()
    for state, sign in ((before, -1), (after, +1)):
        if state is not None:
            delta[(use_case_id, week, bool(flagged), bool(in_random_sample), state.abstention,
                   state.score, state.points2, state.claims)] += sign
    delta = Counter({k: v for k, v in delta.items() if v})
    if not delta:
        return
    _lock_shared({use_case_id})
    _add(RollupScore, _SCORE_KEY, delta)


_SCORE_KEY = ("use_case", "week", "flagged", "in_random_sample", "abstention", "score",
              "points2", "claims")


def _lock_shared(use_case_ids: set[int]) -> None:
    if connection.vendor != "postgresql":
        return  # SQLite serialises writers
    with connection.cursor() as cursor:
        for pk in sorted(use_case_ids):
            cursor.execute("SELECT pg_advisory_xact_lock_shared(%s, %s)", [ROLLUP_LOCK, pk])


def _add(
    model: type[models.Model], key: Sequence[str], counts: Counter[tuple[Any, ...]]
) -> None:
    """answers += n for each key (a row made where there is none), in one statement."""
    table = connection.ops.quote_name(model._meta.db_table)
    columns = [connection.ops.quote_name(_column(model, f)) for f in key]
    answers = connection.ops.quote_name("answers")
    rows = sorted(counts.items(), key=lambda kv: tuple(map(_sortable, kv[0])))
    per_row = len(columns) + 1
    limit = max(1, 999 // per_row) if connection.vendor == "sqlite" else 1000
    with connection.cursor() as cursor:
        for first in range(0, len(rows), limit):
            chunk = rows[first:first + limit]
            values = ", ".join(["(" + ", ".join(["%s"] * per_row) + ")"] * len(chunk))
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(columns)}, {answers}) VALUES {values} "
                f"ON CONFLICT ({', '.join(columns)}) DO UPDATE SET "
                f"{answers} = {table}.{answers} + excluded.{answers}",
                [p for k, n in chunk for p in (*k, n)],
            )


def _column(model: type[models.Model], name: str) -> str:
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field) and field.column
    return field.column


def _sortable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, date) else value


# --- rebuild and check ----------------------------------------------------------------------


def _expected(
    use_case_ids: Sequence[int], since: date | None = None
) -> tuple[Counter[tuple[Any, ...]], Counter[tuple[Any, ...]]]:
    """What the rollups of these use cases should hold (from the Monday `since` on), counted
    from the raw rows."""
    zone = ZoneInfo(settings.TIME_ZONE)
    answers = Answer.objects.filter(use_case_id__in=use_case_ids)
    if since is not None:
        answers = answers.filter(created_at__gte=_local_midnight(since))
    days: Counter[tuple[Any, ...]] = Counter()
    for uc, day, flagged, n in (
        answers
        .annotate(day=TruncDate("created_at", tzinfo=zone))
        .values_list("use_case_id", "day", "flagged")
        .annotate(n=Count("*"))
        .order_by()
    ):
        days[(uc, day, bool(flagged))] += n
    points = Case(
        *[When(label=label, then=Value(p)) for label, p in POINTS2.items()],
        output_field=IntegerField(),
    )
    readable = {
        run_id: (p2, m)
        for run_id, p2, m in Claim.objects.filter(
            run_id__in=answers.filter(status=Answer.Status.JUDGED).values("current_run_id"),
            label__in=list(POINTS2),
        ).values_list("run_id").annotate(p2=Sum(points), m=Count("*")).order_by()
    }
    scores: Counter[tuple[Any, ...]] = Counter()
    for uc, created_at, flagged, in_random, abstention, score, run_id in (
        answers.filter(status=Answer.Status.JUDGED, score__isnull=False)
        .values_list("use_case_id", "created_at", "flagged", "in_random_sample", "abstention",
                     "score", "current_run_id")
        .order_by()
        .iterator(chunk_size=5000)
    ):
        p2, m = readable.get(run_id, (0, 0))
        assert score is not None  # filtered above
        scores[(uc, week_of(created_at), bool(flagged), bool(in_random), bool(abstention),
                float(score), int(p2), int(m))] += 1
    return days, scores


def _stored(
    use_case_ids: Sequence[int], since: date | None = None
) -> tuple[Counter[tuple[Any, ...]], Counter[tuple[Any, ...]]]:
    day_rows, score_rows = _rows(use_case_ids, since)
    days: Counter[tuple[Any, ...]] = Counter()
    for uc, day, flagged, n in day_rows.values_list("use_case_id", "day", "flagged", "answers"):
        if n:
            days[(uc, day, flagged)] += n
    scores: Counter[tuple[Any, ...]] = Counter()
    for row in score_rows.values_list("use_case_id", *_SCORE_KEY[1:], "answers"):
        if row[-1]:
            scores[row[:-1]] += row[-1]
    return days, scores


def _rows(use_case_ids: Sequence[int], since: date | None) -> tuple[Any, Any]:
    days = RollupDay.objects.filter(use_case_id__in=use_case_ids)
    scores = RollupScore.objects.filter(use_case_id__in=use_case_ids)
    if since is not None:
        days, scores = days.filter(day__gte=since), scores.filter(week__gte=since)
    return days, scores


def _local_midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=ZoneInfo(settings.TIME_ZONE))


def since_weeks(weeks: int | None) -> date | None:
    """The Monday `weeks` − 1 weeks before this week's (None: from the start)."""
    if weeks is None:
        return None
    if weeks < 1:
        raise ValueError("weeks must be at least 1")
    return week_of(timezone.now()) - timedelta(weeks=weeks - 1)


def _use_case_ids(use_cases: Iterable[UseCase] | None) -> list[int]:
    if use_cases is None:
        return list(UseCase.objects.order_by("pk").values_list("pk", flat=True))
    return sorted(u.pk for u in use_cases)


@dataclass(frozen=True, slots=True)
class Rebuilt:
    use_cases: int
    day_rows: int
    score_rows: int
    whole: bool  # every week of every use case: the pages read the rollups from now on


def rollups_rebuild(
    *, use_cases: Iterable[UseCase] | None = None, weeks: int | None = None
) -> Rebuilt:
    """Recompute the rollups of these use cases (all: None) from the raw rows, the last `weeks`
    weeks or all of them, one use case per transaction. Rebuilding every week of every use
    case makes the rollups whole for this definition: from then on the pages read them."""
    whole = use_cases is None and weeks is None
    since = since_weeks(weeks)
    ids = _use_case_ids(use_cases)
    day_rows = score_rows = 0
    for pk in ids:
        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [ROLLUP_LOCK, pk])
            days, scores = _expected([pk], since)
            for rows in _rows([pk], since):
                rows.delete()
            _add(RollupDay, ("use_case", "day", "flagged"), days)
            _add(RollupScore, _SCORE_KEY, scores)
            day_rows += len(days)
            score_rows += len(scores)
    if whole:
        RollupState.objects.all().delete()
        RollupState.objects.create(definition=definition(), ready_at=timezone.now())
    return Rebuilt(len(ids), day_rows, score_rows, whole)


def rollups_check(
    *, use_cases: Iterable[UseCase] | None = None, weeks: int | None = None
) -> list[str]:
    """Where the stored rollups differ from a recount of the raw rows (empty: they agree)."""
    ids = _use_case_ids(use_cases)
    since = since_weeks(weeks)
    expected, stored = _expected(ids, since), _stored(ids, since)
    out = []
    for name, want, have in (("day", expected[0], stored[0]), ("score", expected[1], stored[1])):
        for key in sorted(set(want) | set(have), key=lambda k: tuple(map(_sortable, k))):
            if want.get(key, 0) != have.get(key, 0):
                out.append(f"{name} {key}: counted {want.get(key, 0)}, stored "
                           f"{have.get(key, 0)}")
    return out


# The nightly check recounts the last weeks, where answers arrive and runs finish; the
# command checks everything.
CHECK_WEEKS = 8


def rollups_repair(*, weeks: int = CHECK_WEEKS) -> int:
    """The nightly check. Rollups never made whole (an upgrade, a bulk load) are rebuilt in
    full, after which the pages read them. Otherwise each use case whose last `weeks` weeks
    differ from a recount is rebuilt for those weeks, logged as an error (a writer missed
    something). Returns how many use cases were rebuilt."""
    if not rollups_ready():
        logger.info("the rollups are not whole for this definition: rebuilding them")
        return rollups_rebuild().use_cases
    repaired = 0
    for use_case in UseCase.objects.order_by("pk"):
        differences = rollups_check(use_cases=[use_case], weeks=weeks)
        if differences:
            logger.error("rollups of %s differ from a recount (%d rows, e.g. %s); rebuilt",
                         use_case.slug, len(differences), differences[0])
            rollups_rebuild(use_cases=[use_case], weeks=weeks)
            repaired += 1
    return repaired
