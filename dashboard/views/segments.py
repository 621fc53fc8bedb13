"""What the use-case page says of segments (issue 40): the changes on the team's side, the
largest difference that holds, and a dimension's table, in words and the page's numbers."""

from __future__ import annotations

from typing import Any

from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils import formats
from django.utils.http import urlencode
from django.utils.translation import gettext as _

from dashboard.domain.segments import SegmentFigure
from dashboard.domain.statistics.cells import Estimate
from dashboard.selectors.segments import ChangeFigures, SegmentsView
from monitoring.domain.segments import METADATA


def dimension_label(dimension: str) -> str:
    """A dimension as the page names it."""
    if dimension.startswith(METADATA):
        return _("Metadaten „%(key)s“") % {"key": dimension[len(METADATA):]}
    return {
        "model": _("Generator-Modell"),
        "service": _("Dienst"),
        "prompt_version": _("Prompt-Version"),
        "source": _("Quelle"),
    }[dimension]


def value_label(value: str) -> str:
    """A segment's value as shown ("" is the answers without one)."""
    return value if value else _("(ohne Angabe)")


def _num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else formats.number_format(round(value, digits), digits)


def _signed(value: float) -> str:
    text = _num(abs(value))
    return f"−{text}" if value < 0 else f"+{text}"


def _percent(share: float) -> str:
    return f"{floatformat(share * 100, 0)} %"


def _estimate_text(e: Estimate) -> str:
    if e.value is None or e.low is None or e.high is None:
        return _("keine Schätzung")
    return f"{_num(e.value)} ({_num(e.low)}–{_num(e.high)})"


def change_reading(change: ChangeFigures) -> str:
    """'Seit 2026-W37 kommen 80 % der Antworten von llama-2-7b-chat …'"""
    c = change.change
    values = {
        "week": change.week.label, "share": _percent(c.share), "after": value_label(c.after),
        "before": value_label(c.before), "dimension": dimension_label(c.dimension),
        "now": _estimate_text(change.after), "then": _estimate_text(change.before),
    }
    if c.dimension == "model":
        text = _("Seit %(week)s kommen %(share)s der Antworten von %(after)s (vorher "
                 "%(before)s): Treue %(now)s gegenüber %(then)s in den Wochen davor.")
    else:
        text = _("Seit %(week)s tragen %(share)s der Antworten %(dimension)s %(after)s (vorher "
                 "%(before)s): Treue %(now)s gegenüber %(then)s in den Wochen davor.")
    return text % values


def finding_reading(view: SegmentsView) -> str:
    """The largest difference that holds after the correction, or that none does."""
    f = view.finding
    if view.hidden:
        return _("Segmente und ihre Unterschiede sehen die Teamleitungen des Anwendungsfalls.")
    if f is None or f.difference is None:
        if not view.compared:
            return _("Zu wenige geprüfte Antworten, um Segmente zu vergleichen.")
        return _("Kein Segment unterscheidet sich nach Korrektur für %(m)s Vergleiche vom "
                 "Rest des Anwendungsfalls.") % {"m": view.compared}
    d = f.difference
    return _(
        "Größter Unterschied, der hält: %(dimension)s %(value)s (%(share)s der Antworten) "
        "%(mine)s gegenüber %(rest)s beim Rest, Unterschied %(d)s, korrigiertes Intervall "
        "%(low)s bis %(high)s."
    ) % {
        "dimension": dimension_label(f.dimension), "value": value_label(f.value),
        "share": _percent(f.share), "mine": _num(f.estimate.value), "rest": _num(f.rest.value),
        "d": _signed(d.value), "low": _signed(d.low), "high": _signed(d.high),
    }


def _share_text(e: Estimate) -> str:
    if e.value is None or e.low is None or e.high is None:
        return "–"
    return (f"{floatformat(e.value * 100, 0)} % ({floatformat(e.low * 100, 0)}–"
            f"{floatformat(e.high * 100, 0)} %)")


def segment_rows(figures: list[SegmentFigure], use_case_slug: str) -> list[dict[str, Any]]:
    """The breakdown's table rows, each with the explorer's link to its answers."""
    rows = []
    explorer = reverse("monitoring:answer_list")
    for f in figures:
        d = f.difference
        rows.append({
            "value": value_label(f.value),
            "figure": f,
            "segment_text": f"{f.dimension}:{f.value}",
            "answers_url": explorer + "?" + urlencode(
                {"use_case": use_case_slug, "segment": f"{f.dimension}:{f.value}"}),
            "share": _percent(f.share),
            "below": _share_text(f.below),
            "difference": None if d is None else {
                "value": _signed(d.value),
                "interval": _("%(low)s bis %(high)s") % {"low": _signed(d.low),
                                                        "high": _signed(d.high)},
                "holds": d.holds,
            },
            "needed": None if f.sample_rate_needed is None
            else f"{floatformat(f.sample_rate_needed * 100, -1)} %",
        })
    return rows
