"""Reads of the judge tier (tier 2): an answer's runs and verdicts, who may rescore, what a
rescore is expected to cost, the use case's usage per day and its expected weekly cost, and the
way its runs' verdicts came per week (with what each way cost)."""

import math
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from functools import reduce
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Avg, Count, Min, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from judging.domain import cost
from monitoring.domain.prices import price_key
from monitoring.models import (
    Answer,
    Claim,
    JudgeEndpoint,
    JudgePrice,
    JudgeRun,
    RollupDay,
    RollupUsageDay,
    UseCase,
    VerifyPath,
)
from monitoring.models.buckets import Bucket
from monitoring.models.rollups import day_of, local_midnight, rollups_ready

# The weekly cost estimate looks back this far: long enough to average out a quiet week, short
# enough to follow a use case that grows.
COST_WINDOW_DAYS = 28
# The judge page's usage table.
USAGE_DAYS = 14
# Sample rates the cost estimate also shows, so whoever sets the rate sees what it buys.
COMPARED_RATES = (0.02, 0.03, 0.05)
OPEN_STATUSES = (JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING)


def structured_output(*, endpoint: str, model: str) -> bool | None:
    """Whether ``model`` at ``endpoint`` answers in a JSON schema it is sent: None until a
    batched or one-call request found out (judging.services.runs)."""
    known = judge_endpoint(endpoint=endpoint, model=model)
    return None if known is None else known.structured_output


def judge_endpoint(*, endpoint: str, model: str) -> JudgeEndpoint | None:
    """What is known about ``model`` at ``endpoint`` (whether it takes structured output, when
    that was found out, and how): None until a batched or one-call request found out."""
    if not model:
        return None
    return JudgeEndpoint.objects.filter(endpoint=endpoint[:500], model=model[:200]).first()


def same_model(a: str, b: str) -> bool:
    """The judge's rule for "the same model" (judging.services.runs): case and
    surrounding blanks do not make a different model."""
    return a.strip().lower() == b.strip().lower()


def user_may_rescore(*, user: User | AnonymousUser, use_case: UseCase) -> bool:
    """Rescoring spends judge calls: team leads of the use case and staff may, experts may not."""
    if not user.is_authenticated:
        return False
    return bool(user.is_staff) or use_case.team_leads.filter(pk=user.pk).exists()


def prices_for(*, models: Iterable[str]) -> dict[str, JudgePrice]:
    """The prices of these models, keyed by ``cost.price_key``: the one rule every cost figure
    finds its price by (a handful of rows, matched here rather than by the database, whose
    case rules differ between SQLite and PostgreSQL)."""
    keys = {price_key(m) for m in models} - {""}
    if not keys:
        return {}
    return {
        key: price for price in JudgePrice.objects.all()
        if (key := price_key(price.judge_model)) in keys
    }


def price_for_model(*, judge_model: str) -> JudgePrice | None:
    return prices_for(models=[judge_model]).get(price_key(judge_model))


def price_currencies(*, models: Iterable[str]) -> dict[str, str]:
    """The currency of each of these models that has a price, by the model's name as given."""
    prices = prices_for(models=models)
    return {m: prices[price_key(m)].currency for m in models if price_key(m) in prices}


@dataclass
class AnswerJudging:
    """Everything the answer page shows about tier 2."""

    runs: list[JudgeRun]  # newest first
    shown: JudgeRun | None  # the current run (whose score the answer carries), else the newest
    newer: list[JudgeRun]  # runs after the shown one: a rescore waiting, running or failed
    history: list[JudgeRun]  # every run but the shown one, newest first
    mixed: bool  # the runs differ in judge model or prompt version
    demo: bool  # a run of the demo judge, whose verdicts are replayed human labels
    open_run: JudgeRun | None  # a run waiting or running: no second one until it is done
    retry_run: JudgeRun | None  # the newest run, failed, and worth another try


