"""Keeping the weekly rollups (monitoring/models/rollups.py) equal to what they count.

- `answers_added`: an ingest's new answers, in the ingest's transaction (`RollupDay`,
  `RollupCause`).
- `answer_judged`: a judge run's completion moves its answer's judged state (`RollupScore`,
  `RollupCauseScore`, `RollupMoments`): the state it had is subtracted (a rescore), the new one
  added, in the run's transaction.
- `rollups_rebuild`: recompute from the raw rows (after a COPY, a restore, a change of
  definition); `rollups_check`: where the stored rollups differ from a recount.

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
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Case, Count, IntegerField, Sum, Value, When
from django.db.models.functions import TruncDate
from django.utils import timezone

from monitoring.domain.moments import (
    DEFAULT_CHUNK_EDGES,
    DEFAULT_SIMILARITY_EDGES,
    MOMENT_KEYS,
    Moments,
    moments_of,
    moments_of_many,
)
from monitoring.models import (
    Answer,
    Claim,
    JudgeRun,
    RollupCause,
    RollupCauseScore,
    RollupDay,
    RollupMoments,
    RollupScore,
    RollupSealed,
    RollupState,
    RollupUsage,
    RollupUsageDay,
    UseCase,
)
from monitoring.models.buckets import Bucket
from monitoring.models.rollups import (
    NO_BUCKET,
    POINTS2,
    PROBABILITY_GRID,
    USAGE_DAY_SUMS,
    USAGE_SUMS,
    Dim,
    cause_buckets,
    day_of,
    definition,
    local_midnight,
    monday_of,
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

    def moments(self, score: float) -> Moments | None:
        """The answer's part of its week's regression sums (None: no similarity, left out)."""
        if not self.in_regression or self.best_chunk_score is None:
            return None
        return moments_of(self.best_chunk_score, self.chunk_count,
                                 bool(self.multi_part), score)


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
    """Count new answers (just inserted in this transaction) in their days and their weeks'
    cause buckets (the day first: every writer locks the rollups' rows in one order)."""
    counts: Counter[tuple[Any, ...]] = Counter()
    buckets: Counter[tuple[Any, ...]] = Counter()
    for a in answers:
        counts[a.use_case_id, day_of(a.created_at), bool(a.flagged)] += 1
        week = week_of(a.created_at)
        for dim, bucket in Traits.of(a).buckets():
            buckets[a.use_case_id, week, bool(a.flagged), dim, bucket] += 1
    if not counts:
        return
    _lock_shared({uc for uc, _, _ in counts})
    _add(RollupDay, DAY_KEY, counts)
    _add(RollupCause, CAUSE_KEY, buckets)


def answer_judged(
    *, use_case_id: int, created_at: datetime, flagged: bool, in_random_sample: bool,
    traits: Traits, before: Judged | None, after: Judged | None,
) -> None:
    """Move one answer from its judged state `before` (None: it was not judged) to `after`."""
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
    _lock_shared({use_case_id})
    _add(RollupScore, _SCORE_KEY, delta)
    _add(RollupCauseScore, _CAUSE_SCORE_KEY, {k: v for k, v in by_cause.items() if v})
    _moments_move(
        (use_case_id, week, flagged),
        add=None if after is None else traits.moments(after.score),
        sub=None if before is None else traits.moments(before.score),
    )


def _moments_move(
    key: tuple[int, date, bool], *, add: Moments | None, sub: Moments | None
) -> None:
    """Add one answer's moments to its week's row and take away those it had (a rescore: the
    same answer, so the count and the covariates' range stay)."""
    if add is None and sub is None:
        return
    use_case_id, week, flagged = key
    RollupMoments.objects.bulk_create(
        [RollupMoments(use_case_id=use_case_id, week=week, flagged=flagged)],
        ignore_conflicts=True,
    )
    row = RollupMoments.objects.select_for_update().get(
        use_case_id=use_case_id, week=week, flagged=flagged
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


_USAGE_KEY = ("use_case", "week", "judge_model", "prompt_version")


_USAGE_DAY_KEY = ("use_case", "day", "trigger", "status", "dropped")


def run_ended(run_id: int) -> None:
    """Count a judge run that just ended (succeeded or failed), in the transaction that ended
    it: a run that ended never changes again (a retry is a new run)."""
    run = (
        JudgeRun.objects.filter(pk=run_id)
        .values("use_case_id", "answer__created_at", *_RUN_FIELDS)
        .get()
    )
    uc = run["use_case_id"]
    _lock_shared({uc})
    key = (uc, week_of(run["answer__created_at"]), run["judge_model"], run["prompt_version"])
    _add(RollupUsage, _USAGE_KEY, {key: _usage_of(run)}, USAGE_SUMS)
    _add(RollupUsageDay, _USAGE_DAY_KEY, {_usage_day_key(run): _usage_day_of(run)},
         USAGE_DAY_SUMS)


_RUN_FIELDS = ("judge_model", "prompt_version", "status", "trigger", "finished_at", "calls",
               "prompt_tokens", "completion_tokens", "cached_tokens", "cost")


def _usage_day_key(run: Mapping[str, Any], dropped: bool = False) -> tuple[Any, ...]:
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
            ).values("use_case_id", *_RUN_FIELDS)
        ):
            key = _usage_day_key(run)
            moved[key] = _plus(moved.get(key), _usage_day_of(run))
    if not moved:
        return
    _lock_shared({key[0] for key in moved})
    _add(RollupUsageDay, _USAGE_DAY_KEY,
         {key: tuple(-n for n in sums) for key, sums in moved.items()}, USAGE_DAY_SUMS)
    _add(RollupUsageDay, _USAGE_DAY_KEY,
         {(*key[:-1], True): sums for key, sums in moved.items()}, USAGE_DAY_SUMS)


