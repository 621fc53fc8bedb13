"""What the dashboard reads, and as little as it can, because a use case may have a million
answers:

- answers are counted per (use case, week) and flagged - by range counts over the index
  `answer_use_case_time` / `answer_flagged_time`;
- only judged answers are fetched row by row, with only the figures the estimates use (all of
  them in the partial index `answer_dash_judged`);
- the claim labels of their current runs come grouped per run (index `claim_run_label`);
- judge runs are grouped per week, judge model and prompt version;
- the experts' reviews come from what the review app registered (monitoring/extensions.py).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import NamedTuple

from django.db import connections, router
from django.db.models import Case, Count, FloatField, Q, QuerySet, Sum, Value, When

from dashboard.domain.expert_scale import Review
from dashboard.selectors.weeks import Week, week_bucket
from monitoring import extensions
from monitoring.domain.points import CLAIM_POINTS
from monitoring.models import Answer, Claim, JudgeRun
from monitoring.models.rollups import NOT_IN_WEEK_USAGE


class JudgedRow(NamedTuple):
    """The figures of one judged answer that the dashboard uses."""

    use_case_id: int
    week: int  # index into the weeks asked for
    flagged: bool
    score: float
    abstention: bool
    # The rest only where asked for (the overview does without).
    in_random_sample: bool = False
    best_chunk_score: float | None = None
    chunk_count: int = 0
    multi_part: bool | None = None
    min_content_probability: float | None = None
    run_id: int | None = None


@dataclass
class Usage:
    """Judge runs of one week's answers: runs, calls, cost, and who judged."""

    runs: int = 0
    calls: int = 0
    cost: Decimal = Decimal(0)
    unpriced_runs: int = 0  # runs that made calls for a model without a price
    succeeded_runs: int = 0
    succeeded_calls: int = 0
    open_runs: int = 0  # runs still pending or running: the week is still being judged
    judges: set[tuple[str, str]] = field(default_factory=set)  # (model, prompt version)


def answers_in(use_case_ids: Sequence[int], weeks: Sequence[Week]) -> QuerySet[Answer]:
    return Answer.objects.filter(
        use_case_id__in=use_case_ids,
        created_at__gte=weeks[0].start,
        created_at__lt=weeks[-1].end,
    )


def _judged_in(
    use_case_ids: Sequence[int], weeks: Sequence[Week], where: Q | None = None
) -> QuerySet[Answer]:
    return answers_in(use_case_ids, weeks).filter(
        where or Q(), status=Answer.Status.JUDGED, score__isnull=False
    )


# Weeks counted per statement by `read_counts` (SQLite's limit on a compound SELECT is 500).
_COUNT_TERMS = 200


def read_counts(
    use_case_ids: Sequence[int], weeks: Sequence[Week], where: Q | None = None
) -> dict[tuple[int, int], tuple[int, int]]:
    """(all, flagged) answers per (use case, week index); of the answers `where` selects (a
    segment filter, `segments.SegmentFilter`), grouped by week.

    Two range counts per use case and week, all answers and the flagged ones, as correlated
    subqueries over a small table of (use case, week, start, end): each is an index-only range
    scan (answer_use_case_time, answer_flagged_time) that PostgreSQL counts without computing
    anything per answer, planned once for all weeks. About a third of the time of bucketing
    every answer by its week and grouping (26 weeks of the largest bench use case, 108,000
    answers: ~19 ms against 50-70 ms). The weeks are contiguous, so each answer of the span
    counts in exactly the week `week_bucket` would put it in.
    """
    if where is not None:
        return _filtered_counts(use_case_ids, weeks, where)
    # Raw SQL goes past the database router: ask it where answers are read (the replica for a
    # dashboard, where one is configured).
    connection = connections[router.db_for_read(Answer)]
    qn = connection.ops.quote_name
    adapt = connection.ops.adapt_datetimefield_value
    table, use_case, created = (
        qn(Answer._meta.db_table), qn("use_case_id"), qn("created_at")
    )
    count = (
        f"(SELECT COUNT(*) FROM {table} a WHERE a.{use_case} = w.uc{{}} "
        f"AND a.{created} >= w.lo AND a.{created} < w.hi)"
    )
    every, flagged_only = count.format(""), count.format(f" AND a.{qn('flagged')} = %s")
    spans = [
        (int(use_case_id), i, adapt(week.start), adapt(week.end))
        for use_case_id in use_case_ids
        for i, week in enumerate(weeks)
    ]
    out: dict[tuple[int, int], tuple[int, int]] = {}
    with connection.cursor() as cursor:
        # SQLite allows at most 500 terms in a compound SELECT.
        for first in range(0, len(spans), _COUNT_TERMS):
            chunk = spans[first:first + _COUNT_TERMS]
            table_sql = " UNION ALL ".join(
                f"SELECT {pk} AS uc, {i} AS wk, %s AS lo, %s AS hi" for pk, i, _, _ in chunk
            )
            cursor.execute(
                f"SELECT w.uc, w.wk, {every}, {flagged_only} FROM ({table_sql}) w",
                [True, *(param for _, _, lo, hi in chunk for param in (lo, hi))],
            )
            for use_case_id, wk, total, flagged_n in cursor.fetchall():
                if total:
                    out[use_case_id, wk] = (total, flagged_n)
    return out


