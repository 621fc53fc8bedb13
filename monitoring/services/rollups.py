"""Keeping the weekly rollups (monitoring/models/rollups.py) equal to what they count.

- `answers_added`: an ingest's new answers, in the ingest's transaction (`RollupDay`,
  `RollupCause`, `RollupSegment`).
- `answer_judged`: a judge run's completion moves its answer's judged state (`RollupScore`,
  `RollupCauseScore`, `RollupMoments`, `RollupSegmentScore`, `RollupSegmentSums`): the state it
  had is subtracted (a rescore), the new one added, in the run's transaction.
- Rebuilding and checking them against a recount: rollup_rebuild.py; the segments' part of
  it, a key declared later, and metadata that retention clears: segment_rollups.py.

Writers aggregate in Python and send one statement per table: INSERT … ON CONFLICT DO UPDATE,
adding to what is there (the same text on PostgreSQL and SQLite), keys sorted so that two
transactions lock rows in one order. On PostgreSQL a writer holds a shared advisory lock on its
use case until it commits, and the rebuild an exclusive one while it recomputes, so that a
rebuild never misses nor counts twice an answer a writer is adding meanwhile.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.db import connection, models

from monitoring.domain.moments import (
    DEFAULT_SIMILARITY_EDGES,
    MOMENT_KEYS,
    Moments,
    moments_of,
)
from monitoring.domain.points import POINTS2
from monitoring.domain.segments import segment_values
from monitoring.models import (
    Answer,
    Claim,
    JudgeRun,
    RollupCause,
    RollupCauseScore,
    RollupDay,
    RollupMoments,
    RollupScore,
    RollupSegment,
    RollupSegmentScore,
    RollupSegmentSums,
    RollupUsage,
    RollupUsageDay,
    UseCase,
)
from monitoring.models.rollups import (
    USAGE_DAY_SUMS,
    USAGE_SUMS,
    Dim,
    bucket_of,
    cause_buckets,
    day_of,
    in_week_usage,
    week_of,
)
from monitoring.models.segment_rollups import score_micros

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


@dataclass(frozen=True, slots=True)
class Traits:
    """What the diagnosis groups an answer by; set at ingest, never changed."""

    best_chunk_score: float | None
    chunk_count: int
    multi_part: bool | None
    min_content_probability: float | None

    @classmethod
    def of(cls, answer: Any) -> Traits:
        """Of an Answer or a dict of its fields."""
        fields = answer if isinstance(answer, Mapping) else vars(answer)
        return cls(fields["best_chunk_score"], int(fields["chunk_count"]),
                   fields["multi_part"], fields["min_content_probability"])

    def buckets(self) -> tuple[tuple[int, int], ...]:
        return cause_buckets(self.best_chunk_score, self.chunk_count, self.multi_part,
                             self.min_content_probability)

    def judged_buckets(self, in_random_sample: bool) -> list[tuple[int, int]]:
        """The buckets a judged answer's score counts in: the probability only for the random
        sample (the tuner's lift rests on it; it would be the largest rollup)."""
        return [(dim, bucket) for dim, bucket in self.buckets()
                if dim != Dim.PROBABILITY or in_random_sample]

    @property
    def in_regression(self) -> bool:
        """The causes' regression counts the answer: it has a similarity."""
        return self.best_chunk_score is not None and not math.isnan(self.best_chunk_score)

    @property
    def similarity_bucket(self) -> int:
        """The similarity bucket its regression sums are kept in (DEFAULT_SIMILARITY_EDGES)."""
        return bucket_of(self.best_chunk_score, DEFAULT_SIMILARITY_EDGES)

    def moments(self, score: float) -> Moments | None:
        """The answer's part of its week's regression sums (None: no similarity, left out)."""
        if not self.in_regression or self.best_chunk_score is None:
            return None
        return moments_of(self.best_chunk_score, self.chunk_count, bool(self.multi_part), score)


TRAITS = ("best_chunk_score", "chunk_count", "multi_part", "min_content_probability")


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
    """Count new answers (just inserted in this transaction) in their days, their weeks' cause
    buckets and their segments (in this order: every writer locks the rollups' rows in one
    order). The segments of the metadata keys their use case (as loaded with the answer)
    declares."""
    counts: Counter[tuple[Any, ...]] = Counter()
    buckets: Counter[tuple[Any, ...]] = Counter()
    segments: Counter[tuple[Any, ...]] = Counter()
    for a in answers:
        counts[a.use_case_id, day_of(a.created_at), bool(a.flagged)] += 1
        week = week_of(a.created_at)
        for dim, bucket in Traits.of(a).buckets():
            buckets[a.use_case_id, week, bool(a.flagged), dim, bucket] += 1
        for dimension, value in segment_values(vars(a), a.use_case.segment_keys or []):
            segments[a.use_case_id, week, bool(a.flagged), dimension, value] += 1
    if not counts:
        return
    lock_shared({uc for uc, _, _ in counts})
    rows_add(RollupDay, DAY_KEY, counts)
    rows_add(RollupCause, CAUSE_KEY, buckets)
    rows_add(RollupSegment, SEGMENT_KEY, segments)


def answer_judged(
    *, use_case_id: int, created_at: datetime, flagged: bool, in_random_sample: bool,
    traits: Traits, before: Judged | None, after: Judged | None,
    segment_fields: Mapping[str, Any] | None = None,
) -> None:
    """Move one answer from its judged state `before` (None: it was not judged) to `after`;
    `segment_fields`: its SEGMENT_FIELDS, for its segments' scores (under the lock, of the
    keys its use case declares now)."""
    week = week_of(created_at)
    flagged, in_random_sample = bool(flagged), bool(in_random_sample)
    delta: Counter[tuple[Any, ...]] = Counter()
    by_cause: Counter[tuple[Any, ...]] = Counter()
    for state, sign in ((before, -1), (after, +1)):
        if state is None:
            continue
        delta[(use_case_id, week, flagged, in_random_sample, state.abstention,
               state.score, state.points2, state.claims)] += sign
        for dim, bucket in traits.judged_buckets(in_random_sample):
            by_cause[(use_case_id, week, flagged, in_random_sample, dim, bucket,
                      state.score)] += sign
    delta = Counter({k: v for k, v in delta.items() if v})
    if not delta:
        return
    lock_shared({use_case_id})
    rows_add(RollupScore, _SCORE_KEY, delta)
    rows_add(RollupCauseScore, _CAUSE_SCORE_KEY, {k: v for k, v in by_cause.items() if v})
    _moments_move(
        (use_case_id, week, flagged, traits.similarity_bucket),
        add=None if after is None else traits.moments(after.score),
        sub=None if before is None else traits.moments(before.score),
    )
    if segment_fields is not None:
        declared = UseCase.objects.filter(pk=use_case_id).values_list(
            "segment_keys", flat=True).first() or []
        by_segment: Counter[tuple[Any, ...]] = Counter()
        for state, sign in ((before, -1), (after, +1)):
            if state is None:
                continue
            for dimension, value in segment_values(segment_fields, declared):
                by_segment[(use_case_id, week, flagged, dimension, value, state.score)] += sign
        segment_scores_add(by_segment)


def segment_scores_add(scores: Mapping[tuple[Any, ...], int]) -> None:
    """Add judged answers (key of SEGMENT_SCORE_KEY → how many, negative to take away) to the
    segments' histogram of scores and to their exact sums, which come from it."""
    rows_add(RollupSegmentScore, SEGMENT_SCORE_KEY, {k: n for k, n in scores.items() if n})
    rows_add(RollupSegmentSums, SEGMENT_KEY, segment_sums(scores), SEGMENT_SUMS)


def segment_sums(scores: Mapping[tuple[Any, ...], int]) -> dict[tuple[Any, ...], tuple[int, ...]]:
    """The segments' sums (SEGMENT_SUMS: how many, Σ and Σ² of the scores in millionths) of a
    histogram keyed by SEGMENT_SCORE_KEY."""
    sums: dict[tuple[Any, ...], tuple[int, ...]] = {}
    for (*key, score), n in scores.items():
        micros = score_micros(score)
        sums[tuple(key)] = plus(sums.get(tuple(key)), (n, n * micros, n * micros * micros))
    return {k: v for k, v in sums.items() if any(v)}


def lock_exclusive(use_case_id: int) -> None:
    """The rebuild's lock on a use case's rollups (writers wait; SQLite serialises anyway)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [ROLLUP_LOCK, use_case_id])


def _moments_move(
    key: tuple[int, date, bool, int], *, add: Moments | None, sub: Moments | None
) -> None:
    """Add one answer's moments to its week's (and similarity bucket's) row and take away those
    it had (a rescore: the same answer, so the count and the covariates' range stay)."""
    if add is None and sub is None:
        return
    use_case_id, week, flagged, bucket = key
    RollupMoments.objects.bulk_create(
        [RollupMoments(use_case_id=use_case_id, week=week, flagged=flagged, bucket=bucket)],
        ignore_conflicts=True,
    )
    row = RollupMoments.objects.select_for_update().get(
        use_case_id=use_case_id, week=week, flagged=flagged, bucket=bucket
    )
    moments = row.moments
    if add is not None:
        moments = moments + add
    if sub is not None:
        moments = dataclasses.replace(
            moments, n=moments.n - sub.n, m_sum=moments.m_sum - sub.m_sum,
            sums={k: moments.sums[k] - sub.sums[k] for k in MOMENT_KEYS},
        )
    _moments_store(row, moments)
    row.save()


def _moments_store(row: RollupMoments, moments: Moments) -> None:
    row.n, row.m_sum = moments.n, moments.m_sum
    ranges = (moments.s_min, moments.s_max, moments.c_min, moments.c_max)
    row.s_min, row.s_max, row.c_min, row.c_max = (
        (None,) * 4 if not moments.n else ranges
    )
    row.sums = [moments.sums[k] for k in MOMENT_KEYS] if moments.n else []


_SCORE_KEY = ("use_case", "week", "flagged", "in_random_sample", "abstention", "score",
              "points2", "claims")
# The rollups' keys (ingest's single-answer statement names the same columns).
DAY_KEY = ("use_case", "day", "flagged")
CAUSE_KEY = ("use_case", "week", "flagged", "dim", "bucket")
_CAUSE_SCORE_KEY = ("use_case", "week", "flagged", "in_random_sample", "dim", "bucket", "score")
SEGMENT_KEY = ("use_case", "week", "flagged", "dimension", "value")
SEGMENT_SCORE_KEY = ("use_case", "week", "flagged", "dimension", "value", "score")
SEGMENT_SUMS = ("judged", "total", "squares")


_USAGE_KEY = ("use_case", "week", "judge_model", "prompt_version")


_USAGE_DAY_KEY = ("use_case", "day", "trigger", "status", "dropped")


def run_ended(run_id: int) -> None:
    """Count a judge run that just ended (succeeded or failed), in the transaction that ended
    it: a run that ended never changes again (a retry is a new run).

    An on-demand run counts in the days' usage (what the judge cost, by trigger) but not in
    the weeks' (`in_week_usage`)."""
    run = (
        JudgeRun.objects.filter(pk=run_id)
        .values("use_case_id", "answer__created_at", *RUN_FIELDS)
        .get()
    )
    uc = run["use_case_id"]
    lock_shared({uc})
    if in_week_usage(run["trigger"]):
        key = (uc, week_of(run["answer__created_at"]), run["judge_model"], run["prompt_version"])
        rows_add(RollupUsage, _USAGE_KEY, {key: usage_of(run)}, USAGE_SUMS)
    rows_add(RollupUsageDay, _USAGE_DAY_KEY, {usage_day_key(run): usage_day_of(run)},
         USAGE_DAY_SUMS)


def usage_moved(
    *, use_case_ids: set[int], usage: Mapping[tuple[Any, ...], tuple[int, ...]],
    usage_day: Mapping[tuple[Any, ...], tuple[int, ...]],
) -> None:
    """Add these differences to the usage rollups (a past run priced: its cost in, its count
    moved from the unpriced to the priced), in the caller's transaction."""
    lock_shared(use_case_ids)
    rows_add(RollupUsage, _USAGE_KEY, usage, USAGE_SUMS)
    rows_add(RollupUsageDay, _USAGE_DAY_KEY, usage_day, USAGE_DAY_SUMS)


RUN_FIELDS = ("judge_model", "prompt_version", "status", "trigger", "finished_at", "calls",
               "prompt_tokens", "completion_tokens", "cached_tokens", "cost")


def usage_day_key(run: Mapping[str, Any], dropped: bool = False) -> tuple[Any, ...]:
    return (run["use_case_id"], day_of(run["finished_at"]), run["trigger"], run["status"],
            dropped)


def runs_dropped(run_ids: Sequence[int]) -> None:
    """Retention is about to delete these runs with their answers' month: their usage per day
    moves to the rows of dropped runs, which the judge page still reads and a recount leaves
    alone (called in the dropping transaction)."""
    moved: dict[tuple[Any, ...], tuple[int, ...]] = {}
    for first in range(0, len(run_ids), 1000):
        for run in (
            JudgeRun.objects.filter(
                pk__in=run_ids[first:first + 1000],
                status__in=[JudgeRun.Status.SUCCEEDED, JudgeRun.Status.FAILED],
                finished_at__isnull=False,
            ).values("use_case_id", *RUN_FIELDS)
        ):
            key = usage_day_key(run)
            moved[key] = plus(moved.get(key), usage_day_of(run))
    if not moved:
        return
    lock_shared({key[0] for key in moved})
    rows_add(RollupUsageDay, _USAGE_DAY_KEY,
         {key: tuple(-n for n in sums) for key, sums in moved.items()}, USAGE_DAY_SUMS)
    rows_add(RollupUsageDay, _USAGE_DAY_KEY,
         {(*key[:-1], True): sums for key, sums in moved.items()}, USAGE_DAY_SUMS)


def usage_day_of(run: Mapping[str, Any]) -> tuple[int, ...]:
    """A run's part of each of USAGE_DAY_SUMS (those of USAGE_SUMS that a day keeps)."""
    usage = dict(zip(USAGE_SUMS, usage_of(run), strict=True))
    return tuple(usage[name] for name in USAGE_DAY_SUMS)


def usage_of(run: Mapping[str, Any]) -> tuple[int, ...]:
    """A run's part of each of USAGE_SUMS."""
    ok = run["status"] == JudgeRun.Status.SUCCEEDED
    cost = run["cost"]
    return (
        1, int(ok), int(run["status"] == JudgeRun.Status.FAILED), run["calls"],
        run["calls"] if ok else 0, run["prompt_tokens"], run["completion_tokens"],
        run["cached_tokens"], 0 if cost is None else int(cost.scaleb(6).to_integral_value()),
        int(cost is not None), int(cost is None and run["calls"] > 0),
    )


def lock_shared(use_case_ids: set[int]) -> None:
    if connection.vendor != "postgresql":
        return  # SQLite serialises writers
    with connection.cursor() as cursor:
        for pk in sorted(use_case_ids):
            cursor.execute("SELECT pg_advisory_xact_lock_shared(%s, %s)", [ROLLUP_LOCK, pk])


def rows_add(
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
        key=lambda kv: tuple(map(sortable, kv[0])),
    )
    per_row = len(columns) + len(added)
    update = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in added)
    if connection.vendor == "postgresql" and rows:
        # One array per column: the statement's text is the same every time, so psycopg
        # parses it once (a VALUES list of hundreds of placeholders it parsed at every call).
        arrays = ", ".join(
            f"%s::{model._meta.get_field(name).db_type(connection)}[]"
            for name in (*key, *sums)
        )
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(columns + added)}) "
                f"SELECT * FROM unnest({arrays}) "
                f"ON CONFLICT ({', '.join(columns)}) DO UPDATE SET {update}",
                [list(column) for column in zip(*(
                    (*k, *n) for k, n in rows), strict=True)],
            )
        return
    limit = max(1, 999 // per_row)  # SQLite's limit of bound parameters
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


def sortable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, date) else value


