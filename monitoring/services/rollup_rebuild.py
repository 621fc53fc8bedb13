"""Rebuilding and checking the weekly rollups (monitoring/services/rollups.py keeps them as
answers and runs arrive): `rollups_rebuild` recomputes them from the raw rows under an exclusive
lock on the use case; `rollups_check` recounts and compares; `rollups_repair`, nightly, rebuilds
a use case that differs; `rollups_seal` keeps a month's figures when retention drops its rows."""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import models, transaction
from django.db.models import Case, Count, F, IntegerField, Sum, Value, When
from django.db.models.functions import TruncDate
from django.utils import timezone

from monitoring.domain.moments import (
    DEFAULT_CHUNK_EDGES,
    DEFAULT_SIMILARITY_EDGES,
    MOMENT_KEYS,
    Moments,
    moments_of_many,
)
from monitoring.domain.points import POINTS2
from monitoring.models import (
    Answer,
    Claim,
    JudgeRun,
    RollupMoments,
    RollupSealed,
    RollupState,
    RollupUsageDay,
    UseCase,
)
from monitoring.models.buckets import Bucket
from monitoring.models.rollups import (
    NO_BUCKET,
    NOT_IN_WEEK_USAGE,
    PROBABILITY_GRID,
    Dim,
    definition,
    local_midnight,
    monday_of,
    rollups_ready,
    week_of,
)
from monitoring.services.rollups import (
    RUN_FIELDS,
    TABLES,
    TRAITS,
    Rows,
    Traits,
    lock_exclusive,
    plus,
    rows_add,
    sortable,
    usage_day_key,
    usage_day_of,
    usage_of,
)
from monitoring.services.segment_rollups import (
    expected_segments,
    segment_keys_roll_pending,
    unrolled,
)

logger = logging.getLogger(__name__)


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
            regressed[(uc, week, flagged, of.similarity_bucket)].append(
                (of.best_chunk_score, of.chunk_count, bool(of.multi_part), score))
    usage: dict[tuple[Any, ...], tuple[int, ...]] = {}
    for run in (
        JudgeRun.objects.filter(
            answer__in=answers, status__in=[JudgeRun.Status.SUCCEEDED, JudgeRun.Status.FAILED]
        )
        .exclude(NOT_IN_WEEK_USAGE)
        .values("answer__use_case_id", "answer__created_at", *RUN_FIELDS)
        .order_by()
        .iterator(chunk_size=5000)
    ):
        key = (run["answer__use_case_id"], week_of(run["answer__created_at"]),
               run["judge_model"], run["prompt_version"])
        usage[key] = plus(usage.get(key), usage_of(run))
    # By the day a run ended (not its answer's): the runs that ended since `since`.
    ended = JudgeRun.objects.filter(
        use_case_id__in=use_case_ids,
        status__in=[JudgeRun.Status.SUCCEEDED, JudgeRun.Status.FAILED],
        finished_at__isnull=False,
    )
    if since is not None:
        ended = ended.filter(finished_at__gte=local_midnight(since))
    usage_day: dict[tuple[Any, ...], tuple[int, ...]] = {}
    for run in ended.values("use_case_id", *RUN_FIELDS).order_by().iterator(chunk_size=5000):
        key = usage_day_key(run)
        usage_day[key] = plus(usage_day.get(key), usage_day_of(run))
    # A partial recount (`since`) counts the keys already rolled only: a key declared since
    # waits for its task, which counts all its weeks.
    segments, segment_scores, segment_sums = expected_segments(
        use_case_ids, since, rolled_only=since is not None)
    return {
        "segment": segments,
        "segment_score": segment_scores,
        "segment_sums": segment_sums,
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




def _stored(use_case_ids: Sequence[int], since: date | None = None) -> Rows:
    out: Rows = {}
    for name, (model, key, sums, dated_by) in TABLES.items():
        rows: dict[tuple[Any, ...], tuple[int, ...]] = {}
        fields = ["use_case_id", *key[1:]]
        for row in _rows(model, dated_by, use_case_ids, since).values_list(*fields, *sums):
            values = tuple(row[len(fields):])
            if any(values):
                rows[tuple(row[:len(fields)])] = plus(rows.get(row[:len(fields)]), values)
        out[name] = rows
    out["moments"] = {
        (row.use_case_id, row.week, row.flagged, row.bucket): _moment_values(row.moments)
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
    written = dict.fromkeys([*TABLES, "moments"], 0)
    for pk in ids:
        with transaction.atomic():
            lock_exclusive(pk)
            sealed = _sealed([pk])
            expected = _without_sealed(_expected([pk], since), sealed)
            for name, (model, key, sums, dated_by) in TABLES.items():
                _unsealed(_rows(model, dated_by, [pk], since), dated_by, sealed).delete()
                rows_add(model, key, expected[name], sums)
                written[name] += len(expected[name])
            _unsealed(_rows(RollupMoments, "week", [pk], since), "week", sealed).delete()
            RollupMoments.objects.bulk_create([
                _moments_row(key, values) for key, values in expected["moments"].items()
            ])
            written["moments"] += len(expected["moments"])
            if since is None:  # the segments now hold every declared key's answers
                UseCase.objects.filter(pk=pk).update(segment_keys_rolled=F("segment_keys"))
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
    for rows in (expected, stored):  # a key declared since is its task's to count
        for name in ("segment", "segment_score", "segment_sums"):
            rows[name] = unrolled(rows[name], ids)
    out = []
    for name in [*TABLES, "moments"]:
        want, have = expected[name], stored[name]
        same = _close if name == "moments" else _equal
        for key in sorted(set(want) | set(have), key=lambda k: tuple(map(sortable, k))):
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
    use_case_id, week, flagged, bucket = key
    n, s_min, s_max, c_min, c_max, m_sum, *sums = values
    return RollupMoments(use_case_id=use_case_id, week=week, flagged=flagged, bucket=bucket, n=n,
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
    segment_keys_roll_pending()  # declared keys whose task was lost
    repaired = 0
    for use_case in UseCase.objects.order_by("pk"):
        differences = rollups_check(use_cases=[use_case], weeks=weeks)
        if differences:
            logger.error("rollups of %s differ from a recount (%d rows, e.g. %s); rebuilt",
                         use_case.slug, len(differences), differences[0])
            rollups_rebuild(use_cases=[use_case], weeks=weeks)
            repaired += 1
    return repaired
