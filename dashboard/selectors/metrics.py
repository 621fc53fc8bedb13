"""Reads for the machine-facing figures: the estimates API and `/metrics`.

The weekly figures themselves come from `dashboard.selectors` (one estimator for the
pages, the API and Prometheus); this module adds what only operations need - the judge queue,
the oldest answer still waiting for its score, judge call counters, the open alarms - and the
currency of each judge model, so a week's cost can name its currency without a query per week.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Min, Sum
from django.utils import timezone

from alarms.models import Alarm
from common.db_router import reads_from_replica
from dashboard.domain.headline import Headline
from dashboard.domain.segments import top_values
from dashboard.selectors.figures import WeekFigures, use_case_headline, use_cases_weeks
from dashboard.selectors.segment_reads import week_volumes
from dashboard.selectors.weeks import iso_weeks
from judging.selectors.prices import price_currencies
from monitoring.models import Answer, JudgeRun, RollupUsage, RollupUsageDay, UseCase
from monitoring.models.rollups import rollups_ready

# Answers sampled for the judge whose score is not there yet.
UNSCORED_STATUSES = (Answer.Status.QUEUED, Answer.Status.JUDGING)
# Runs a worker has still to finish.
OPEN_RUN_STATUSES = (JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING)


def judge_currencies(*, models: Iterable[str]) -> dict[str, str]:
    """The currency of each judge model that has a price; models without one are missing."""
    return price_currencies(models=set(models))


def week_currency(*, figures: WeekFigures, currencies: dict[str, str]) -> str | None:
    """The currency of a week's cost: that of its judge models when they agree, else None."""
    found = {currencies[model] for model, _ in figures.judges if model in currencies}
    return found.pop() if len(found) == 1 else None


def open_alarms(*, use_cases: Iterable[UseCase]) -> dict[tuple[str, str], int]:
    """(use case slug, alarm kind) -> alarms open now, for every kind of every use case given
    (0 where none is open; through the partial index `alarm_open`)."""
    chosen = {u.pk: u.slug for u in use_cases}
    found = dict.fromkeys(
        ((slug, kind) for slug in chosen.values() for kind in Alarm.Kind.values), 0
    )
    rows = (
        Alarm.objects.filter(use_case_id__in=list(chosen), cleared_at__isnull=True)
        .values_list("use_case_id", "kind").annotate(n=Count("*")).order_by()
    )
    for use_case_id, kind, n in rows:
        found[(chosen[use_case_id], kind)] = n
    return found


def active_use_cases() -> list[UseCase]:
    return list(UseCase.objects.filter(active=True).order_by("slug"))


@dataclass(frozen=True)
class CurrentWeek:
    """A use case's current ISO week and its headline now (which may be last week's)."""

    use_case: UseCase
    figures: WeekFigures
    headline: Headline


@reads_from_replica
def current_week_figures(*, use_cases: Iterable[UseCase]) -> list[CurrentWeek]:
    """This ISO week's figures per use case, and the headline the pages lead with.

    The weekly figures' own selector for all use cases at once (`use_cases_weeks`: each table
    read once), so the numbers are the pages' numbers by construction. Without the claim-level
    share, which /metrics does not export (its query is a third of the cost). Two weeks: the
    headline of a running week is last week's until the running one decides.
    """
    chosen = list(use_cases)
    weeks = use_cases_weeks(use_cases=chosen, weeks=2)
    return [CurrentWeek(u, weeks[u.pk][-1], use_case_headline(weeks[u.pk])) for u in chosen]


@dataclass(frozen=True)
class QueueFigures:
    """The judge tier's backlog and its lifetime counters."""

    answers: dict[tuple[str, str], int]  # (use case slug, answer status) -> waiting answers
    runs: dict[str, int]  # run status -> runs, all of them (pending and running are the queue)
    oldest_unscored_seconds: float  # 0 when nothing waits
    calls: int  # judge calls ever made, retries of failed attempts included


def queue_figures(*, now: datetime | None = None) -> QueueFigures:
    """Queue depth, the age of the oldest unscored sampled answer and the judge counters.

    The waiting answers are read through the partial index `answer_awaiting_judge`; the oldest
    one is measured from when Treue received it (`received_at`), not from the client's
    `created_at`, which may lie in the past for a replay and would raise a false alarm.

    The counters are over all runs and not per use case: that would join every run to its
    answer (0.6 s at a million answers, bench/dashboard.py), while one pass over the runs
    takes ~35 ms; once the rollups are whole, the runs that ended come from them and only the
    open ones are read. The calls per use case and week are in the weekly figures.
    """
    now = now or timezone.now()
    slugs = dict(UseCase.objects.values_list("pk", "slug"))
    waiting = (
        Answer.objects.filter(status__in=UNSCORED_STATUSES)
        .values_list("use_case_id", "status")
        .annotate(n=Count("*"))
        .order_by()
    )
    answers = {(slugs[uc], status): n for uc, status, n in waiting}
    oldest = Answer.objects.filter(status__in=UNSCORED_STATUSES).aggregate(
        t=Min("received_at")
    )["t"]
    runs: dict[str, int] = dict.fromkeys(JudgeRun.Status.values, 0)
    calls = 0
    every = JudgeRun.objects.all()
    if rollups_ready():
        # The runs that ended from the rollups, the open ones (few) read raw.
        ended = RollupUsage.objects.aggregate(
            ok=Sum("succeeded_runs"), failed=Sum("failed_runs"), spent=Sum("calls")
        )
        runs[JudgeRun.Status.SUCCEEDED] = ended["ok"] or 0
        runs[JudgeRun.Status.FAILED] = ended["failed"] or 0
        calls = ended["spent"] or 0
        # On-demand runs are not in the weeks' usage (rollups.in_week_usage): from the days'.
        for status, n, spent in (
            RollupUsageDay.objects.filter(trigger=JudgeRun.Trigger.ON_DEMAND)
            .values_list("status").annotate(n=Sum("runs"), spent=Sum("calls")).order_by()
        ):
            runs[status] += n or 0
            calls += spent or 0
        every = every.filter(status__in=[JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING])
    for status, n, spent in (
        every.values_list("status").annotate(n=Count("*"), spent=Sum("calls")).order_by()
    ):
        runs[status] = n
        calls += spent or 0
    return QueueFigures(
        answers=answers,
        runs=runs,
        oldest_unscored_seconds=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
        calls=calls,
    )


@reads_from_replica
def segment_volumes(
    *, use_cases: Iterable[UseCase], dimensions: Iterable[str] = ("model", "prompt_version"),
) -> dict[tuple[str, str], dict[str, int]]:
    """This ISO week's answers per (use case slug, dimension) and value, the TOP_LABELS largest
    values and "other" (`segments.top_values`)."""
    chosen = list(use_cases)
    if not chosen:
        return {}
    slugs = {u.pk: u.slug for u in chosen}
    counts = week_volumes(list(slugs), iso_weeks(weeks=1), list(dimensions))
    return {(slugs[pk], dimension): top_values(values)
            for (pk, dimension), values in counts.items()}
