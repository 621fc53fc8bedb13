"""What the judge costs: a use case's mean calls and tokens per run, the expected cost of a rescore
(an answer or a week), the usage by day, and the weekly cost at the sample rates compared."""

import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Count, Min, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from judging.domain import cost
from judging.selectors.prices import price_for_model
from judging.selectors.runs import (
    OPEN_STATUSES,
    answers_with_open_runs,
    same_model,
    week_judged_answers,
)
from monitoring.models import (
    Answer,
    Claim,
    JudgeMode,
    JudgePrice,
    JudgeRun,
    RollupDay,
    RollupUsageDay,
    UseCase,
)
from monitoring.models.rollups import day_of, local_midnight, rollups_ready

# The weekly cost estimate looks back this far: long enough to average out a quiet week, short
# enough to follow a use case that grows.
COST_WINDOW_DAYS = 28


# The judge page's usage table.
USAGE_DAYS = 14


# Sample rates the cost estimate also shows, so whoever sets the rate sees what it buys.
COMPARED_RATES = (0.02, 0.03, 0.05)


@dataclass(frozen=True)
class JudgeMeans:
    """Calls and tokens of a use case's succeeded sample runs in a window."""

    runs: int
    calls_per_answer: float | None
    prompt_tokens_per_call: float | None
    completion_tokens_per_call: float | None
    cached_tokens_per_call: float | None = None  # of the prompt tokens


def _next_midnight(moment: datetime) -> datetime:
    """The local midnight after `moment`: where the whole days of a window that starts at
    `moment` begin (the rollups count whole local days; the part before is read raw)."""
    return local_midnight(day_of(moment) + timedelta(days=1))


def use_case_judge_means(*, use_case: UseCase, since: datetime) -> JudgeMeans:
    """Calls and tokens of the use case's succeeded sample runs that finished since `since`."""
    runs = JudgeRun.objects.filter(
        use_case=use_case, status=JudgeRun.Status.SUCCEEDED, trigger=JudgeRun.Trigger.SAMPLE,
        finished_at__gte=since,
    )
    sums = {"runs": "id", "calls": "calls", "prompt_tokens": "prompt_tokens",
            "completion_tokens": "completion_tokens", "cached_tokens": "cached_tokens"}
    if rollups_ready():
        # Whole days from the rollup, the first part-day raw.
        whole = _next_midnight(since)
        totals = _totals(runs.filter(finished_at__lt=whole).aggregate(
            runs=Count("id"), **{name: Sum(f) for name, f in sums.items() if name != "runs"}
        ))
        days = RollupUsageDay.objects.filter(
            use_case=use_case, status=JudgeRun.Status.SUCCEEDED, trigger=JudgeRun.Trigger.SAMPLE,
            day__gte=day_of(whole),
        ).aggregate(**{name: Sum(name) for name in sums})
        totals = {name: totals[name] + (days[name] or 0) for name in sums}
    else:
        totals = _totals(runs.aggregate(
            runs=Count("id"), **{name: Sum(f) for name, f in sums.items() if name != "runs"}
        ))
    n, calls = totals["runs"], totals["calls"]
    return JudgeMeans(
        runs=n,
        calls_per_answer=calls / n if n else None,
        prompt_tokens_per_call=totals["prompt_tokens"] / calls if calls else None,
        completion_tokens_per_call=totals["completion_tokens"] / calls if calls else None,
        cached_tokens_per_call=totals["cached_tokens"] / calls if calls else None,
    )


def _totals(aggregated: dict[str, int | None]) -> dict[str, int]:
    """Sums of no rows are 0, not None."""
    return {name: value or 0 for name, value in aggregated.items()}


