"""Reads for the team-lead dashboard: weekly figures per use case, the overview's rows, the
causes, the trigger's worth and the threshold tuner.

The statistics live in `monitoring.domain` (statistics, causes, tuner); this module fetches what
they need, and as little as it can, because a use case may have a million answers:

- answers are counted per (week, flagged) - and for the causes per bucket - by a GROUP BY in
  the database, an index-only range scan of `answer_dash_week`;
- only judged answers are fetched row by row, with only the figures the estimates use (all of
  them in the partial index `answer_dash_judged`);
- the claim labels of their current runs come grouped per run (index `claim_run_label`).

Each group (a week, a similarity bucket, ...) is estimated like a week: its flagged and its
unflagged answers are two strata, weighted by their sizes (`statistics.stratified_mean`).

Weeks are ISO weeks in the site's time zone (Europe/Berlin), Monday 00:00 to Monday 00:00, as
`iso_week_bounds` draws them; a week's answers are those created in it, and so are the judge
runs that judged them (a rescore counts in the week of the answer it rescored).
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from operator import itemgetter
from typing import Any, NamedTuple

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection
from django.db.models import (
    Case,
    Count,
    FloatField,
    Func,
    IntegerField,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.utils import timezone

from alarms.models import Alarm
from monitoring import extensions
from monitoring.domain import causes, statistics, tuner
from monitoring.domain.expert_scale import ExpertScale, Review, expert_scale
from monitoring.domain.statistics import Estimate, Lift, Precision, Stratum
from monitoring.judging.domain import cost
from monitoring.judging.selectors import iso_week_bounds
from monitoring.models import Answer, Claim, JudgePrice, JudgeRun, UseCase

# The use-case page's trend: half a year of weeks.
WEEKS = 26
# The overview's small trend per use case.
OVERVIEW_WEEKS = 8
# The pooled view: a week and the 3 before it (1, 4 or 13 on the page). Small use cases judge a
# handful of random answers a week; four weeks of them decide where one cannot.
POOLED_WEEKS = 4
POOLED_CHOICES = (1, 4, 13)
# Causes, the trigger's worth and the tuner pool this many weeks (the current one included):
# one week's judged answers split into buckets are too few, a quarter would hide a change.
CAUSES_WEEKS = 8
SIMILARITY_EDGES = causes.DEFAULT_SIMILARITY_EDGES
# The similarity the "no chunk passed" figure uses when the buckets offer no cutoff (nothing
# turns unfaithful, or too few answers to tell): a usual floor of RAG services for cosine
# similarity; the page names the value it used. Like every cutoff it is a bucket edge, so the
# answers below it are whole buckets.
DEFAULT_SIMILARITY_THRESHOLD = 0.5
assert DEFAULT_SIMILARITY_THRESHOLD in SIMILARITY_EDGES
CHUNK_EDGES = causes.DEFAULT_CHUNK_EDGES
TUNER_THRESHOLDS = tuner.DEFAULT_THRESHOLDS
CLAIM_POINTS = {
    Claim.Label.GEDECKT: 1.0,
    Claim.Label.TEILWEISE: 0.5,
    Claim.Label.UNGEDECKT: 0.0,
}
# Answers with judge runs (waiting, running, done or failed); a not-sampled answer has none.
_SAMPLED_STATUSES = (
    Answer.Status.QUEUED, Answer.Status.JUDGING, Answer.Status.JUDGED, Answer.Status.FAILED,
)
_LIGHT_ORDER = {"red": 0, "amber": 1, "grey": 2, "green": 3}


@dataclass(frozen=True)
class Week:
    """An ISO week in the site's time zone."""

    year: int
    number: int
    start: datetime
    end: datetime

    @property
    def label(self) -> str:
        return f"{self.year}-W{self.number:02d}"


def iso_weeks(*, weeks: int, until: datetime | date | None = None) -> list[Week]:
    """The `weeks` ISO weeks up to the one holding `until` (default now), oldest first."""
    if weeks < 1:
        raise ValueError("weeks must be at least 1")
    if until is None:
        today = timezone.localdate()
    elif isinstance(until, datetime):
        today = timezone.localtime(until).date()
    else:
        today = until
    monday = today - timedelta(days=today.weekday())
    out = []
    for back in range(weeks - 1, -1, -1):
        year, number, _ = (monday - timedelta(weeks=back)).isocalendar()
        start, end = iso_week_bounds(year=year, week=number)
        out.append(Week(year, number, start, end))
    return out


