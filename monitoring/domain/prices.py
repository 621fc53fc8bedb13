"""What a judge call costs: a price per million tokens, found by one rule for a model's name."""

import math
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


