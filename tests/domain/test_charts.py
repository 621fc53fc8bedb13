"""The dashboard's Plotly figures (dashboard.domain.charts): what each trace holds, checked on
tables of weeks, and that Plotly itself accepts every figure."""

import math

import plotly.graph_objects as go
import pytest

from common.domain.plotly import plotly_config
from dashboard.domain import charts
from dashboard.domain.charts import Bar, Point, Series
from review.domain import charts as review_charts

LABELS = {
    "value": "Treue (Schätzung)", "band": "95-%-Intervall", "too_few": "zu wenige geprüft",
    "threshold": "Handlungsschwelle", "y": "Treue",
}


def P(week: int, value: float | None, n: int = 40, too_few: bool = False,
      spread: float = 0.05) -> Point:
    low = None if value is None else value - spread
    high = None if value is None else min(1.0, value + spread)
    return Point(f"2026-W{week:02d}", value, low, high, n, too_few)


def trace(figure: dict, role: str) -> dict:
    found = [t for t in figure["data"] if t["meta"]["role"] == role]
    assert len(found) == 1, role
    return found[0]


def valid(figure: dict) -> None:
    """Plotly validates every attribute; an unknown one or a wrong type raises."""
    go.Figure(figure["data"], figure["layout"])


WEEKS = [
    # (points, estimate ys, too-few ys)
    ([P(1, 0.9), P(2, 0.8), P(3, 0.95)], [0.9, 0.8, 0.95], [None, None, None]),
    ([P(1, 0.9), P(2, 0.7, n=4, too_few=True), P(3, 0.95)], [0.9, None, 0.95],
     [None, 0.7, None]),
    ([P(1, 0.9), P(2, None, n=0, too_few=True), P(3, 0.85)], [0.9, None, 0.85],
     [None, None, None]),
    ([P(1, 0.6, n=3, too_few=True)], [None], [0.6]),
]


@pytest.mark.parametrize(("points", "estimate", "too_few"), WEEKS)
def test_trend_has_one_point_per_week_and_greys_the_too_few(
    points: list[Point], estimate: list, too_few: list
) -> None:
    figure = charts.trend_figure(points, threshold=0.85, labels=LABELS)
    valid(figure)
    weeks = [p.x for p in points]
    line, grey = trace(figure, "estimate"), trace(figure, "too_few")
    assert line["x"] == weeks and grey["x"] == weeks
    assert line["y"] == estimate
    assert grey["y"] == too_few
    assert line["connectgaps"] is False, "no line is drawn across a too-few week"
    # Every point carries its n (and interval) for the hover text.
    assert [c[0] for c in line["customdata"]] == [p.n for p in points]
    assert "n = %{customdata[0]}" in line["hovertemplate"]
    # The weeks stay in order whichever trace names them first (the band skips some).
    assert figure["layout"]["xaxis"]["categoryarray"] == weeks
    assert figure["layout"]["xaxis"]["categoryorder"] == "array"


def test_the_x_axis_spans_the_data_not_the_empty_weeks_before_it() -> None:
    # A 26-week range chosen for a use case that has answers since week 41 only.
    points = [P(w, None, n=0, too_few=True) for w in range(20, 41)]
    points += [P(41, 0.9), P(42, None, n=0, too_few=True), P(43, 0.8, n=5, too_few=True)]
    overlay = Series("4 Wochen", [P(w, 0.88) for w in range(20, 44)], "#000", "dot")
    figure = charts.trend_figure(points, threshold=0.85, labels=LABELS, overlays=[overlay])
    valid(figure)
    weeks = ["2026-W41", "2026-W42", "2026-W43"]  # an empty week inside the data stays
    assert figure["layout"]["xaxis"]["categoryarray"] == weeks
    for role in ("estimate", "too_few", "overlay"):
        assert trace(figure, role)["x"] == weeks, role
    assert trace(figure, "threshold")["x"] == ["2026-W41", "2026-W43"]
    # No week at all with data: the last week alone, so the chart still has an axis.
    empty = charts.trend_figure([P(w, None, n=0) for w in (1, 2, 3)], threshold=0.85,
                                labels=LABELS)
    assert empty["layout"]["xaxis"]["categoryarray"] == ["2026-W03"]