class _Bucket(Func):
    """The bucket a value falls in: 0 below edges[0], i for edges[i-1] <= value < edges[i],
    len(edges) from the last edge up; NULL for NULL. The [low, high) buckets of the domain.

    Written out as a CASE over fixed bounds. For weeks that is the bounds `iso_week_bounds`
    draws (daylight saving included), alike in every database, and on PostgreSQL about twice as
    fast as truncating each timestamp in a time zone; compiled by hand because Django's Case
    with When objects costs ~10 ms to compile for 26 weeks.
    """

    output_field = IntegerField()

    @property
    def convert_value(self) -> Any:
        # The database returns integers already; Django's int() per row costs ~5 µs a row.
        return self._convert_value_noop

    def __init__(self, expression: Any, edges: Sequence[Any], *, datetimes: bool = False):
        super().__init__(expression)
        self.edges = tuple(edges)
        self.datetimes = datetimes

    def as_sql(self, compiler: Any, connection: Any, **extra_context: Any) -> tuple[str, list]:
        sql, params = compiler.compile(self.source_expressions[0])
        adapt = connection.ops.adapt_datetimefield_value if self.datetimes else None
        parts, out = [f"CASE WHEN {sql} IS NULL THEN NULL"], list(params)
        for i, edge in enumerate(self.edges):
            parts.append(f"WHEN {sql} < %s THEN {i}")
            out += [*params, adapt(edge) if adapt else edge]
        parts.append(f"ELSE {len(self.edges)} END")
        return " ".join(parts), out

    def as_postgresql(
        self, compiler: Any, connection: Any, **extra_context: Any
    ) -> tuple[str, list]:
        # The same buckets by binary search over the edges: a fifth faster than the CASE on
        # 50,000 rows. width_bucket is NULL for NULL, 0 below the first edge, i from edge i.
        if not self.edges:
            return self.as_sql(compiler, connection, **extra_context)
        sql, params = compiler.compile(self.source_expressions[0])
        kind = "timestamptz" if self.datetimes else (
            "integer" if all(isinstance(e, int) for e in self.edges) else "double precision"
        )
        holes = ", ".join(["%s"] * len(self.edges))
        return f"width_bucket({sql}, ARRAY[{holes}]::{kind}[])", [*params, *self.edges]


def _week_of(field_name: str, weeks: Sequence[Week]) -> _Bucket:
    """The index of a timestamp's week in `weeks` (the query keeps to their span)."""
    return _Bucket(field_name, [w.end for w in weeks[:-1]], datetimes=True)


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
    judges: set[tuple[str, str]] = field(default_factory=set)  # (model, prompt version)


@dataclass(frozen=True)
class WeekFigures:
    """Everything the dashboard shows about one use case in one ISO week.

    `below`, `abstention_share` and `claims` are None where they were not asked for (the
    overview computes them for this week and last only).
    """

    week: Week
    current: bool  # the week is not over yet
    volume: int
    flagged: int
    judged: int
    judged_flagged: int
    judged_unflagged: int
    abstentions: int  # judged answers without claims
    estimate: Estimate  # mean faithfulness, stratified
    below: Estimate | None  # share of answers below the action threshold
    abstention_share: Estimate | None
    claims: Estimate | None  # share of supported claims
    light: str  # red / amber / green / grey
    runs: int
    calls: int
    cost: Decimal
    unpriced_runs: int
    judges: tuple[tuple[str, str], ...]  # (judge model, prompt version), sorted
    judge_changed: bool  # a judge model or prompt version the latest judged week before lacked
    # The judge-scale estimate over this week and the ones before it (`pooled_weeks` in all,
    # fewer at the start of the data), and its light.
    pooled: Estimate | None = None
    pooled_light: str = "grey"
    pooled_weeks: int = 1
    # What the week's own estimate can decide and what would make it decisive.
    precision: Precision | None = None
    # Faithfulness on the experts' scale (prediction-powered: the pooled judge-scale estimate
    # corrected by the mean expert − judge difference of the reviews of those weeks); None
    # without any review in the window.
    expert: ExpertScale | None = None
    expert_light: str = "grey"

    @property
    def headline_on_experts_scale(self) -> bool:
        """The experts' scale leads once a week's batch of reviews stands behind it."""
        return (
            self.expert is not None and self.expert.value is not None
            and not self.expert.too_few
        )

    @property
    def label(self) -> str:
        return self.week.label

    @property
    def flagged_share(self) -> float | None:
        return self.flagged / self.volume if self.volume else None

    @property
    def flagged_percent(self) -> float | None:
        return self.flagged / self.volume * 100 if self.volume else None


def _answers_in(use_case_ids: Sequence[int], weeks: Sequence[Week]) -> QuerySet[Answer]:
    return Answer.objects.filter(
        use_case_id__in=use_case_ids,
        created_at__gte=weeks[0].start,
        created_at__lt=weeks[-1].end,
    )


def _judged_in(use_case_ids: Sequence[int], weeks: Sequence[Week]) -> QuerySet[Answer]:
    return _answers_in(use_case_ids, weeks).filter(
        status=Answer.Status.JUDGED, score__isnull=False
    )


