"""Amounts of money as the pages write them: with enough decimals to be read and their
currency (monitoring.domain.prices.amount_places), in the page's language."""

from decimal import ROUND_HALF_UP, Decimal

from django import template
from django.utils.formats import number_format

from monitoring.domain.prices import amount_places

register = template.Library()


@register.filter
def money(amount: Decimal | float | None, currency: str = "") -> str:
    """``{{ cost|money:currency }}``: "0,00025 EUR", "12,40 USD"; "–" for no amount."""
    if amount is None or amount == "":
        return "–"
    places = amount_places(amount)
    value = Decimal(str(amount)) if isinstance(amount, float) else Decimal(amount)
    if not value.is_finite():
        return "–"
    rounded = value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    text = number_format(rounded, decimal_pos=places, force_grouping=True)
    return f"{text}\u00a0{currency}" if currency else text


@register.filter
def per_thousand(amount: Decimal | float | None) -> Decimal | None:
    """An amount per answer as per 1,000 answers: small costs read as sums one can picture."""
    if amount is None or amount == "":
        return None
    return (Decimal(str(amount)) if isinstance(amount, float) else Decimal(amount)) * 1000
