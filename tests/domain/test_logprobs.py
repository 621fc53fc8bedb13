"""Tier 1: uncertain words from token log-probabilities (ingest.domain.logprobs)."""

import json
import math
import time
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.domain.logprobs import (
    UNALIGNED_WARNING,
    TokenLogprob,
    _align,
    _align_bytes,
    align_tokens,
    analyse_answer,
    reanalyse,
    tokens_from_openai,
)
from monitoring.domain.compact import pack_compact, unpack_compact

SURE = 0.0
LOW = -2.0  # p = 0.135


def lp(*items):
    """An OpenAI logprobs object from (token, logprob) or (token, logprob, bytes) tuples."""
    content = []
    for item in items:
        token, logprob, raw = (*item, None) if len(item) == 2 else item
        content.append({"token": token, "logprob": logprob, "bytes": raw, "top_logprobs": []})
    return {"content": content}


def words(result):
    return [(w.word, w.start, w.end) for w in result.uncertain]


# (id, answer, tokens, expected uncertain words as (word, start, end)) at threshold 0.5.
WORD_CASES = [
    (
        "decimal comma split over three tokens",
        "Die Frist beträgt 3,5 Jahre.",
        [
            ("Die", SURE),
            (" Frist", SURE),
            (" beträgt", SURE),
            (" 3", SURE),
            (",", LOW),
            ("5", SURE),
            (" Jahre", SURE),
            (".", SURE),
        ],
        [("3,5", 18, 21)],
    ),
    (
        "year with trailing full stop",
        "Gültig ab 2026.",
        [("Gültig", SURE), (" ab", SURE), (" 202", SURE), ("6", LOW), (".", LOW)],
        [("2026", 10, 14)],
    ),
    (
        "section sign with its number",
        "Geregelt in § 4 BGB.",
        [
            ("Ge", SURE),
            ("regelt", SURE),
            (" in", SURE),
            (" §", SURE),
            (" 4", LOW),
            (" BGB", SURE),
            (".", SURE),
        ],
        [("§ 4", 12, 15)],
    ),
    (
        "section sign without space and a letter",
        "Siehe §4a.",
        [("Siehe", SURE), (" §", LOW), ("4", SURE), ("a", SURE), (".", SURE)],
        [("§4a", 6, 9)],
    ),
    (
        "low lowercase continuation reports the whole noun",
        "Je nach Behältergröße.",
        [("Je", SURE), (" nach", SURE), (" Behälter", SURE), ("größe", LOW), (".", SURE)],
        [("Behältergröße", 8, 21)],
    ),
    (
        "lowercase word is not content-bearing",
        "Das ist vielleicht richtig.",
        [("Das", SURE), (" ist", SURE), (" vielleicht", -5.0), (" richtig", LOW), (".", SURE)],
        [],
    ),
    (
        "punctuation outside words is ignored",
        "Ja, Herr Müller.",
        [("Ja", SURE), (",", -5.0), (" Herr", SURE), (" Müller", SURE), (".", -5.0)],
        [],
    ),
    (
        "English proper noun and hyphenated code",
        "The deadline is March 2026 for COVID-19 reports.",
        [
            ("The", SURE),
            (" deadline", SURE),
            (" is", SURE),
            (" March", -1.0),
            (" 2026", SURE),
            (" for", SURE),
            (" COVID", SURE),
            ("-", SURE),
            ("19", LOW),
            (" reports", -5.0),
            (".", SURE),
        ],
        [("March", 16, 21), ("COVID-19", 31, 39)],
    ),
    (
        "English thousands separator and decimal point",
        "It costs 12,000.50 dollars.",
        [
            ("It", SURE),
            (" costs", SURE),
            (" 12", SURE),
            (",", SURE),
            ("000", SURE),
            (".", SURE),
            ("50", LOW),
            (" dollars", SURE),
            (".", SURE),
        ],
        [("12,000.50", 9, 18)],
    ),
    (
        "German thousands separator",
        "Es kostet 1.000 Euro.",
        [
            ("Es", SURE),
            (" kostet", SURE),
            (" 1", SURE),
            (".", SURE),
            ("000", LOW),
            (" Euro", SURE),
            (".", SURE),
        ],
        [("1.000", 10, 15)],
    ),
    (
        "hyphenated noun",
        "Bitte per E-Mail melden.",
        [
            ("Bitte", SURE),
            (" per", SURE),
            (" E", SURE),
            ("-", LOW),
            ("Mail", SURE),
            (" melden", SURE),
            (".", SURE),
        ],
        [("E-Mail", 10, 16)],
    ),
    (
        "several words in one answer, in text order",
        "Laut Anlage 2 gilt Stufe B.",
        [
            ("La", LOW),
            ("ut", SURE),
            (" Anlage", SURE),
            (" 2", LOW),
            (" gilt", LOW),
            (" Stufe", SURE),
            (" B", LOW),
            (".", SURE),
        ],
        [("Laut", 0, 4), ("2", 12, 13), ("B", 25, 26)],
    ),
    (
        "all sure",
        "Die Frist beträgt 3 Jahre.",
        [
            ("Die", SURE),
            (" Frist", -0.1),
            (" beträgt", SURE),
            (" 3", -0.3),
            (" Jahre", SURE),
            (".", SURE),
        ],
        [],
    ),
]


