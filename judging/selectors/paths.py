"""How the judge's verdicts came back, week by week (batched, corrected, per claim as a fallback,
one call), with what each path cost; and the tokens the judge's evidence costs."""

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db.models import Avg, Count, Q, Sum
from django.utils import timezone

from common.weeks import iso_week_bounds
from judging.selectors.costs import COST_WINDOW_DAYS
from judging.selectors.prices import price_currencies
from monitoring.models import (
    Claim,
    JudgeRun,
    UseCase,
    VerifyPath,
)
from monitoring.models.buckets import Bucket

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
