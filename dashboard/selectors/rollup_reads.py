"""The weekly figures' inputs from the rollups (monitoring/models/rollups.py), in the very
shapes the raw reads give them (`reads.read_counts`, `judged.judged_by_week`), so that both paths
share all the statistics and give the same figures (tests/monitoring/test_rollups.py compares
them). Read only once `rollups_ready()`: a complete rebuild under the current definition."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import date
from decimal import Decimal
from typing import Any

from django.db.models import Sum
from django.utils import timezone

from dashboard.selectors.judged import StratumJudged, WeekJudged
from dashboard.selectors.reads import (
    OPEN_RUNS,
    Usage,
    UsageGroups,
    usage_groups,
    usage_of_groups,
)
from dashboard.selectors.weeks import Week
from monitoring.domain.moments import NO_MOMENTS, Moments
from monitoring.models import (
    RollupCause,
    RollupCauseScore,
    RollupDay,
    RollupMoments,
    RollupScore,
    RollupUsage,
)
from monitoring.models.rollups import NO_BUCKET, Dim, grid_probability, monday_of
from monitoring.models.rollups import rollups_ready as rollups_ready  # the readers ask here


def _mondays(weeks: Sequence[Week]) -> dict[date, int]:
    return {timezone.localtime(w.start).date(): i for i, w in enumerate(weeks)}


def counts_from_rollups(
    use_case_ids: Sequence[int], weeks: Sequence[Week]
) -> dict[tuple[int, int], tuple[int, int]]:
    """(all, flagged) answers per (use case, week index), as `reads.read_counts`."""
    mondays = _mondays(weeks)
    first = min(mondays)
    last = timezone.localtime(weeks[-1].end).date()
    totals: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
    rows = (
        RollupDay.objects.filter(use_case_id__in=use_case_ids, day__gte=first, day__lt=last)
        .values_list("use_case_id", "day", "flagged")
        .annotate(n=Sum("answers"))
        .order_by()
    )
    for use_case_id, day, flagged, n in rows:
        wk = mondays.get(monday_of(day))
        if wk is None or not n:
            continue
        totals[use_case_id, wk][0] += n
        if flagged:
            totals[use_case_id, wk][1] += n
    return {key: (total, flagged) for key, (total, flagged) in totals.items() if total}


def judged_from_rollups(
    use_case_ids: Sequence[int], weeks: Sequence[Week], *, claims_from: int | None = None
) -> dict[tuple[int, int], WeekJudged]:
    """The judged answers per (use case, week index) as `judged.judged_by_week` builds them
    from the rows; the claims for the weeks from `claims_from` on (None: none)."""
    mondays = _mondays(weeks)
    parts: dict[tuple[int, int, bool], tuple[Counter[float], list[int],
                                             Counter[tuple[float, int]]]] = {}
    rows = (
        RollupScore.objects.filter(use_case_id__in=use_case_ids, week__in=list(mondays))
        .values_list("use_case_id", "week", "flagged", "abstention", "score", "points2",
                     "claims")
        .annotate(n=Sum("answers"))
        .order_by()
    )
    for use_case_id, week, flagged, abstention, score, points2, claims, n in rows:
        if not n:
            continue
        key = (use_case_id, mondays[week], bool(flagged))
        scores, abstentions, pairs = parts.setdefault(key, (Counter(), [0], Counter()))
        scores[float(score)] += n
        if abstention:
            abstentions[0] += n
        pairs[(points2 / 2, claims)] += n
    out: dict[tuple[int, int], WeekJudged] = {}
    for use_case_id, wk in {(uc, wk) for uc, wk, _ in parts}:
        with_claims = claims_from is not None and wk >= claims_from
        strata = []
        for flagged in (True, False):
            scores, abstentions, pairs = parts.get((use_case_id, wk, flagged),
                                                   (Counter(), [0], Counter()))
            strata.append(StratumJudged(scores, abstentions[0],
                                        pairs if with_claims else None))
        out[use_case_id, wk] = WeekJudged(strata[0], strata[1])
    return out


def _bucket(dim: int, bucket: int) -> Any:
    """A rollup's bucket as the diagnosis names it: an index (None: no similarity), a bool or
    None for multi-part, the grid probability standing in for the tuner's."""
    if dim == Dim.PROBABILITY:
        return grid_probability(bucket)
    if bucket == NO_BUCKET:
        return None
    return bool(bucket) if dim == Dim.MULTI_PART else bucket


