"""Text from outside is never markup in a chart (issue 21, point 8).

Plotly draws a subset of HTML in every text it renders (`<a href>`, `<b>`, `<span style>`, ...)
and fills `%{...}` in hover templates; it decodes `&amp; &lt; &gt;` and numeric entities in the
text between tags. So a model name, a week label or any other string from outside must reach
the figure as entities, never as tags or template expressions. Each figure is built here with
hostile text in every string it takes, and the whole figure dict is walked.
"""

import re
from collections.abc import Iterator
from typing import Any

import plotly.graph_objects as go
import pytest

from common.domain.plotly_text import plotly_text
from dashboard.domain import charts
from dashboard.domain.charts import Bar, Point, Series
from review.domain import charts as review_charts

LINK = '<a href="https://evil.example">x</a>'
SCRIPT = "<script>alert(1)</script>"
TEMPLATE = "%{y}"
EVIL = f"{LINK} {SCRIPT} {TEMPLATE} & 'q'"
ESCAPED_LINK = "&lt;a href=&#34;https://evil.example&#34;&gt;x&lt;/a&gt;"

# Plotly's own decoding (svg_text_utils.convertEntities of plotly.js 4): a few named entities
# and any numeric one; everything else stays as written.
_PLOTLY_NAMED = {"mu": "μ", "amp": "&", "lt": "<", "gt": ">", "nbsp": "\xa0", "times": "×",
                 "plusmn": "±", "deg": "°"}
_ENTITY = re.compile(r"&(#\d+|#x[\da-fA-F]+|[a-z]+);")
# Plotly's hover template expressions (Lib.TEMPLATE_STRING_REGEX).
_TEMPLATE_EXPRESSION = re.compile(r"%{([^\s%{}:]*)([:|\|][^}]*)?}")
# What the charts' own hover templates may refer to.
_OWN_EXPRESSIONS = {"x", "y", "text", "customdata[0]", "customdata[1]", "customdata[2]"}
_TAG = re.compile(r"<[^<>]*>")
_OWN_TAGS = {"<br>", "<extra>", "</extra>"}