def answer_judging(*, answer: Answer) -> AnswerJudging:
    runs = list(
        answer.judge_runs.select_related("requested_by").prefetch_related("claims")
        .order_by("-created_at", "-id")
    )
    for run in runs:
        run.duration = (
            run.finished_at - run.started_at if run.finished_at and run.started_at else None
        )
        run.same_model = same_model(run.judge_model, answer.model)
    shown = next((r for r in runs if r.pk == answer.current_run_id), runs[0] if runs else None)
    newer = runs[: runs.index(shown)] if shown else []
    open_run = next((r for r in runs if r.status in OPEN_STATUSES), None)
    newest = runs[0] if runs else None
    retry_run = (
        newest
        if newest and newest.status == JudgeRun.Status.FAILED and not newest.same_model
        and open_run is None
        else None
    )
    currencies = price_currencies(models={r.judge_model for r in runs})
    for run in runs:
        run.currency = currencies.get(run.judge_model, "")
    # The judge's evidence with the chunks' sources: (rank, source) per chunk named.
    sources = dict(answer.chunks.values_list("rank", "source"))
    for run in runs:
        for claim in run.claims.all():
            claim.evidence = [  # type: ignore[attr-defined]  # shown by the template
                (rank, sources.get(rank, "")) for rank in claim.evidence_chunks
            ]
    demo_model = settings.TREUE_DEMO_JUDGE_MODEL  # the demo judge's name; "" outside the demo
    return AnswerJudging(
        runs=runs,
        shown=shown,
        newer=newer,
        history=[r for r in runs if r is not shown],
        mixed=len({(r.judge_model, r.prompt_version) for r in runs}) > 1,
        demo=bool(demo_model) and any(r.judge_model == demo_model for r in runs),
        open_run=open_run,
        retry_run=retry_run,
    )


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
    # "claims": 1 + claims of each answer's current run; "use_case": the use case's mean calls
    # per judged answer; "assumption": ASSUMED_CALLS_PER_ANSWER, nothing judged yet.
    basis: str
    cost: float | None
    price: JudgePrice | None
    skipped_same_model: int = 0
    skipped_open: int = 0


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
    run = answer.current_run
    calls: float
    if run is not None:
        calls = 1 + run.claims.count()
        return RescoreEstimate(
            answers=1, calls=calls, basis="claims", price=price,
            cost=_run_estimate(calls=calls, run=run, means=None, price=price),
        )
    means = use_case_judge_means(
        use_case=answer.use_case, since=timezone.now() - timedelta(days=COST_WINDOW_DAYS)
    )
    if means.calls_per_answer is not None:
        calls, basis = means.calls_per_answer, "use_case"
    else:
        calls, basis = cost.ASSUMED_CALLS_PER_ANSWER, "assumption"
    return RescoreEstimate(
        answers=1, calls=calls, basis=basis, price=price,
        cost=_run_estimate(calls=calls, run=None, means=means, price=price),
    )


def iso_week_bounds(*, year: int, week: int) -> tuple[datetime, datetime]:
    """Monday 00:00 to the next Monday 00:00 of an ISO week, in the site's time zone.

    Raises ValueError for a week the year does not have (week 53 of a short year)."""
    monday = date.fromisocalendar(year, week, 1)
    zone = timezone.get_current_timezone()
    start = datetime.combine(monday, time.min, tzinfo=zone)
    return start, datetime.combine(monday + timedelta(days=7), time.min, tzinfo=zone)


def previous_iso_week(*, today: date | None = None) -> str:
    year, week, _ = ((today or timezone.localdate()) - timedelta(days=7)).isocalendar()
    return f"{year}-W{week:02d}"


def week_judged_answers(*, use_case: UseCase, year: int, week: int) -> QuerySet[Answer]:
    """Answers of the use case created in the ISO week (site time) that carry a score and
    still have their text (an anonymised answer cannot be judged again)."""
    start, end = iso_week_bounds(year=year, week=week)
    return Answer.objects.filter(
        use_case=use_case,
        created_at__gte=start,
        created_at__lt=end,
        status=Answer.Status.JUDGED,
        current_run__isnull=False,
        anonymised_at__isnull=True,
    )


