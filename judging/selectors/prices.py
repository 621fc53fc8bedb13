"""A judge model's price, found by one rule for its name (monitoring/domain/prices.py)."""

from collections.abc import Iterable

from monitoring.domain.prices import price_key
from monitoring.models import (
    JudgePrice,
)


def prices_for(*, models: Iterable[str]) -> dict[str, JudgePrice]:
    """The prices of these models, keyed by ``cost.price_key``: the one rule every cost figure
    finds its price by (a handful of rows, matched here rather than by the database, whose
    case rules differ between SQLite and PostgreSQL)."""
    keys = {price_key(m) for m in models} - {""}
    if not keys:
        return {}
    return {
        key: price for price in JudgePrice.objects.all()
        if (key := price_key(price.judge_model)) in keys
    }



def price_for_model(*, judge_model: str) -> JudgePrice | None:
    return prices_for(models=[judge_model]).get(price_key(judge_model))



def price_currencies(*, models: Iterable[str]) -> dict[str, str]:
    """The currency of each of these models that has a price, by the model's name as given."""
    prices = prices_for(models=models)
    return {m: prices[price_key(m)].currency for m in models if price_key(m) in prices}