def test_every_drawn_point_has_its_interval_as_whiskers() -> None:
    # A lone week between gaps has no band (a run of one has no area): its whiskers show it.
    points = [P(1, 0.9, spread=0.04), P(2, None, n=0), P(3, 0.7, n=4, too_few=True, spread=0.25),
              P(4, None, n=0), P(5, 0.95, spread=0.1)]
    figure = charts.trend_figure(points, threshold=0.85, labels=LABELS)
    valid(figure)
    for role, shown in (("estimate", {0, 4}), ("too_few", {2})):
        t = trace(figure, role)
        bars = t["error_y"]
        assert bars["type"] == "data" and bars["symmetric"] is False
        for i, p in enumerate(points):
            if i in shown:
                assert t["y"][i] + bars["array"][i] == pytest.approx(p.high), (role, i)
                assert t["y"][i] - bars["arrayminus"][i] == pytest.approx(p.low), (role, i)
            else:
                assert t["y"][i] is None
                assert bars["array"][i] is None and bars["arrayminus"][i] is None


def test_week_labels_are_thinned_to_the_width_not_fixed() -> None:
    # A fixed count of 14 ticks overlapped at 375 px; Plotly picks the count from the width.
    figure = charts.trend_figure([P(w, 0.9) for w in range(1, 27)], threshold=0.85,
                                 labels=LABELS)
    assert "nticks" not in figure["layout"]["xaxis"]
    assert figure["layout"]["xaxis"].get("tickmode", "auto") == "auto"


def test_a_week_judged_but_without_an_estimate_is_a_grey_cross_at_the_foot() -> None:
    # Week 2: flagged answers judged, no random one, so no estimate; week 4: no answers at all.
    points = [P(1, 0.9), P(2, None, n=12, too_few=True), P(3, 0.95), P(4, None, n=0, too_few=True)]
    figure = charts.trend_figure(points, threshold=0.85, labels={
        **LABELS, "unknown": "keine", "unknown_why": "keine: eine Schicht ohne Urteil"})
    valid(figure)
    cross = trace(figure, "unknown")
    floor, top = figure["layout"]["yaxis"]["range"]
    assert cross["y"] == [None, pytest.approx(floor + 0.04 * (top - floor)), None, None]
    # A short name in the legend (it must fit a phone), the reason in the hover.
    assert cross["name"] == "keine" and "n = %{customdata[0]}" in cross["hovertemplate"]
    assert "eine Schicht ohne Urteil" in cross["hovertemplate"]
    assert [c[0] for c in cross["customdata"]] == [40, 12, 40, 0]
    # Nothing of the kind when every week judged has its estimate.
    plain = charts.trend_figure([P(1, 0.9), P(2, None, n=0)], threshold=0.85, labels=LABELS)
    assert "unknown" not in [t["meta"]["role"] for t in plain["data"]]


def test_threshold_line_spans_the_weeks() -> None:
    points = [P(w, 0.9) for w in range(1, 9)]
    figure = charts.trend_figure(points, threshold=0.85, labels=LABELS)
    line = trace(figure, "threshold")
    assert line["x"] == ["2026-W01", "2026-W08"]
    assert line["y"] == [0.85, 0.85]
    assert line["meta"]["value"] == 0.85
    assert line["name"] == "Handlungsschwelle"
    assert line["line"]["dash"] == "dash"


def test_band_covers_every_estimated_week_and_breaks_at_gaps() -> None:
    # An undecided week's interval is drawn too (issue 17: a number and its interval every
    # week, however wide); only a week without an estimate breaks the band.
    points = [P(1, 0.9), P(2, 0.8, n=2, too_few=True), P(3, None, 0), P(4, 0.95)]
    band = trace(charts.trend_figure(points, threshold=0.85, labels=LABELS), "band")
    # Two polygons: weeks 1-2 (out along the upper ends, back along the lower), then week 4.
    assert band["x"] == ["2026-W01", "2026-W02", "2026-W02", "2026-W01", None,
                         "2026-W04", "2026-W04"]
    assert [None if v is None else round(v, 9) for v in band["y"]] == [
        0.95, 0.85, 0.75, 0.85, None, 1.0, 0.9
    ]
    assert band["fill"] == "toself"
    assert band["hoverinfo"] == "skip"