@pytest.mark.parametrize(
    ("answer", "tokens", "expected"),
    [case[1:] for case in WORD_CASES],
    ids=[case[0] for case in WORD_CASES],
)
def test_uncertain_words(answer, tokens, expected):
    result = analyse_answer(answer, lp(*tokens), 0.5)

    assert result.logprobs_status == "ok"
    assert words(result) == expected
    assert result.flagged is bool(expected)
    assert result.warning is None
    for word in result.uncertain:
        assert answer[word.start : word.end] == word.word


@pytest.mark.parametrize(
    ("logprobs", "expected"),
    [
        ([-0.5, -1.2, -0.8], round(math.exp(-1.2), 4)),
        ([-9999.0, SURE, SURE], 0.0),
        ([SURE, SURE, -0.69314], 0.5),
    ],
)
def test_probability_is_lowest_token_of_the_word_rounded(logprobs, expected):
    tokens = [(" Auf", logprobs[0]), ("bewahr", logprobs[1]), ("ungsfrist", logprobs[2])]
    result = analyse_answer(" Aufbewahrungsfrist", lp(*tokens), 0.9)

    assert [(w.word, w.probability) for w in result.uncertain] == [("Aufbewahrungsfrist", expected)]


@pytest.mark.parametrize(
    ("probability", "threshold", "flagged"),
    [
        (0.5, 0.5, False),  # strictly below: equal is not uncertain
        (0.4999, 0.5, True),
        (0.5, 0.5001, True),
        (1.0, 1.0, False),
        (0.0, 0.0, False),  # threshold 0 switches tier 1 off
        (0.3, 0.2, False),
        (0.1, 0.2, True),
    ],
)
def test_threshold_is_strictly_below(probability, threshold, flagged):
    logprob = -9999.0 if probability == 0 else math.log(probability)
    result = analyse_answer(
        "Frist 3 Jahre", lp(("Frist", SURE), (" 3", logprob), (" Jahre", SURE)), threshold
    )

    assert result.flagged is flagged
    assert words(result) == ([("3", 6, 7)] if flagged else [])


# The answer "Die Größe zählt." with "ö" (c3 b6) split between two tokens, in the three ways
# servers write such tokens; the low token holds the first half of "ö".
SPLIT_STYLES = [
    (
        "openai bytes: token with bytes",
        [("bytes:\\xc3", LOW, [0xC3]), ("bytes:\\xb6", SURE, [0xB6])],
    ),
    ("escape without bytes", [("\\xc3", LOW), ("\\xb6", SURE)]),
    ("replacement char without bytes", [("\ufffd", LOW), ("\ufffd", SURE)]),
    (
        "vllm: replacement char with its own bytes",
        [("\ufffd", LOW, [239, 191, 189]), ("\ufffd", SURE, [239, 191, 189])],
    ),
]


@pytest.mark.parametrize("split", [s[1] for s in SPLIT_STYLES], ids=[s[0] for s in SPLIT_STYLES])
def test_umlaut_split_across_tokens_aligns(split):
    tokens = [("Die", SURE), (" Gr", SURE), *split, ("ße", SURE), (" zählt", SURE), (".", SURE)]
    answer = "Die Größe zählt."

    result = analyse_answer(answer, lp(*tokens), 0.5)

    assert result.logprobs_status == "ok"
    assert words(result) == [("Größe", 4, 9)]
    # Both halves of "ö" belong to that character.
    assert result.compact is not None
    assert result.compact["s"][2:4] == [6, 6]
    assert result.compact["e"][2:4] == [7, 7]


