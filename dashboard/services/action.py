"""The action signal: a use case whose weekly faithfulness is below its action threshold, on
evidence - never on one noisy point.

Checked hourly (Celery beat, `check_action_alarms`) for the last complete week and the current
one, by `dashboard.domain.alarms.action_decision`: a week raises the alarm when its whole 95 %
interval lies below the threshold (a red light; on a week of too few judged answers only when
the pooled view's interval lies below it too), or when it and the week before are both below
it with intervals that decide it (amber or red, not grey). Mailed on the point estimate alone
the alarm fired in 12-21 % of healthy weeks; this rule fires in at most 2 % of them
(bench/statistics.py).

- raised: an alarm per week (key: the ISO week), stored and mailed to the team leads once -
  `alarm_raise` finds an existing row and mails nobody again;
- the newest decided week green: the use case has recovered, and its open action alarms clear
  themselves.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils.translation import gettext_noop

from alarms.models import Alarm
from alarms.services import alarm_clear, alarm_raise
from alarms.text import Part, number
from dashboard.domain import alarms
from dashboard.domain.headline import EXPERTS, POOLED, Figure, Headline
from dashboard.selectors.figures import (
    WeekFigures,
    running_strict_on_headline_scale,
    use_case_headline,
    use_case_weeks,
)
from jobs import framework as jobs
from monitoring.models import UseCase

# The task that checks one use case's action alarms (dashboard/tasks.py), published by name.
ACTION_ALARMS_TASK = "dashboard.tasks.check_use_case_action_alarms"


@dataclass(frozen=True)
class ActionCheck:
    raised: list[str]  # ISO weeks newly alarmed
    cleared: int  # open alarms cleared because the use case recovered


def _measured(week: WeekFigures, headline: Headline) -> Part:
    """Which figure the alarm read: its scale, its weeks and what stands behind it."""
    if headline.scale == EXPERTS:
        return (gettext_noop(
            "Gemessen auf der Skala der Fachexperten, Sammelsicht über %(weeks)s Wochen bis "
            "%(week)s, mit %(n)s begutachteten Antworten."
        ), {"weeks": headline.weeks, "week": headline.week, "n": headline.n})
    if headline.view == POOLED:
        return (gettext_noop(
            "Gemessen laut Prüfmodell, Sammelsicht über %(weeks)s Wochen bis %(week)s, an "
            "%(n)s geprüften Antworten."
        ), {"weeks": headline.weeks, "week": headline.week, "n": headline.n})
    return (gettext_noop("Gemessen laut Prüfmodell an %(n)s geprüften von %(volume)s Antworten."),
            {"n": headline.n, "volume": week.volume})


def _text(
    use_case: UseCase, week: WeekFigures, headline: Headline, reason: str | None
) -> list[Part]:
    parts: list[Part] = [
        (gettext_noop(
            "Woche %(week)s: Die geschätzte Treue von „%(name)s“ liegt bei %(value)s "
            "(95-%%-Intervall %(low)s–%(high)s), unter der Handlungsschwelle von %(threshold)s."
        ), {
            "week": week.label,
            "name": use_case.name,
            "value": number(headline.value or 0),
            "low": number(headline.low or 0),
            "high": number(headline.high or 0),
            "threshold": number(use_case.action_threshold),
        }),
        _measured(week, headline),
    ]
    parts.append({
        alarms.INTERVAL_BELOW: (gettext_noop("Das ganze Intervall liegt unter der Schwelle."), {}),
        alarms.POOLED_BELOW: (gettext_noop(
            "Die Woche hat wenige geprüfte Antworten, aber auch die Sammelsicht über "
            "%(weeks)s Wochen liegt mit ihrem ganzen Intervall unter der Schwelle "
            "(%(low)s–%(high)s)."
        ), {
            "weeks": week.standard_pooled_weeks,
            "low": number(week.standard_pooled.low or 0) if week.standard_pooled else "–",
            "high": number(week.standard_pooled.high or 0) if week.standard_pooled else "–",
        }),
        alarms.RUNNING_BELOW: (gettext_noop(
            "Die Woche läuft noch, aber schon jetzt liegt auch das strengere Intervall der "
            "stündlichen Prüfung ganz unter der Schwelle."
        ), {}),
    }.get(reason or "", (gettext_noop("Die zweite Woche in Folge unter der Schwelle."), {})))
    if use_case.leaves_unreviewed:
        parts.append((gettext_noop(
            "Die Antworten gehen ungeprüft nach außen: Sie brauchen eine menschliche "
            "Freigabe, welche Zahl auch immer hier steht."
        ), {}))
    parts.append((gettext_noop(
        "Die Zahl misst die Treue zu den Quellen, nicht die Wahrheit. Ursachen zeigt die "
        "Seite des Anwendungsfalls."
    ), {}))
    return parts


def _decide(before: WeekFigures, week: WeekFigures, threshold: float
            ) -> tuple[Headline, alarms.ActionDecision]:
    """A week's decision on the figure the pages lead with: a complete week's headline (and
    the week before's), or the running week's own estimate on its strict rule."""
    if week.current:
        running = use_case_headline([before, week])
        return running, alarms.running_decision(running_strict_on_headline_scale(before, week))
    headline = week.complete_headline
    pooled = week.standard_pooled
    return headline, alarms.headline_decision(
        current=headline, previous=before.complete_headline, action_threshold=threshold,
        pooled=None if pooled is None else Figure(
            pooled.value, pooled.low, pooled.high, pooled.n, pooled.too_few,
            week.standard_pooled_light, week.standard_pooled_weeks),
    )


def action_alarms_check(*, use_case: UseCase, now: datetime | None = None) -> ActionCheck:
    """Raise or clear the use case's action alarms from last week and this week, on the figure
    the pages lead with (dashboard.domain.headline)."""
    # The week before last only as the previous week of last week's decision.
    weeks = use_case_weeks(use_case=use_case, weeks=3, until=now, claims=False)
    threshold = use_case.action_threshold
    decisions = [
        (week, *_decide(before, week, threshold))
        for before, week in zip(weeks, weeks[1:], strict=False)
    ]
    decided = [(w, d) for w, _, d in decisions if d.light != "grey"]
    if decided and decided[-1][1].recovered:
        return ActionCheck(
            raised=[], cleared=alarm_clear(use_case=use_case, kind=Alarm.Kind.ACTION)
        )
    raised = []
    for week, headline, decision in decisions:
        if not decision.alarm:
            continue
        alarm = alarm_raise(
            use_case=use_case,
            kind=Alarm.Kind.ACTION,
            key=week.label,
            text=_text(use_case, week, headline, decision.reason),
            details={
                "week": week.label,
                "estimate": headline.value,
                "low": headline.low,
                "high": headline.high,
                "n": headline.n,
                "population": week.volume,
                "threshold": threshold,
                "light": headline.light,
                "reason": decision.reason,
                "scale": headline.scale,
                "view": headline.view,
                "weeks": headline.weeks,
            },
        )
        if alarm is not None:
            raised.append(week.label)
    return ActionCheck(raised=raised, cleared=0)


def action_alarms_check_all(*, now: datetime | None = None) -> int:
    """Check every active use case; returns how many alarms were raised."""
    return sum(
        len(action_alarms_check(use_case=use_case, now=now).raised)
        for use_case in UseCase.objects.filter(active=True)
    )


def action_alarms_check_for(*, use_case_id: int) -> int:
    """The action alarms of one use case by its id (the task after a change); none for a use
    case that is gone or inactive. Returns how many alarms were raised."""
    use_case = UseCase.objects.filter(pk=use_case_id, active=True).first()
    return 0 if use_case is None else len(action_alarms_check(use_case=use_case).raised)


def action_alarms_check_later(*, use_case_id: int) -> None:
    """Once the surrounding transaction commits, a worker checks the use case's action alarms
    (registered with monitoring.extensions: after a settings change, an import of reviews). A
    message the broker loses costs an hour at most: `check_action_alarms` checks every use case
    hourly."""
    transaction.on_commit(
        lambda: jobs.publish_each(ACTION_ALARMS_TASK, [use_case_id], what="action alarm check")
    )