def _usage_day_of(run: Mapping[str, Any]) -> tuple[int, ...]:
    """A run's part of each of USAGE_DAY_SUMS (those of USAGE_SUMS that a day keeps)."""
    usage = dict(zip(USAGE_SUMS, _usage_of(run), strict=True))
    return tuple(usage[name] for name in USAGE_DAY_SUMS)


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


def _sortable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, date) else value


# --- rebuild and check ----------------------------------------------------------------------


# Each rollup: its model, key fields, summed fields, and the field its rows are dated by.
_TABLES: dict[str, tuple[type[models.Model], tuple[str, ...], tuple[str, ...], str]] = {
    "day": (RollupDay, DAY_KEY, ("answers",), "day"),
    "score": (RollupScore, _SCORE_KEY, ("answers",), "week"),
    "usage": (RollupUsage, _USAGE_KEY, USAGE_SUMS, "week"),
    "usage_day": (RollupUsageDay, _USAGE_DAY_KEY, USAGE_DAY_SUMS, "day"),
    "cause": (RollupCause, CAUSE_KEY, ("answers",), "week"),
    "cause_score": (RollupCauseScore, _CAUSE_SCORE_KEY, ("answers",), "week"),
}

Rows = dict[str, dict[tuple[Any, ...], tuple[int, ...]]]


