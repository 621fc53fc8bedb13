"""What the judge tier costs: the expected weekly cost of a use case, and of one judge run.

Every flagged answer is judged, and of the others the share given by the sample rate; each
judged answer costs one decomposition call plus one call per claim (per-claim mode) or per
batch of claims (batched mode). Prompt tokens a provider served from its cache cost the cached
price where one is set. The figures are expected values from the use case's recent weeks, so
the page that sets the sample rate can show what a rate costs before anyone saves it.
"""

from dataclasses import dataclass

from judging.domain.judgement import BATCHED, MODES, PER_CLAIM
from monitoring.domain.prices import check_non_negative, check_share, token_cost

# When a use case has no judged answer yet, the number of calls per answer is assumed: one
# decomposition plus five claims, the middle of the 3-8 claims a RAG answer usually holds. The
# pages say so whenever they use it.
ASSUMED_CLAIMS_PER_ANSWER = 5
ASSUMED_CALLS_PER_ANSWER = 1.0 + ASSUMED_CLAIMS_PER_ANSWER


@dataclass(frozen=True, slots=True)
class RescoreCalls:
    calls: int
    # True where a reply the judge model got wrong is asked again at a call each, so the
    # figure is a floor (batched and one-call modes); per claim it is the count itself.
    at_least: bool


def rescore_calls(*, mode: str, claims: int, batch_size: int) -> RescoreCalls:
    """The calls of judging an answer of `claims` claims in `mode` (judgement.MODES).

    Per claim: one decomposition and one call a claim. Batched: one decomposition and one call
    per batch of up to `batch_size` claims (none without claims); claims the reply leaves open
    are asked again in the same conversation, then one by one. One call: decomposition and
    verdicts together; unreadable verdicts are asked again as in batched mode. Raises
    ValueError for an unknown mode, negative claims or a batch size below 1.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if claims < 0 or batch_size < 1:
        raise ValueError(f"claims must be >= 0 and batch_size >= 1, not {claims}, {batch_size}")
    if mode == PER_CLAIM:
        return RescoreCalls(calls=1 + claims, at_least=False)
    if mode == BATCHED:
        return RescoreCalls(calls=1 + -(-claims // batch_size), at_least=True)
    return RescoreCalls(calls=1, at_least=True)


@dataclass(frozen=True, slots=True)
class WeeklyCostEstimate:
    judged_answers: float
    calls: float
    cost: float | None  # None when a price or the token figures are unknown


def call_cost(
    *,
    prompt_tokens: float,
    completion_tokens: float,
    prompt_price_per_1k: float | None,
    completion_price_per_1k: float | None,
    cached_tokens: float = 0.0,
    cached_price_per_1k: float | None = None,
) -> float | None:
    """The price of the given tokens (``token_cost``); None when a price is unknown."""
    check_non_negative("prompt_tokens", prompt_tokens)
    check_non_negative("completion_tokens", completion_tokens)
    check_non_negative("cached_tokens", cached_tokens)
    check_non_negative("prompt_price_per_1k", prompt_price_per_1k)
    check_non_negative("completion_price_per_1k", completion_price_per_1k)
    check_non_negative("cached_price_per_1k", cached_price_per_1k)
    if prompt_price_per_1k is None or completion_price_per_1k is None:
        return None
    return token_cost(
        prompt_tokens=float(prompt_tokens), completion_tokens=float(completion_tokens),
        cached_tokens=float(cached_tokens), prompt_per_1k=float(prompt_price_per_1k),
        completion_per_1k=float(completion_price_per_1k),
        cached_per_1k=None if cached_price_per_1k is None else float(cached_price_per_1k),
    )


def expected_weekly_judge_cost(
    *,
    weekly_volume: float,
    flagged_share: float,
    sample_rate: float,
    calls_per_answer: float,
    prompt_tokens_per_call: float | None,
    completion_tokens_per_call: float | None,
    prompt_price_per_1k: float | None,
    completion_price_per_1k: float | None,
    cached_tokens_per_call: float = 0.0,
    cached_price_per_1k: float | None = None,
) -> WeeklyCostEstimate:
    """Judged answers, calls and cost of one week.

    judged = volume × (flagged + (1 − flagged) × rate): flagged answers are always judged, the
    others with probability = rate (the draw is independent of the flag, but a flagged answer is
    judged once however it was drawn). Raises ValueError for shares outside [0, 1] and negative
    or non-finite figures. Unknown tokens or prices give a cost of None, never 0.
    """
    check_non_negative("weekly_volume", weekly_volume)
    check_share("flagged_share", flagged_share)
    check_share("sample_rate", sample_rate)
    check_non_negative("calls_per_answer", calls_per_answer)
    judged = weekly_volume * (flagged_share + (1 - flagged_share) * sample_rate)
    calls = judged * calls_per_answer
    if prompt_tokens_per_call is None or completion_tokens_per_call is None:
        check_non_negative("prompt_price_per_1k", prompt_price_per_1k)
        check_non_negative("completion_price_per_1k", completion_price_per_1k)
        return WeeklyCostEstimate(judged_answers=judged, calls=calls, cost=None)
    per_call = call_cost(
        prompt_tokens=prompt_tokens_per_call,
        completion_tokens=completion_tokens_per_call,
        prompt_price_per_1k=prompt_price_per_1k,
        completion_price_per_1k=completion_price_per_1k,
        cached_tokens=cached_tokens_per_call,
        cached_price_per_1k=cached_price_per_1k,
    )
    return WeeklyCostEstimate(
        judged_answers=judged,
        calls=calls,
        cost=None if per_call is None else calls * per_call,
    )