@pytest.mark.parametrize(
    ("answer", "tokens", "starts", "ends"),
    [
        pytest.param(
            "Größe",
            [("Gr", None), ("\\xc3", None), ("\\xb6ße", None)],
            [0, 2, 2],
            [2, 3, 5],
            id="escape mixed with text",
        ),
        pytest.param(
            "„Zitat“",
            [("\ufffd", None), ("\ufffdZ", None), ("itat", None), ("“", None)],
            [0, 0, 2, 6],
            [1, 2, 6, 7],
            id="3-byte quote as 2+1 replacement bytes",
        ),
        pytest.param(
            "a😀b",
            [("a\ufffd", None), ("\ufffd\ufffdb", None)],
            [0, 1],
            [2, 3],
            id="4-byte emoji as 1+2 replacement bytes",
        ),
        pytest.param(
            "5 €",
            [("5", None), (" \ufffd\ufffd\ufffd", None)],
            [0, 1],
            [1, 3],
            id="one replacement char per byte (non-standard server)",
        ),
        pytest.param(
            "Wert \ufffd Ende",
            [("Wert", None), (" \ufffd", None), (" Ende", None)],
            [0, 4, 6],
            [4, 6, 11],
            id="literal U+FFFD in the answer",
        ),
        pytest.param(
            "x\\xc3y",
            [("x\\xc3", None), ("y", None)],
            [0, 5],
            [5, 6],
            id="literal backslash text in the answer",
        ),
        pytest.param(
            "bytes: 3",
            [("bytes", None), (":", None), (" 3", None)],
            [0, 5, 6],
            [5, 6, 8],
            id="the word bytes in the answer",
        ),
        pytest.param(
            "Ä",
            [("bytes:\\xc3", [0xC3]), ("bytes:\\x84", [0x84])],
            [0, 0],
            [1, 1],
            id="bytes lists win over token text",
        ),
        pytest.param(
            "Die Frist",
            [("\n\n", None), ("Die", None), (" Frist", None), ("\n", None)],
            [0, 0, 3, 9],
            [0, 3, 9, 9],
            id="tokens with whitespace the answer lost",
        ),
        pytest.param(
            " Die Frist\n",
            [("Die", None), (" Frist", None)],
            [1, 4],
            [4, 10],
            id="answer with whitespace the tokens lack",
        ),
        pytest.param("Die", [(" Die", None)], [0], [3], id="stripped answer, token with space"),
        pytest.param("", [], [], [], id="empty"),
    ],
)
def test_align_tokens_offsets(answer, tokens, starts, ends):
    objects = [TokenLogprob(t, -1.0, None if b is None else tuple(b)) for t, b in tokens]

    assert align_tokens(answer, objects) == (starts, ends)


@pytest.mark.parametrize(
    ("answer", "tokens"),
    [
        pytest.param(
            "Die Frist beträgt 3 Jahre.",
            [("Die", SURE), (" Frist", SURE), (" beträgt", SURE), (" 4", LOW), (" Jahre.", SURE)],
            id="different number",
        ),
        pytest.param("Die  Frist", [("Die", SURE), (" Frist", LOW)], id="inner whitespace differs"),
        pytest.param("Die Frist", [("Die", LOW)], id="tokens stop early"),
        pytest.param("Die", [("Die", SURE), (" Frist", LOW)], id="extra tokens"),
        pytest.param(
            "Größe",
            [
                ("Gr", SURE),
                ("bytes:\\xc3", LOW, [0xC3]),
                ("bytes:\\xb7", SURE, [0xB7]),
                ("ße", SURE),
            ],
            id="wrong byte",
        ),
        pytest.param(
            "Größe", [("Gr", SURE), ("x", LOW, [300]), ("ße", SURE)], id="byte out of range"
        ),
        pytest.param(
            "Gr e",
            [("Gr", SURE), ("\ufffd", LOW), ("e", SURE)],
            id="replacement char cannot stand for ASCII",
        ),
        pytest.param(
            "Größe",
            [("Grö", SURE), ("\ufffd\ufffd\ufffd", LOW), ("e", SURE)],
            id="three replacement chars need three bytes",
        ),
    ],
)
def test_mismatched_tokens_are_unaligned_not_errors(answer, tokens):
    result = analyse_answer(answer, lp(*tokens), 0.5)

    assert result.logprobs_status == "unaligned"
    assert result.flagged is False
    assert result.uncertain == ()
    assert result.warning == UNALIGNED_WARNING
    assert result.compact is not None
    assert result.compact["s"] is None and result.compact["e"] is None
    assert result.compact["t"] == [t[0] for t in tokens]
    assert reanalyse(answer, result.compact, 0.99) == []


