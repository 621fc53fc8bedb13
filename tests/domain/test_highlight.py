"""Splitting an answer into plain and highlighted pieces (dashboard.domain.highlight)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dashboard.domain.highlight import Segment, segments

TEXT = "Der Behälter muss alle 5 Jahre geprüft werden."
# Offsets in TEXT: "Der" 0-3, "Behälter" 4-12, "muss" 13-17, "5" 23-24, "Jahre" 25-30.


def span(start, end, p=0.2):
    return {
        "token": TEXT[start:end] if 0 <= start <= end else "?",
        "probability": p,
        "position": start,
        "end": end,
    }


# (id, text, spans, expected segments as (text, probability or None)).
CASES = [
    ("no spans", TEXT, [], [(TEXT, None)]),
    ("empty text, no spans", "", [], []),
    (
        "one span in the middle",
        TEXT,
        [span(23, 24, 0.2)],
        [("Der Behälter muss alle ", None), ("5", 0.2), (" Jahre geprüft werden.", None)],
    ),
    (
        "span at the very start",
        TEXT,
        [span(0, 3, 0.1)],
        [("Der", 0.1), (" Behälter muss alle 5 Jahre geprüft werden.", None)],
    ),
    (
        "span at the very end",
        TEXT,
        [span(39, 46, 0.3)],
        [("Der Behälter muss alle 5 Jahre geprüft ", None), ("werden.", 0.3)],
    ),
    (
        "span covering the whole text",
        "Hamburg",
        [{"position": 0, "end": 7, "probability": 0.4}],
        [("Hamburg", 0.4)],
    ),
    (
        "two spans, given out of order, come out in text order",
        TEXT,
        [span(25, 30, 0.3), span(4, 12, 0.1)],
        [
            ("Der ", None),
            ("Behälter", 0.1),
            (" muss alle 5 ", None),
            ("Jahre", 0.3),
            (" geprüft werden.", None),
        ],
    ),
    (
        "adjacent spans stay two marks with no empty piece between",
        "AB12",
        [
            {"position": 0, "end": 2, "probability": 0.1},
            {"position": 2, "end": 4, "probability": 0.2},
        ],
        [("AB", 0.1), ("12", 0.2)],
    ),
    (
        "overlapping span is skipped, the first one (by start) is kept",
        TEXT,
        [span(4, 12, 0.1), span(8, 17, 0.2)],
        [("Der ", None), ("Behälter", 0.1), (" muss alle 5 Jahre geprüft werden.", None)],
    ),
    (
        "span nested inside another is skipped",
        TEXT,
        [span(4, 17, 0.1), span(5, 7, 0.2)],
        [("Der ", None), ("Behälter muss", 0.1), (" alle 5 Jahre geprüft werden.", None)],
    ),
    (
        "duplicate span is shown once",
        TEXT,
        [span(23, 24, 0.2), span(23, 24, 0.2)],
        [("Der Behälter muss alle ", None), ("5", 0.2), (" Jahre geprüft werden.", None)],
    ),
    (
        "span past the end is skipped",
        "kurz",
        [{"position": 2, "end": 9, "probability": 0.1}],
        [("kurz", None)],
    ),
    (
        "span starting past the end is skipped",
        "kurz",
        [{"position": 10, "end": 12, "probability": 0.1}],
        [("kurz", None)],
    ),
    (
        "negative start is skipped",
        "kurz",
        [{"position": -2, "end": 2, "probability": 0.1}],
        [("kurz", None)],
    ),
    ("backwards span is skipped", TEXT, [span(12, 4)], [(TEXT, None)]),
    ("empty span is skipped", TEXT, [span(4, 4)], [(TEXT, None)]),
    (
        "a bad span does not cost the good one after it",
        TEXT,
        [span(30, 25), span(500, 501), span(23, 24, 0.2)],
        [("Der Behälter muss alle ", None), ("5", 0.2), (" Jahre geprüft werden.", None)],
    ),
    (
        "missing or non-integer offsets are skipped, whatever their type",
        TEXT,
        [
            {"probability": 0.1},
            {"position": "4", "end": "12", "probability": 0.1},
            {"position": None, "end": 3},
            {"position": 4.0, "end": 12.0},
            span(23, 24, 0.2),
        ],
        [("Der Behälter muss alle ", None), ("5", 0.2), (" Jahre geprüft werden.", None)],
    ),
    (
        "boolean offsets and a probability that is not a number are skipped",
        TEXT,
        [
            {"position": True, "end": 3, "probability": 0.1},
            {"position": 4, "end": 12, "probability": "niedrig"},
            {"position": 13, "end": 17, "probability": None},
            span(23, 24, 0.2),
        ],
        [("Der Behälter muss alle ", None), ("5", 0.2), (" Jahre geprüft werden.", None)],
    ),
    (
        "offsets count characters, not UTF-8 bytes",
        "größe Öl",
        [{"position": 6, "end": 8, "probability": 0.25}],
        [("größe ", None), ("Öl", 0.25)],
    ),
    (
        "line breaks stay in the plain pieces",
        "Zeile eins\nZeile 2",
        [{"position": 17, "end": 18, "probability": 0.3}],
        [("Zeile eins\nZeile ", None), ("2", 0.3)],
    ),
]


@pytest.mark.parametrize(
    ("text", "spans", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_segments(text, spans, expected):
    result = segments(text, spans)
    assert [(s.text, s.probability) for s in result] == expected
    assert "".join(s.text for s in result) == text


def test_probability_is_a_float_and_plain_pieces_have_none():
    result = segments("Am 3. Mai", [{"position": 3, "end": 4, "probability": 1}])
    assert result == [Segment("Am "), Segment("3", 1.0), Segment(". Mai")]
    assert isinstance(result[1].probability, float)


def test_input_order_of_spans_is_not_mutated():
    spans = [span(25, 30), span(4, 12)]
    segments(TEXT, spans)
    assert [s["position"] for s in spans] == [25, 4]


span_strategy = st.fixed_dictionaries(
    {
        "position": st.integers(min_value=-5, max_value=60),
        "end": st.integers(min_value=-5, max_value=60),
        "probability": st.floats(min_value=0, max_value=1),
    }
)


@given(text=st.text(max_size=50), spans=st.lists(span_strategy, max_size=8))
def test_text_is_always_rebuilt_exactly_and_marks_never_overlap(text, spans):
    result = segments(text, spans)
    assert "".join(s.text for s in result) == text
    assert all(s.text for s in result), "no empty pieces"
    marked = {(s["position"], s["end"]) for s in spans}
    pos = 0
    for s in result:
        if s.probability is not None:
            assert (pos, pos + len(s.text)) in marked
        pos += len(s.text)