def test_judge_changes_are_vertical_markers() -> None:
    points = [P(w, 0.9) for w in range(1, 5)]
    figure = charts.trend_figure(points, threshold=0.85, labels=LABELS,
                                 changes=[("2026-W03", "Prüfer gewechselt", "Prüfer: judge-y v2"),
                                          ("2025-W01", "x", "y")])
    valid(figure)
    shapes = figure["layout"]["shapes"]
    assert [(s["x0"], s["x1"], s["yref"]) for s in shapes] == [("2026-W03", "2026-W03", "paper")]
    # A short label above the line, the details in its hover.
    [note] = figure["layout"]["annotations"]
    assert (note["text"], note["hovertext"]) == ("Prüfer gewechselt", "Prüfer: judge-y v2")
    # Without changes the layout has no shapes at all.
    assert "shapes" not in charts.trend_figure(points, threshold=0.85, labels=LABELS)["layout"]


@pytest.mark.parametrize(("weeks", "changed", "anchor"), [
    (15, 15, "right"), (15, 14, "right"), (15, 8, "right"), (15, 7, "left"), (15, 1, "left"),
    (1, 1, "right"), (2, 1, "left"), (2, 2, "right"),
])
def test_a_change_note_runs_towards_the_middle_and_never_widens_the_axis(
    weeks: int, changed: int, anchor: str
) -> None:
    # Issue 20: a note centred on the last week made Plotly widen the axis to [-1.1, 19.2]
    # for weeks 0-14, and was cut off on a phone. Anchored on the side of the middle, and the
    # axis' range fixed to the weeks, neither can happen.
    points = [P(w, 0.9) for w in range(1, weeks + 1)]
    figure = charts.trend_figure(points, threshold=0.85, labels=LABELS,
                                 changes=[(f"2026-W{changed:02d}", "Einstellung geändert", "d")])
    valid(figure)
    [note] = figure["layout"]["annotations"]
    assert note["xanchor"] == anchor
    xaxis = figure["layout"]["xaxis"]
    assert xaxis["autorange"] is False and xaxis["range"] == [-0.5, weeks - 0.5]


def test_notes_of_changes_close_together_alternate_rows() -> None:
    points = [P(w, 0.9) for w in range(1, 9)]
    figure = charts.trend_figure(points, threshold=0.85, labels=LABELS, changes=[
        ("2026-W06", "Prüfer gewechselt", "a"), ("2026-W07", "Einstellung geändert", "b"),
        ("2026-W08", "Einstellung geändert", "c")])
    assert [n["yshift"] for n in figure["layout"]["annotations"]] == [0, 16, 0]
    assert figure["layout"]["margin"]["t"] >= 14 + 2 * 16, "room for both rows"


def test_every_week_chart_spans_its_weeks_exactly() -> None:
    points = [P(w, 0.9) for w in range(3, 9)]
    shares = charts.shares_figure([Series("unter", points, charts.RED)],
                                  labels={"y": "Anteil", "too_few": "zu wenige"})
    for figure in (charts.trend_figure(points, threshold=0.85, labels=LABELS), shares):
        xaxis = figure["layout"]["xaxis"]
        assert xaxis["range"] == [-0.5, len(xaxis["categoryarray"]) - 0.5] == [-0.5, 5.5]
        assert xaxis["autorange"] is False


def test_config_offers_no_cloud_and_speaks_the_page_language() -> None:
    config = plotly_config(locale="de", words={"Zoom": "Ausschnitt vergrößern"})
    assert config["displaylogo"] is False and config["showSendToCloud"] is False
    assert config["plotlyServerURL"] == ""
    assert "sendChartToCloud" in config["modeBarButtonsToRemove"]
    assert config["locale"] == "de"
    assert config["locales"]["de"]["dictionary"] == {"Zoom": "Ausschnitt vergrößern"}
    figure = charts.trend_figure([P(1, 0.9)], threshold=0.85, labels=LABELS, config=config)
    assert figure["config"] == config
    assert charts.trend_figure([P(1, 0.9)], threshold=0.85, labels=LABELS)["config"][
        "showSendToCloud"] is False, "the default too"