@pytest.mark.parametrize(
    "logprobs",
    [
        None,
        {},
        {"content": None},
        {"content": []},
        {"refusal": None},
        {"content": [], "refusal": []},
    ],
)
def test_no_logprobs(logprobs):
    result = analyse_answer("Die Frist beträgt 3 Jahre.", logprobs, 0.5)

    assert tokens_from_openai(logprobs) is None
    assert (result.logprobs_status, result.flagged, result.uncertain) == ("none", False, ())
    assert result.warning is None and result.compact is None


def test_tokens_from_openai_keeps_bytes_and_drops_top_logprobs():
    logprobs = lp(("bytes:\\xc3", -0.25, [195]), (" Jahr", -9999.0))
    logprobs["content"][0]["top_logprobs"] = [{"token": "x", "logprob": -1.0, "bytes": [120]}]

    assert tokens_from_openai(logprobs) == [
        TokenLogprob("bytes:\\xc3", -0.25, (195,)),
        TokenLogprob(" Jahr", -9999.0, None),
    ]


def test_compact_copy_is_small_and_json_shaped():
    result = analyse_answer(
        "Ab 2026", lp(("Ab", SURE), (" 2026", -9999.0, [32, 50, 48, 50, 54])), 0.5
    )

    assert result.compact == {
        "v": 1,
        "t": ["Ab", " 2026"],
        "lp": [0.0, -9999.0],
        "s": [0, 2],
        "e": [2, 7],
    }
    assert [(w.word, w.probability) for w in result.uncertain] == [("2026", 0.0)]


REANALYSE_CASES = [
    (
        "Je nach Behältergröße gilt § 4 ab 2026.",
        [
            ("Je", -0.2),
            (" nach", -3.0),
            (" Behälter", -0.4),
            ("größe", -1.5),
            (" gilt", SURE),
            (" §", -0.9),
            (" 4", SURE),
            (" ab", SURE),
            (" 202", -2.5),
            ("6", SURE),
            (".", -4.0),
        ],
    ),
    (
        "The rate is 3.5 percent in Q2.",
        [
            ("The", -0.1),
            (" rate", SURE),
            (" is", SURE),
            (" 3", -0.6),
            (".", SURE),
            ("5", SURE),
            (" percent", -3.0),
            (" in", SURE),
            (" Q", -1.1),
            ("2", SURE),
            (".", SURE),
        ],
    ),
]


@pytest.mark.parametrize(("answer", "tokens"), REANALYSE_CASES)
@pytest.mark.parametrize("threshold", [0.05, 0.2, 0.5, 0.7, 0.9, 1.0])
def test_reanalyse_equals_analyse(answer, tokens, threshold):
    # Stored as JSON in the database: the copy must survive the round trip unchanged.
    stored = json.loads(json.dumps(analyse_answer(answer, lp(*tokens), 0.5).compact))

    assert reanalyse(answer, stored, threshold) == list(
        analyse_answer(answer, lp(*tokens), threshold).uncertain
    )


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [
        (0.9, ["Je", "Behältergröße", "§ 4", "2026"]),
        (0.5, ["Behältergröße", "§ 4", "2026"]),
        (0.3, ["Behältergröße", "2026"]),
        (0.1, ["2026"]),
        (0.05, []),
    ],
)
def test_lower_threshold_on_stored_copy_flags_fewer(threshold, expected):
    answer, tokens = REANALYSE_CASES[0]
    stored = analyse_answer(answer, lp(*tokens), 0.9).compact

    assert stored is not None
    assert [w.word for w in reanalyse(answer, stored, threshold)] == expected


