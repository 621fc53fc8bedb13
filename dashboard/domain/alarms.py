"""When the action alarm is raised and cleared: on evidence, never on one noisy point.

The action alarm mails the team leads that a use case's faithfulness is below its action line.
Mailed on the point estimate alone it fired in 21 % of healthy weeks (true 0.88, action line
0.85) at 500 answers a week: a team learns to ignore it. It now needs either

- this week's interval wholly below the line (the red light: one week, but strong evidence)
  on a week with enough judged answers (not `too_few`), or
- two consecutive weeks whose estimates are below the line with intervals that decide it
  (amber or red lights: the interval straddles the line by no more than
  `statistics.UNDECIDED_WIDTH`, or lies below it). Two amber weeks are the sustained dip a
  single red week would be too slow to show; a grey week (an interval too wide to say which
  side of the line the use case is on) never counts toward it.

A red week of too few judged answers (a drawn stratum with fewer than `MIN_JUDGED`) is one
noisy point: its interval rests on a handful of random answers, and at 150 answers a week such
weeks were red in 3.4-3.6 % of healthy weeks. Alone it raises the alarm only when the pooled
view agrees (the week and the 3 before it, an interval wholly below the line on enough judged
answers: the view the pages show where single weeks are thin); otherwise it counts toward the
two-week rule like an amber week. Its light stays red on the pages.

It clears once a week is green (decided at or above the line), but not on a pooled headline
whose trend check turned it amber (`trend.py`): that warning raises nothing either. False alarms
per healthy week and detection are measured in `bench/statistics.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dashboard.domain.headline import JUDGE, WEEK, Figure, Headline, running_week_decides
from dashboard.domain.statistics.cells import Estimate
from dashboard.domain.statistics.precision import traffic_light

INTERVAL_BELOW = "interval_below"
POOLED_BELOW = "pooled_below"
TWO_WEEKS_BELOW = "two_weeks_below"
# The running week's strict interval already below (dashboard.domain.headline).
RUNNING_BELOW = "running_below"


@dataclass(frozen=True, slots=True)
class ActionDecision:
    alarm: bool
    reason: str | None  # INTERVAL_BELOW, POOLED_BELOW, TWO_WEEKS_BELOW or None
    recovered: bool  # this week is green: open action alarms may clear
    light: str  # this week's light


def action_decision(
    *, current: Estimate, previous: Estimate | None, action_threshold: float,
    pooled: Estimate | None = None,
) -> ActionDecision:
    """The action alarm's decision for the week of ``current`` (``previous``: the week before,
    None when there is none; ``pooled``: the week and the weeks before it as one estimate)."""
    light = traffic_light(current, action_threshold)
    if light == "red" and not current.too_few:
        return ActionDecision(True, INTERVAL_BELOW, False, light)
    if (light == "red" and pooled is not None and not pooled.too_few
            and traffic_light(pooled, action_threshold) == "red"):
        return ActionDecision(True, POOLED_BELOW, False, light)
    before = traffic_light(previous, action_threshold) if previous is not None else "grey"
    if light in ("amber", "red") and before in ("amber", "red"):
        return ActionDecision(True, TWO_WEEKS_BELOW, False, light)
    return ActionDecision(False, None, light == "green", light)


def headline_decision(
    *, current: Headline, previous: Headline | None, action_threshold: float,
    pooled: Figure | None = None,
) -> ActionDecision:
    """The decision for a complete week on its headline, the figure the pages lead with (the
    experts' scale where it leads): the rules above, read on that figure. ``pooled``: the
    judge's pooled view of the week, asked only where the headline is the judge's week."""
    asked = pooled if current.scale == JUDGE and current.view == WEEK else None
    decision = action_decision(
        current=_estimate(current), previous=None if previous is None else _estimate(previous),
        action_threshold=action_threshold, pooled=None if asked is None else _estimate(asked),
    )
    if current.trend_amber and decision.recovered:
        # A pool whose weeks fall below the line (`trend.py`) is a warning, not evidence: it
        # raises nothing, and it keeps an open alarm from clearing on the pool's green.
        return replace(decision, recovered=False, light="amber")
    return decision


def running_decision(strict: Figure | None) -> ActionDecision:
    """The decision for the running week, looked at every hour, on its strict interval alone:
    an alarm where it lies below the threshold, recovery where it is green; else undecided (its
    light here grey), and it never counts toward two weeks."""
    if strict is not None and running_week_decides(strict):
        return ActionDecision(True, RUNNING_BELOW, False, "red")
    if strict is not None and not strict.too_few and strict.light == "green":
        return ActionDecision(False, None, True, "green")
    return ActionDecision(False, None, False, "grey")


def _estimate(figure: Headline | Figure) -> Estimate:
    return Estimate(figure.value, figure.low, figure.high, figure.n, 0, (), figure.too_few)