@pytest.mark.parametrize(("language", "separators"), [("de", ",."), ("en", ".,")])
def test_numbers_follow_the_page_language(language: str, separators: str) -> None:
    figure = charts.trend_figure([P(1, 0.9)], threshold=0.85, labels=LABELS,
                                 separators=charts.SEPARATORS[language])
    assert figure["layout"]["separators"] == separators


def test_y_axis_always_shows_the_threshold_and_every_drawn_interval() -> None:
    low = charts.trend_figure([P(1, 0.5), P(2, 0.2, too_few=True)], threshold=0.85,
                              labels=LABELS)
    lo, hi = low["layout"]["yaxis"]["range"]
    assert hi == 1.02 and lo <= 0.15, "every drawn interval is inside, an undecided one too"
    high = charts.trend_figure([P(1, 0.97, spread=0.01)], threshold=0.85, labels=LABELS)
    assert high["layout"]["yaxis"]["range"][0] < 0.85


def test_compact_trend_for_the_overview() -> None:
    figure = charts.trend_figure([P(w, 0.9) for w in range(1, 9)], threshold=0.85,
                                 labels=LABELS, compact=True,
                                 changes=[("2026-W05", "Prüfer gewechselt", "judge-y v2")])
    valid(figure)
    assert figure["layout"]["height"] < 200
    assert figure["layout"]["showlegend"] is False
    assert figure["layout"]["annotations"] == [], "no room for words; the line stays"
    assert len(figure["layout"]["shapes"]) == 1


def test_shares_span_the_weeks_with_data_in_any_series() -> None:
    below = [P(1, None, n=0), P(2, None, n=0), P(3, 0.2), P(4, 0.1)]
    flagged = [P(1, None, n=0), P(2, 0.3), P(3, 0.1), P(4, 0.2)]
    figure = charts.shares_figure(
        [Series("unter", below, charts.RED), Series("markiert", flagged, charts.AMBER)],
        labels={"y": "Anteil", "too_few": "zu wenige geprüft"},
    )
    valid(figure)
    weeks = ["2026-W02", "2026-W03", "2026-W04"]
    assert figure["layout"]["xaxis"]["categoryarray"] == weeks
    assert all(t["x"] == weeks for t in figure["data"])


def test_shares_figure_in_percent_with_grey_too_few() -> None:
    below = [P(1, 0.2), P(2, 0.3, n=5, too_few=True)]
    flagged = [P(1, 0.1), P(2, 0.12)]
    figure = charts.shares_figure(
        [Series("unter der Handlungsschwelle", below, charts.RED),
         Series("markiert", flagged, charts.AMBER, "dot")],
        labels={"y": "Anteil", "too_few": "zu wenige geprüft"},
    )
    valid(figure)
    assert figure["layout"]["yaxis"]["tickformat"] == ".0%"
    assert figure["layout"]["xaxis"]["categoryarray"] == ["2026-W01", "2026-W02"]
    names = [t["name"] for t in figure["data"]]
    assert names == ["unter der Handlungsschwelle",
                     "unter der Handlungsschwelle (zu wenige geprüft)", "markiert"]
    assert figure["data"][0]["y"] == [0.2, None]
    assert figure["data"][1]["y"] == [None, 0.3]
    assert figure["data"][2]["y"] == [0.1, 0.12]


