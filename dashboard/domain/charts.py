"""Plotly figures of the dashboard, built from plain series.

A selector returns the numbers, this module turns them into a figure dict (`{"data", "layout",
"config"}`) that the template embeds with `json_script` and `static/js/charts.js` hands to
`Plotly.newPlot`. Plain dicts rather than `plotly.graph_objects`: the figures are small, and
building graph objects validates every attribute, which costs more than the page's queries.
The tests validate the dicts with graph_objects instead.

No django here: the words on the chart come in as `labels` (already translated), numbers are
formatted by Plotly with the `separators` of the page's language ("," decimal comma in German).
Every string a figure draws (labels, week labels, series and bar names, judge changes: some of
them from outside, such as a judge model's name) goes in as plain text and is escaped here with
`plotly_text`, so Plotly never renders it as markup or a hover-template expression.

What the trend chart promises (DESIGN.md, Statistics): the line is the stratified estimate, never
the naive mean; every point carries its n; a week with too few judged answers is a grey point
outside the line and its band, so no line is drawn through noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from html import unescape
from typing import Any

from common.domain.plotly import CONFIG
from common.domain.plotly_text import plotly_text

BLUE = "#1f5fbf"
BAND = "rgba(31, 95, 191, 0.15)"
GREY = "#98a2b3"
RED = "#b42318"
AMBER = "#dc6803"
GREEN = "#067647"
INK = "#1d2430"
GRID = "#e4e7ec"

SEPARATORS = {"de": ",.", "en": ".,"}


@dataclass(frozen=True, slots=True)
class Point:
    """One week of a series: the estimate, its 95 % interval and the judged answers behind it."""

    x: str  # the ISO week, "2026-W48"
    value: float | None
    low: float | None
    high: float | None
    n: int
    too_few: bool


def _drawn_labels(labels: Mapping[str, str]) -> dict[str, str]:
    return {key: plotly_text(text) for key, text in labels.items()}


def _drawn_points(points: Sequence[Point]) -> list[Point]:
    """The points with their week label as drawn (on the axis and in the hover)."""
    return [replace(p, x=plotly_text(p.x)) for p in points]


def _layout(*, height: int, separators: str, y_title: str, y_range: Sequence[float] | None,
            percent: bool, compact: bool, categories: Sequence[str] | None = None,
            ) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "height": height,
        "separators": separators,
        "margin": {"l": 40, "r": 10, "t": 10, "b": 30} if compact else
        {"l": 60, "r": 20, "t": 20, "b": 50},
        "showlegend": not compact,
        "legend": {"orientation": "h", "y": -0.2, "x": 0},
        "hovermode": "closest",
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "font": {"family": "system-ui, sans-serif", "size": 11 if compact else 12, "color": INK},
        # No fixed tick count: the browser sets one per about 90 px of the chart's width
        # (static/js/charts.js), so that week labels never overlap on a phone.
        "xaxis": {"type": "category", "showgrid": False, "tickangle": 0,
                  "automargin": True, "fixedrange": True},
        "yaxis": {"title": {"text": "" if compact else y_title}, "gridcolor": GRID,
                  "zeroline": False, "fixedrange": True},
    }
    if categories is not None:
        # Plotly orders categories as the traces first name them; the band names only the
        # weeks with an estimate, so without this the weeks would come out of order.
        layout["xaxis"]["categoryorder"] = "array"
        layout["xaxis"]["categoryarray"] = list(categories)
        layout["xaxis"].update(week_axis(len(categories)))
    if y_range is not None:
        layout["yaxis"]["range"] = list(y_range)
    if percent:
        layout["yaxis"]["tickformat"] = ".0%"
    return layout


def week_axis(weeks: int) -> dict[str, Any]:
    """A category axis of `weeks` weeks that spans exactly them: half a week either side of
    the first and the last. Left to itself Plotly widens the axis to fit a marker's size or an
    annotation's text, and weeks without data appear at the ends. The labels stand a little off
    the axis, so that the lowest y label (centred on the axis' floor) never touches the first
    week's label on a narrow chart."""
    axis: dict[str, Any] = {"ticklabelstandoff": 8}
    if weeks:
        axis.update(autorange=False, range=[-0.5, weeks - 0.5])
    return axis


def _from_first_data(points: Sequence[Point]) -> list[Point]:
    """The weeks from the first one with judged answers on (the last week always): the x-axis
    spans the data, not the empty weeks of a range chosen before the use case had any."""
    first = next((i for i, p in enumerate(points) if p.n > 0 or p.value is not None),
                 max(len(points) - 1, 0))
    return list(points[first:])


def _whiskers(points: Sequence[Point], shown: Sequence[float | None], color: str
              ) -> dict[str, Any]:
    """Error bars from each drawn point to its interval's ends: every point shows its
    interval itself, also a lone week the band cannot draw (a run of one week has no area)."""
    def reach(p: Point, y: float | None, end: float | None, up: bool) -> float | None:
        if y is None or end is None:
            return None
        return max(0.0, end - y) if up else max(0.0, y - end)
    return {
        "type": "data", "symmetric": False, "color": color, "thickness": 1.2, "width": 3,
        "array": [reach(p, y, p.high, True) for p, y in zip(points, shown, strict=True)],
        "arrayminus": [reach(p, y, p.low, False) for p, y in zip(points, shown, strict=True)],
    }


def _band(points: Sequence[Point], name: str) -> dict[str, Any]:
    """The intervals of the points as filled polygons, one per unbroken run of weeks (a week
    without an estimate ends a run, so no band bridges it). An undecided week's interval is
    drawn too, however wide: its width is what says how little the week can tell."""
    runs: list[list[Point]] = [[]]
    for p in points:
        if p.value is None or p.low is None or p.high is None:
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append(p)
    xs: list[Any] = []
    ys: list[Any] = []
    for run in (r for r in runs if r):
        if xs:
            xs.append(None)
            ys.append(None)
        xs += [p.x for p in run] + [p.x for p in reversed(run)]
        ys += [p.high for p in run] + [p.low for p in reversed(run)]
    return {
        "type": "scatter", "name": name, "x": xs, "y": ys, "mode": "lines",
        "fill": "toself", "fillcolor": BAND, "line": {"width": 0, "color": BAND},
        "hoverinfo": "skip", "showlegend": True, "meta": {"role": "band"},
    }


def _above(bar: Bar) -> float:
    """How far the bar's interval reaches above its value (0 without one)."""
    if bar.value is None or bar.high is None:
        return 0.0
    return bar.high - bar.value


def _below(bar: Bar) -> float:
    if bar.value is None or bar.low is None:
        return 0.0
    return bar.value - bar.low


def _hover(labels: Mapping[str, str], value_format: str) -> str:
    return (
        "%{x}<br>" + labels["value"] + " %{y:" + value_format + "}"
        "<br>95 % %{customdata[1]:" + value_format + "}–%{customdata[2]:" + value_format + "}"
        "<br>n = %{customdata[0]}<extra></extra>"
    )


def trend_figure(
    points: Sequence[Point],
    *,
    threshold: float,
    labels: Mapping[str, str],
    changes: Sequence[tuple[str, str, str]] = (),
    separators: str = SEPARATORS["de"],
    compact: bool = False,
    overlays: Sequence[Series] = (),
    config: Mapping[str, Any] = CONFIG,
) -> dict[str, Any]:
    """The weekly estimate with its 95 % band, the action threshold and judge changes;
    `overlays`: further lines over the same weeks (the pooled view, the experts' scale).

    `labels`: "value" (the estimate's name), "band", "too_few", "threshold", "y", and
    "unknown" and "unknown_why" (optional: the legend's short name and the hover's reason).
    `changes`: (week, label, detail) where the judge or a setting changed; a dotted vertical
    line each, the short label above it (the detail in its hover). Traces, in order: band,
    estimate (one point per week, None where too few), too-few points (one per week, None
    elsewhere), threshold line, and only when some week has judged answers but no estimate (a
    stratum without a judged answer), a grey cross at the foot of the chart for each such week,
    so that it reads as "too few", not as no data. Each trace says its role in `meta`.
    """
    points = _drawn_points(_from_first_data(points))
    labels = _drawn_labels(labels)
    changes = [(plotly_text(week), plotly_text(label), plotly_text(detail))
               for week, label, detail in changes]
    weeks = [p.x for p in points]
    reliable = [p.value if (p.value is not None and not p.too_few) else None for p in points]
    shaky = [p.value if (p.value is not None and p.too_few) else None for p in points]
    custom = [[p.n, p.low, p.high] for p in points]
    hover = _hover(labels, ".2f")
    data = [
        _band(points, labels["band"]),
        {
            "type": "scatter", "name": labels["value"], "x": weeks, "y": reliable,
            "mode": "lines+markers", "connectgaps": False,
            "line": {"color": BLUE, "width": 2}, "marker": {"color": BLUE, "size": 7},
            "error_y": _whiskers(points, reliable, BLUE),
            "customdata": custom, "hovertemplate": hover, "meta": {"role": "estimate"},
        },
        {
            "type": "scatter", "name": labels["too_few"], "x": weeks, "y": shaky,
            "mode": "markers", "marker": {"color": GREY, "size": 7, "symbol": "circle-open"},
            "error_y": _whiskers(points, shaky, GREY),
            "customdata": custom,
            "hovertemplate": hover.replace("<extra>", " (" + labels["too_few"] + ")<extra>"),
            "meta": {"role": "too_few"},
        },
        {
            "type": "scatter", "name": labels["threshold"],
            "x": [weeks[0], weeks[-1]] if weeks else [], "y": [threshold, threshold]
            if weeks else [],
            "mode": "lines", "line": {"color": RED, "width": 1.5, "dash": "dash"},
            "hovertemplate": labels["threshold"] + " %{y:.2f}<extra></extra>",
            "meta": {"role": "threshold", "value": threshold},
        },
    ]
    shown_weeks = set(weeks)
    for o in overlays:
        o_points = [p for p in _drawn_points(o.points) if p.x in shown_weeks]
        data.append({
            "type": "scatter", "name": plotly_text(o.name), "x": [p.x for p in o_points],
            "y": [p.value for p in o_points], "mode": "lines", "connectgaps": False,
            "line": {"color": o.color, "width": 1.5, "dash": o.dash},
            "customdata": [[p.n, p.low, p.high] for p in o_points],
            "hovertemplate": _hover({**labels, "value": plotly_text(o.name)}, ".2f"),
            "meta": {"role": "overlay"},
        })
    values = [v for p in points for v in (p.low, p.value) if v is not None]
    low = min([threshold, *values]) if values else threshold
    floor = max(0.0, min(low - 0.05, 0.8))
    cross = floor + 0.04 * (1.02 - floor)
    if any(p.value is None and p.n > 0 for p in points):
        data.append({
            "type": "scatter", "name": labels.get("unknown", labels["too_few"]), "x": weeks,
            # Just above the axis' floor, clear of the week labels below it.
            "y": [cross if p.value is None and p.n > 0 else None for p in points],
            "mode": "markers", "marker": {"color": GREY, "size": 8, "symbol": "x-thin-open"},
            "cliponaxis": False,  # on the axis' floor: drawn whole, not cut in half
            "customdata": [[p.n] for p in points],
            "hovertemplate": "%{x}<br>"
            + labels.get("unknown_why", labels.get("unknown", labels["too_few"]))
            + "<br>n = %{customdata[0]}<extra></extra>",
            "meta": {"role": "unknown"},
        })
    layout = _layout(height=160 if compact else 360, separators=separators, y_title=labels["y"],
                     y_range=[floor, 1.02], percent=False, compact=compact, categories=weeks)
    shapes: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    for week, label, detail in changes:
        if week not in weeks:
            continue
        shapes.append({
            "type": "line", "xref": "x", "yref": "paper", "x0": week, "x1": week, "y0": 0,
            "y1": 1, "line": {"color": AMBER, "width": 1.5, "dash": "dot"},
        })
        notes.append(_change_note(week, label, detail, index=weeks.index(week),
                                  weeks=len(weeks), row=len(notes) % 2))
    if shapes:
        layout["shapes"] = shapes
        layout["annotations"] = [] if compact else notes
        rows = min(len(notes), 2)
        layout["margin"]["t"] = 10 if compact else 14 + 16 * rows
    return {"data": data, "layout": layout, "config": dict(config)}


def _change_note(week: str, label: str, detail: str, *, index: int, weeks: int, row: int
                 ) -> dict[str, Any]:
    """The short label above a change's line, running from the line towards the middle of the
    chart (left of a line in the right half, right of one in the left half), so that it never
    sticks out past the chart's edge nor makes Plotly widen the axis; the detail (who changed
    what from what to what) is its hover. Consecutive notes alternate between two rows, so that
    two changes close together do not print over each other."""
    return {
        "x": week, "xref": "x", "y": 1, "yref": "paper", "yanchor": "bottom",
        "yshift": 16 * row, "xanchor": "right" if 2 * index >= weeks - 1 else "left",
        "text": label, "hovertext": detail or label, "showarrow": False,
        "font": {"size": 10, "color": AMBER}, "name": "change",
    }


@dataclass(frozen=True, slots=True)
class LegendEntry:
    """One line of a chart's legend written beside it (the small charts, which have no room
    for Plotly's own): the trace's name and how it is drawn."""

    name: str  # plain text, to be escaped where it is rendered
    kind: str  # "line", "band", "marker" or "change" (a vertical line at a week)
    color: str
    dash: str = "solid"  # of a line: "solid", "dash", "dot"
    symbol: str = ""  # of a marker: Plotly's symbol name


def chart_legend(figure: Mapping[str, Any], *, change_label: str = "") -> list[LegendEntry]:
    """The legend of a figure built here: an entry for each trace that draws something (a
    name shown once), in the order drawn, and for the change lines when there are any."""
    entries: list[LegendEntry] = []
    seen: set[str] = set()
    for trace in figure["data"]:
        if not any(y is not None for y in trace.get("y", ())):
            continue
        name = unescape(str(trace.get("name", "")))
        if not name or name in seen:
            continue
        seen.add(name)
        line, marker = trace.get("line", {}), trace.get("marker", {})
        if trace.get("fill"):
            entries.append(LegendEntry(name, "band", str(trace.get("fillcolor", BAND))))
        elif "lines" in trace.get("mode", ""):
            entries.append(LegendEntry(name, "line", str(line.get("color", INK)),
                                       str(line.get("dash", "solid"))))
        else:
            entries.append(LegendEntry(name, "marker", str(marker.get("color", INK)),
                                       symbol=str(marker.get("symbol", "circle"))))
    if change_label and figure["layout"].get("shapes"):
        entries.append(LegendEntry(change_label, "change", AMBER, "dot"))
    return entries


@dataclass(frozen=True, slots=True)
class Series:
    """A named line of shares (0-1) per week; points may be None (no data)."""

    name: str
    points: Sequence[Point]
    color: str
    dash: str = "solid"


def shares_figure(
    series: Sequence[Series], *, labels: Mapping[str, str], separators: str = SEPARATORS["de"],
    config: Mapping[str, Any] = CONFIG,
) -> dict[str, Any]:
    """Shares over the weeks (below the action threshold, flagged, abstentions), in percent.

    Too-few points of an estimated share are left out of its line (grey points instead), like
    on the trend chart; every point of an estimated share (below the threshold, abstentions)
    has its 95 % interval drawn as whiskers. `labels`: "y", "too_few".
    """
    labels = _drawn_labels(labels)
    # From the first week with data in any series on, as on the trend chart beside it (ISO
    # week labels sort as the weeks do).
    starts = [p.x for s in series for p in _from_first_data(s.points)[:1]
              if p.n > 0 or p.value is not None]
    start = min(starts, default=None)
    series = [replace(s, name=plotly_text(s.name), points=_drawn_points(
        [p for p in s.points if start is None or p.x >= start] or s.points[-1:]))
        for s in series]
    data = []
    for s in series:
        weeks = [p.x for p in s.points]
        custom = [[p.n, p.low, p.high] for p in s.points]
        # An estimated share carries its interval as whiskers, as on the trend chart; a
        # counted one (the flagged share) has none to draw.
        estimated = any(p.low is not None and p.high is not None for p in s.points)
        hover = ("%{x}<br>" + s.name + " %{y:.1%}"
                 + ("<br>95 % %{customdata[1]:.1%}–%{customdata[2]:.1%}" if estimated else "")
                 + "<br>n = %{customdata[0]}")
        line_y = [p.value if not p.too_few else None for p in s.points]
        trace: dict[str, Any] = {
            "type": "scatter", "name": s.name, "x": weeks, "y": line_y,
            "mode": "lines+markers", "connectgaps": False,
            "line": {"color": s.color, "width": 2, "dash": s.dash},
            "marker": {"color": s.color, "size": 6}, "customdata": custom,
            "hovertemplate": hover + "<extra></extra>",
            "meta": {"role": "share"},
        }
        if estimated:
            trace["error_y"] = _whiskers(s.points, line_y, s.color)
        data.append(trace)
        if any(p.too_few and p.value is not None for p in s.points):
            grey_y = [p.value if p.too_few else None for p in s.points]
            grey: dict[str, Any] = {
                "type": "scatter", "name": f"{s.name} ({labels['too_few']})", "x": weeks,
                "y": grey_y, "mode": "markers",
                "marker": {"color": GREY, "size": 6, "symbol": "circle-open"},
                "customdata": custom, "showlegend": False,
                "hovertemplate": hover + " (" + labels["too_few"] + ")<extra></extra>",
                "meta": {"role": "too_few"},
            }
            if estimated:
                grey["error_y"] = _whiskers(s.points, grey_y, GREY)
            data.append(grey)
    weeks = [p.x for p in series[0].points] if series else []
    layout = _layout(height=300, separators=separators, y_title=labels["y"], y_range=None,
                     percent=True, compact=False, categories=weeks)
    layout["yaxis"]["rangemode"] = "tozero"
    return {"data": data, "layout": layout, "config": dict(config)}


@dataclass(frozen=True, slots=True)
class Bar:
    """One bucket of a cause: its label and estimate."""

    label: str
    value: float | None
    low: float | None
    high: float | None
    n: int
    too_few: bool


def buckets_figure(
    bars: Sequence[Bar], *, threshold: float, labels: Mapping[str, str],
    separators: str = SEPARATORS["de"], config: Mapping[str, Any] = CONFIG,
) -> dict[str, Any]:
    """Faithfulness per bucket (e.g. best-chunk similarity) as bars with 95 % error bars, the
    action threshold across; too-few buckets grey. `labels`: "value", "threshold", "x", "y".

    Every bucket given keeps its place on the axis, as its row does in the table beside the
    chart; one without an estimate has no bar there (and no hover), not a missing category.
    """
    labels = _drawn_labels(labels)
    shown = [replace(b, label=plotly_text(b.label)) for b in bars]
    xs = [b.label for b in shown]
    data = [
        {
            "type": "bar", "name": labels["value"], "x": xs, "y": [b.value for b in shown],
            "marker": {"color": [GREY if b.too_few else BLUE for b in shown]},
            "error_y": {
                "type": "data", "symmetric": False, "color": INK, "thickness": 1,
                "array": [_above(b) for b in shown],
                "arrayminus": [_below(b) for b in shown],
            },
            "customdata": [[b.n, b.low, b.high] for b in shown],
            "hovertemplate": _hover(labels, ".2f"),
            "meta": {"role": "estimate"},
        },
        {
            "type": "scatter", "name": labels["threshold"], "x": [xs[0], xs[-1]] if xs else [],
            "y": [threshold, threshold] if xs else [], "mode": "lines",
            "line": {"color": RED, "width": 1.5, "dash": "dash"},
            "hovertemplate": labels["threshold"] + " %{y:.2f}<extra></extra>",
            "meta": {"role": "threshold", "value": threshold},
        },
    ]
    layout = _layout(height=260, separators=separators, y_title=labels["y"], y_range=[0, 1.02],
                     percent=False, compact=False)
    layout["xaxis"]["title"] = {"text": labels["x"]}
    # Every bucket labelled (the browser thins a week axis to its width, not this one: Plotly
    # angles labels that would overlap).
    layout["xaxis"]["nticks"] = max(1, len(xs))
    del layout["xaxis"]["tickangle"]  # unset: Plotly angles labels that would overlap
    layout["showlegend"] = False
    layout["bargap"] = 0.35
    return {"data": data, "layout": layout, "config": dict(config)}
