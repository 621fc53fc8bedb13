"""Threshold tuner (dashboard.domain.tuner).

The tuner's promise is that "flagged at t" means exactly what tier 1 would decide at t, so the
equivalence with logprobs.reanalyse is tested over many generated German and English answers
and every threshold that could make a difference (each token's own probability and its
neighbouring floats).
"""

import math
import random
import time
from collections.abc import Sequence
from typing import TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dashboard.domain.statistics.lift import lift
from dashboard.domain.tuner import (
    DEFAULT_THRESHOLDS,
    TunerRow,
    threshold_table,
    threshold_table_from_counts,
)
from ingest.domain.content_probability import min_content_probability
from ingest.domain.logprobs import analyse_answer, reanalyse

SURE = 0.0


def lp(*items):
    """An OpenAI logprobs object from (token, logprob) or (token, logprob, bytes) tuples."""
    content = []
    for item in items:
        token, logprob, raw = (*item, None) if len(item) == 2 else item
        content.append({"token": token, "logprob": logprob, "bytes": raw, "top_logprobs": []})
    return {"content": content}


def compact_of(answer, logprobs):
    return analyse_answer(answer, logprobs, 0.5).compact


# (id, answer, tokens or None, expected min probability or None)
MIN_CASES = [
    (
        "decimal comma: the low comma belongs to the number",
        "Die Frist beträgt 3,5 Jahre.",
        [("Die", SURE), (" Frist", -0.1), (" beträgt", -3.0), (" 3", SURE), (",", -2.0),
         ("5", SURE), (" Jahre", SURE), (".", -5.0)],
        # "beträgt" (lowercase) and "." are not content words: min over Die, Frist, 3,5, Jahre.
        math.exp(-2.0),
    ),
    (
        "lowercase continuation of a noun counts for the noun",
        "Je nach Behältergröße.",
        [("Je", SURE), (" nach", -4.0), (" Behälter", -0.2), ("größe", -1.5), (".", SURE)],
        math.exp(-1.5),
    ),
    (
        "all content words sure",
        "Die Frist beträgt 3 Jahre.",
        [("Die", SURE), (" Frist", SURE), (" beträgt", -6.0), (" 3", SURE), (" Jahre", SURE),
         (".", SURE)],
        1.0,
    ),
    (
        "English name and code",
        "The deadline is March 2026 for COVID-19 reports.",
        [("The", -0.05), (" deadline", -9.0), (" is", SURE), (" March", -1.0), (" 2026", SURE),
         (" for", SURE), (" COVID", SURE), ("-", SURE), ("19", -0.7), (" reports", -5.0),
         (".", SURE)],
        math.exp(-1.0),
    ),
    (
        "section sign with its number",
        "Geregelt in § 4 BGB.",
        [("Ge", SURE), ("regelt", SURE), (" in", SURE), (" §", -0.3), (" 4", -0.4),
         (" BGB", SURE), (".", SURE)],
        math.exp(-0.4),
    ),
    (
        "no content word at all",
        "ja, das geht so.",
        [("ja", -3.0), (",", SURE), (" das", -2.0), (" geht", SURE), (" so", SURE), (".", SURE)],
        None,
    ),
    ("no logprobs", "Die Frist beträgt 3 Jahre.", None, None),
    (
        "unaligned tokens",
        "Die Frist beträgt 3 Jahre.",
        [("Die", SURE), (" Zeit", -3.0)],
        None,
    ),
]


@pytest.mark.parametrize(
    ("answer", "tokens", "expected"),
    [c[1:] for c in MIN_CASES],
    ids=[c[0] for c in MIN_CASES],
)
def test_min_content_probability(answer, tokens, expected):
    compact = None if tokens is None else compact_of(answer, lp(*tokens))
    result = min_content_probability(answer, compact)
    if expected is None:
        assert result is None
    else:
        assert result == expected  # exactly: the same float tier 1 compares


def test_min_content_probability_of_stored_garbage():
    answer = "Die Frist."
    assert min_content_probability(answer, {}) is None
    assert min_content_probability(answer, {"s": [0, 3], "e": [3], "lp": [-1.0, -1.0]}) is None
    assert min_content_probability(answer, {"s": None, "e": None, "lp": [-1.0]}) is None


# --- equivalence with tier 1 ----------------------------------------------------------------