def test_estimated_shares_draw_their_intervals_counted_ones_none() -> None:
    # Issue 20: the table gave the intervals of the share below the threshold and of the
    # abstentions, the chart drew none. Every drawn point of an estimated share has its
    # whiskers, the grey too-few points too; the flagged share is counted and has no interval.
    below = [P(1, 0.2, spread=0.05), P(2, 0.3, n=5, too_few=True, spread=0.2), P(3, None, n=0)]
    flagged = [Point(f"2026-W0{w}", v, None, None, 40, False) for w, v in ((1, .1), (2, .2),
                                                                           (3, .3))]
    figure = charts.shares_figure(
        [Series("unter", below, charts.RED), Series("markiert", flagged, charts.AMBER)],
        labels={"y": "Anteil", "too_few": "zu wenige geprüft"},
    )
    valid(figure)
    line, grey, counted = figure["data"]
    assert line["error_y"]["array"][0] == pytest.approx(0.05)
    assert line["error_y"]["array"][1:] == [None, None]
    assert line["error_y"]["arrayminus"][0] == pytest.approx(0.05)
    assert grey["error_y"]["array"][1] == pytest.approx(0.2)
    assert grey["error_y"]["arrayminus"][1] == pytest.approx(0.2)
    assert [grey["error_y"]["array"][i] for i in (0, 2)] == [None, None]
    assert "error_y" not in counted
    assert "95 %" in line["hovertemplate"] and "95 %" not in counted["hovertemplate"]


def test_buckets_figure_has_error_bars_and_the_threshold() -> None:
    bars = [Bar("<0.5", 0.58, 0.45, 0.7, 30, False), Bar("0.5–0.6", None, None, None, 0, True),
            Bar("≥0.9", 0.96, 0.9, 0.99, 8, True)]
    figure = charts.buckets_figure(bars, threshold=0.85, labels={
        "value": "Treue", "threshold": "Handlungsschwelle", "x": "Ähnlichkeit", "y": "Treue"})
    valid(figure)
    bar = trace(figure, "estimate")
    # "<" as an entity, which Plotly draws as "<" (test_chart_escaping.py).
    # Every bucket keeps its place, as its row in the table does; one without an estimate has
    # no bar and no whisker.
    assert bar["x"] == ["&lt;0.5", "0.5–0.6", "≥0.9"]
    assert bar["y"] == [0.58, None, 0.96]
    assert bar["error_y"]["array"] == pytest.approx([0.12, 0.0, 0.03])
    assert bar["error_y"]["arrayminus"] == pytest.approx([0.13, 0.0, 0.06])
    assert bar["marker"]["color"] == [charts.BLUE, charts.GREY, charts.GREY]
    assert trace(figure, "threshold")["y"] == [0.85, 0.85]
    assert trace(figure, "threshold")["x"] == ["&lt;0.5", "≥0.9"]
    # All bucket labels drawn: the browser's thinning of week labels leaves this axis alone.
    assert figure["layout"]["xaxis"]["nticks"] == 3


def test_empty_series_still_make_a_valid_figure() -> None:
    for figure in (
        charts.trend_figure([], threshold=0.85, labels=LABELS),
        charts.buckets_figure([], threshold=0.85, labels={
            "value": "Treue", "threshold": "H", "x": "x", "y": "y"}),
    ):
        valid(figure)
        assert not any(isinstance(v, float) and math.isnan(v)
                       for t in figure["data"] for v in (t.get("y") or []) if v is not None)


def test_overlays_are_lines_over_the_same_weeks() -> None:
    pooled = [P(1, 0.88), P(2, None, n=0)]
    figure = charts.trend_figure(
        [P(1, 0.9), P(2, 0.8)], threshold=0.85, labels=LABELS,
        overlays=[charts.Series("4 Wochen <b>", pooled, charts.GREY, "dot")],
    )
    valid(figure)
    (line,) = [t for t in figure["data"] if t["meta"]["role"] == "overlay"]
    assert line["y"] == [0.88, None] and line["line"]["dash"] == "dot"
    assert line["name"] == "4 Wochen &lt;b&gt;"


