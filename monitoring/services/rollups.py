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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Case, Count, IntegerField, Sum, Value, When
from django.db.models.functions import TruncDate
from django.utils import timezone

from monitoring.models import (
    Answer,
    Claim,
    JudgeRun,
    RollupDay,
    RollupScore,
    RollupState,
    RollupUsage,
    UseCase,
)
from monitoring.models.rollups import (
    POINTS2,
    USAGE_SUMS,
    day_of,
    definition,
    rollups_ready,
    week_of,
)

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


_USAGE_KEY = ("use_case", "week", "judge_model", "prompt_version")


def run_ended(run_id: int) -> None:
    """Count a judge run that just ended (succeeded or failed), in the transaction that ended
    it: a run that ended never changes again (a retry is a new run)."""
    run = (
        JudgeRun.objects.filter(pk=run_id)
        .values("answer__use_case_id", "answer__created_at", *_RUN_FIELDS)
        .get()
    )
    uc = run["answer__use_case_id"]
    _lock_shared({uc})
    key = (uc, week_of(run["answer__created_at"]), run["judge_model"], run["prompt_version"])
    _add(RollupUsage, _USAGE_KEY, {key: _usage_of(run)}, USAGE_SUMS)


_RUN_FIELDS = ("judge_model", "prompt_version", "status", "calls", "prompt_tokens",
               "completion_tokens", "cached_tokens", "cost")


def _usage_of(run: Mapping[str, Any]) -> tuple[int, ...]:
    """A run's part of each of USAGE_SUMS."""
    ok = run["status"] == JudgeRun.Status.SUCCEEDED
    cost = run["cost"]
    return (
        1, int(ok), int(run["status"] == JudgeRun.Status.FAILED), run["calls"],
        run["calls"] if ok else 0, run["prompt_tokens"], run["completion_tokens"],
        run["cached_tokens"], 0 if cost is None else int(cost.scaleb(6).to_integral_value()),
        int(cost is not None), int(cost is None and run["calls"] > 0),
    )


def _lock_shared(use_case_ids: set[int]) -> None:
    if connection.vendor != "postgresql":
        return  # SQLite serialises writers
    with connection.cursor() as cursor:
        for pk in sorted(use_case_ids):
            cursor.execute("SELECT pg_advisory_xact_lock_shared(%s, %s)", [ROLLUP_LOCK, pk])


def _add(
    model: type[models.Model], key: Sequence[str], counts: Mapping[tuple[Any, ...], Any],
    sums: Sequence[str] = ("answers",),
) -> None:
    """Add to the `sums` columns of each key's row (made where there is none), in one
    statement; `counts` maps a key to its number (one sum) or tuple of numbers."""
    q = connection.ops.quote_name
    table = q(model._meta.db_table)
    columns = [q(_column(model, f)) for f in key]
    added = [q(f) for f in sums]
    rows = sorted(
        ((k, v if isinstance(v, tuple) else (v,)) for k, v in counts.items()),
        key=lambda kv: tuple(map(_sortable, kv[0])),
    )
    per_row = len(columns) + len(added)
    limit = max(1, 999 // per_row) if connection.vendor == "sqlite" else 1000
    update = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in added)
    with connection.cursor() as cursor:
        for first in range(0, len(rows), limit):
            chunk = rows[first:first + limit]
            values = ", ".join(["(" + ", ".join(["%s"] * per_row) + ")"] * len(chunk))
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(columns + added)}) VALUES {values} "
                f"ON CONFLICT ({', '.join(columns)}) DO UPDATE SET {update}",
                [p for k, n in chunk for p in (*k, *n)],
            )


def _column(model: type[models.Model], name: str) -> str:
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field) and field.column
    return field.column


def _sortable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, date) else value


# --- rebuild and check ----------------------------------------------------------------------


_DAY_KEY = ("use_case", "day", "flagged")
# Each rollup: its model, key fields, summed fields, and the field its rows are dated by.
_TABLES: dict[str, tuple[type[models.Model], tuple[str, ...], tuple[str, ...], str]] = {
    "day": (RollupDay, _DAY_KEY, ("answers",), "day"),
    "score": (RollupScore, _SCORE_KEY, ("answers",), "week"),
    "usage": (RollupUsage, _USAGE_KEY, USAGE_SUMS, "week"),
}

Rows = dict[str, dict[tuple[Any, ...], tuple[int, ...]]]


def _expected(use_case_ids: Sequence[int], since: date | None = None) -> Rows:
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
    usage: dict[tuple[Any, ...], tuple[int, ...]] = {}
    for run in (
        JudgeRun.objects.filter(
            answer__in=answers, status__in=[JudgeRun.Status.SUCCEEDED, JudgeRun.Status.FAILED]
        )
        .values("answer__use_case_id", "answer__created_at", *_RUN_FIELDS)
        .order_by()
        .iterator(chunk_size=5000)
    ):
        key = (run["answer__use_case_id"], week_of(run["answer__created_at"]),
               run["judge_model"], run["prompt_version"])
        usage[key] = _plus(usage.get(key), _usage_of(run))
    return {
        "day": {k: (n,) for k, n in days.items()},
        "score": {k: (n,) for k, n in scores.items()},
        "usage": usage,
    }


def _plus(a: tuple[int, ...] | None, b: tuple[int, ...]) -> tuple[int, ...]:
    return b if a is None else tuple(x + y for x, y in zip(a, b, strict=True))


def _stored(use_case_ids: Sequence[int], since: date | None = None) -> Rows:
    out: Rows = {}
    for name, (model, key, sums, dated_by) in _TABLES.items():
        rows: dict[tuple[Any, ...], tuple[int, ...]] = {}
        fields = ["use_case_id", *key[1:]]
        for row in _rows(model, dated_by, use_case_ids, since).values_list(*fields, *sums):
            values = tuple(row[len(fields):])
            if any(values):
                rows[tuple(row[:len(fields)])] = _plus(rows.get(row[:len(fields)]), values)
        out[name] = rows
    return out


def _rows(
    model: type[models.Model], dated_by: str, use_case_ids: Sequence[int], since: date | None
) -> Any:
    rows = model._default_manager.filter(use_case_id__in=use_case_ids)
    return rows if since is None else rows.filter(**{f"{dated_by}__gte": since})


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
    rows: dict[str, int]  # rows written per rollup
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
    written = dict.fromkeys(_TABLES, 0)
    for pk in ids:
        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [ROLLUP_LOCK, pk])
            expected = _expected([pk], since)
            for name, (model, key, sums, dated_by) in _TABLES.items():
                _rows(model, dated_by, [pk], since).delete()
                _add(model, key, expected[name], sums)
                written[name] += len(expected[name])
    if whole:
        RollupState.objects.all().delete()
        RollupState.objects.create(definition=definition(), ready_at=timezone.now())
    return Rebuilt(len(ids), written, whole)


def rollups_check(
    *, use_cases: Iterable[UseCase] | None = None, weeks: int | None = None
) -> list[str]:
    """Where the stored rollups differ from a recount of the raw rows (empty: they agree)."""
    ids = _use_case_ids(use_cases)
    since = since_weeks(weeks)
    expected, stored = _expected(ids, since), _stored(ids, since)
    out = []
    for name in _TABLES:
        want, have = expected[name], stored[name]
        for key in sorted(set(want) | set(have), key=lambda k: tuple(map(_sortable, k))):
            a, b = want.get(key), have.get(key)
            if a != b:
                shown = [None if x is None else (x[0] if len(x) == 1 else x) for x in (a, b)]
                out.append(f"{name} {key}: counted {shown[0] or 0}, stored {shown[1] or 0}")
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