@pytest.mark.timing
def test_three_hundred_tokens_analyse_fast():
    sentence = " Die Aufbewahrungsfrist für Behältergrößen beträgt 3,5 Jahre nach § 4."
    answer = (sentence * 30).strip()
    tokens = []
    for word in sentence.split(" ")[1:] * 30:
        tokens += (
            [(" " + word[:4], -0.3), (word[4:], -1.0)] if len(word) > 4 else [(" " + word, -0.1)]
        )
    logprobs = lp(*tokens)
    assert len(tokens) >= 300

    best = math.inf
    for _ in range(5):
        began = time.perf_counter()
        result = analyse_answer(answer, logprobs, 0.5)
        best = min(best, time.perf_counter() - began)

    assert result.logprobs_status == "ok"
    assert len(result.uncertain) == 90
    # Typically ~1 ms; the bound is loose so a busy CI machine does not fail it.
    assert best < 0.05


@pytest.mark.timing
@pytest.mark.parametrize(
    ("tokens", "aligned"),
    [
        pytest.param(["\ufffd"] * 1800, True, id="one replacement char per byte"),
        pytest.param(["\ufffd"] * 1799 + ["x"], False, id="mismatch at the very end"),
        pytest.param(["\ufffd\ufffd"] * 600, None, id="ambiguous pairs"),
    ],
)
def test_long_replacement_runs_stay_cheap(tokens, aligned):
    answer = "漢字" * 300  # 1800 bytes, all non-ASCII

    began = time.perf_counter()
    spans = align_tokens(answer, [TokenLogprob(t, -1.0) for t in tokens])
    elapsed = time.perf_counter() - began

    if aligned is not None:
        assert (spans is not None) is aligned
    # About 0.1 s at worst on a laptop; the search budget keeps it from growing with ambiguity.
    assert elapsed < 3.0


def test_split_characters_align_where_the_shortest_readings_fall_short():
    """Tokens of four U+FFFD, each for two characters cut into bytes: read loosely a U+FFFD is
    1-3 bytes, and taking the shortest first leaves half the answer uncovered. The search skips
    states the remaining tokens cannot finish from, so it finds the reading instead of spending
    its budget on them."""
    answer = "é" * 20_000  # 40,000 bytes, 5,000 tokens of 8 bytes each

    spans = align_tokens(answer, [TokenLogprob("\ufffd" * 4, -1.0)] * 5_000)

    assert spans is not None
    starts, ends = spans
    assert (starts[0], ends[-1]) == (0, len(answer))
    assert all(0 <= s < e <= len(answer) for s, e in zip(starts, ends, strict=True))


def test_tokens_that_cannot_cover_the_answer_stay_unaligned():
    # At most 3 bytes a U+FFFD: 100 of them cannot spell 400 bytes, nor 400 of them 100.
    assert align_tokens("é" * 200, [TokenLogprob("\ufffd", -1.0)] * 100) is None
    assert align_tokens("é" * 50, [TokenLogprob("\ufffd", -1.0)] * 400) is None


def _server_token(chunk, style):
    """A token as a server writes it when its bytes may split a character."""
    try:
        return TokenLogprob(chunk.decode(), -1.0, tuple(chunk))
    except UnicodeDecodeError:
        pass
    if style == "openai":
        return TokenLogprob("bytes:" + "".join(f"\\x{x:02x}" for x in chunk), -1.0, tuple(chunk))
    if style == "escape":
        return TokenLogprob(chunk.decode(errors="backslashreplace"), -1.0)
    return TokenLogprob(chunk.decode(errors="replace"), -1.0)