def _expected(use_case_ids: Sequence[int], since: date | None = None) -> Rows:
    """What the rollups of these use cases should hold (from the Monday `since` on), counted
    from the raw rows."""
    zone = ZoneInfo(settings.TIME_ZONE)
    answers = Answer.objects.filter(use_case_id__in=use_case_ids)
    if since is not None:
        answers = answers.filter(created_at__gte=local_midnight(since))
    days: Counter[tuple[Any, ...]] = Counter()
    buckets: Counter[tuple[Any, ...]] = Counter()
    # Two passes: the causes together, then the probability (its hundred buckets times the
    # others would group by nearly every answer).
    joint = {
        Dim.CHUNKS: Bucket("chunk_count", DEFAULT_CHUNK_EDGES),
        Dim.SIMILARITY: Bucket("best_chunk_score", DEFAULT_SIMILARITY_EDGES),
        Dim.MULTI_PART: models.F("multi_part"),
    }
    for dims in (joint, {Dim.PROBABILITY: Bucket("min_content_probability", PROBABILITY_GRID)}):
        names = [f"b{dim}" for dim in dims]
        for uc, day, flagged, *found, n in (
            answers
            .annotate(day=TruncDate("created_at", tzinfo=zone),
                      **{name: e for name, e in zip(names, dims.values(), strict=True)})
            .values_list("use_case_id", "day", "flagged", *names)
            .annotate(n=Count("*"))
            .order_by()
        ):
            if Dim.CHUNKS in dims:  # every answer has a chunk count: the days from here
                days[(uc, day, bool(flagged))] += n
            week = monday_of(day)
            for dim, b in zip(dims, found, strict=True):
                buckets[(uc, week, bool(flagged), dim,
                         NO_BUCKET if b is None else int(b))] += n
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
    by_cause: Counter[tuple[Any, ...]] = Counter()
    regressed: dict[tuple[Any, ...], list[tuple[float, int, bool, float]]] = defaultdict(list)
    for uc, created_at, flagged, in_random, abstention, score, run_id, *traits in (
        answers.filter(status=Answer.Status.JUDGED, score__isnull=False)
        .values_list("use_case_id", "created_at", "flagged", "in_random_sample", "abstention",
                     "score", "current_run_id", *TRAITS)
        .order_by()
        .iterator(chunk_size=5000)
    ):
        p2, m = readable.get(run_id, (0, 0))
        assert score is not None  # filtered above
        week, flagged, in_random, score = week_of(created_at), bool(flagged), bool(in_random), (
            float(score))
        scores[(uc, week, flagged, in_random, bool(abstention), score, int(p2), int(m))] += 1
        of = Traits(*traits)
        for dim, bucket in of.judged_buckets(in_random):
            by_cause[(uc, week, flagged, in_random, dim, bucket, score)] += 1
        if of.in_regression:
            assert of.best_chunk_score is not None
            regressed[(uc, week, flagged)].append(
                (of.best_chunk_score, of.chunk_count, bool(of.multi_part), score))
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
    # By the day a run ended (not its answer's): the runs that ended since `since`.
    ended = JudgeRun.objects.filter(
        use_case_id__in=use_case_ids,
        status__in=[JudgeRun.Status.SUCCEEDED, JudgeRun.Status.FAILED],
        finished_at__isnull=False,
    )
    if since is not None:
        ended = ended.filter(finished_at__gte=local_midnight(since))
    usage_day: dict[tuple[Any, ...], tuple[int, ...]] = {}
    for run in ended.values("use_case_id", *_RUN_FIELDS).order_by().iterator(chunk_size=5000):
        key = _usage_day_key(run)
        usage_day[key] = _plus(usage_day.get(key), _usage_day_of(run))
    return {
        "day": {k: (n,) for k, n in days.items()},
        "score": {k: (n,) for k, n in scores.items()},
        "usage": usage,
        "usage_day": usage_day,
        "cause": {k: (n,) for k, n in buckets.items()},
        "cause_score": {k: (n,) for k, n in by_cause.items()},
        "moments": {k: _moment_values(moments_of_many(rows))
                    for k, rows in regressed.items()},
    }


def _moment_values(m: Moments) -> tuple[Any, ...]:
    """A stratum's moments as one row of numbers, to compare."""
    return (m.n, m.s_min, m.s_max, m.c_min, m.c_max, m.m_sum,
            *(m.sums[k] for k in MOMENT_KEYS))


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
    out["moments"] = {
        (row.use_case_id, row.week, row.flagged): _moment_values(row.moments)
        for row in _rows(RollupMoments, "week", use_case_ids, since) if row.n
    }
    return out