def _filtered_counts(
    use_case_ids: Sequence[int], weeks: Sequence[Week], where: Q
) -> dict[tuple[int, int], tuple[int, int]]:
    rows = (
        answers_in(use_case_ids, weeks).filter(where)
        .annotate(wk=week_bucket("created_at", weeks))
        .values_list("use_case_id", "wk")
        .annotate(total=Count("*"), flagged_n=Count("id", filter=Q(flagged=True)))
        .order_by()
    )
    return {(uc, wk): (total, flagged_n) for uc, wk, total, flagged_n in rows if total}


_JUDGED_COLUMNS = (
    "use_case_id", "wk", "flagged", "score", "abstention", "in_random_sample",
    "best_chunk_score", "chunk_count", "multi_part", "min_content_probability", "current_run_id",
)


def judged_rows(
    use_case_ids: Sequence[int], weeks: Sequence[Week], *, lean: bool = False,
    where: Q | None = None,
) -> list[JudgedRow]:
    """The judged answers of the weeks (those `where` selects); `lean`: only what the weekly
    estimates need."""
    columns = _JUDGED_COLUMNS[:5] if lean else _JUDGED_COLUMNS
    rows = (
        _judged_in(use_case_ids, weeks, where)
        .annotate(wk=week_bucket("created_at", weeks))
        .values_list(*columns)
        .order_by()
    )
    return [JudgedRow(*row) for row in rows] if lean else list(map(JudgedRow._make, rows))


def read_claims(
    use_case_id: int, weeks: Sequence[Week], where: Q | None = None
) -> dict[int, tuple[float, int]]:
    """(supported points, claims) of the judged answers' current runs, by run id.

    Unreadable verdicts are left out, as in the answer's own score; a run without claims (an
    abstention) is missing here and counts as (0, 0).
    """
    runs = _judged_in([use_case_id], weeks, where).values("current_run_id")
    points = Case(
        *[When(label=label, then=Value(p)) for label, p in CLAIM_POINTS.items()],
        output_field=FloatField(),
    )
    rows = (
        Claim.objects.filter(run_id__in=runs, label__in=list(CLAIM_POINTS))
        .values_list("run_id")
        .annotate(points=Sum(points), n=Count("*"))
        .order_by()
    )
    return {run_id: (points, n) for run_id, points, n in rows}


def read_usage(
    use_case_ids: Sequence[int], weeks: Sequence[Week], offset: int = 0,
    where: Q | None = None,
) -> dict[tuple[int, int], Usage]:
    """Judge runs per (use case, week index + offset), by the week of the judged answer (of
    the answers `where` selects, a condition on the run: `answer__…`)."""
    return usage_of_groups(usage_groups(use_case_ids, weeks, where), offset)


# (use case, week index, judge model, prompt version) → runs, calls, cost (None: none priced),
# unpriced runs, succeeded runs, succeeded calls, open runs (pending or running)
UsageGroups = dict[tuple[int, int, str, str],
                   tuple[int, int, Decimal | None, int, int, int, int]]
OPEN_RUNS = Q(status__in=[JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING])


