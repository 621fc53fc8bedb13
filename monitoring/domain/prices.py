"""What a judge call costs: a price per million tokens, found by one rule for a model's name."""

import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import TypeVar

Number = TypeVar("Number", float, Decimal)


def check_share(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0 or math.isnan(value):
        raise ValueError(f"{name} must be between 0 and 1, not {value!r}")


def check_non_negative(name: str, value: float | None) -> None:
    if value is not None and (value < 0 or math.isnan(value) or math.isinf(value)):
        raise ValueError(f"{name} must be a finite number of at least 0, not {value!r}")


def price_key(model: str) -> str:
    """The one rule by which a price is found for a model name: case and surrounding blanks do
    not make another model (as for "the same model" when a model would judge itself)."""
    return model.strip().lower()


def token_cost(
    *,
    prompt_tokens: Number,
    completion_tokens: Number,
    cached_tokens: Number,
    prompt_per_1k: Number,
    completion_per_1k: Number,
    cached_per_1k: Number | None,
) -> Number:
    """The price of a call's tokens, in floats (estimates) or Decimals (what runs cost).

    Cached prompt tokens are a part of the prompt tokens (as the OpenAI API reports them:
    ``usage.prompt_tokens_details.cached_tokens``), billed at ``cached_per_1k``; without a
    price of their own they cost what other prompt tokens cost."""
    cached_price = prompt_per_1k if cached_per_1k is None else cached_per_1k
    cached = min(cached_tokens, prompt_tokens)
    return (
        (prompt_tokens - cached) * prompt_per_1k
        + cached * cached_price
        + completion_tokens * completion_per_1k
    ) / 1000




@dataclass(frozen=True, slots=True)
class ListPrice:
    """A judge model's list price per 1,000 tokens, as its provider publishes it."""

    judge_model: str
    prompt_per_1k: Decimal
    cached_prompt_per_1k: Decimal | None
    completion_per_1k: Decimal
    currency: str = "USD"


def _per_million(
    model: str, prompt: str, cached: str | None, completion: str
) -> ListPrice:
    """Providers publish prices per million tokens; JudgePrice keeps them per 1,000."""
    thousand = Decimal(1000)
    return ListPrice(
        model, Decimal(prompt) / thousand,
        None if cached is None else Decimal(cached) / thousand,
        Decimal(completion) / thousand,
    )


# Listenpreise Stand August 2025, in US dollars per million tokens (prompt, cached prompt,
# completion), as published at https://openai.com/api/pricing/ and
# https://www.anthropic.com/pricing#api (Claude: the cache read price as the cached one).
# Treue writes them into JudgePrice where a model has no price yet (migration
# monitoring.0031_judge_list_prices); an operator edits them in the admin, where they are
# ordinary rows. Prices change: check them against the provider's page.
LIST_PRICES_AS_OF = "2025-08"
LIST_PRICES_SOURCES = (
    "https://openai.com/api/pricing/",
    "https://www.anthropic.com/pricing#api",
)
LIST_PRICES: tuple[ListPrice, ...] = (
    _per_million("gpt-4o", "2.50", "1.25", "10.00"),
    _per_million("gpt-4o-mini", "0.15", "0.075", "0.60"),
    _per_million("gpt-4.1", "2.00", "0.50", "8.00"),
    _per_million("gpt-4.1-mini", "0.40", "0.10", "1.60"),
    _per_million("gpt-4.1-nano", "0.10", "0.025", "0.40"),
    _per_million("o3-mini", "1.10", "0.55", "4.40"),
    _per_million("o4-mini", "1.10", "0.275", "4.40"),
    _per_million("o3", "2.00", "0.50", "8.00"),
    _per_million("gpt-5", "1.25", "0.125", "10.00"),
    _per_million("gpt-5-mini", "0.25", "0.025", "2.00"),
    _per_million("gpt-5-nano", "0.05", "0.005", "0.40"),
    _per_million("claude-3-5-haiku-latest", "0.80", "0.08", "4.00"),
    _per_million("claude-3-7-sonnet-latest", "3.00", "0.30", "15.00"),
    _per_million("claude-sonnet-4-0", "3.00", "0.30", "15.00"),
    _per_million("claude-sonnet-4-20250514", "3.00", "0.30", "15.00"),
    _per_million("claude-opus-4-1", "15.00", "1.50", "75.00"),
)


def missing_list_prices(
    existing: Iterable[str], prices: Iterable[ListPrice] = LIST_PRICES
) -> list[ListPrice]:
    """The list prices of the models that have no price yet (by ``price_key``): a price an
    operator set or edited is never overwritten."""
    have = {price_key(m) for m in existing}
    return [p for p in prices if price_key(p.judge_model) not in have]


# A cost is kept to six decimals (JudgeUsage.cost); below one unit it is written with two
# significant digits, so that 0.00025 is not rounded to 0.00 nor written with six zeros.
COST_DECIMALS = 6


def amount_places(amount: Decimal | float | None) -> int:
    """How many decimals to write an amount of money with: two from one unit up (and for
    nothing at all), else enough for two significant digits, at most COST_DECIMALS."""
    if amount is None:
        return 2
    value = abs(Decimal(str(amount)) if isinstance(amount, float) else amount)
    if not value.is_finite() or value == 0 or value >= 1:
        return 2
    # adjusted(): the exponent of the first significant digit (0.00025 -> -4)
    return max(2, min(COST_DECIMALS, -value.adjusted() + 1))