def test_bias_chart_draws_too_few_weeks_grey_without_a_bar() -> None:
    # Issue 20: a week of one review ("zu wenige") was a blue point on the line with a bar of
    # zero width, read as an exact bias. It is a grey open point off the lines, without
    # whiskers; the decided weeks keep theirs, and the axis spans the weeks.
    rows = [review_charts.WeekBias("2026-W01", 12, -0.05, -0.1, 0.0, 0.06, False),
            review_charts.WeekBias("2026-W02", 1, 0.0, None, None, 0.0, True),
            review_charts.WeekBias("2026-W03", 0, None, None, None, None, True)]
    figure = review_charts.weekly_bias_chart(rows, labels={
        "bias": "Abweichung", "mae": "MAE", "week": "Woche", "difference": "Δ",
        "too_few": "zu wenige Prüfungen"})
    bias, too_few, mae = figure["data"]
    assert bias["meta"]["role"] == "bias" and bias["connectgaps"] is False
    assert list(bias["y"]) == [-0.05, None]
    assert bias["error_y"]["array"][0] == pytest.approx(0.05)
    assert bias["error_y"]["array"][1] is None
    assert too_few["meta"]["role"] == "too_few"
    assert list(too_few["y"]) == [None, 0.0] and "error_y" not in too_few
    assert too_few["marker"]["symbol"] == "circle-open"
    assert list(mae["y"]) == [0.06, None]
    assert figure["layout"]["xaxis"]["range"] == [-0.5, 1.5]
    assert figure["config"]["showSendToCloud"] is False


def test_the_small_charts_legend_names_every_line_style_drawn():
    # Issue 41, point 3: the overview's small chart draws four line styles (the estimate, the
    # threshold dashed, the pooled view dotted, the experts' scale dashed) and said only
    # "gestrichelt: Handlungsschwelle". Its legend names each, as it is drawn.
    points = [P(w, 0.9, too_few=w == 43) for w in range(40, 44)]
    overlays = [Series("4 Wochen <b>", [P(w, 0.88) for w in range(40, 44)], charts.GREY, "dot"),
                Series("Fachexperten", [P(w, 0.86) for w in range(40, 44)], charts.GREEN,
                       "dash")]
    figure = charts.trend_figure(points, threshold=0.85, labels=LABELS, compact=True,
                                 overlays=overlays, changes=[("2026-W42", "neu", "Prüfer")])
    assert figure["layout"]["showlegend"] is False  # no room for Plotly's own
    legend = charts.chart_legend(figure, change_label="Prüfer gewechselt")
    by_name = {e.name: e for e in legend}
    assert [e.name for e in legend] == [
        LABELS["band"], LABELS["value"], LABELS["too_few"], LABELS["threshold"],
        "4 Wochen <b>", "Fachexperten", "Prüfer gewechselt",
    ]  # plain text again: the page escapes it
    assert (by_name[LABELS["threshold"]].kind, by_name[LABELS["threshold"]].dash) == (
        "line", "dash")
    assert by_name["4 Wochen <b>"].dash == "dot" and by_name["Fachexperten"].dash == "dash"
    assert by_name[LABELS["value"]].dash == "solid"
    assert by_name[LABELS["too_few"]].kind == "marker"
    assert by_name[LABELS["band"]].kind == "band"
    assert by_name["Prüfer gewechselt"].kind == "change"
    # A trace that draws nothing (no too-few week, no change) has no entry.
    plain = charts.trend_figure([P(w, 0.9) for w in range(40, 44)], threshold=0.85,
                                labels=LABELS, compact=True)
    names = [e.name for e in charts.chart_legend(plain, change_label="Prüfer gewechselt")]
    assert names == [LABELS["band"], LABELS["value"], LABELS["threshold"]]


BIAS_LABELS = {"bias": "Abweichung", "mae": "MAE", "week": "Woche", "difference": "Δ",
               "too_few": "zu wenige Prüfungen"}
SCATTER_LABELS = {"x": "automatisch", "y": "manuell", "diagonal": "Übereinstimmung",
                  "threshold": "Schwelle", "hover": "Antwort {answer}", "legend": "Woche",
                  "earlier": "frühere Wochen"}