GERMAN_WORDS = [
    "Die", "Frist", "beträgt", "3,5", "Jahre", "für", "Behältergröße", "gilt", "§ 4", "BGB",
    "Müller", "nach", "Anlage", "2", "Stufe", "B", "ab", "2026", "E-Mail", "Übergangsfrist",
    "ändert", "sich", "Straße", "Größe", "1.000", "Euro", "je", "Öffnungszeiten", "über",
]
ENGLISH_WORDS = [
    "The", "deadline", "is", "March", "2026", "for", "COVID-19", "reports", "It", "costs",
    "12,000.50", "dollars", "per", "year", "NASA", "said", "the", "Q3", "report", "isn't",
    "ready",
]
PUNCTUATION = [".", ",", ":", "?", "!"]
LOGPROBS = st.one_of(
    st.floats(min_value=-12.0, max_value=0.0, allow_nan=False),
    st.sampled_from([0.0, -0.0, math.log(0.5), math.log(0.3), -1e-12, -math.inf, math.nan]),
)


def tokenise(text: str, cuts: list[int]) -> list[tuple[str, list[int]]]:
    """Cut ``text``'s UTF-8 bytes at ``cuts``; a piece that splits a character is written the
    way OpenAI writes it ("bytes:\\xc3") with its bytes."""
    data = text.encode()
    bounds = sorted({0, len(data), *(c for c in cuts if 0 < c < len(data))})
    tokens = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        piece = data[a:b]
        try:
            token = piece.decode()
        except UnicodeDecodeError:
            token = "bytes:" + "".join(f"\\x{byte:02x}" for byte in piece)
        tokens.append((token, list(piece)))
    return tokens


@st.composite
def answers(draw):
    vocabulary = draw(st.sampled_from([GERMAN_WORDS, ENGLISH_WORDS]))
    words = draw(st.lists(st.sampled_from(vocabulary + PUNCTUATION), min_size=1, max_size=14))
    text = " ".join(words).replace(" .", ".").replace(" ,", ",")
    # Token boundaries: at every space (as BPE does) plus random cuts, also inside characters.
    spaces = [i for i, byte in enumerate(text.encode()) if byte == 0x20]
    extra = draw(st.lists(st.integers(0, len(text.encode())), max_size=8))
    tokens = tokenise(text, spaces + extra)
    values = draw(st.lists(LOGPROBS, min_size=len(tokens), max_size=len(tokens)))
    content = [
        {"token": token, "logprob": value, "bytes": raw, "top_logprobs": []}
        for (token, raw), value in zip(tokens, values, strict=True)
    ]
    return text, {"content": content}


def candidate_thresholds(compact) -> list[float]:
    """A grid plus every threshold at which the flag could switch: each token's probability
    and the floats just beside it."""
    grid = [k / 20 for k in range(1, 21)] + [1e-300, 0.0, -0.5]
    edges = []
    for value in compact["lp"]:
        if math.isnan(value):
            continue
        p = math.exp(min(value, 0.0))
        edges += [p, math.nextafter(p, 0.0), math.nextafter(p, 2.0)]
    return grid + [t for t in edges if t <= 1.0]


@settings(max_examples=250, deadline=None)
@given(answers())
def test_flagged_at_t_iff_min_below_t(case):
    text, logprobs = case
    compact = compact_of(text, logprobs)
    assert compact["s"] is not None, "the generator builds aligned tokens"
    lowest = min_content_probability(text, compact)
    for t in candidate_thresholds(compact):
        flagged = bool(reanalyse(text, compact, t))
        assert flagged == (lowest is not None and lowest < t), (t, lowest)


def test_equivalence_on_a_table_of_thresholds():
    # A hand-made answer whose words sit at known probabilities: 0.135 (3,5), 0.9 (Frist),
    # 0.5 exactly (Jahre); flagged exactly when t is above the lowest, 0.135.
    answer = "Die Frist beträgt 3,5 Jahre."
    compact = compact_of(
        answer,
        lp(("Die", SURE), (" Frist", math.log(0.9)), (" beträgt", -9.0), (" 3", SURE),
           (",", -2.0), ("5", SURE), (" Jahre", math.log(0.5)), (".", SURE)),
    )
    lowest = min_content_probability(answer, compact)
    assert lowest == math.exp(-2.0)
    for t, flagged in [(0.1, False), (lowest, False), (math.nextafter(lowest, 1), True),
                       (0.2, True), (0.5, True), (1.0, True)]:
        assert bool(reanalyse(answer, compact, t)) is flagged
        assert (lowest < t) is flagged


# --- threshold_table --------------------------------------------------------------------------

MIN_PROBABILITIES = [0.05, 0.15, 0.35, 0.35, 0.6, 0.95, None, None, None, None]
# (min probability, score) of the judged random-sample answers; unfaithful = score < 0.85.
RANDOM_SAMPLE = [
    (0.05, 0.2),  # bad
    (0.3, 0.5),  # bad
    (0.3, 1.0),
    (0.5, 1.0),
    (0.7, 0.8),  # bad
    (0.9, 1.0),
    (None, 1.0),
    (None, 0.4),  # bad
    (None, 1.0),
    (None, 0.85),  # exactly the line: faithful
]