# Weeks counted per statement by `_counts` (SQLite's limit on a compound SELECT is 500).
_COUNT_TERMS = 200


def _counts(
    use_case_ids: Sequence[int], weeks: Sequence[Week]
) -> dict[tuple[int, int], tuple[int, int]]:
    """(all, flagged) answers per (use case, week index).

    Two range counts per use case and week, all answers and the flagged ones, as correlated
    subqueries over a small table of (use case, week, start, end): each is an index-only range
    scan (answer_use_case_time, answer_flagged_time) that PostgreSQL counts without computing
    anything per answer, planned once for all weeks. About a third of the time of bucketing
    every answer by its week and grouping (26 weeks of the largest bench use case, 108,000
    answers: ~19 ms against 50-70 ms). The weeks are contiguous, so each answer of the span
    counts in exactly the week `_week_of` would put it in.
    """
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


_JUDGED_COLUMNS = (
    "use_case_id", "wk", "flagged", "score", "abstention", "in_random_sample",
    "best_chunk_score", "chunk_count", "multi_part", "min_content_probability", "current_run_id",
)


def _judged_rows(
    use_case_ids: Sequence[int], weeks: Sequence[Week], *, lean: bool = False
) -> list[JudgedRow]:
    """The judged answers of the weeks; `lean`: only what the weekly estimates need."""
    columns = _JUDGED_COLUMNS[:5] if lean else _JUDGED_COLUMNS
    rows = (
        _judged_in(use_case_ids, weeks)
        .annotate(wk=_week_of("created_at", weeks))
        .values_list(*columns)
        .order_by()
    )
    return [JudgedRow(*row) for row in rows] if lean else list(map(JudgedRow._make, rows))


def _by_case_and_week(judged: Iterable[JudgedRow]) -> dict[tuple[int, int], list[JudgedRow]]:
    out: dict[tuple[int, int], list[JudgedRow]] = defaultdict(list)
    for row in judged:
        out[row.use_case_id, row.week].append(row)
    return out


def _claims(use_case_id: int, weeks: Sequence[Week]) -> dict[int, tuple[float, int]]:
    """(supported points, claims) of the judged answers' current runs, by run id.

    Unreadable verdicts are left out, as in the answer's own score; a run without claims (an
    abstention) is missing here and counts as (0, 0).
    """
    runs = _judged_in([use_case_id], weeks).values("current_run_id")
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


def _usage(
    use_case_ids: Sequence[int], weeks: Sequence[Week], offset: int = 0
) -> dict[tuple[int, int], Usage]:
    """Judge runs per (use case, week index + offset), by the week of the judged answer."""
    rows = (
        JudgeRun.objects.filter(
            answer__use_case_id__in=use_case_ids,
            answer__status__in=_SAMPLED_STATUSES,
            answer__created_at__gte=weeks[0].start,
            answer__created_at__lt=weeks[-1].end,
        )
        .annotate(wk=_week_of("answer__created_at", weeks))
        .values_list("answer__use_case_id", "wk", "judge_model", "prompt_version")
        .annotate(
            n_runs=Count("*"),
            n_calls=Sum("calls"),
            total_cost=Sum("cost"),
            unpriced=Count("id", filter=Q(cost__isnull=True, calls__gt=0)),
            ok_runs=Count("id", filter=Q(status=JudgeRun.Status.SUCCEEDED)),
            ok_calls=Sum("calls", filter=Q(status=JudgeRun.Status.SUCCEEDED)),
        )
        .order_by()
    )
    out: dict[tuple[int, int], Usage] = defaultdict(Usage)
    for use_case_id, wk, model, version, runs, calls, spent, unpriced, ok_runs, ok_calls in rows:
        usage = out[use_case_id, wk + offset]
        usage.runs += runs
        usage.calls += calls or 0
        usage.cost += Decimal(spent or 0)
        usage.unpriced_runs += unpriced
        usage.succeeded_runs += ok_runs
        usage.succeeded_calls += ok_calls or 0
        if ok_runs:
            usage.judges.add((model, version))
    return out


_SCORE = itemgetter(JudgedRow._fields.index("score"))


def _split(rows: Iterable[JudgedRow]) -> tuple[list[JudgedRow], list[JudgedRow]]:
    """The rows of the flagged stratum and those of the unflagged one, in their order."""
    rows = rows if isinstance(rows, list) else list(rows)
    return [r for r in rows if r.flagged], [r for r in rows if not r.flagged]