@dataclass(frozen=True)
class RescoreEstimate:
    """What a rescore is expected to cost, and what the figures rest on."""

    answers: int
    calls: float
    # "claims": the calls of each answer's current run's claims in the use case's judge mode
    # (cost.rescore_calls); "use_case": the use case's mean calls per judged answer;
    # "assumption": ASSUMED_CLAIMS_PER_ANSWER in that mode, nothing judged yet.
    basis: str
    cost: float | None
    price: JudgePrice | None
    skipped_same_model: int = 0
    skipped_open: int = 0
    mode: str = JudgeMode.PER_CLAIM
    at_least: bool = False  # `calls` is a floor: misread replies are asked again


def _estimate_cost(
    price: JudgePrice | None, *, prompt: float, completion: float, cached: float
) -> float | None:
    """What these (expected) tokens cost at `price`; None without one."""
    if price is None:
        return None
    return cost.call_cost(
        prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached,
        prompt_price_per_1k=float(price.prompt_per_1k),
        completion_price_per_1k=float(price.completion_per_1k),
        cached_price_per_1k=(
            None if price.cached_prompt_per_1k is None else float(price.cached_prompt_per_1k)
        ),
    )


def _run_estimate(
    *, calls: float, run: JudgeRun | None, means: JudgeMeans | None, price: JudgePrice | None
) -> float | None:
    """Expected cost of `calls` calls, at the tokens per call of `run` or else of `means`."""
    if run is not None and run.calls:
        prompt, completion = run.prompt_tokens / run.calls, run.completion_tokens / run.calls
        cached = run.cached_tokens / run.calls
    elif means is not None and means.prompt_tokens_per_call is not None:
        prompt, completion = means.prompt_tokens_per_call, means.completion_tokens_per_call or 0
        cached = means.cached_tokens_per_call or 0
    else:
        return None
    return _estimate_cost(
        price, prompt=prompt * calls, completion=completion * calls, cached=cached * calls
    )


def rescore_estimate_for_answer(*, answer: Answer, judge_model: str) -> RescoreEstimate:
    """Expected calls and cost of judging one answer again with `judge_model`.

    An answer with a current run is expected to need one decomposition plus one call per claim
    of that run, at that run's tokens per call; otherwise the use case's recent means stand in,
    and failing those an assumption the page names.
    """
    price = price_for_model(judge_model=judge_model)
    run, mode = answer.current_run, answer.use_case.judge_mode
    calls: float
    if run is not None:
        expected = _calls(mode, run.claims.count())
        return RescoreEstimate(
            answers=1, calls=expected.calls, basis="claims", price=price, mode=mode,
            at_least=expected.at_least,
            cost=_run_estimate(calls=expected.calls, run=run, means=None, price=price),
        )
    means = use_case_judge_means(
        use_case=answer.use_case, since=timezone.now() - timedelta(days=COST_WINDOW_DAYS)
    )
    at_least = False
    if means.calls_per_answer is not None:
        calls, basis = means.calls_per_answer, "use_case"
    else:
        assumed = _calls(mode, cost.ASSUMED_CLAIMS_PER_ANSWER)
        calls, basis, at_least = float(assumed.calls), "assumption", assumed.at_least
    return RescoreEstimate(
        answers=1, calls=calls, basis=basis, price=price, mode=mode, at_least=at_least,
        cost=_run_estimate(calls=calls, run=None, means=means, price=price),
    )


def _calls(mode: str, claims: int) -> cost.RescoreCalls:
    """The calls of judging `claims` claims again in `mode`, in batches as the runs make them."""
    return cost.rescore_calls(
        mode=mode, claims=claims, batch_size=settings.TREUE_JUDGE_BATCH_SIZE
    )


