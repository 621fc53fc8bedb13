"""Which answers the judge sees (tier 2).

Every flagged answer is judged (inclusion probability 1). Independently of the flag, a hash of
(service, external id) decides whether the answer is in the random sample at the use case's rate;
unflagged answers in it are judged with inclusion probability = rate. The hash makes the decision
deterministic: replaying an answer decides the same, on any machine.
"""

import hashlib
from dataclasses import dataclass

from monitoring.domain.sample_rate import validate_rate


def random_draw(service_key: str, external_id: str) -> float:
    """A uniform number in [0, 1) derived from (service, external id) alone."""
    digest = hashlib.sha256(f"{service_key}\x1f{external_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True, slots=True)
class SampleDecision:
    in_random_sample: bool
    sampled: bool
    reason: str  # "flagged" | "random" | "not_sampled"
    # Defined for every answer, judged or not: the estimator needs it for the stratum sizes.
    inclusion_probability: float


def decide(*, service_key: str, external_id: str, flagged: bool, rate: float) -> SampleDecision:
    rate = validate_rate(rate)
    in_random = random_draw(service_key, external_id) < rate
    if flagged:
        return SampleDecision(in_random, True, "flagged", 1.0)
    if in_random:
        return SampleDecision(True, True, "random", rate)
    return SampleDecision(False, False, "not_sampled", rate)
