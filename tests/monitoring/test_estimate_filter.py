"""The dashboard's estimate: two decimals, three where two would print it on the action line
it lies under or over (`shown_digits`, the `estimate_value` tag); an interval that ends at its
estimate above says why (`tops_at_estimate`)."""

import pytest
from django.template import Context, Template
from django.utils import translation

from dashboard.domain.statistics.cells import Estimate, Stratum
from dashboard.domain.statistics.estimates import stratified_mean
from dashboard.domain.statistics.precision import shown_digits, tops_at_estimate
from dashboard.views.pages import _estimate_cell, _Numbers

# Ten flagged answers judged in full, 30 of 990 unflagged drawn at random.
ALL_ONE = stratified_mean([Stratum(10, [0.5] * 10, drawn=False), Stratum(990, [1.0] * 30)])
MIXED = stratified_mean([Stratum(10, [0.5] * 10, drawn=False),
                         Stratum(990, [1.0] * 27 + [0.5] * 3)])
CENSUS = stratified_mean([Stratum(10, [0.5] * 10, drawn=False), Stratum(20, [1.0] * 20)])


@pytest.mark.parametrize(("value", "threshold", "digits"), [
    (0.846, 0.85, 3),  # under the line, two decimals would say 0.85
    (0.854, 0.85, 3),  # over it
    (0.845, 0.85, 3),  # half up: 0.85, like floatformat
    (0.8449, 0.85, 2),  # rounds away from the line on its own
    (0.85, 0.85, 2),  # on it: nothing hidden
    (0.86, 0.85, 2),
    (0.846, None, 2),  # no line
    (0.8496, 0.85, 3),
])
def test_shown_digits(value, threshold, digits) -> None:
    assert shown_digits(value, threshold) == digits


def test_the_tag_reads_the_line_from_the_context_and_is_localised() -> None:
    template = Template("{% load estimates %}{% estimate_value v %}")
    with translation.override("de"):
        assert template.render(Context({"v": 0.846, "threshold": 0.85})) == "0,846"
        assert template.render(Context({"v": 0.846})) == "0,85"  # no line on this page
        assert template.render(Context({"v": 0.846, "threshold": "x"})) == "0,85"
        assert template.render(Context({"v": None, "threshold": 0.85})) == ""
    with translation.override("en"):
        assert template.render(Context({"v": 0.846, "threshold": 0.85})) == "0.846"


def test_an_interval_tops_at_its_estimate_only_where_every_drawn_answer_scored_one() -> None:
    # 0.01·0.5 + 0.99·1.0 = 0.995: the drawn part cannot be higher than 1.0.
    assert ALL_ONE.value == pytest.approx(0.995) and ALL_ONE.high == pytest.approx(0.995)
    assert tops_at_estimate(ALL_ONE)
    assert not tops_at_estimate(MIXED)  # three answers at 0.5: room above
    assert CENSUS.low == CENSUS.high == CENSUS.value  # judged in full: known, nothing to say
    assert not tops_at_estimate(CENSUS)
    assert not tops_at_estimate(Estimate(None, None, None, 0, 10, (0, 0), True))


@pytest.mark.parametrize(("language", "words"), [
    ("de", "Jede zufällig gezogene Antwort erhielt 1,0"),
    ("en", "Every randomly drawn answer scored 1.0"),
])
def test_the_pages_say_why_an_interval_tops_at_its_estimate(language, words) -> None:
    partial = Template('{% include "monitoring/_dash_estimate.html" %}')
    with translation.override(language):
        card = partial.render(Context({"e": ALL_ONE}))
        cell = str(_estimate_cell(ALL_ONE, _Numbers()))
        assert words in card and words in cell
        assert words not in partial.render(Context({"e": MIXED}))
        assert words not in str(_estimate_cell(MIXED, _Numbers()))


MARK = '<sup class="tops-at-mark"'


def test_an_interval_that_tops_at_its_estimate_is_marked_visibly() -> None:
    # Issue 41: the reason was a hover text only, which touch screens never show; the interval
    # carries a visible mark that the card's or page's footnote explains.
    from dashboard.domain.headline import JUDGE, WEEK, Headline

    partial = Template('{% include "monitoring/_dash_estimate.html" %}')
    headline = Template('{% include "monitoring/_dash_headline.html" %}')

    def as_headline(e: Estimate) -> Headline:
        return Headline(JUDGE, WEEK, "2026-W40", 1, False, e.value, e.low, e.high, e.n,
                        e.too_few, "grey")

    with translation.override("de"):
        assert MARK in partial.render(Context({"e": ALL_ONE}))
        assert MARK in str(_estimate_cell(ALL_ONE, _Numbers()))
        assert MARK in headline.render(Context({"h": as_headline(ALL_ONE)}))
        assert MARK not in partial.render(Context({"e": MIXED}))
        assert MARK not in str(_estimate_cell(MIXED, _Numbers()))
        assert MARK not in headline.render(Context({"h": as_headline(MIXED)}))