def rescore_estimate_for_week(
    *, use_case: UseCase, year: int, week: int, judge_model: str
) -> RescoreEstimate:
    """Expected calls and cost of judging every judged answer of an ISO week again.

    Left out, and counted: answers generated by `judge_model` itself (a model may not judge
    itself) and answers with a run already waiting or running.
    """
    answers = week_judged_answers(use_case=use_case, year=year, week=week)
    open_ids = answers_with_open_runs(answers=answers)
    # A subquery, not a GROUP BY over answers: partitioned answers have no primary key of
    # their id alone, which PostgreSQL would need to group by it.
    claims = (
        Claim.objects.filter(run_id=OuterRef("current_run_id")).order_by()
        .values("run_id").annotate(n=Count("*")).values("n")
    )
    rows = answers.annotate(claim_count=Coalesce(Subquery(claims), 0)).values_list(
        "pk", "model", "claim_count", "current_run__calls", "current_run__prompt_tokens",
        "current_run__completion_tokens", "current_run__cached_tokens",
    )
    price = price_for_model(judge_model=judge_model)
    count = calls = skipped_same = skipped_open = 0
    prompt_tokens = completion_tokens = cached_tokens = 0.0
    for pk, model, claims, run_calls, run_prompt, run_completion, run_cached in rows:
        if same_model(model, judge_model):
            skipped_same += 1
            continue
        if pk in open_ids:
            skipped_open += 1
            continue
        count += 1
        expected = _calls(use_case.judge_mode, claims).calls
        calls += expected
        if run_calls:
            prompt_tokens += run_prompt / run_calls * expected
            completion_tokens += run_completion / run_calls * expected
            cached_tokens += run_cached / run_calls * expected
    return RescoreEstimate(
        answers=count, calls=calls, basis="claims", price=price, mode=use_case.judge_mode,
        at_least=_calls(use_case.judge_mode, 0).at_least,
        cost=_estimate_cost(
            price, prompt=prompt_tokens, completion=completion_tokens, cached=cached_tokens
        ),
        skipped_same_model=skipped_same, skipped_open=skipped_open,
    )


@dataclass
class UsageRow:
    """Judge usage of one day (or of all days, for the total line)."""

    day: date | None
    runs: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of the prompt tokens
    cost: Decimal = Decimal(0)
    unpriced_runs: int = 0  # runs that made calls for a model without a price

    @property
    def calls_per_run(self) -> float | None:
        return self.calls / self.runs if self.runs else None

    @property
    def cost_per_run(self) -> Decimal | None:
        priced = self.runs - self.unpriced_runs
        return self.cost / priced if priced else None


def judge_usage_by_day(
    *, use_case: UseCase, days: int = USAGE_DAYS, today: date | None = None
) -> tuple[list[UsageRow], UsageRow]:
    """Calls, tokens and cost of the use case's judge runs per day (site time, by the time a
    run finished), today and the days before, newest first; and their total."""
    today = today or timezone.localdate()
    first = today - timedelta(days=days - 1)
    by_day = (_usage_days_rolled if rollups_ready() else _usage_days_raw)(
        use_case=use_case, first=first, last=today
    )
    rows, total = [], UsageRow(day=None)
    for offset in range(days):
        day = today - timedelta(days=offset)
        row = by_day.get(day, UsageRow(day=day))
        rows.append(row)
        for name in ("runs", "calls", "prompt_tokens", "completion_tokens", "cached_tokens",
                     "cost", "unpriced_runs"):
            setattr(total, name, getattr(total, name) + getattr(row, name))
    return rows, total


@dataclass(frozen=True)
class RunCounts:
    pending: int
    running: int
    failed: int  # finished as failed within the usage window


def judge_run_counts(*, use_case: UseCase, days: int = USAGE_DAYS) -> RunCounts:
    first = timezone.localdate() - timedelta(days=days - 1)
    runs = JudgeRun.objects.filter(use_case=use_case)
    open_runs = runs.filter(status__in=OPEN_STATUSES).aggregate(
        pending=Count("id", filter=Q(status=JudgeRun.Status.PENDING)),
        running=Count("id", filter=Q(status=JudgeRun.Status.RUNNING)),
    )
    if rollups_ready():
        failed = RollupUsageDay.objects.filter(
            use_case=use_case, status=JudgeRun.Status.FAILED, day__gte=first
        ).aggregate(n=Sum("runs"))["n"] or 0
    else:
        failed = runs.filter(
            status=JudgeRun.Status.FAILED, finished_at__gte=local_midnight(first)
        ).count()
    return RunCounts(failed=failed, **open_runs)


