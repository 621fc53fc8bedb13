"""The overview: one row per use case a person leads, this week and last and a short trend,
the most alarming first."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from alarms.models import Alarm
from common.db_router import reads_from_replica
from dashboard.domain.expert_scale import POOLED_WEEKS as EXPERT_POOLED_WEEKS
from dashboard.domain.headline import EXPERTS, Headline
from dashboard.domain.statistics import precision as statistics
from dashboard.selectors.figures import (
    WeekFigures,
    use_case_headline,
    week_figures,
)
from dashboard.selectors.reads import read_reviews
from dashboard.selectors.restarts import pool_restarts
from dashboard.selectors.weekly_inputs import weekly_inputs, weekly_usage
from dashboard.selectors.weeks import OVERVIEW_WEEKS, POOLED_WEEKS, Week, iso_weeks
from judging.selectors.prices import price_currencies
from monitoring.models import SettingChange, UseCase
from monitoring.selectors import access
from monitoring.selectors.access import Role, use_cases_for_user

_LIGHT_ORDER = {"red": 0, "amber": 1, "grey": 2, "green": 3}


def use_cases_led_by(*, user: User | AnonymousUser) -> QuerySet[UseCase]:
    """The active use cases a person leads; staff lead all."""
    return use_cases_for_user(user=user, role=Role.LEAD).filter(active=True).order_by("name")


def user_leads(*, user: User | AnonymousUser) -> bool:
    """Whether the overview is the person's landing page: staff and team leads."""
    return access.user_leads(user=user)


def user_may_tune(*, user: User | AnonymousUser, use_case: UseCase) -> bool:
    """Team leads of the use case and staff change its thresholds and sample rate: the same
    people who may spend judge calls on a rescore."""
    return access.user_leads(user=user, use_case=use_case)


def setting_changes(*, use_case: UseCase, limit: int | None = None) -> list[SettingChange]:
    """The use case's setting changes, newest first."""
    changes = use_case.setting_changes.select_related("changed_by").order_by("-changed_at", "-pk")
    return list(changes[:limit] if limit is not None else changes)


def setting_changes_by_week(
    *, use_case: UseCase, weeks: Sequence[Week]
) -> dict[str, list[SettingChange]]:
    """The changes within ``weeks``, oldest first, by the ISO week they were made in."""
    if not weeks:
        return {}
    out: dict[str, list[SettingChange]] = defaultdict(list)
    changes = use_case.setting_changes.select_related("changed_by").filter(
        changed_at__gte=weeks[0].start, changed_at__lt=weeks[-1].end
    ).order_by("changed_at", "pk")
    for change in changes:
        week = next(w for w in weeks if w.start <= change.changed_at < w.end)
        out[week.label].append(change)
    return dict(out)


def user_reviews(*, user: User | AnonymousUser) -> bool:
    """Whether the person is a domain expert of some use case (their work is the review
    queue)."""
    return use_cases_for_user(user=user, role=Role.EXPERT).exists()


def open_alarms(*, use_cases: Iterable[UseCase]) -> dict[int, list[Alarm]]:
    """Open alarms of every kind per use case id, newest first."""
    out: dict[int, list[Alarm]] = defaultdict(list)
    for alarm in Alarm.objects.filter(use_case__in=list(use_cases), cleared_at__isnull=True):
        out[alarm.use_case_id].append(alarm)
    return out


def cost_currency(*, judges: Iterable[tuple[str, str]]) -> str:
    """The currency of the judge models' prices when they agree, else ''."""
    currencies = set(
        price_currencies(models={model for model, _ in judges}).values()
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
    def headline(self) -> Headline:
        """The figure the use case is judged by (dashboard.domain.headline): the card's light
        and its place in the order read it, as the page and the action alarm do."""
        return use_case_headline(self.weeks)

    @property
    def experts_lead(self) -> bool:
        """The experts' scale heads the card where it is the headline (a week's batch of
        reviews stands behind it); before that it sits below the judge's figure."""
        return self.headline.scale == EXPERTS

    @property
    def experts_follow(self) -> bool:
        """Reviews exist, but not yet a week's batch: the experts' scale below the judge's."""
        return not self.experts_lead and (
            self.this_week.expert is not None or self.last_week.expert is not None)

    @property
    def light(self) -> str:
        """The headline's light (whichever pooled view the page shows)."""
        return self.headline.light


def overview_order(row: OverviewRow) -> tuple[int, int, str]:
    """The overview's order: the most alarming light first, then the most alarms, then by
    name."""
    return (_LIGHT_ORDER[row.light], -len(row.alarms), row.use_case.name)


@reads_from_replica
def overview_rows(
    *, user: User | AnonymousUser, until: datetime | date | None = None,
    weeks: int = OVERVIEW_WEEKS, pooled_weeks: int = POOLED_WEEKS,
) -> list[OverviewRow]:
    """One row per use case the user leads (staff: all), the most alarming first.

    Four queries for all use cases together: counts and judged answers of `weeks` weeks (and
    the weeks before the first that its pooled views need), judge runs of the last two, open
    alarms. No claims: the overview does not show that share.
    """
    use_cases = list(use_cases_led_by(user=user))
    if not use_cases:
        return []
    lead = max(pooled_weeks, EXPERT_POOLED_WEEKS) - 1  # so that the first week's pools are whole
    span = iso_weeks(weeks=max(2, weeks) + lead, until=until)
    ids = [u.pk for u in use_cases]
    counts, judged = weekly_inputs(ids, span, claims_from=None)
    usage = weekly_usage(ids, span[-2:], offset=len(span) - 2)
    alarms = open_alarms(use_cases=use_cases)
    reviews = read_reviews(ids, span)
    restarts = pool_restarts(ids, span)
    rows = [
        OverviewRow(use_case, week_figures(
            use_case=use_case, weeks=span, counts=counts, judged=judged, usage=usage,
            full_from=len(span) - 2, reviews=reviews,
            restarts=restarts.get(use_case.pk, ()), pooled_weeks=pooled_weeks,
        )[lead:], alarms.get(use_case.pk, []))
        for use_case in use_cases
    ]
    currency = cost_currency(judges={j for row in rows for w in row.weeks for j in w.judges})
    for row in rows:
        row.currency = currency
    rows.sort(key=overview_order)
    return rows