def _strata(
    sizes: tuple[int, int], rows: Iterable[JudgedRow],
    value: Callable[[JudgedRow], float] | None = None,
) -> list[Stratum]:
    """[flagged, unflagged] strata from their sizes and the judged rows (value: the score)."""
    parts = _split(rows)
    values = tuple(list(map(value or _SCORE, part)) for part in parts)
    # A stratum is never smaller than what was judged of it (an answer stored between the two
    # queries would otherwise make the domain refuse the group).
    # The flagged stratum (first) is judged in full; the unflagged one is drawn at random.
    return [
        Stratum(max(size, len(v)), v, drawn=h == 1)
        for h, (size, v) in enumerate(zip(sizes, values, strict=True))
    ]


def _week_figures(
    *,
    use_case: UseCase,
    weeks: Sequence[Week],
    counts: dict[tuple[int, int], tuple[int, int]],
    judged: dict[tuple[int, int], list[JudgedRow]],
    usage: dict[tuple[int, int], Usage],
    claims: dict[int, tuple[float, int]] | None,
    full_from: int = 0,
    claims_from: int = 0,
    reviews: dict[tuple[int, int], list[Review]] | None = None,
    restart: int | None = None,
    pooled_weeks: int = POOLED_WEEKS,
) -> list[WeekFigures]:
    """The figures of each week: the shares from week `full_from` on, the claim share (when
    `claims` are given) from week `claims_from` on.

    `judged`: the judged rows by (use case id, week index)."""
    threshold = use_case.action_threshold
    now = timezone.now()
    out: list[WeekFigures] = []
    every: list[list[Stratum]] = []  # each week's strata, for the pooled views
    # The judges of the latest week before that had any: a week with a judge it lacked is a
    # change (a switch back to an earlier model or prompt is one too).
    before: set[tuple[str, str]] = set()
    for i, week in enumerate(weeks):
        volume, flagged = counts.get((use_case.pk, i), (0, 0))
        sizes = (flagged, volume - flagged)
        rows = judged.get((use_case.pk, i), [])
        parts = _split(rows)
        strata = [
            Stratum(max(size, len(part)), list(map(_SCORE, part)), drawn=h == 1)
            for h, (size, part) in enumerate(zip(sizes, parts, strict=True))
        ]
        estimate = statistics.stratified_mean(strata)
        every.append(strata)
        window = list(range(max(0, i - pooled_weeks + 1), i + 1))
        pooled = statistics.pooled_mean([every[j] for j in window])
        expert = None
        if reviews is not None:
            # Reviews measured the judge as it was: after a drift alarm only those since.
            since = [j for j in window if restart is None or j >= restart]
            reviewed = [r for j in since for r in reviews.get((use_case.pk, j), [])]
            if reviewed:
                expert = expert_scale([every[j] for j in since], reviewed)
        below = abstention_share = claim_estimate = None
        if i >= full_from:
            below = statistics.stratified_share(
                statistics.indicator_strata(strata, lambda s: s < threshold)
            )
            abstention_share = statistics.stratified_share([
                Stratum(s.size, [1.0 if r.abstention else 0.0 for r in part], s.drawn)
                for s, part in zip(strata, parts, strict=True)
            ])
            if claims is not None and i >= claims_from:
                none = (0.0, 0)
                per_answer = tuple(
                    [claims.get(r.run_id, none) for r in part] for part in parts
                )
                claim_estimate = statistics.claim_share([
                    statistics.ClaimStratum(s.size, a, s.drawn)
                    for s, a in zip(strata, per_answer, strict=True)
                ])
        week_usage = usage.get((use_case.pk, i), Usage())
        judges = tuple(sorted(week_usage.judges))
        judged_flagged = len(parts[0])
        out.append(WeekFigures(
            week=week,
            current=week.end > now,
            volume=volume,
            flagged=flagged,
            judged=len(rows),
            judged_flagged=judged_flagged,
            judged_unflagged=len(rows) - judged_flagged,
            abstentions=sum(1 for r in rows if r.abstention),
            estimate=estimate,
            below=below,
            abstention_share=abstention_share,
            claims=claim_estimate,
            light=statistics.traffic_light(estimate, threshold),
            runs=week_usage.runs,
            calls=week_usage.calls,
            cost=week_usage.cost,
            unpriced_runs=week_usage.unpriced_runs,
            judges=judges,
            judge_changed=bool(before and set(judges) - before),
            pooled=pooled,
            pooled_light=statistics.traffic_light(pooled, threshold),
            pooled_weeks=len(window),
            precision=statistics.week_precision(
                strata, action_threshold=threshold, pooled=pooled, pooled_weeks=len(window)
            ),
            expert=expert,
            expert_light=_expert_light(expert, threshold),
        ))
        if judges:
            before = set(judges)
    return out


def _expert_light(expert: ExpertScale | None, threshold: float) -> str:
    if expert is None or expert.value is None:
        return "grey"
    as_estimate = Estimate(expert.value, expert.low, expert.high, expert.n_reviews, 0, (),
                           expert.too_few)
    return statistics.traffic_light(as_estimate, threshold)


