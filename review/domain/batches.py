"""Which answers go into a weekly review batch, and the ISO-week arithmetic around it.

The batch is drawn at random from last week's judged answers, preferring those the random
sample hit: the random sample is independent of the tier-1 flag, so a batch drawn from it
represents all traffic, while flagged answers are over-represented among judged answers. Only
when the random stratum has fewer answers than the batch needs are flagged ones added.

The draw is seeded with the use case and week, so running the command again (or on another
machine) picks the same answers — and the unique batch per week makes it create nothing new.
"""

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

# ASCII digits only: \d would take Arabic-Indic or full-width digits too.
_WEEK_RE = re.compile(r"^([0-9]{4})-W([0-9]{2})$")

RANDOM = "random"
FLAGGED = "flagged"


def parse_week(text: str) -> tuple[int, int]:
    """`"2026-W49"` → `(2026, 49)`; ValueError for anything else or a week the year lacks."""
    match = _WEEK_RE.match(text) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"{text!r} is not an ISO week like 2026-W49")
    year, week = int(match.group(1)), int(match.group(2))
    if not 2 <= year <= 9998:  # the weeks around it (source week, trends) must exist too
        raise ValueError(f"{text!r}: the year must be between 0002 and 9998")
    date.fromisocalendar(year, week, 1)  # raises ValueError for W00, W54, W53 of short years
    return year, week


def format_week(year: int, week: int) -> str:
    return f"{year:04d}-W{week:02d}"


def week_of(day: date) -> str:
    year, week, _ = day.isocalendar()
    return format_week(year, week)


def shift_week(week: str, weeks: int) -> str:
    """The ISO week `weeks` later (negative: earlier), across year boundaries."""
    year, number = parse_week(week)
    return week_of(date.fromisocalendar(year, number, 1) + timedelta(weeks=weeks))


def week_monday(week: str) -> date:
    year, number = parse_week(week)
    return date.fromisocalendar(year, number, 1)


@dataclass(frozen=True, slots=True)
class Candidate:
    answer_id: int
    in_random_sample: bool


@dataclass(frozen=True, slots=True)
class Drawn:
    answer_id: int
    stratum: str  # RANDOM or FLAGGED


def draw_batch(candidates: Sequence[Candidate], *, size: int, seed: str) -> list[Drawn]:
    """Up to `size` answers: random-sample ones first, topped up with flagged ones if needed.

    The order of `candidates` does not matter: they are sorted before the seeded shuffle.
    """
    if size <= 0:
        return []
    rng = random.Random(seed)
    random_ids = sorted(c.answer_id for c in candidates if c.in_random_sample)
    other_ids = sorted(c.answer_id for c in candidates if not c.in_random_sample)
    picked = [Drawn(i, RANDOM) for i in _sample(rng, random_ids, size)]
    missing = size - len(picked)
    if missing > 0:
        picked += [Drawn(i, FLAGGED) for i in _sample(rng, other_ids, missing)]
    return picked


def _sample(rng: random.Random, ids: list[int], k: int) -> list[int]:
    return rng.sample(ids, min(k, len(ids)))