@settings(max_examples=300, deadline=None)
@given(
    core=st.text(alphabet="aeßöüÄ€„“😀 ,.3§\n", min_size=1, max_size=40).filter(
        lambda t: t == t.strip()
    ),
    pad=st.sampled_from([("", ""), (" ", ""), ("\n\n", " "), ("", "\n")]),
    cuts=st.lists(st.integers(min_value=1, max_value=200), max_size=30),
    style=st.sampled_from(["openai", "escape", "replacement"]),
)
def test_any_byte_level_split_aligns(core, pad, cuts, style):
    data = (pad[0] + core + pad[1]).encode()
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    byte_spans = list(zip(bounds, bounds[1:], strict=False))
    tokens = [_server_token(data[b:e], style) for b, e in byte_spans]

    spans = align_tokens(core, tokens)

    assert spans is not None
    starts, ends = spans
    assert (starts[0], ends[-1]) == (0, len(core))
    assert starts == sorted(starts) and ends == sorted(ends)
    if style == "replacement":
        return  # a run of U+FFFD may be split differently; coverage is what matters
    char_of = [i for i, ch in enumerate(core) for _ in ch.encode()] + [len(core)]
    size = len(core.encode())
    expected_starts, expected_ends = [], []
    for b, e in byte_spans:
        b, e = (min(max(x - len(pad[0].encode()), 0), size) for x in (b, e))
        expected_starts.append(char_of[b])
        expected_ends.append(char_of[e - 1] + 1 if e > b else char_of[b])
    assert (starts, ends) == (expected_starts, expected_ends)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet="aeßöüÄ€„“😀 ,.3§\n\t", max_size=40),
    cuts=st.lists(st.integers(min_value=0, max_value=40), max_size=30),
    with_bytes=st.sampled_from(["all", "none", "some"]),
)
def test_tokens_spelling_the_answer_align_as_their_bytes_do(text, cuts, with_bytes):
    """Tier 1's shortcut (token texts that spell the answer give their spans by length) finds
    what the byte alignment finds; with edge whitespace it is not taken."""
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    texts = [text[b:e] for b, e in zip(bounds, bounds[1:], strict=False)]
    raws: list[Sequence[int] | None] = [
        list(t.encode()) if with_bytes == "all" or (with_bytes == "some" and i % 2) else None
        for i, t in enumerate(texts)
    ]
    assert _align(text, texts, raws) == _align_bytes(text, texts, raws)


# ---------------------------------------------------------------- the stored compact copy


@given(
    st.lists(
        st.tuples(
            st.text(max_size=8),
            st.floats(max_value=0, allow_nan=False),
        ),
        max_size=40,
    )
)
def test_packed_compact_copy_unpacks_to_the_same_values(tokens):
    answer = "".join(t for t, _ in tokens)
    compact = analyse_answer(answer, lp(*tokens), 0.5).compact or {"v": 1, "t": [], "lp": []}
    data = pack_compact(compact)
    assert isinstance(data, bytes) and data[:1] != b"{"
    back = unpack_compact(data)
    assert back == compact
    # Every float keeps every bit: the tuner compares them with thresholds exactly.
    assert [math.copysign(1, v) for v in back["lp"]] == [math.copysign(1, v) for v in compact["lp"]]
    assert reanalyse(answer, back, 0.5) == reanalyse(answer, compact, 0.5)


def test_packed_copy_is_smaller_than_its_json():
    tokens = [(f" Wort{i}", -0.01 * i) for i in range(300)]
    compact = analyse_answer("".join(t for t, _ in tokens), lp(*tokens), 0.5).compact
    assert compact is not None
    assert len(pack_compact(compact)) < 0.8 * len(json.dumps(compact).encode())


@pytest.mark.parametrize("stored", [
    b'{"v": 1, "t": ["Alle", " 5"], "lp": [-0.1, -1.6], "s": [0, 4], "e": [4, 6]}',
    '{"v": 1, "t": ["Alle", " 5"], "lp": [-0.1, -1.6], "s": [0, 4], "e": [4, 6]}',
    memoryview(b'{"v": 1, "t": ["Alle", " 5"], "lp": [-0.1, -1.6], "s": [0, 4], "e": [4, 6]}'),
], ids=["bytes", "text", "memoryview"])
def test_copies_stored_as_json_still_unpack(stored):
    """Rows stored before the copy was packed hold its JSON text (the migration converts the
    column in place), SQLite may hand it back as text."""
    compact = unpack_compact(stored)
    assert compact["lp"] == [-0.1, -1.6]
    assert [w.word for w in reanalyse("Alle 5", compact, 0.5)] == ["5"]


@pytest.mark.parametrize(
    "odd", [{"t": ["\ud800"]}, {"n": 2**70}], ids=["lone surrogate", "big int"]
)
def test_what_msgpack_cannot_hold_is_kept_as_json(odd):
    compact = {"v": 1, "lp": [-0.5], **odd}
    data = pack_compact(compact)
    assert data[:1] == b"{"
    assert unpack_compact(data) == compact