# (threshold, flagged answers of the 10, sample flagged, sample flagged and unfaithful)
TABLE_CASES = [
    (0.05, 0, 0, 0),  # strictly below: 0.05 is not below 0.05
    (0.1, 1, 1, 1),
    (0.35, 2, 3, 2),  # the two answers at exactly 0.35 stay unflagged
    (0.4, 4, 3, 2),
    (0.5, 4, 3, 2),
    (0.6, 4, 4, 2),
    (0.9, 5, 5, 3),  # 0.95 is not below 0.9
    (1.0, 6, 6, 3),
]


def test_threshold_table_by_hand():
    rows = threshold_table(
        min_probabilities=MIN_PROBABILITIES,
        random_sample=RANDOM_SAMPLE,
        rate=0.1,
        weeks=2,
        calls_per_answer=5,
        unfaithful_below=0.85,
        thresholds=[t for t, *_ in TABLE_CASES],
    )
    assert [row.threshold for row in rows] == [t for t, *_ in TABLE_CASES]
    for row, (t, flagged, sample_flagged, sample_bad) in zip(rows, TABLE_CASES, strict=True):
        assert isinstance(row, TunerRow)
        assert row.flagged_share == approx_(flagged / 10), t
        # e.g. t = 0.4: (4 + 0.1 · 6)/2 weeks = 2.3 answers, × 5 = 11.5 calls a week
        assert row.judge_answers_per_week == approx_((flagged + 0.1 * (10 - flagged)) / 2), t
        assert row.judge_calls_per_week == approx_(5 * row.judge_answers_per_week), t
        # 4 of the 10 sample answers are unfaithful; the flagged ones are part of them.
        assert row.lift == lift(
            flagged_bad=sample_bad, flagged_n=sample_flagged, random_bad=4, random_n=10,
            nested=True, population_share=flagged / 10,
        ), t


def approx_(value):
    return pytest.approx(value, abs=1e-12)


def test_threshold_table_lift_by_hand():
    # t = 0.4: 2 of 3 flagged sample answers unfaithful, 2 of the 7 others. The threshold flags
    # 4 of the 10 answers (counted, not estimated): the unfaithful share of all answers is
    # 0.4 · 2/3 + 0.6 · 2/7, and the lift (2/3) / that - not (2/3)/(4/10) from the sample's mix.
    (row,) = threshold_table(
        min_probabilities=MIN_PROBABILITIES,
        random_sample=RANDOM_SAMPLE,
        rate=0.1,
        weeks=2,
        calls_per_answer=5,
        unfaithful_below=0.85,
        thresholds=[0.4],
    )
    assert (row.lift.flagged_n, row.lift.random_n) == (3, 10)
    assert row.lift.flagged_share == pytest.approx(2 / 3)
    assert row.lift.random_share == pytest.approx(0.4)
    assert row.lift.lift == pytest.approx((2 / 3) / (0.4 * 2 / 3 + 0.6 * 2 / 7))
    assert row.lift.too_few  # 3 flagged sample answers are too few to judge a trigger by


def test_default_thresholds():
    assert DEFAULT_THRESHOLDS == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    rows = threshold_table(
        min_probabilities=[], random_sample=[], rate=0.03, weeks=1, calls_per_answer=6,
        unfaithful_below=0.85,
    )
    assert [r.threshold for r in rows] == list(DEFAULT_THRESHOLDS)
    assert all(r.flagged_share is None and r.judge_answers_per_week == 0 for r in rows)
    assert all(r.lift.lift is None and r.lift.too_few for r in rows)


def brute_force(min_probabilities, random_sample, rate, weeks, calls, below, thresholds):
    rows = []
    for t in thresholds:
        flagged = sum(1 for p in min_probabilities if p is not None and p < t)
        judged = (flagged + rate * (len(min_probabilities) - flagged)) / weeks
        in_sample = [(p is not None and p < t, score < below) for p, score in random_sample]
        rows.append(
            (
                t,
                flagged / len(min_probabilities),
                judged,
                judged * calls,
                lift(
                    flagged_bad=sum(f and b for f, b in in_sample),
                    flagged_n=sum(f for f, _ in in_sample),
                    random_bad=sum(b for _, b in in_sample),
                    random_n=len(in_sample),
                    nested=True,
                    population_share=flagged / len(min_probabilities),
                ),
            )
        )
    return rows


