"""The action signal: a use case whose weekly faithfulness falls below its action threshold.

Checked hourly (Celery beat, `check_action_alarms`) for the last complete week and the current
one. Only a week with enough answers judged counts (`Estimate.too_few` is False): a handful of
answers is noise, not a signal. The newest such week decides:

- below the threshold: an alarm per week below (key: the ISO week), stored and mailed to the
  team leads once - `alarm_raise` finds an existing row and mails nobody again;
- at or above it: the use case has recovered, and its open action alarms clear themselves.

So a week that dipped and recovered within the check's two weeks raises nothing: by the time
it would be mailed, the answers are faithful enough again (the chart still shows the dip).
"""

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.template.defaultfilters import floatformat
from django.utils import translation
from django.utils.translation import gettext as _

from monitoring.models import Alarm, UseCase
from monitoring.selectors.dashboard import WeekFigures, use_case_weeks
from monitoring.services.alarms import alarm_clear, alarm_raise


@dataclass(frozen=True)
class ActionCheck:
    raised: list[str]  # ISO weeks newly alarmed
    cleared: int  # open alarms cleared because the use case recovered


def _number(value: float) -> str:
    return str(floatformat(value, 2))  # as on the pages: localized, rounded half up


def _message(use_case: UseCase, week: WeekFigures) -> str:
    estimate = week.estimate
    with translation.override(settings.LANGUAGE_CODE):
        text = _(
            "Woche %(week)s: Die geschätzte Treue von „%(name)s“ liegt bei %(value)s "
            "(95-%%-Intervall %(low)s–%(high)s, %(n)s geprüfte von %(volume)s Antworten), unter "
            "der Handlungsschwelle von %(threshold)s."
        ) % {
            "week": week.label,
            "name": use_case.name,
            "value": _number(estimate.value or 0),
            "low": _number(estimate.low or 0),
            "high": _number(estimate.high or 0),
            "n": estimate.n,
            "volume": estimate.population,
            "threshold": _number(use_case.action_threshold),
        }
        if use_case.leaves_unreviewed:
            text += " " + _(
                "Die Antworten gehen ungeprüft nach außen: Sie brauchen eine menschliche "
                "Freigabe, welche Zahl auch immer hier steht."
            )
        text += " " + _(
            "Die Zahl misst die Treue zu den Quellen, nicht die Wahrheit. Ursachen zeigt die "
            "Seite des Anwendungsfalls."
        )
    return text


def action_alarms_check(*, use_case: UseCase, now: datetime | None = None) -> ActionCheck:
    """Raise or clear the use case's action alarms from last week and this week."""
    weeks = [
        w for w in use_case_weeks(use_case=use_case, weeks=2, until=now, claims=False)
        if not w.estimate.too_few and w.estimate.value is not None
    ]
    if not weeks:
        return ActionCheck(raised=[], cleared=0)
    threshold = use_case.action_threshold
    if weeks[-1].estimate.value >= threshold:
        return ActionCheck(
            raised=[], cleared=alarm_clear(use_case=use_case, kind=Alarm.Kind.ACTION)
        )
    raised = []
    for week in weeks:
        if week.estimate.value >= threshold:
            continue
        estimate = week.estimate
        alarm = alarm_raise(
            use_case=use_case,
            kind=Alarm.Kind.ACTION,
            key=week.label,
            message=_message(use_case, week),
            details={
                "week": week.label,
                "estimate": estimate.value,
                "low": estimate.low,
                "high": estimate.high,
                "n": estimate.n,
                "population": estimate.population,
                "threshold": threshold,
                "light": week.light,
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