def plotly_decoded(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        inner = match.group(1)
        if inner.startswith("#x"):
            return chr(int(inner[2:], 16))
        if inner.startswith("#"):
            return chr(int(inner[1:]))
        return _PLOTLY_NAMED.get(inner, match.group(0))
    return _ENTITY.sub(one, text)


def strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string anywhere in a figure dict, with where it is."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from strings(item, f"{path}[{i}]")


def assert_no_outside_markup(figure: dict[str, Any]) -> list[str]:
    """No tag but the charts' own, no template expression but the charts' own; returns the
    strings that hold the escaped hostile link (there must be some)."""
    escaped = []
    for path, text in strings(figure):
        lowered = text.lower()
        assert "<a" not in lowered and "<script" not in lowered, (path, text)
        assert TEMPLATE not in text, (path, text)
        assert set(_TAG.findall(text)) <= _OWN_TAGS, (path, text)
        names = {m.group(1) for m in _TEMPLATE_EXPRESSION.finditer(text)}
        assert names <= _OWN_EXPRESSIONS, (path, text)
        if ESCAPED_LINK in text:
            escaped.append(path)
    return escaped


def valid(figure: dict[str, Any]) -> None:
    go.Figure(figure["data"], figure["layout"])


@pytest.mark.parametrize("text", [
    EVIL, LINK, SCRIPT, TEMPLATE, "plain judge-x v2", "", "&lt; already an entity &amp;",
    "100 % %{customdata[0]} {answer}", "<b>fett</b><br>", "ümlaut – ≥ 0,9 &#60;", "a\"b'c",
])
def test_plotly_shows_the_escaped_text_literally(text: str) -> None:
    shown = plotly_text(text)
    assert "<" not in shown and ">" not in shown, "no tag can start"
    assert "%{" not in shown, "no template expression can start"
    assert '"' not in shown and "'" not in shown
    # Only entities Plotly decodes, so what it draws is the text as it came.
    for match in _ENTITY.finditer(shown):
        assert match.group(1).startswith("#") or match.group(1) in _PLOTLY_NAMED, shown
    assert plotly_decoded(shown) == text


def test_plain_words_stay_as_they_are() -> None:
    assert plotly_text("Prüfer: judge-x v2") == "Prüfer: judge-x v2"
    assert plotly_text("2026-W48") == "2026-W48"


def test_trend_figure_escapes_judge_changes_weeks_and_labels() -> None:
    week = f"2026-W01 {EVIL}"
    points = [Point(week, 0.9, 0.85, 0.95, 40, False), Point("2026-W02", None, None, None, 3,
                                                                  True)]
    labels = {key: f"{key} {EVIL}" for key in
              ("value", "band", "too_few", "threshold", "y", "unknown")}
    figure = charts.trend_figure(points, threshold=0.85, labels=labels,
                                 changes=[(week, f"Prüfer {EVIL}", f"Prüfer: {EVIL} v2")])
    valid(figure)
    escaped = assert_no_outside_markup(figure)
    [note] = figure["layout"]["annotations"]
    assert note["text"] == plotly_text(f"Prüfer {EVIL}")
    assert note["hovertext"] == plotly_text(f"Prüfer: {EVIL} v2")
    assert plotly_decoded(note["hovertext"]) == f"Prüfer: {EVIL} v2", "shown as it came"
    # The change still finds its week, and the shape sits on the same (escaped) category.
    [shape] = figure["layout"]["shapes"]
    assert shape["x0"] == plotly_text(week) in figure["layout"]["xaxis"]["categoryarray"]
    assert any(".annotations" in p for p in escaped)
    assert any(".name" in p for p in escaped)
    assert any(".hovertemplate" in p for p in escaped)
    assert any(p.endswith(".x[0]") for p in escaped), "the week on the axis"


def test_compact_trend_and_empty_trend_stay_clean() -> None:
    figure = charts.trend_figure([Point(EVIL, 0.9, 0.8, 1.0, 5, False)], threshold=0.5,
                                 labels={k: EVIL for k in
                                         ("value", "band", "too_few", "threshold", "y")},
                                 changes=[(EVIL, EVIL, EVIL)], compact=True)
    assert_no_outside_markup(figure)
    assert_no_outside_markup(charts.trend_figure([], threshold=0.5, labels={
        k: EVIL for k in ("value", "band", "too_few", "threshold", "y")}))


def test_shares_figure_escapes_series_names_weeks_and_labels() -> None:
    points = [Point(EVIL, 0.2, 0.1, 0.3, 20, False), Point("2026-W02", 0.4, 0.1, 0.6, 4, True)]
    figure = charts.shares_figure([Series(EVIL, points, charts.RED)],
                                  labels={"y": EVIL, "too_few": EVIL})
    valid(figure)
    escaped = assert_no_outside_markup(figure)
    assert figure["data"][0]["name"] == plotly_text(EVIL)
    assert any(".yaxis.title.text" in p for p in escaped)
    assert any(".categoryarray" in p for p in escaped)


def test_buckets_figure_escapes_bar_labels_and_labels() -> None:
    figure = charts.buckets_figure(
        [Bar(EVIL, 0.6, 0.5, 0.7, 30, False), Bar("< 0,5", 0.9, 0.8, 1.0, 8, True)],
        threshold=0.85, labels={"value": EVIL, "threshold": EVIL, "x": EVIL, "y": EVIL},
    )
    valid(figure)
    escaped = assert_no_outside_markup(figure)
    bar = figure["data"][0]
    assert bar["x"] == [plotly_text(EVIL), "&lt; 0,5"]
    assert [plotly_decoded(x) for x in bar["x"]] == [EVIL, "< 0,5"]
    assert any(".xaxis.title.text" in p for p in escaped)


def test_calibration_scatter_escapes_weeks_and_labels() -> None:
    points = [review_charts.ScatterPoint(1, EVIL, 1.0, 0.5, "/answers/1/"),
              review_charts.ScatterPoint(2, "2026-W02", 0.5, 0.5, "/answers/2/")]
    labels = {key: f"{key} {EVIL}" for key in ("x", "y", "diagonal", "threshold", "legend")}
    labels["hover"] = f"Antwort {{answer}} {EVIL}"
    figure = review_charts.calibration_scatter(points, action_threshold=0.8, labels=labels)
    escaped = assert_no_outside_markup(figure)
    assert plotly_text(EVIL) in [t["name"] for t in figure["data"]]
    assert any(".annotations" in p for p in escaped)
    assert any(".legend.title.text" in p for p in escaped)
    # The hover still names the answer by its id from customdata.
    assert all("%{customdata[0]}" in t["hovertemplate"] for t in figure["data"]
               if "hovertemplate" in t)


def test_weekly_bias_chart_escapes_weeks_and_labels() -> None:
    rows = [review_charts.WeekBias(EVIL, 6, 0.1, -0.1, 0.3, 0.2, False),
            review_charts.WeekBias("2026-W02", 2, 0.2, None, None, 0.3, True)]
    labels = {key: f"{key} {EVIL}" for key in ("bias", "mae", "week", "difference", "too_few")}
    figure = review_charts.weekly_bias_chart(rows, labels=labels)
    escaped = assert_no_outside_markup(figure)
    assert figure["data"][0]["x"][0] == plotly_text(EVIL)
    assert any(".text[1]" in p for p in escaped), "the too-few note in the hover text"