def window(n, seed):
    rng = random.Random(seed)
    probabilities = [None if rng.random() < 0.1 else rng.random() ** 3 for _ in range(n)]
    # Ties on purpose: stored probabilities repeat (exp of the same logprob).
    probabilities += [0.5, 0.5, 0.3, 0.3]
    sample = [(p, rng.choice([1.0, 1.0, 1.0, 0.75, 0.5, 0.0])) for p in probabilities[::30]]
    return probabilities, sample


def test_threshold_table_matches_brute_force():
    probabilities, sample = window(3000, seed=7)
    thresholds = [0.0, 0.05, 0.3, 0.5, 0.51, 0.99, 1.0]
    rows = threshold_table(
        min_probabilities=probabilities, random_sample=sample, rate=0.03, weeks=4,
        calls_per_answer=6.5, unfaithful_below=0.85, thresholds=thresholds,
    )
    expected = brute_force(probabilities, sample, 0.03, 4, 6.5, 0.85, thresholds)
    assert [
        (r.threshold, r.flagged_share, r.judge_answers_per_week, r.judge_calls_per_week, r.lift)
        for r in rows
    ] == expected


@pytest.mark.timing
def test_threshold_table_is_fast_on_100k_answers():
    probabilities, sample = window(100_000, seed=11)
    # CPU time of this process: on a machine busy with other tests the wall clock would count
    # the waits for a core too.
    start = time.process_time()
    rows = threshold_table(
        min_probabilities=probabilities, random_sample=sample, rate=0.03, weeks=4,
        calls_per_answer=6, unfaithful_below=0.85,
        thresholds=[k / 100 for k in range(1, 100)],
    )
    elapsed = time.process_time() - start
    assert len(rows) == 99
    # One sort and a bisection per threshold: well under a second; a scan per threshold
    # (99 × 100k) would take several.
    assert elapsed < 0.5


@pytest.mark.parametrize(
    "kwargs",
    [dict(rate=0), dict(rate=1.5), dict(weeks=0), dict(calls_per_answer=-1),
     dict(thresholds=[math.nan])],
)
def test_threshold_table_rejects_nonsense(kwargs):
    arguments = dict(
        min_probabilities=[0.1], random_sample=[], rate=0.03, weeks=1, calls_per_answer=6,
        unfaithful_below=0.85,
    )
    with pytest.raises(ValueError):
        threshold_table(**(arguments | kwargs))


def test_a_population_share_is_for_a_nested_lift_in_0_to_1_only():
    with pytest.raises(ValueError, match="population_share"):
        lift(flagged_bad=1, flagged_n=2, random_bad=2, random_n=5, population_share=0.3)
    with pytest.raises(ValueError, match="population_share"):
        lift(flagged_bad=1, flagged_n=2, random_bad=2, random_n=5, nested=True,
             population_share=1.5)
    # With the sample's own mix as the population share it is the plain nested lift.
    assert lift(flagged_bad=2, flagged_n=3, random_bad=4, random_n=10, nested=True,
                population_share=0.3).lift == pytest.approx(
        lift(flagged_bad=2, flagged_n=3, random_bad=4, random_n=10, nested=True).lift)


class TableOptions(TypedDict):
    """The keyword arguments both tables take, besides their data."""

    rate: float
    weeks: float
    calls_per_answer: float
    unfaithful_below: float
    thresholds: Sequence[float]


def test_the_table_from_counts_is_the_table_from_lists():
    """What weekly rollups will hand in (answers per stand-in probability, the sample per
    (probability, score)) gives the rows the lists give."""
    import random
    from collections import Counter

    rng = random.Random(5)
    grid = [None] + [i / 100 for i in range(100)]
    probabilities = [rng.choice(grid) for _ in range(5000)]
    sample = [(rng.choice(grid), rng.choice([0.0, 0.5, 2 / 3, 1.0])) for _ in range(300)]
    thresholds = (0.1, 0.25, 0.5, 0.73, 0.9)
    kwargs = TableOptions(rate=0.05, weeks=8, calls_per_answer=4.5, unfaithful_below=0.85,
                          thresholds=thresholds)
    from_lists = threshold_table(min_probabilities=probabilities, random_sample=sample, **kwargs)
    from_counts = threshold_table_from_counts(
        answers=Counter(probabilities), random_sample=Counter(sample), **kwargs)
    assert from_counts == from_lists
    assert [r.flagged_share for r in from_counts] == [
        sum(1 for p in probabilities if p is not None and p < t) / 5000 for t in thresholds]
    assert from_counts[2].lift.flagged_n == sum(
        1 for p, _ in sample if p is not None and p < 0.5)