def _usage_days_raw(*, use_case: UseCase, first: date, last: date) -> dict[date, UsageRow]:
    """Usage per local day of the runs that finished from `first` to `last`, counted."""
    grouped = (
        JudgeRun.objects.filter(
            use_case=use_case,
            finished_at__gte=local_midnight(first),
            finished_at__lt=local_midnight(last + timedelta(days=1)),
        )
        .annotate(day=TruncDate("finished_at", tzinfo=timezone.get_current_timezone()))
        .values("day")
        .annotate(
            n_runs=Count("id"), n_calls=Sum("calls"), prompt=Sum("prompt_tokens"),
            completion=Sum("completion_tokens"), cached=Sum("cached_tokens"),
            total_cost=Sum("cost"),
            unpriced=Count("id", filter=Q(cost__isnull=True, calls__gt=0)),
        )
        .order_by()
    )
    return {
        data["day"]: UsageRow(
            day=data["day"], runs=data["n_runs"], calls=data["n_calls"] or 0,
            prompt_tokens=data["prompt"] or 0, completion_tokens=data["completion"] or 0,
            cached_tokens=data["cached"] or 0, cost=Decimal(data["total_cost"] or 0),
            unpriced_runs=data["unpriced"],
        )
        for data in grouped
    }


def _usage_days_rolled(*, use_case: UseCase, first: date, last: date) -> dict[date, UsageRow]:
    """The same from the rollup of ended runs per day."""
    grouped = (
        RollupUsageDay.objects.filter(use_case=use_case, day__gte=first, day__lte=last)
        .values("day")
        .annotate(
            n_runs=Sum("runs"), n_calls=Sum("calls"), prompt=Sum("prompt_tokens"),
            completion=Sum("completion_tokens"), cached=Sum("cached_tokens"),
            micros=Sum("cost_micros"), unpriced=Sum("unpriced_runs"),
        )
        .order_by()
    )
    return {
        data["day"]: UsageRow(
            day=data["day"], runs=data["n_runs"], calls=data["n_calls"],
            prompt_tokens=data["prompt"], completion_tokens=data["completion"],
            cached_tokens=data["cached"], cost=Decimal(data["micros"]).scaleb(-6),
            unpriced_runs=data["unpriced"],
        )
        for data in grouped if data["n_runs"]
    }


@dataclass(frozen=True)
class ComparedRate:
    rate: float
    estimate: cost.WeeklyCostEstimate
    current: bool

    @property
    def percent(self) -> float:
        return self.rate * 100


@dataclass(frozen=True)
class WeeklyCost:
    """The expected weekly judge cost of a use case, with the figures it rests on."""

    estimate: cost.WeeklyCostEstimate
    weeks: int  # weeks of history the means come from (1-4)
    answers: int  # answers in those weeks
    weekly_volume: float
    flagged_share: float
    sample_rate: float
    calls_per_answer: float
    calls_measured: bool  # False: ASSUMED_CALLS_PER_ANSWER
    judged_runs: int
    prompt_tokens_per_call: float | None
    completion_tokens_per_call: float | None
    cached_tokens_per_call: float | None
    judge_model: str
    price: JudgePrice | None
    compared: list[ComparedRate]

    @property
    def flagged_percent(self) -> float:
        return self.flagged_share * 100

    @property
    def sample_percent(self) -> float:
        return self.sample_rate * 100


