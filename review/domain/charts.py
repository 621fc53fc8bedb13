"""Plotly figures of the calibration page, built from plain series (no database here).

The words on the axes come in as arguments, already translated by the caller, so this module
stays plain Python and the page can speak German or English. Every string a figure draws
(labels, week labels) is escaped here with `plotly_text`, so Plotly never renders it as markup
or a hover-template expression; the callers pass plain text.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from common.domain.plotly import CONFIG
from common.domain.plotly_text import plotly_text
from dashboard.domain.charts import SEPARATORS, week_axis

_BLUE = "#1f77b4"
_GREY = "#999"

# The weeks of the scatter with a colour and a legend entry each; older ones share a grey one.
SCATTER_WEEKS = 4

# The weekly deviation's axis spans at least this much (see bias_range).
BIAS_MIN_SPAN = 0.2

# The legend in a row above the plot, wrapping on a narrow screen: beside it, it took the
# plot's width on a phone.
_LEGEND_ABOVE: dict[str, Any] = {
    "orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom",
}

# A qualitative palette that stays readable when weeks are many: Plotly's default ten.
_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)


@dataclass(frozen=True, slots=True)
class ScatterPoint:
    answer_id: int
    week: str
    manual: float
    automatic: float
    url: str


@dataclass(frozen=True, slots=True)
class WeekBias:
    week: str
    n: int
    bias: float | None
    low: float | None
    high: float | None
    mae: float | None
    too_few: bool


def calibration_scatter(
    points: Sequence[ScatterPoint], *, action_threshold: float, labels: Mapping[str, str],
    config: Mapping[str, Any] | None = None, separators: str = SEPARATORS["de"],
) -> dict[str, Any]:
    """Manual (y) against automatic (x) score per reviewed answer, one trace per week (the
    latest SCATTER_WEEKS; older weeks together in one grey trace, so that the legend stays a
    line or two on a phone), with the diagonal (perfect agreement) and the action threshold on
    both axes.

    Each point carries its answer's URL in `customdata`, so a click can open the answer.
    `labels` needs: x, y, diagonal, threshold, hover (a format with {answer}); "legend" (the
    legend's title) and "earlier" (the older weeks' name) are optional.
    """
    # Escaped before {answer} in the hover is filled in (plotly_text leaves braces as they are);
    # by replace, not str.format, which would read any other braces in the text as fields.
    labels = {key: plotly_text(text) for key, text in labels.items()}
    fig = go.Figure()
    weeks = sorted({p.week for p in points})
    earlier = weeks[:-SCATTER_WEEKS] if len(weeks) > SCATTER_WEEKS + 1 else []
    if earlier:
        older = [p for p in points if p.week in set(earlier)]
        fig.add_trace(go.Scatter(
            x=[p.automatic for p in older], y=[p.manual for p in older], mode="markers",
            name=labels.get("earlier", "…"),
            marker={"color": _GREY, "size": 8, "opacity": 0.6},
            customdata=[[p.answer_id, p.url, plotly_text(p.week)] for p in older],
            hovertemplate=(
                labels["hover"].replace("{answer}", "%{customdata[0]}")
                + "<br>" + labels["x"] + ": %{x:.2f}<br>" + labels["y"] + ": %{y:.2f}"
                + "<extra>%{customdata[2]}</extra>"
            ),
            meta={"role": "earlier", "weeks": [plotly_text(w) for w in earlier]},
        ))
    for i, week in enumerate(w for w in weeks if w not in set(earlier)):
        mine = [p for p in points if p.week == week]
        shown_week = plotly_text(week)
        fig.add_trace(go.Scatter(
            x=[p.automatic for p in mine],
            y=[p.manual for p in mine],
            mode="markers",
            name=shown_week,
            marker={"color": _PALETTE[i % len(_PALETTE)], "size": 10, "opacity": 0.75},
            customdata=[[p.answer_id, p.url] for p in mine],
            hovertemplate=(
                labels["hover"].replace("{answer}", "%{customdata[0]}")
                + "<br>" + labels["x"] + ": %{x:.2f}<br>" + labels["y"] + ": %{y:.2f}"
                + f"<extra>{shown_week}</extra>"
            ),
        ))
    fig.add_trace(go.Scatter(
        x=[0, 1], y=[0, 1], mode="lines", name=labels["diagonal"],
        line={"color": "#555", "dash": "dot", "width": 1}, hoverinfo="skip",
    ))
    for axis in ("x", "y"):
        line = {"color": "#c0392b", "dash": "dash", "width": 1}
        if axis == "x":
            fig.add_shape(type="line", x0=action_threshold, x1=action_threshold, y0=0, y1=1,
                          line=line)
        else:
            fig.add_shape(type="line", x0=0, x1=1, y0=action_threshold, y1=action_threshold,
                          line=line)
    fig.add_annotation(
        x=action_threshold, y=0.02, text=labels["threshold"], showarrow=False,
        xanchor="right", font={"color": "#c0392b", "size": 11},
    )
    fig.update_layout(
        # A square plot whose axes stay at 0..1: with scaleanchor alone Plotly would widen
        # the ranges to fill the box and show scores that cannot exist.
        # No fixed tick step: Plotly spaces the ticks by the axis' length, every 0.1 on a
        # wide screen, every 0.2 on a phone, where eleven labels would overlap.
        xaxis={"title": {"text": labels["x"]}, "range": [-0.03, 1.03], "constrain": "domain",
               "tickformat": ".1f", "automargin": True},
        yaxis={"title": {"text": labels["y"]}, "range": [-0.03, 1.03], "scaleanchor": "x",
               "constrain": "domain", "tickformat": ".1f", "automargin": True},
        margin={"l": 50, "r": 10, "t": 10, "b": 40},
        # The height of a wide screen; static/js/calibration.js makes it fit a narrow one (a
        # square plot as wide as the card).
        height=460,
        separators=separators,
        legend=_LEGEND_ABOVE | {"title": {"text": labels.get("legend", "")}},
        hovermode="closest",
    )
    return {**fig.to_plotly_json(), "config": dict(config or CONFIG)}


def weekly_bias_chart(rows: Sequence[WeekBias], *, labels: Mapping[str, str],
                      config: Mapping[str, Any] | None = None,
                      separators: str = SEPARATORS["de"]) -> dict[str, Any]:
    """Weekly mean bias (manual − automatic) with its t-interval as error bars, the mean
    absolute difference as a second line, and zero as the reference. The x-axis spans the
    weeks with reviews, no more; the y-axis the values drawn, with zero (`bias_range`).

    A week with too few reviews for an interval is not on the lines: its bias (the difference
    of its one or two reviews) is a grey open point without whiskers, like an undecided week on
    the dashboard's trend, and says "too few" in its hover - not a blue point with a bar of
    zero width that reads as an exact value.

    `labels` needs: bias, mae, week, difference, too_few.
    """
    labels = {key: plotly_text(text) for key, text in labels.items()}
    shown = [r for r in rows if r.bias is not None]
    weeks = [plotly_text(r.week) for r in shown]
    decided = [r.bias if not r.too_few else None for r in shown]
    text = [f"n = {r.n}" + (f" · {labels['too_few']}" if r.too_few else "") for r in shown]
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=weeks,
        y=decided,
        mode="lines+markers",
        name=labels["bias"],
        connectgaps=False,
        marker={"color": _BLUE, "size": 9},
        error_y={
            "type": "data", "symmetric": False,
            "array": [None if y is None else _reach(r)[1] for r, y in zip(shown, decided,
                                                                         strict=True)],
            "arrayminus": [None if y is None else _reach(r)[0] for r, y in zip(shown, decided,
                                                                              strict=True)],
            "color": _BLUE,
        },
        text=text,
        hovertemplate="%{x}: %{y:+.3f}<br>%{text}<extra></extra>",
        meta={"role": "bias"},
    ))
    if any(r.too_few for r in shown):
        fig.add_trace(go.Scatter(
            x=weeks,
            y=[r.bias if r.too_few else None for r in shown],
            mode="markers",
            name=labels["too_few"],
            marker={"color": _GREY, "size": 9, "symbol": "circle-open"},
            text=text,
            hovertemplate="%{x}: %{y:+.3f}<br>%{text}<extra></extra>",
            meta={"role": "too_few"},
        ))
    fig.add_trace(go.Scatter(
        x=weeks,
        y=[r.mae if not r.too_few else None for r in shown],
        mode="lines+markers",
        name=labels["mae"],
        connectgaps=False,
        line={"color": "#ff7f0e", "dash": "dash"},
        hovertemplate="%{x}: %{y:.3f}<extra></extra>",
        meta={"role": "mae"},
    ))
    fig.add_hline(y=0, line={"color": "#555", "width": 1})
    fig.update_layout(
        xaxis={"title": {"text": labels["week"]}, "type": "category", "automargin": True,
               "categoryorder": "array", "categoryarray": weeks, **week_axis(len(weeks))},
        yaxis={"title": {"text": labels["difference"]}, "range": bias_range(shown),
               "automargin": True, "zeroline": False},
        margin={"l": 50, "r": 10, "t": 10, "b": 40},
        height=320,
        separators=separators,
        legend=_LEGEND_ABOVE,
        hovermode="x unified",
    )
    return {**fig.to_plotly_json(), "config": dict(config or CONFIG)}


def bias_range(rows: Sequence[WeekBias]) -> list[float]:
    """The y-axis of the weekly deviation: every value drawn (biases, their intervals, the
    mean absolute deviations) and zero, with a margin, at least BIAS_MIN_SPAN wide (a
    deviation of ±0.06 on a −1…1 axis reads as none), never past the possible −1…1."""
    values = [0.0]
    for r in rows:
        # A week of too few reviews draws its bias alone (no interval, no MAE).
        drawn = (r.bias,) if r.too_few else (r.bias, r.mae, r.low, r.high)
        values += [v for v in drawn if v is not None]
    low, high = min(values), max(values)
    if high - low < BIAS_MIN_SPAN:
        middle = (low + high) / 2
        # Zero stays on: it lay between low and high, which were less than the span apart.
        low, high = middle - BIAS_MIN_SPAN / 2, middle + BIAS_MIN_SPAN / 2
    pad = 0.08 * (high - low)
    return [max(-1.05, low - pad), min(1.05, high + pad)]


def _reach(row: WeekBias) -> tuple[float, float]:
    """How far the interval reaches below and above the bias (0, 0 where none is drawn)."""
    if row.too_few or row.bias is None or row.low is None or row.high is None:
        return 0.0, 0.0
    return row.bias - row.low, row.high - row.bias