def use_case_weeks(
    *, use_case: UseCase, weeks: int = WEEKS, until: datetime | date | None = None,
    claims: bool = True, pooled_weeks: int = POOLED_WEEKS,
) -> list[WeekFigures]:
    """The use case's figures per ISO week, oldest first, the week holding `until` last.

    The weeks before the first are read too, so that its pooled views are whole."""
    lead = pooled_weeks - 1
    span = iso_weeks(weeks=weeks + lead, until=until)
    ids = [use_case.pk]
    figures = _week_figures(
        use_case=use_case,
        weeks=span,
        counts=_counts(ids, span),
        judged=_by_case_and_week(_judged_rows(ids, span, lean=not claims)),
        usage=_usage(ids, span),
        claims=_claims(use_case.pk, span[lead:]) if claims else None,
        claims_from=lead,
        reviews=_reviews(ids, span),
        restart=_drift_restarts(ids, span).get(use_case.pk),
        pooled_weeks=pooled_weeks,
    )
    return figures[lead:]


def _reviews(
    use_case_ids: Sequence[int], weeks: Sequence[Week]
) -> dict[tuple[int, int], list[Review]]:
    """The experts' reviews (each item's latest submission, imported ones included) of the
    answers of `weeks`, by (use case id, index of the answer's week), from what review
    registered (monitoring/extensions.py; none without it). Each review carries the answer's
    tier-1 flag: the expert-scale correction is stratified like the estimate, so a batch topped
    up with flagged answers does not count them as a random sample."""
    ends = [w.end for w in weeks]
    out: dict[tuple[int, int], list[Review]] = defaultdict(list)
    for expert_reviews in extensions.registry.expert_reviews.values():
        for review in expert_reviews(
            use_case_ids=use_case_ids, start=weeks[0].start, end=weeks[-1].end
        ):
            out[review.use_case_id, bisect_right(ends, review.answer_created_at)].append(Review(
                min(1.0, max(0.0, review.manual_score)),
                min(1.0, max(0.0, review.automatic_score)),
                review.flagged,
            ))
    return out


def _drift_restarts(use_case_ids: Sequence[int], weeks: Sequence[Week]) -> dict[int, int]:
    """Per use case, the index of the week of its latest drift alarm within `weeks`: the
    expert-scale correction starts again there (the judge has changed since)."""
    ends = [w.end for w in weeks]
    out: dict[int, int] = {}
    # The CUSUM's alarms only: a bias alarm says the judge is off, not that it changed.
    rows = Alarm.objects.filter(
        use_case_id__in=use_case_ids, kind=Alarm.Kind.DRIFT, key__startswith="cusum:",
        opened_at__gte=weeks[0].start, opened_at__lt=weeks[-1].end,
    ).values_list("use_case_id", "opened_at")
    for use_case_id, opened in rows:
        index = bisect_right(ends, opened)
        out[use_case_id] = max(index, out.get(use_case_id, 0))
    return out


# --- the overview ------------------------------------------------------------------------------