def _rows(
    model: type[models.Model], dated_by: str, use_case_ids: Sequence[int], since: date | None
) -> Any:
    """A rollup's rows that a recount covers."""
    rows = model._default_manager.filter(use_case_id__in=use_case_ids)
    if model is RollupUsageDay:
        rows = rows.filter(dropped=False)  # the record of runs whose raw rows are gone
    return rows if since is None else rows.filter(**{f"{dated_by}__gte": since})


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
    written = dict.fromkeys([*_TABLES, "moments"], 0)
    for pk in ids:
        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [ROLLUP_LOCK, pk])
            sealed = _sealed([pk])
            expected = _without_sealed(_expected([pk], since), sealed)
            for name, (model, key, sums, dated_by) in _TABLES.items():
                _unsealed(_rows(model, dated_by, [pk], since), dated_by, sealed).delete()
                _add(model, key, expected[name], sums)
                written[name] += len(expected[name])
            _unsealed(_rows(RollupMoments, "week", [pk], since), "week", sealed).delete()
            RollupMoments.objects.bulk_create([
                _moments_row(key, values) for key, values in expected["moments"].items()
            ])
            written["moments"] += len(expected["moments"])
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
    sealed = _sealed(ids)
    expected = _without_sealed(_expected(ids, since), sealed)
    stored = _without_sealed(_stored(ids, since), sealed)
    out = []
    for name in [*_TABLES, "moments"]:
        want, have = expected[name], stored[name]
        same = _close if name == "moments" else _equal
        for key in sorted(set(want) | set(have), key=lambda k: tuple(map(_sortable, k))):
            a, b = want.get(key), have.get(key)
            if not same(a, b):
                shown = [None if x is None else (x[0] if len(x) == 1 else x) for x in (a, b)]
                out.append(f"{name} {key}: counted {shown[0] or 0}, stored {shown[1] or 0}")
    return out


def _sealed(use_case_ids: Sequence[int]) -> set[tuple[int, date]]:
    """(use case, week) whose raw rows retention dropped: their rollups are the record."""
    return set(
        RollupSealed.objects.filter(use_case_id__in=use_case_ids).values_list("use_case_id",
                                                                                "week")
    )


def _without_sealed(rows: Rows, sealed: set[tuple[int, date]]) -> Rows:
    """The rows of weeks that are not sealed (every table's key is (use case, day or week,
    ...))."""
    if not sealed:
        return rows
    return {
        name: {k: v for k, v in table.items() if (k[0], monday_of(k[1])) not in sealed}
        for name, table in rows.items()
    }


def _unsealed(rows: Any, dated_by: str, sealed: set[tuple[int, date]]) -> Any:
    """A queryset of rollup rows without those of sealed weeks."""
    weeks: dict[int, list[date]] = defaultdict(list)
    for use_case_id, week in sealed:
        weeks[use_case_id].append(week)
    for use_case_id, mondays in weeks.items():
        dates = mondays if dated_by == "week" else [
            monday + timedelta(days=d) for monday in mondays for d in range(7)
        ]
        rows = rows.exclude(use_case_id=use_case_id, **{f"{dated_by}__in": dates})
    return rows


def rollups_seal(*, start: datetime, end: datetime) -> int:
    """Seal every week of every use case with answers created in [start, end) (a month that
    retention is about to drop): from then on no rebuild or check touches them. Returns how
    many weeks were sealed."""
    use_case_ids = set(
        Answer.objects.filter(created_at__gte=start, created_at__lt=end)
        .values_list("use_case_id", flat=True).distinct()
    )
    first, last = week_of(start), week_of(end - timedelta(microseconds=1))
    weeks = []
    week = first
    while week <= last:
        weeks.append(week)
        week += timedelta(days=7)
    rows = [RollupSealed(use_case_id=uc, week=w) for uc in sorted(use_case_ids) for w in weeks]
    RollupSealed.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def _equal(a: Any, b: Any) -> bool:
    return bool(a == b)


def _close(a: tuple[Any, ...] | None, b: tuple[Any, ...] | None) -> bool:
    """Moments agree: counts and ranges equal, sums up to the rounding of a rescore's
    subtraction."""
    if a is None or b is None:
        return a is b
    return a[:6] == b[:6] and all(
        math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-6) for x, y in zip(a[6:], b[6:], strict=True)
    )


def _moments_row(key: tuple[Any, ...], values: tuple[Any, ...]) -> RollupMoments:
    use_case_id, week, flagged = key
    n, s_min, s_max, c_min, c_max, m_sum, *sums = values
    return RollupMoments(use_case_id=use_case_id, week=week, flagged=flagged, n=n,
                         s_min=s_min, s_max=s_max, c_min=c_min, c_max=c_max, m_sum=m_sum,
                         sums=list(sums))


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