def causes_from_rollups(
    use_case_id: int, weeks: Sequence[Week]
) -> tuple[dict[tuple[int, int, Any, bool], int],
           dict[tuple[int, int, Any, bool, bool], Counter[float]],
           dict[tuple[int, int], Moments]]:
    """The diagnosis' window (diagnosis.Window): answers per (dim, week index, bucket,
    flagged), judged scores per (dim, week index, bucket, flagged, in the random sample), and
    the regression's moments per (stratum: 0 flagged, 1 unflagged; similarity bucket)."""
    mondays = _mondays(weeks)
    named: dict[tuple[int, int], Any] = {}  # (dim, bucket) → the diagnosis' name of it

    def name(dim: int, bucket: int) -> Any:
        if (dim, bucket) not in named:
            named[dim, bucket] = _bucket(dim, bucket)
        return named[dim, bucket]

    answers: dict[tuple[int, int, Any, bool], int] = defaultdict(int)
    for week, flagged, dim, bucket, n in (
        RollupCause.objects.filter(use_case_id=use_case_id, week__in=list(mondays), answers__gt=0)
        .values_list("week", "flagged", "dim", "bucket", "answers")
    ):
        answers[dim, mondays[week], name(dim, bucket), flagged] += n
    judged: dict[tuple[int, int, Any, bool, bool], Counter[float]] = defaultdict(Counter)
    for week, flagged, in_random, dim, bucket, score, n in (
        RollupCauseScore.objects.filter(use_case_id=use_case_id, week__in=list(mondays),
                                        answers__gt=0)
        .values_list("week", "flagged", "in_random_sample", "dim", "bucket", "score", "answers")
    ):
        judged[dim, mondays[week], name(dim, bucket), flagged, in_random][score] += n
    moments: dict[tuple[int, int], Moments] = {}
    for row in RollupMoments.objects.filter(use_case_id=use_case_id, week__in=list(mondays),
                                            n__gt=0):
        key = (0 if row.flagged else 1, row.bucket)
        moments[key] = moments.get(key, NO_MOMENTS) + row.moments
    return answers, judged, moments


def usage_from_rollups(
    use_case_ids: Sequence[int], weeks: Sequence[Week], offset: int = 0
) -> dict[tuple[int, int], Usage]:
    """Judge runs per (use case, week index + offset), as `reads.read_usage`: the runs that ended
    from the rollups, the few still open read raw and added."""
    mondays = _mondays(weeks)
    groups: UsageGroups = {}
    rows = (
        RollupUsage.objects.filter(use_case_id__in=use_case_ids, week__in=list(mondays))
        .values_list("use_case_id", "week", "judge_model", "prompt_version")
        .annotate(*[Sum(name) for name in ("runs", "calls", "cost_micros", "priced_runs",
                                           "unpriced_runs", "succeeded_runs",
                                           "succeeded_calls")])
        .order_by()
    )
    for uc, week, model, version, runs, calls, micros, priced, unpriced, ok, ok_calls in rows:
        if not runs:
            continue
        cost = Decimal(micros).scaleb(-6) if priced else None
        # The rollups hold runs that ended: none of them is open.
        groups[uc, mondays[week], model, version] = (runs, calls, cost, unpriced, ok, ok_calls, 0)
    for key, open_runs in usage_groups(use_case_ids, weeks, OPEN_RUNS).items():
        ended = groups.get(key)
        groups[key] = open_runs if ended is None else _merged(ended, open_runs)
    return usage_of_groups(groups, offset)


def _merged(a: tuple[Any, ...], b: tuple[Any, ...]) -> Any:
    cost = None if a[2] is None and b[2] is None else (a[2] or 0) + (b[2] or 0)
    return (a[0] + b[0], a[1] + b[1], cost, a[3] + b[3], a[4] + b[4], a[5] + b[5], a[6] + b[6])