# --- rebuild and check ----------------------------------------------------------------------


# Each rollup: its model, key fields, summed fields, and the field its rows are dated by.
TABLES: dict[str, tuple[type[models.Model], tuple[str, ...], tuple[str, ...], str]] = {
    "day": (RollupDay, DAY_KEY, ("answers",), "day"),
    "score": (RollupScore, _SCORE_KEY, ("answers",), "week"),
    "usage": (RollupUsage, _USAGE_KEY, USAGE_SUMS, "week"),
    "usage_day": (RollupUsageDay, _USAGE_DAY_KEY, USAGE_DAY_SUMS, "day"),
    "cause": (RollupCause, CAUSE_KEY, ("answers",), "week"),
    "cause_score": (RollupCauseScore, _CAUSE_SCORE_KEY, ("answers",), "week"),
    "segment": (RollupSegment, SEGMENT_KEY, ("answers",), "week"),
    "segment_score": (RollupSegmentScore, SEGMENT_SCORE_KEY, ("answers",), "week"),
    "segment_sums": (RollupSegmentSums, SEGMENT_KEY, SEGMENT_SUMS, "week"),
}

Rows = dict[str, dict[tuple[Any, ...], tuple[int, ...]]]


def plus(a: tuple[int, ...] | None, b: tuple[int, ...]) -> tuple[int, ...]:
    return b if a is None else tuple(x + y for x, y in zip(a, b, strict=True))