def use_case_weekly_cost(*, use_case: UseCase, now: datetime | None = None) -> WeeklyCost:
    """Expected judged answers, calls and cost per week at the use case's sample rate.

    Volume and flagged share come from the answers of the last four weeks (fewer when the first
    answer in that window is younger: a new use case is not averaged with weeks it did not
    exist); calls and tokens per call from the succeeded sample runs of the same window; the
    price from the use case's judge model (its own, else TREUE_JUDGE_MODEL).
    """
    now = now or timezone.now()
    since = now - timedelta(days=COST_WINDOW_DAYS)
    figures = _answers_since(use_case=use_case, since=since)
    answers = figures["answers"]
    weeks = 1
    if figures["first"] is not None:
        age_days = (now - figures["first"]).total_seconds() / 86400
        weeks = min(COST_WINDOW_DAYS // 7, max(1, math.ceil(age_days / 7)))
    means = use_case_judge_means(use_case=use_case, since=since)
    judge_model = use_case.effective_judge_model
    price = price_for_model(judge_model=judge_model)
    calls_per_answer = means.calls_per_answer or cost.ASSUMED_CALLS_PER_ANSWER
    prompt_price = completion_price = cached_price = None
    if price is not None:
        prompt_price, completion_price = float(price.prompt_per_1k), float(price.completion_per_1k)
        if price.cached_prompt_per_1k is not None:
            cached_price = float(price.cached_prompt_per_1k)

    def estimate(rate: float) -> cost.WeeklyCostEstimate:
        return cost.expected_weekly_judge_cost(
            weekly_volume=answers / weeks,
            flagged_share=figures["flagged"] / answers if answers else 0.0,
            sample_rate=rate,
            calls_per_answer=calls_per_answer,
            prompt_tokens_per_call=means.prompt_tokens_per_call,
            completion_tokens_per_call=means.completion_tokens_per_call,
            prompt_price_per_1k=prompt_price,
            completion_price_per_1k=completion_price,
            cached_tokens_per_call=means.cached_tokens_per_call or 0.0,
            cached_price_per_1k=cached_price,
        )

    rates = sorted({*COMPARED_RATES, use_case.sample_rate})
    return WeeklyCost(
        estimate=estimate(use_case.sample_rate),
        weeks=weeks,
        answers=answers,
        weekly_volume=answers / weeks,
        flagged_share=figures["flagged"] / answers if answers else 0.0,
        sample_rate=use_case.sample_rate,
        calls_per_answer=calls_per_answer,
        calls_measured=means.calls_per_answer is not None,
        judged_runs=means.runs,
        prompt_tokens_per_call=means.prompt_tokens_per_call,
        completion_tokens_per_call=means.completion_tokens_per_call,
        cached_tokens_per_call=means.cached_tokens_per_call,
        judge_model=judge_model,
        price=price,
        compared=[
            ComparedRate(rate, estimate(rate), rate == use_case.sample_rate) for rate in rates
        ],
    )


def _answers_since(*, use_case: UseCase, since: datetime) -> dict[str, Any]:
    """The use case's answers created since `since`: how many, how many flagged, and the first
    one's time. With the rollups whole, the whole local days come from them and only the first
    part-day is counted."""
    answers = Answer.objects.filter(use_case=use_case, created_at__gte=since)
    if not rollups_ready():
        return answers.aggregate(
            answers=Count("id"), flagged=Count("id", filter=Q(flagged=True)),
            first=Min("created_at"),
        )
    whole = _next_midnight(since)
    figures = answers.filter(created_at__lt=whole).aggregate(
        answers=Count("id"), flagged=Count("id", filter=Q(flagged=True)),
    )
    for flagged, n in (
        RollupDay.objects.filter(use_case=use_case, day__gte=day_of(whole))
        .values_list("flagged").annotate(n=Sum("answers")).order_by()
    ):
        figures["answers"] += n
        figures["flagged"] += n if flagged else 0
    # The oldest by the (use case, created_at) index: one row, not a scan.
    figures["first"] = answers.order_by("created_at").values_list(
        "created_at", flat=True).first()
    return figures