def usage_groups(
    use_case_ids: Sequence[int], weeks: Sequence[Week], runs: Q | None = None
) -> UsageGroups:
    """The judge runs of the weeks' answers (those `runs` selects; all by default), grouped;
    never an on-demand run, as the weeks' usage rollup (monitoring.models.rollups.
    in_week_usage)."""
    rows = (
        JudgeRun.objects.filter(
            runs or Q(),
            answer__use_case_id__in=use_case_ids,
            answer__created_at__gte=weeks[0].start,
            answer__created_at__lt=weeks[-1].end,
        )
        .exclude(NOT_IN_WEEK_USAGE)
        .annotate(wk=week_bucket("answer__created_at", weeks))
        .values_list("answer__use_case_id", "wk", "judge_model", "prompt_version")
        .annotate(
            n_runs=Count("*"),
            n_calls=Sum("calls"),
            total_cost=Sum("cost"),
            unpriced=Count("id", filter=Q(cost__isnull=True, calls__gt=0)),
            ok_runs=Count("id", filter=Q(status=JudgeRun.Status.SUCCEEDED)),
            ok_calls=Sum("calls", filter=Q(status=JudgeRun.Status.SUCCEEDED)),
            open_runs=Count("id", filter=OPEN_RUNS),
        )
        .order_by()
    )
    return {
        (uc, wk, model, version): (runs_n, calls or 0, spent, unpriced, ok_runs, ok_calls or 0,
                                   open_runs)
        for uc, wk, model, version, runs_n, calls, spent, unpriced, ok_runs, ok_calls, open_runs
        in rows
    }


def usage_of_groups(groups: UsageGroups, offset: int = 0) -> dict[tuple[int, int], Usage]:
    """Usage per (use case, week index + offset) from the grouped runs."""
    out: dict[tuple[int, int], Usage] = defaultdict(Usage)
    for (use_case_id, wk, model, version), (
        runs, calls, spent, unpriced, ok_runs, ok_calls, open_runs
    ) in groups.items():
        usage = out[use_case_id, wk + offset]
        usage.runs += runs
        usage.calls += calls
        usage.cost += Decimal(spent or 0)
        usage.unpriced_runs += unpriced
        usage.succeeded_runs += ok_runs
        usage.succeeded_calls += ok_calls
        usage.open_runs += open_runs
        if ok_runs:
            usage.judges.add((model, version))
    return out


def read_reviews(
    use_case_ids: Sequence[int], weeks: Sequence[Week], where: Q | None = None
) -> dict[tuple[int, int], list[Review]]:
    """The experts' reviews (each item's latest submission, imported ones included) of the
    answers of `weeks`, by (use case id, index of the answer's week), from what review
    registered (monitoring/extensions.py; none without it). Each review carries the answer's
    tier-1 flag: the expert-scale correction is stratified like the estimate, so a batch topped
    up with flagged answers does not count them as a random sample. `where`: only the reviews
    of the answers it selects (a segment's)."""
    ends = [w.end for w in weeks]
    out: dict[tuple[int, int], list[Review]] = defaultdict(list)
    every = [
        review
        for expert_reviews in extensions.registry.expert_reviews.values()
        for review in expert_reviews(
            use_case_ids=use_case_ids, start=weeks[0].start, end=weeks[-1].end
        )
    ]
    if where is not None:
        kept = set(Answer.objects.filter(
            where, pk__in=[r.answer_id for r in every if r.answer_id is not None]
        ).values_list("pk", flat=True))
        every = [r for r in every if r.answer_id in kept]
    for review in every:
        out[review.use_case_id, bisect_right(ends, review.answer_created_at)].append(Review(
            min(1.0, max(0.0, review.manual_score)),
            min(1.0, max(0.0, review.automatic_score)),
            review.flagged,
        ))
    return out


def drift_restarts(use_case_ids: Sequence[int], weeks: Sequence[Week]) -> dict[int, list[str]]:
    """Per use case, the ISO weeks of answers from which the experts' scale starts again after
    a drift alarm, oldest first, those that `weeks` hold: the source week of the review batch
    whose reviews crossed the CUSUM's limit (recorded in the alarm; where it is not, the week
    before the alarm's review week). Reviews of earlier answers measured the judge as it was;
    a week before the restart keeps the figure it had."""
    held = {w.label for w in weeks}
    # Each held week by the review week that follows it (the one starting at its end).
    before = {"{}-W{:02d}".format(*w.end.date().isocalendar()[:2]): w.label for w in weeks}
    out: dict[int, set[str]] = defaultdict(set)
    for restarts in extensions.registry.drift_restarts.values():
        for restart in restarts(use_case_ids=use_case_ids):
            recorded = restart.source_week
            if recorded not in held:
                # Not recorded (or not a week shown): the week before its review week.
                recorded = before.get(restart.review_week)
            if recorded is not None:
                out[restart.use_case_id].add(recorded)
    return {use_case_id: sorted(labels) for use_case_id, labels in out.items()}