def answers_with_open_runs(*, answers: QuerySet[Answer]) -> set[int]:
    return set(
        JudgeRun.objects.filter(answer__in=answers, status__in=OPEN_STATUSES)
        .values_list("answer_id", flat=True)
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
        calls += 1 + claims
        if run_calls:
            prompt_tokens += run_prompt / run_calls * (1 + claims)
            completion_tokens += run_completion / run_calls * (1 + claims)
            cached_tokens += run_cached / run_calls * (1 + claims)
    return RescoreEstimate(
        answers=count, calls=calls, basis="claims", price=price,
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


# The judge page's table of the ways the verdicts came: this many ISO weeks, the current one
# included (as the dashboard's small trends).
PATH_WEEKS = 8
# A share of runs asked again claim by claim above this, in the latest week with runs, says
# that the judge model does not keep to the reply format (and pays for it in calls).
FALLBACK_WARNING_SHARE = 0.10
# The order the page lists the ways in: the cheap way first, then what a judge model that
# strays from the format costs, then the other modes.
PATH_ORDER = (
    VerifyPath.BATCHED, VerifyPath.CORRECTED, VerifyPath.FALLBACK, VerifyPath.PER_CLAIM,
    VerifyPath.SINGLE,
)


@dataclass
class PathUsage:
    """The finished runs of one week whose verdicts came one way, and what they cost."""

    path: str
    runs: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: Decimal = Decimal(0)
    unpriced_runs: int = 0  # runs that made calls for a model without a price
    share: float = 0.0  # of the week's runs with a recorded way
    judge_models: set[str] = field(default_factory=set)
    currency: str | None = None  # of the priced runs' models, when they agree

    @property
    def label(self) -> str:
        return str(VerifyPath(self.path).label)

    @property
    def judge_model_list(self) -> list[str]:
        return sorted(self.judge_models)

    @property
    def percent(self) -> float:
        return self.share * 100

    @property
    def calls_per_answer(self) -> float | None:
        return self.calls / self.runs if self.runs else None

    @property
    def prompt_tokens_per_answer(self) -> float | None:
        return self.prompt_tokens / self.runs if self.runs else None

    @property
    def completion_tokens_per_answer(self) -> float | None:
        return self.completion_tokens / self.runs if self.runs else None

    @property
    def cost_per_answer(self) -> Decimal | None:
        priced = self.runs - self.unpriced_runs
        return self.cost / priced if priced else None


@dataclass
class PathWeek:
    """An ISO week's finished runs by the way their verdicts came."""

    label: str  # YYYY-Www
    start: datetime
    current: bool
    paths: list[PathUsage]  # in PATH_ORDER, the ways with runs only
    runs: int  # runs with a recorded way
    without_path: int  # finished runs without one: older, failed early, or nothing to verify

    def share_of(self, path: str) -> float:
        return next((p.share for p in self.paths if p.path == path), 0.0)

    @property
    def fallback(self) -> PathUsage | None:
        return next((p for p in self.paths if p.path == VerifyPath.FALLBACK), None)


@dataclass(frozen=True)
class JudgePaths:
    """The ways the verdicts of a use case's runs came, per week, newest week first."""

    weeks: list[PathWeek]

    @property
    def latest(self) -> PathWeek | None:
        """The newest week with runs with a recorded way."""
        return next((w for w in self.weeks if w.runs), None)

    @property
    def fallback_warning(self) -> bool:
        """More than FALLBACK_WARNING_SHARE of the latest week's runs were asked again claim by
        claim: the judge model does not keep to the reply format."""
        latest = self.latest
        return latest is not None and latest.share_of(VerifyPath.FALLBACK) > FALLBACK_WARNING_SHARE


def _path_weeks(*, weeks: int, today: date) -> list[tuple[str, datetime, datetime]]:
    """(label, start, end) of the ``weeks`` ISO weeks up to the one holding ``today``, oldest
    first (the dashboard's weeks, drawn by iso_week_bounds)."""
    monday = today - timedelta(days=today.weekday())
    out = []
    for back in range(weeks - 1, -1, -1):
        year, number, _ = (monday - timedelta(weeks=back)).isocalendar()
        start, end = iso_week_bounds(year=year, week=number)
        out.append((f"{year}-W{number:02d}", start, end))
    return out


def judge_paths_by_week(
    *, use_case: UseCase, weeks: int = PATH_WEEKS, today: date | None = None
) -> JudgePaths:
    """The use case's finished runs (by the week they finished in, site time) per way their
    verdicts came (JudgeRun.verify_path): the share of the week's runs with a recorded way, and
    calls, tokens and cost per judged answer. One grouped read of the runs (by the index on use
    case and finish time) and one of the prices."""
    today = today or timezone.localdate()
    span = _path_weeks(weeks=weeks, today=today)
    grouped = (
        JudgeRun.objects.filter(
            use_case=use_case, finished_at__gte=span[0][1], finished_at__lt=span[-1][2]
        )
        .annotate(week=Bucket("finished_at", [end for _, _, end in span[:-1]], datetimes=True))
        .values("week", "verify_path", "judge_model")
        .annotate(
            n_runs=Count("id"), n_calls=Sum("calls"), prompt=Sum("prompt_tokens"),
            completion=Sum("completion_tokens"), total_cost=Sum("cost"),
            unpriced=Count("id", filter=Q(cost__isnull=True, calls__gt=0)),
        )
        .order_by()
    )
    by_week: dict[int, dict[str, PathUsage]] = {}
    without: dict[int, int] = {}
    for row in grouped:
        week, path = row["week"], row["verify_path"]
        if path not in VerifyPath.values:
            without[week] = without.get(week, 0) + row["n_runs"]
            continue
        usage = by_week.setdefault(week, {}).setdefault(path, PathUsage(path=path))
        usage.runs += row["n_runs"]
        usage.calls += row["n_calls"] or 0
        usage.prompt_tokens += row["prompt"] or 0
        usage.completion_tokens += row["completion"] or 0
        usage.cost += Decimal(row["total_cost"] or 0)
        usage.unpriced_runs += row["unpriced"]
        usage.judge_models.add(row["judge_model"])
    currencies = price_currencies(
        models={m for paths in by_week.values() for p in paths.values() for m in p.judge_models}
    )
    out = []
    for index, (label, start, _end) in enumerate(span):
        paths = by_week.get(index, {})
        runs = sum(p.runs for p in paths.values())
        ordered = [paths[path] for path in PATH_ORDER if path in paths]
        for usage in ordered:
            usage.share = usage.runs / runs
            found = {currencies[m] for m in usage.judge_models if m in currencies}
            usage.currency = found.pop() if len(found) == 1 else None
        out.append(PathWeek(
            label=label, start=start, current=index == len(span) - 1, paths=ordered,
            runs=runs, without_path=without.get(index, 0),
        ))
    return JudgePaths(weeks=list(reversed(out)))


@dataclass(frozen=True)
class EvidenceTokens:
    """Completion tokens per claim of batched replies, with the judge's evidence (chunk ranks or
    a reason) and without it."""

    with_evidence_claims: int
    with_evidence_tokens: float | None  # mean per claim
    without_evidence_claims: int
    without_evidence_tokens: float | None

    @property
    def measured(self) -> bool:
        return bool(self.with_evidence_claims or self.without_evidence_claims)

    @property
    def difference(self) -> float | None:
        """What the evidence costs per claim, where both were measured."""
        if self.with_evidence_tokens is None or self.without_evidence_tokens is None:
            return None
        return self.with_evidence_tokens - self.without_evidence_tokens


def judge_evidence_tokens(
    *, use_case: UseCase, days: int = COST_WINDOW_DAYS, now: datetime | None = None
) -> EvidenceTokens:
    """The mean completion tokens per claim of the use case's runs whose verdicts all came from
    the batched reply (verify_path "batched"), finished in the last ``days``: each claim holds
    its share of its reply's tokens. A claim counts as with evidence when it came with chunk
    ranks or a reason. Claims whose verdict was reused (no call) are left out."""
    since = (now or timezone.now()) - timedelta(days=days)
    evidence = ~Q(reason="") | ~Q(evidence_chunks=[])
    figures = Claim.objects.filter(
        run__use_case=use_case, run__finished_at__gte=since,
        run__verify_path=VerifyPath.BATCHED, cached=False,
    ).aggregate(
        with_n=Count("id", filter=evidence), with_mean=Avg("completion_tokens", filter=evidence),
        without_n=Count("id", filter=~evidence),
        without_mean=Avg("completion_tokens", filter=~evidence),
    )
    return EvidenceTokens(
        with_evidence_claims=figures["with_n"], with_evidence_tokens=figures["with_mean"],
        without_evidence_claims=figures["without_n"],
        without_evidence_tokens=figures["without_mean"],
    )


def judge_runs_to_retry(*, use_case: UseCase) -> list[JudgeRun]:
    """The use case's failed runs that a retry can take up: each its answer's newest (an older
    failure has been overtaken by a later run), of an answer not anonymised, and not a refusal
    to judge an answer with its own model (a retry would be refused the same way)."""
    newest = (JudgeRun.objects.filter(answer=OuterRef("answer"))
              .order_by("-created_at", "-id").values("pk")[:1])
    # The answer by its id and time: one partition to look in, not every month's.
    answer = _answer_of_run().filter(anonymised_at__isnull=True)
    runs = (JudgeRun.objects.filter(use_case=use_case, status=JudgeRun.Status.FAILED)
            .filter(pk=Subquery(newest))
            .annotate(answer_model=Subquery(answer.values("model")[:1]))
            .filter(answer_model__isnull=False)
            .only("pk", "answer_id", "answer_created_at", "judge_model").order_by("pk"))
    model = use_case.effective_judge_model
    return [r for r in runs if not same_model(r.judge_model or model, r.answer_model)]


def _answer_of_run() -> QuerySet[Answer]:
    """A run's answer, for a subquery: by id and creation time, so that PostgreSQL looks for it
    in the one monthly partition that holds it."""
    return Answer.objects.filter(pk=OuterRef("answer_id"), created_at=OuterRef("answer_created_at"))


def judge_runs_recent(*, use_case: UseCase, limit: int = 20) -> list[JudgeRun]:
    """The use case's latest runs with their answers, for the per-run table of the judge page
    (the answers by id and time: each from its own monthly partition)."""
    runs = list(
        JudgeRun.objects.filter(use_case=use_case)
        .defer("call_log", "decomposition_raw")
        .order_by("-created_at", "-id")[:limit]
    )
    if runs:
        answers = Answer.objects.filter(
            reduce(operator.or_, (Q(pk=r.answer_id, created_at=r.answer_created_at)
                                  for r in runs))
        ).defer("token_data", "messages")
        by_id = {answer.pk: answer for answer in answers}
        for run in runs:
            if run.answer_id in by_id:
                run.answer = by_id[run.answer_id]
    return runs


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
