"""The dashboard's figures as a reader with open review items may see them.

The one place that applies blind review to aggregates (`dashboard.domain.small_cells`): every
page, and the estimates API, that shows a use case's figures to a person passes them through
`figures_for_reader`. Answers are blind by the one rule, `blind_answer_ids`.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, TypeVar

from django.contrib.auth.models import AnonymousUser, User

from alarms.models import Alarm
from dashboard.domain.small_cells import small, withhold_small
from dashboard.selectors.figures import WeekFigures
from monitoring.models import Answer
from monitoring.selectors.access import blind_answer_ids

T = TypeVar("T")


def use_cases_with_open_items(*, user: User | AnonymousUser) -> set[int]:
    """The use cases in which this reader has answers open for blind review."""
    blind = blind_answer_ids(user=user)
    if not blind:
        return set()
    return set(
        Answer.objects.filter(pk__in=blind).values_list("use_case_id", flat=True).distinct()
    )


def figures_for_reader(
    figures: T, *, user: User | AnonymousUser, use_case_id: int,
    open_in: set[int] | None = None,
) -> T:
    """``figures`` (a page, a row, a list of weeks) as this reader may see them: unchanged, or
    for a reader with open items in the use case every figure resting on fewer than
    `small_cells.MIN_ANSWERS` judged answers withheld, with the lights that read them grey.
    ``open_in``: `use_cases_with_open_items` of the reader, where a page shows several use
    cases (read once, not per use case)."""
    if open_in is None:
        open_in = use_cases_with_open_items(user=user)
    if use_case_id not in open_in:
        return figures
    withheld: Any = withhold_small(figures, then=_lights)
    alarms = getattr(withheld, "alarms", None)
    if isinstance(alarms, list):
        withheld = dataclasses.replace(withheld, alarms=[_alarm(a) for a in alarms])
    result: T = withheld
    return result


def _alarm(alarm: Alarm) -> Alarm:
    """An action alarm says its week's value and interval: on fewer than MIN_ANSWERS judged
    answers the reader is told the week and that the figures wait for the review, not them."""
    n = alarm.details.get("n") if isinstance(alarm.details, dict) else None
    if alarm.kind != Alarm.Kind.ACTION or not (isinstance(n, int) and small(n)):
        return alarm
    shown = copy.copy(alarm)
    shown.figures_withheld = True  # type: ignore[attr-defined]  # read by _dash_alarms.html
    return shown


def _lights(old: Any, new: Any) -> Any:
    """A week's lights read its estimates: one withheld is a grey light (a red light on one
    answer says its score is below the line), and so is the 4-week light on too few."""
    if not isinstance(old, WeekFigures):
        return new
    grey: dict[str, Any] = {}
    if new.estimate is not old.estimate:
        grey |= {"light": "grey", "precision": None}
    if new.pooled is not old.pooled:
        grey["pooled_light"] = "grey"
    if new.expert is not old.expert:
        grey["expert_light"] = "grey"
    if small(old.standard_pooled_n) or new.standard_pooled is not old.standard_pooled:
        grey["standard_pooled_light"] = "grey"
    if new.strict is not old.strict:
        grey["strict_light"] = "grey"
    return dataclasses.replace(new, **grey) if grey else new