def use_cases_led_by(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[UseCase]:
    """The active use cases a person leads; staff lead all."""
    if not user.is_authenticated:
        return UseCase.objects.none()
    use_cases = UseCase.objects.filter(active=True)
    if not user.is_staff:
        use_cases = use_cases.filter(team_leads=user)
    return use_cases.order_by("name")


def user_leads(*, user: AbstractBaseUser | AnonymousUser) -> bool:
    """Whether the overview is the person's landing page: staff and team leads."""
    return bool(user.is_authenticated and (
        user.is_staff or UseCase.objects.filter(team_leads=user).exists()
    ))


def open_alarms(*, use_cases: Iterable[UseCase]) -> dict[int, list[Alarm]]:
    """Open alarms of every kind per use case id, newest first."""
    out: dict[int, list[Alarm]] = defaultdict(list)
    for alarm in Alarm.objects.filter(use_case__in=list(use_cases), cleared_at__isnull=True):
        out[alarm.use_case_id].append(alarm)
    return out


def cost_currency(*, judges: Iterable[tuple[str, str]]) -> str:
    """The currency of the judge models' prices when they agree, else ''."""
    models = {model for model, _ in judges}
    if not models:
        return ""
    currencies = set(
        JudgePrice.objects.filter(judge_model__in=models).values_list("currency", flat=True)
    )
    return currencies.pop() if len(currencies) == 1 else ""


@dataclass
class OverviewRow:
    """One use case on the overview: this week and last, and its recent weeks."""

    use_case: UseCase
    weeks: list[WeekFigures]  # oldest first; the last two with all figures
    alarms: list[Alarm]
    currency: str = ""

    @property
    def this_week(self) -> WeekFigures:
        return self.weeks[-1]

    @property
    def last_week(self) -> WeekFigures:
        return self.weeks[-2]

    @property
    def trend(self) -> str:
        return statistics.trend(self.this_week.estimate, self.last_week.estimate)

    @property
    def light(self) -> str:
        """The more alarming light of the two weeks; where neither week can decide (both grey:
        a small use case), the pooled view of the weeks up to last week decides instead."""
        weekly = min(self.this_week.light, self.last_week.light, key=_LIGHT_ORDER.__getitem__)
        if self.this_week.light == self.last_week.light == "grey":
            return self.last_week.pooled_light
        return weekly


def overview_rows(
    *, user: AbstractBaseUser | AnonymousUser, until: datetime | date | None = None,
    weeks: int = OVERVIEW_WEEKS,
) -> list[OverviewRow]:
    """One row per use case the user leads (staff: all), the most alarming first.

    Four queries for all use cases together: counts and judged answers of `weeks` weeks, judge
    runs of the last two, open alarms. No claims: the overview does not show that share.
    """
    use_cases = list(use_cases_led_by(user=user))
    if not use_cases:
        return []
    span = iso_weeks(weeks=max(2, weeks), until=until)
    ids = [u.pk for u in use_cases]
    counts = _counts(ids, span)
    judged = _by_case_and_week(_judged_rows(ids, span, lean=True))
    usage = _usage(ids, span[-2:], offset=len(span) - 2)
    alarms = open_alarms(use_cases=use_cases)
    reviews = _reviews(ids, span)
    restarts = _drift_restarts(ids, span)
    rows = [
        OverviewRow(use_case, _week_figures(
            use_case=use_case, weeks=span, counts=counts, judged=judged, usage=usage,
            claims=None, full_from=len(span) - 2, reviews=reviews,
            restart=restarts.get(use_case.pk),
        ), alarms.get(use_case.pk, []))
        for use_case in use_cases
    ]
    currency = cost_currency(judges={j for row in rows for w in row.weeks for j in w.judges})
    for row in rows:
        row.currency = currency
    rows.sort(key=lambda r: (_LIGHT_ORDER[r.light], -len(r.alarms), r.use_case.name))
    return rows


# --- causes, the trigger's worth, the tuner ------------------------------------------------------


@dataclass(frozen=True)
class Causes:
    """Faithfulness by retrieval similarity, by number of chunks, of multi-part vs single
    questions, and of answers given although no chunk passed the similarity threshold."""

    similarity: list[causes.Bucket]
    cutoff: float | None  # similarity below which answers turn unfaithful; None: none found
    similarity_threshold: float  # the cutoff, or DEFAULT_SIMILARITY_THRESHOLD
    chunks: list[causes.Bucket]
    single: Estimate
    multi: Estimate
    no_passing_chunk: Estimate
    unclassified: int  # answers stored before the multi-part detector existed
    # Each cause's association with the score, the others held fixed (weighted regression,
    # multiplicity-corrected): what a piece of advice must rest on, not a bucket's dip.
    adjusted: causes.Adjusted | None = None
    # A cut-off chosen on half of the weeks and confirmed on the other half: a bucket picked
    # for its dip on the same answers it is shown on proves nothing.
    cutoff_held_out: bool = False

    def effect(self, name: str) -> causes.Effect | None:
        if self.adjusted is None:
            return None
        return next((e for e in self.adjusted.effects if e.name == name), None)


@dataclass(frozen=True)
class Tuner:
    rows: list[tuner.TunerRow]
    current: float  # the use case's threshold (one of the rows)
    random_sample: int  # judged random-sample answers the lift rests on
    calls_per_answer: float
    calls_measured: bool  # False: cost.ASSUMED_CALLS_PER_ANSWER


@dataclass(frozen=True)
class Diagnosis:
    """The last CAUSES_WEEKS weeks: causes, the trigger's worth (lift) and the tuner."""

    weeks: int
    causes: Causes
    worth: Lift
    unfaithful_below: float  # an answer counts as unfaithful below this score
    tuner: Tuner


def _grouped(
    counts: dict[tuple[Any, bool], int], rows: Iterable[tuple[Any, JudgedRow]]
) -> dict[Any, Estimate]:
    """A stratified estimate per group from (group, flagged) counts and (group, row) pairs."""
    judged: dict[Any, list[JudgedRow]] = defaultdict(list)
    for key, row in rows:
        judged[key].append(row)
    keys = {key for key, _ in counts} | set(judged)
    return {
        key: statistics.stratified_mean(
            _strata((counts.get((key, True), 0), counts.get((key, False), 0)), judged[key])
        )
        for key in keys
    }


def _with_estimates(
    buckets: list[causes.Bucket], estimates: dict[int | None, Estimate]
) -> list[causes.Bucket]:
    """The domain's buckets (labels and bounds, made from no rows) with these estimates; the
    buckets are in index order with the "none" bucket, if any, last."""
    empty = statistics.stratified_mean([])
    keys: list[int | None] = list(range(len(buckets)))
    if buckets and buckets[-1].low is None and buckets[-1].high is None and len(buckets) > 1:
        keys[-1] = None
    return [
        dataclasses.replace(b, estimate=estimates.get(k, empty))
        for b, k in zip(buckets, keys, strict=True)
    ]


def _index(value: float | None, edges: Sequence[float]) -> int | None:
    """The bucket of a value, as _Bucket computes it in the database."""
    if value is None:
        return None
    if value != value:
        return 0  # NaN: no edge is <= it
    return bisect_right(edges, value)  # the edges <= value; the edges are sorted


def _held_out_cutoff(
    counts: Callable[..., dict[tuple[Any, bool], int]], rows: Sequence[JudgedRow],
    threshold: float, first: int,
) -> bool:
    """`causes.held_out_cutoff` on the grouped counts: the cut-off is chosen on the even weeks
    of the window and holds only if the odd weeks' answers below it are red as well. `first`:
    the window's first week as the rows count weeks (the cells count from 0)."""
    def even(wk: int) -> bool:
        return wk % 2 == 0

    chosen = _with_estimates(
        causes.similarity_buckets([], edges=SIMILARITY_EDGES),
        _grouped(counts(lambda c: c[0], even),
                 ((_index(r.best_chunk_score, SIMILARITY_EDGES), r) for r in rows
                  if even(r.week - first))),
    )
    cutoff = causes.similarity_cutoff(chosen, threshold)
    if cutoff is None:
        return False
    index = _index(cutoff, SIMILARITY_EDGES)
    test = _grouped(
        counts(lambda c: c[0] is not None and c[0] < index, lambda wk: not even(wk)),
        ((r.best_chunk_score is not None and r.best_chunk_score < cutoff, r) for r in rows
         if not even(r.week - first)),
    ).get(True)
    return bool(
        test is not None and not test.too_few
        and statistics.traffic_light(test, threshold) == "red"
    )


def use_case_diagnosis(
    *, use_case: UseCase, until: datetime | date | None = None,
    judged: Sequence[JudgedRow] | None = None, usage: dict[tuple[int, int], Usage] | None = None,
    weeks: Sequence[Week] | None = None,
) -> Diagnosis:
    """Causes, the trigger's worth and the tuner over the last CAUSES_WEEKS weeks.

    `weeks` with `judged` and `usage` hand over what the weekly figures already read for these
    weeks (their last CAUSES_WEEKS are used), so the page reads each table once.
    """
    span = list(weeks) if weeks is not None else iso_weeks(weeks=CAUSES_WEEKS, until=until)
    first = max(0, len(span) - CAUSES_WEEKS)
    span = span[first:]
    if judged is None or usage is None:
        ids = [use_case.pk]
        judged, usage, first = _judged_rows(ids, span), _usage(ids, span), 0
    pk = use_case.pk
    rows = [r for r in judged if r.use_case_id == pk and r.week >= first]
    thresholds = tuple(sorted({*TUNER_THRESHOLDS, use_case.logprob_threshold}))

    # All answers of the window per (similarity, chunks, multi-part, flagged, tuner bucket).
    cells = list(
        _answers_in([use_case.pk], span)
        .annotate(
            sim=_Bucket("best_chunk_score", SIMILARITY_EDGES),
            chunk_bucket=_Bucket("chunk_count", CHUNK_EDGES),
            low_p=_Bucket("min_content_probability", thresholds),
            wk=_week_of("created_at", span),
        )
        .values_list("sim", "chunk_bucket", "multi_part", "flagged", "low_p", "wk")
        .annotate(n=Count("*"))
        .order_by()
    )

    def counts(
        pick: Callable[[tuple], Any], weeks: Callable[[int], bool] = lambda wk: True
    ) -> dict[tuple[Any, bool], int]:
        out: dict[tuple[Any, bool], int] = defaultdict(int)
        for cell in cells:
            if weeks(cell[5]):
                out[pick(cell), cell[3]] += cell[6]
        return out

    threshold = use_case.action_threshold
    similarity = _with_estimates(
        causes.similarity_buckets([], edges=SIMILARITY_EDGES),
        _grouped(counts(lambda c: c[0]),
                 ((_index(r.best_chunk_score, SIMILARITY_EDGES), r) for r in rows)),
    )
    cutoff = causes.similarity_cutoff(similarity, threshold)
    passing = cutoff if cutoff is not None else DEFAULT_SIMILARITY_THRESHOLD
    held_out = _held_out_cutoff(counts, rows, threshold, first)
    below_passing = _grouped(
        counts(lambda c: c[0] is not None and c[0] < _index(passing, SIMILARITY_EDGES)),
        ((r.best_chunk_score is not None and r.best_chunk_score < passing, r) for r in rows),
    )
    chunks = _with_estimates(
        causes.chunk_count_buckets([], edges=CHUNK_EDGES),
        _grouped(counts(lambda c: c[1]), ((_index(r.chunk_count, CHUNK_EDGES), r) for r in rows)),
    )
    multi = _grouped(counts(lambda c: c[2]), ((r.multi_part, r) for r in rows))
    empty = statistics.stratified_mean([])

    flagged = [r for r in rows if r.flagged]
    random = [r for r in rows if r.in_random_sample]
    worth = statistics.lift(
        flagged_bad=sum(1 for r in flagged if r.score < threshold),
        flagged_n=len(flagged),
        random_bad=sum(1 for r in random if r.score < threshold),
        random_n=len(random),
    )

    # Each answer's lowest content-word probability, represented by the lower edge of its
    # bucket between two thresholds: the tuner only asks "below t?" for these thresholds.
    probabilities: list[float | None] = []
    for cell in cells:
        low_p = cell[4]
        stand_in = None if low_p is None else (thresholds[low_p - 1] if low_p else 0.0)
        probabilities.extend([stand_in] * cell[6])
    sample = [(r.min_content_probability, r.score) for r in random]
    recent = [u for (_, wk), u in usage.items() if wk >= first]
    ok_runs = sum(u.succeeded_runs for u in recent)
    ok_calls = sum(u.succeeded_calls for u in recent)
    calls_per_answer = ok_calls / ok_runs if ok_runs else cost.ASSUMED_CALLS_PER_ANSWER
    table = tuner.threshold_table(
        min_probabilities=probabilities,
        random_sample=sample,
        rate=use_case.sample_rate,
        weeks=len(span),
        calls_per_answer=calls_per_answer,
        unfaithful_below=threshold,
        thresholds=thresholds,
    )
    return Diagnosis(
        weeks=len(span),
        causes=Causes(
            similarity=similarity,
            cutoff=cutoff,
            similarity_threshold=passing,
            chunks=chunks,
            single=multi.get(False, empty),
            multi=multi.get(True, empty),
            no_passing_chunk=below_passing.get(True, empty),
            unclassified=sum(n for (key, _), n in counts(lambda c: c[2]).items() if key is None),
            cutoff_held_out=held_out,
            adjusted=causes.adjusted_effects(
                [(r.best_chunk_score, r.chunk_count, bool(r.multi_part), r.flagged, r.score)
                 for r in rows],
                sizes=(sum(c[6] for c in cells if c[3]), sum(c[6] for c in cells if not c[3])),
            ),
        ),
        worth=worth,
        unfaithful_below=threshold,
        tuner=Tuner(
            rows=table,
            current=use_case.logprob_threshold,
            random_sample=len(sample),
            calls_per_answer=calls_per_answer,
            calls_measured=bool(ok_runs),
        ),
    )


# --- the use-case page -----------------------------------------------------------------------


@dataclass(frozen=True)
class UseCasePage:
    weeks: list[WeekFigures]  # oldest first
    diagnosis: Diagnosis
    alarms: list[Alarm]
    currency: str


def use_case_page(
    *, use_case: UseCase, until: datetime | date | None = None, weeks: int = WEEKS,
    pooled_weeks: int = POOLED_WEEKS,
) -> UseCasePage:
    """Everything the use-case page shows; each table is read once for all of it.

    The claim-level share only for the last CAUSES_WEEKS weeks: it needs every claim label of
    every judged answer, the most expensive read of the page, and the weekly trend is the
    estimate's. (`use_case_weeks` computes it for every week it is asked for.)
    """
    span = iso_weeks(weeks=max(weeks, CAUSES_WEEKS), until=until)
    ids = [use_case.pk]
    judged = _judged_rows(ids, span)
    # (The first shown weeks pool what the span holds: their pooled_weeks says how many.)
    usage = _usage(ids, span)
    recent = len(span) - CAUSES_WEEKS
    figures = _week_figures(
        use_case=use_case, weeks=span, counts=_counts(ids, span),
        judged=_by_case_and_week(judged), usage=usage,
        claims=_claims(use_case.pk, span[recent:]), claims_from=recent,
        reviews=_reviews(ids, span), restart=_drift_restarts(ids, span).get(use_case.pk),
        pooled_weeks=pooled_weeks,
    )
    return UseCasePage(
        weeks=figures[-weeks:],
        diagnosis=use_case_diagnosis(
            use_case=use_case, judged=judged, usage=usage, weeks=span
        ),
        alarms=open_alarms(use_cases=[use_case]).get(use_case.pk, []),
        currency=cost_currency(judges={j for w in figures for j in w.judges}),
    )
