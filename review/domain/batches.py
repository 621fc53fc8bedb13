"""Which answers go into a weekly review batch (the ISO weeks around it: common/domain/weeks.py).

The batch is drawn at random from last week's judged answers, preferring those the random
sample hit: the random sample is independent of the tier-1 flag, so a batch drawn from it
represents all traffic, while flagged answers are over-represented among judged answers. Only
when the random stratum has fewer answers than the batch needs are flagged ones added.

The draw is seeded with the use case and week, so running the command again (or on another
machine) picks the same answers — and the unique batch per week makes it create nothing new.
"""

import random
from collections.abc import Sequence
from dataclasses import dataclass

RANDOM = "random"
FLAGGED = "flagged"


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