def test_the_weekly_deviation_axis_fits_the_data_with_zero_and_a_minimum_span() -> None:
    # Issue 41, point 8: ±0.06 on a −1…1 axis read as a flat line.
    rows = [review_charts.WeekBias(f"2026-W{w:02d}", 20, b, b - 0.02, b + 0.02, abs(b), False)
            for w, b in ((1, 0.06), (2, -0.06), (3, 0.01))]
    figure = review_charts.weekly_bias_chart(rows, labels=BIAS_LABELS)
    valid(figure)
    low, high = figure["layout"]["yaxis"]["range"]
    assert low < -0.08 and high > 0.08  # every value and interval on the axis
    assert high - low < 0.5  # not −1…1
    # All values on one side of zero: zero still on the axis; a tiny spread: at least 0.2.
    small = [review_charts.WeekBias("2026-W01", 20, 0.03, 0.02, 0.04, 0.03, False)]
    low, high = review_charts.bias_range(small)
    assert low < 0 < high and high - low >= review_charts.BIAS_MIN_SPAN
    # Large deviations: the axis grows, but never past what a score difference can be.
    wide = [review_charts.WeekBias("2026-W01", 20, -0.9, -1.0, -0.8, 0.9, False)]
    low, high = review_charts.bias_range(wide)
    assert -1.05 <= low <= -1.0 and 0.9 <= high <= 1.05
    # Too few reviews: its bias is drawn (a grey point), its interval is not.
    few = [review_charts.WeekBias("2026-W01", 1, 0.05, -0.9, 0.9, 0.6, True)]
    low, high = review_charts.bias_range(few)
    assert low > -0.5 and high < 0.5


@pytest.mark.parametrize(("separators", "expected"), [(",.", ",."), (".,", ".,")])
def test_calibration_charts_write_numbers_in_the_pages_language(separators, expected) -> None:
    points = [review_charts.ScatterPoint(1, "2026-W01", 0.5, 0.6, "/answers/1/")]
    scatter = review_charts.calibration_scatter(points, action_threshold=0.8,
                                                labels=SCATTER_LABELS, separators=separators)
    rows = [review_charts.WeekBias("2026-W01", 20, 0.05, 0.0, 0.1, 0.05, False)]
    bias = review_charts.weekly_bias_chart(rows, labels=BIAS_LABELS, separators=separators)
    assert scatter["layout"]["separators"] == bias["layout"]["separators"] == expected


def test_the_scatters_legend_stays_short_and_above_the_plot() -> None:
    # Issue 41, point 8: fourteen weeks, each in the legend beside the plot, left the plot
    # about 100 px on a phone. The latest weeks keep a colour each, the older share one grey
    # trace (each point still names its week in the hover), and the legend is a row above.
    points = [review_charts.ScatterPoint(w * 10 + k, f"2026-W{w:02d}", 0.5, 0.5 + k / 10,
                                         f"/answers/{w * 10 + k}/")
              for w in range(1, 15) for k in range(2)]
    figure = review_charts.calibration_scatter(points, action_threshold=0.8,
                                               labels=SCATTER_LABELS)
    valid(figure)
    markers = [t for t in figure["data"] if t["mode"] == "markers"]
    assert [t["name"] for t in markers] == ["frühere Wochen", "2026-W11", "2026-W12",
                                            "2026-W13", "2026-W14"]
    earlier = markers[0]
    assert len(earlier["x"]) == 20 and earlier["marker"]["color"] == "#999"
    assert [c[2] for c in earlier["customdata"]][:2] == ["2026-W01", "2026-W01"]
    assert "%{customdata[2]}" in earlier["hovertemplate"]
    assert sum(len(t["x"]) for t in markers) == len(points)
    legend = figure["layout"]["legend"]
    assert (legend["orientation"], legend["yanchor"]) == ("h", "bottom") and legend["y"] >= 1
    # Ticks spaced by the axis' length (no fixed 0.1 step that overlaps on a phone).
    assert "dtick" not in figure["layout"]["xaxis"] and "dtick" not in figure["layout"]["yaxis"]
    # Five weeks or fewer: one trace each, as before.
    few = review_charts.calibration_scatter(points[:10], action_threshold=0.8,
                                            labels=SCATTER_LABELS)
    assert [t["name"] for t in few["data"] if t["mode"] == "markers"] == [
        f"2026-W{w:02d}" for w in range(1, 6)]
