"""Template tags for the dashboard's estimates."""

from __future__ import annotations

from typing import Any

from django import template
from django.template.defaultfilters import floatformat

from dashboard.domain.statistics.precision import shown_digits
from dashboard.domain.statistics.precision import tops_at as interval_tops_at

register = template.Library()


@register.simple_tag(takes_context=True)
def estimate_value(context: template.Context, value: float | None) -> str:
    """``value`` at two decimals, or three where two would print it on the action line.

    The line is the context's ``threshold`` (the use case's action threshold), where the page
    sets one; without it, two decimals. Localised like `floatformat`.
    """
    if value is None:
        return ""
    threshold: Any = context.get("threshold")
    try:
        line = float(threshold) if threshold not in (None, "") else None
    except (TypeError, ValueError):
        line = None
    return floatformat(value, shown_digits(value, line))


@register.filter
def tops_at(figure: Any) -> bool:
    """Whether ``figure``'s interval (an estimate's, a headline's) ends at its value above
    (`tops_at_estimate`)."""
    return interval_tops_at(*(getattr(figure, name, None) for name in ("value", "low", "high")))


@register.filter
def signed(value: float | None, digits: int = 2) -> str:
    """``value`` with its sign always written ("+0,10", "−0,10", "0,00"), localised: a
    difference whose direction matters (expert − judge) must not read as a distance."""
    if value is None:
        return ""
    text = floatformat(abs(value), digits)
    if round(value, digits) == 0:
        return text
    return ("+" if value > 0 else "\u2212") + text
