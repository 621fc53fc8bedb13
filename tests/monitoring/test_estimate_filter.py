"""The dashboard's estimate: two decimals, three where two would print it on the action line
it lies under or over (`shown_digits`, the `estimate_value` tag)."""

import pytest
from django.template import Context, Template
from django.utils import translation

from monitoring.domain.statistics import shown_digits


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
