"""Statistics from histograms (dashboard.domain.statistics.counts) against the same statistics
from the lists the histograms describe: identical floats, compared with `==` and by `repr`
(which tells every bit of a float, -0.0 from 0.0 included), never approximately.

Where a list of millions would be slow to build, the reference is `summarize`'s arithmetic
done in exact fractions: fsum is the exact sum correctly rounded, and so is float() of a
Fraction. `test_exact_reference_is_summarize` shows the two references agree.
"""

import math
import random
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dashboard.domain.expert_scale import Review, expert_scale
from dashboard.domain.statistics.cells import Cell, Stratum, StratumSums, summarize

# The cells themselves, not only the estimates built on them: a difference in a sum that the
# estimate happened not to show would still be a difference.
from dashboard.domain.statistics.claims import ClaimStratum, _claim_cell, claim_share
from dashboard.domain.statistics.counts import (
    ClaimCounts,
    _claim_cell_from_counts,
    claim_share_from_counts,
    indicator_counts,
    sums_from_counts,
)
from dashboard.domain.statistics.estimates import (
    fit_mean,
    fit_pooled,
    indicator_strata,
    mean_from_sums,
    pooled_mean,
    share_below,
    share_from_sums,
    stratified_mean,
    stratified_share,
)
from dashboard.domain.statistics.precision import sample_rate_for, week_precision


def same(got, want):
    """Equal, and equal to the last bit (repr round-trips floats exactly)."""
    assert got == want
    assert repr(got) == repr(want)


def values_of(histogram, *, seed=0):
    """The list a histogram describes, shuffled: fsum must not depend on the order."""
    values = [v for v, k in histogram.items() for _ in range(k)]
    random.Random(seed).shuffle(values)
    return values


def exact_sums(histogram, *, size, drawn):
    """`summarize`'s arithmetic on the described list, without building it: fsum as the
    correctly rounded exact sum (Fraction), the mean and each deviation as floats."""
    n = sum(histogram.values())
    total = float(sum(Fraction(v) * k for v, k in histogram.items()))
    mean = total / n if n else 0.0
    sq_dev = float(sum(Fraction((v - mean) ** 2) * k for v, k in histogram.items())) if n else 0.0
    return StratumSums(size, n, total, sq_dev, drawn)


def mixed(count, *, seed):
    """A realistic week: 80 % of scores 1.0, the rest k/(2m) with m ≤ 12."""
    rng = random.Random(seed)
    scores = []
    for _ in range(count):
        m = rng.randint(1, 12)
        scores.append(1.0 if rng.random() < 0.8 else rng.randint(0, 2 * m) / (2 * m))
    return Counter(scores)


# --- sums_from_counts == summarize ------------------------------------------------------------

# (id, histogram, extra unjudged answers in the stratum)
HISTOGRAMS = [
    ("all 1.0", {1.0: 500}, 0),
    ("all 0.0", {0.0: 20}, 3),
    ("halves", {0.0: 3, 0.5: 7, 1.0: 30}, 100),
    ("thirds and sevenths",
     {1 / 3: 11, 2 / 3: 5, 1 / 7: 13, 3 / 7: 4, 6 / 7: 9, 1.0: 40}, 17),
    ("one value", {0.25: 33}, 0),
    ("one value, not a binary fraction", {0.1: 12_345}, 5),
    ("n = 1", {0.7: 1}, 9),
    ("n = 1 of 1", {1.0: 1}, 0),
    ("n = 0, empty histogram", {}, 4),
    ("n = 0, values counted 0 times", {0.5: 0, 1.0: 0}, 4),
    ("n = 0 in an empty stratum", {}, 0),
    ("a value counted 0 times among others", {0.5: 0, 0.75: 3, 1.0: 8}, 0),
    ("k/(2m), 10,000 answers", mixed(10_000, seed=1), 2_000),
    ("k/(2m), 200,000 answers", mixed(200_000, seed=2), 0),
    ("one value 10**6 times", {1 / 3: 10**6}, 0),
    ("10**6 answers over three values", {1 / 3: 333_333, 0.9: 333_334, 1.0: 333_333}, 10),
]


@pytest.mark.parametrize("drawn", [True, False])
@pytest.mark.parametrize(
    ("histogram", "extra"), [c[1:] for c in HISTOGRAMS], ids=[c[0] for c in HISTOGRAMS]
)
def test_sums_from_counts_is_summarize(histogram, extra, drawn):
    size = sum(histogram.values()) + extra
    want = summarize(Stratum(size, values_of(histogram), drawn))
    same(sums_from_counts(Counter(histogram), size=size, drawn=drawn), want)
    same(sums_from_counts(histogram, size=size, drawn=drawn), want)


@pytest.mark.parametrize(
    ("histogram", "extra"), [c[1:] for c in HISTOGRAMS], ids=[c[0] for c in HISTOGRAMS]
)
def test_exact_reference_is_summarize(histogram, extra):
    size = sum(histogram.values()) + extra
    same(exact_sums(histogram, size=size, drawn=True),
         summarize(Stratum(size, values_of(histogram), True)))


# Counts up to 10**6 per value, millions of answers: never built as a list.
LARGE = [
    ("10**6 each of the halves", {0.0: 10**6, 0.5: 10**6, 1.0: 10**6}),
    ("10**6 each of thirds and sevenths",
     {1 / 3: 10**6, 2 / 3: 999_999, 1 / 7: 10**6 - 7, 5 / 7: 123_457, 1.0: 10**6}),
    ("every k/(2m), m ≤ 12, 10**6 - k - m each",
     {k / (2 * m): 10**6 - k - m for m in range(1, 13) for k in range(2 * m + 1)}),
    ("mostly 1.0 with a few below", {1.0: 10**6, 0.95: 3, 23 / 24: 1, 1 / 24: 2}),
]


@pytest.mark.parametrize("histogram", [c[1] for c in LARGE], ids=[c[0] for c in LARGE])
def test_sums_from_counts_at_large_counts(histogram):
    size = sum(histogram.values()) + 10**6
    same(sums_from_counts(histogram, size=size, drawn=True),
         exact_sums(histogram, size=size, drawn=True))


def test_numpy_counts_and_values_are_read_as_summarize_reads_them():
    histogram: dict[float, int] = {
        np.float64(0.5): np.int64(4),  # type: ignore[dict-item]  # numpy's, on purpose
        np.float64(1.0): np.int64(6),  # type: ignore[dict-item]  # numpy's, on purpose
    }
    want = summarize(Stratum(12, [np.float64(0.5)] * 4 + [np.float64(1.0)] * 6, False))
    same(sums_from_counts(histogram, size=12, drawn=False), want)
    assert type(sums_from_counts(histogram, size=12, drawn=False).n) is int


# Derandomized and without an example database, as tests/monitoring/test_api_fuzz.py: every run
# tries the same examples, and a failure is one anyone can repeat.
PROPERTY = settings(deadline=None, derandomize=True, database=None)

# k/(2m) with m ≤ 12: the scores points/claims gives at up to a dozen claims (halves from
# TEILWEISE); deduplicated as floats, as a Counter of the scores would be.
SCORES = st.integers(1, 12).flatmap(lambda m: st.integers(0, 2 * m).map(lambda k: k / (2 * m)))


@settings(PROPERTY, max_examples=400)
@given(
    histogram=st.dictionaries(SCORES, st.integers(0, 300), max_size=20),
    extra=st.integers(0, 50),
    drawn=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_sums_from_counts_is_summarize_for_any_histogram(histogram, extra, drawn, seed):
    size = sum(histogram.values()) + extra
    same(sums_from_counts(histogram, size=size, drawn=drawn),
         summarize(Stratum(size, values_of(histogram, seed=seed), drawn)))


@settings(PROPERTY, max_examples=300)
@given(histogram=st.dictionaries(SCORES, st.integers(0, 10**6), max_size=25))
def test_sums_from_counts_is_exact_at_any_count(histogram):
    size = sum(histogram.values())
    same(sums_from_counts(histogram, size=size, drawn=True),
         exact_sums(histogram, size=size, drawn=True))


# --- bad input: refused with ValueError, as summarize and the estimators refuse it -------------

# (id, histogram, size): the list each describes makes summarize or the estimators raise, a
# ValueError (a TypeError for a string, compared with a number, as summarize has it).
BAD_COUNTS = [
    ("score above 1", {1.5: 1}, 5),
    ("score below 0", {-0.1: 1}, 5),
    ("NaN score", {math.nan: 1}, 5),
    ("infinite score", {math.inf: 1}, 5),
    ("not a number", {"0.5": 1}, 5),
    ("more judged than the stratum holds", {1.0: 3}, 2),
]


@pytest.mark.parametrize(
    ("histogram", "size"), [c[1:] for c in BAD_COUNTS], ids=[c[0] for c in BAD_COUNTS]
)
def test_bad_histograms_are_refused_as_lists_are(histogram, size):
    with pytest.raises(Exception) as from_list:
        mean_from_sums([summarize(Stratum(size, values_of(histogram)))])
    with pytest.raises(from_list.type):
        sums_from_counts(histogram, size=size, drawn=True)


@pytest.mark.parametrize(
    ("histogram", "size"),
    [
        ({0.5: -1}, 5),  # a negative count
        ({0.5: 1.5}, 5),  # a fractional one
        ({0.5: 1.0}, 5),  # a float, even a whole one
        ({0.5: True}, 5),  # a bool is not a count
        ({0.5: "3"}, 5),
        ({1.5: 0}, 5),  # a bad score is refused even counted 0 times
        ({0.5: 1}, -1),  # stratum sizes as the estimators check them
        ({0.5: 1}, 2.0),
        ({0.5: 1}, True),
    ],
)
def test_bad_counts_and_sizes_are_refused(histogram, size):
    with pytest.raises(ValueError):
        sums_from_counts(histogram, size=size, drawn=True)


def test_indicator_counts_refuses_bad_scores():
    with pytest.raises(ValueError):
        indicator_counts({1.5: 2}, lambda v: v < 0.5)
    with pytest.raises(ValueError):
        indicator_counts({0.5: -2}, lambda v: v < 0.5)


# --- the claim cell ------------------------------------------------------------------------------

NONE = (0.0, 0)  # an answer without claims (an abstention), as figures.py gives it

# (id, histogram of (supported points, claims), extra unjudged answers)
CLAIM_HISTOGRAMS = [
    ("every claim supported", {(1.0, 1): 40, (3.0, 3): 25, (5.0, 5): 7}, 0),
    ("halves (TEILWEISE)", {(0.5, 1): 6, (1.5, 2): 9, (2.0, 3): 4, (3.0, 3): 20}, 30),
    ("thirds and sevenths of claims",
     {(1.0, 3): 11, (2.0, 3): 5, (1.0, 7): 13, (3.5, 7): 4, (6.0, 7): 9, (7.0, 7): 2}, 10),
    ("abstentions among them", {NONE: 12, (2.0, 2): 30, (1.5, 4): 3}, 5),
    ("only abstentions", {NONE: 8}, 2),
    ("one pair", {(2.5, 4): 17}, 0),
    ("n = 1", {(1.0, 2): 1}, 6),
    ("n = 0", {}, 5),
    ("n = 0, pairs counted 0 times", {(1.0, 1): 0}, 5),
    ("many claims", {(29.5, 30): 200, (12.0, 30): 15, (0.0, 30): 1}, 0),
    ("20,000 answers",
     {(k / 2, m): 20_000 // (m + 1) for m in range(6) for k in range(2 * m + 1)}, 1_000),
]


def claim_values(histogram, *, seed=0):
    return values_of(histogram, seed=seed)


def exact_claim_cell(histogram, *, size, drawn):
    """`claim_share`'s cell for the described answers, without building them (as `exact_sums`)."""
    def exact(term):
        return float(sum(Fraction(term(a, m)) * k for (a, m), k in histogram.items()))

    n = sum(histogram.values())
    a_sum, m_sum = exact(lambda a, m: a), exact(lambda a, m: m)
    a_mean, m_mean = (a_sum / n, m_sum / n) if n else (0.0, 0.0)
    return Cell(
        size, n, a_sum, m_sum,
        exact(lambda a, m: (a - a_mean) ** 2),
        exact(lambda a, m: (m - m_mean) ** 2),
        exact(lambda a, m: (a - a_mean) * (m - m_mean)),
        drawn, lost=0.5,  # a share's half degree of freedom (cells.SHARE_LOST)
    )


@pytest.mark.parametrize("drawn", [True, False])
@pytest.mark.parametrize(
    ("histogram", "extra"), [c[1:] for c in CLAIM_HISTOGRAMS],
    ids=[c[0] for c in CLAIM_HISTOGRAMS],
)
def test_claim_cell_from_counts_is_claim_shares_cell(histogram, extra, drawn):
    size = sum(histogram.values()) + extra
    same(_claim_cell_from_counts(ClaimCounts(size, Counter(histogram), drawn)),
         _claim_cell(ClaimStratum(size, claim_values(histogram), drawn)))


@pytest.mark.parametrize(
    "flagged", [c[1] for c in CLAIM_HISTOGRAMS[:6]], ids=[c[0] for c in CLAIM_HISTOGRAMS[:6]]
)
@pytest.mark.parametrize(
    "unflagged", [c[1] for c in CLAIM_HISTOGRAMS], ids=[c[0] for c in CLAIM_HISTOGRAMS]
)
def test_claim_share_from_counts_is_claim_share(flagged, unflagged):
    sizes = (sum(flagged.values()), sum(unflagged.values()) * 10 + 3)
    want = claim_share([
        ClaimStratum(sizes[0], claim_values(flagged), drawn=False),
        ClaimStratum(sizes[1], claim_values(unflagged)),
    ])
    got = claim_share_from_counts([
        ClaimCounts(sizes[0], flagged, drawn=False), ClaimCounts(sizes[1], unflagged),
    ])
    same(got, want)


@pytest.mark.parametrize(
    ("histogram", "extra"), [c[1:] for c in CLAIM_HISTOGRAMS],
    ids=[c[0] for c in CLAIM_HISTOGRAMS],
)
def test_exact_claim_reference_is_claim_shares_cell(histogram, extra):
    size = sum(histogram.values()) + extra
    same(exact_claim_cell(histogram, size=size, drawn=True),
         _claim_cell(ClaimStratum(size, claim_values(histogram), True)))


# Counts up to 10**6 per pair, millions of answers: never built as a list.
LARGE_CLAIMS = [
    ("10**6 each of halves", {(0.5, 1): 10**6, (1.0, 1): 10**6, (1.5, 3): 10**6, NONE: 10**6}),
    ("every pair up to 12 claims",
     {(k / 2, m): 10**6 - 7 * k - m for m in range(13) for k in range(2 * m + 1)}),
    ("mostly supported", {(3.0, 3): 10**6, (2.5, 3): 5, (0.0, 7): 1}),
]


@pytest.mark.parametrize(
    "histogram", [c[1] for c in LARGE_CLAIMS], ids=[c[0] for c in LARGE_CLAIMS]
)
def test_claim_cell_from_counts_at_large_counts(histogram):
    size = sum(histogram.values()) + 10**6
    same(_claim_cell_from_counts(ClaimCounts(size, histogram)),
         exact_claim_cell(histogram, size=size, drawn=True))


# (points, claims) as the judge gives them: halves of up to 30 claims.
PAIRS = st.integers(0, 30).flatmap(
    lambda m: st.integers(0, 2 * m).map(lambda k: (k / 2, m))
)
CLAIM_HISTOGRAM = st.dictionaries(PAIRS, st.integers(0, 200), max_size=15)


@settings(PROPERTY, max_examples=300)
@given(
    flagged=CLAIM_HISTOGRAM, unflagged=CLAIM_HISTOGRAM,
    extra=st.tuples(st.integers(0, 20), st.integers(0, 2_000)), seed=st.integers(0, 2**32),
)
def test_claim_share_from_counts_is_claim_share_for_any_histograms(
    flagged, unflagged, extra, seed
):
    sizes = (sum(flagged.values()) + extra[0], sum(unflagged.values()) + extra[1])
    lists = [
        ClaimStratum(sizes[0], claim_values(flagged, seed=seed), drawn=False),
        ClaimStratum(sizes[1], claim_values(unflagged, seed=seed + 1)),
    ]
    counts = [ClaimCounts(sizes[0], flagged, drawn=False), ClaimCounts(sizes[1], unflagged)]
    for c, s in zip(counts, lists, strict=True):
        same(_claim_cell_from_counts(c), _claim_cell(s))
    same(claim_share_from_counts(counts), claim_share(lists))


@settings(PROPERTY, max_examples=200)
@given(histogram=st.dictionaries(PAIRS, st.integers(0, 10**6), max_size=20))
def test_claim_cell_from_counts_is_exact_at_any_count(histogram):
    size = sum(histogram.values())
    same(_claim_cell_from_counts(ClaimCounts(size, histogram, drawn=False)),
         exact_claim_cell(histogram, size=size, drawn=False))


@pytest.mark.parametrize(
    "histogram",
    [
        {(1.0, -1): 1},  # negative claims
        {(0.5, 1.5): 1},  # fractional claims
        {(2.0, 1): 1},  # more points than claims
        {(-0.5, 1): 1},  # negative points
        {(math.nan, 1): 1},
        {(1.0, 1): -1},  # a negative count
        {(1.0, 1): 0.5},
        {(1.0, 1): 6},  # more judged answers than the stratum (5) holds
    ],
)
def test_bad_claim_histograms_are_refused(histogram):
    with pytest.raises(ValueError):
        claim_share_from_counts([ClaimCounts(5, histogram)])


# --- the estimates built on the sums: identical too ----------------------------------------------

# Weeks as (flagged histogram, unflagged histogram, unflagged stratum size beyond the judged).
WEEKS = [
    ("a usual week", {1.0: 9, 0.5: 3, 0.0: 2}, {1.0: 80, 0.75: 6, 0.5: 2, 1 / 3: 1}, 900),
    ("all 1.0", {1.0: 12}, {1.0: 60}, 600),
    ("thirds and sevenths", {1 / 3: 4, 6 / 7: 3}, {1 / 7: 2, 2 / 3: 5, 1.0: 30}, 250),
    ("few drawn", {0.5: 2}, {1.0: 3, 0.25: 1}, 40),
    ("nothing flagged", {}, {1.0: 25, 0.9: 4}, 100),
    ("nothing drawn judged", {0.5: 3}, {}, 50),
    ("census of both", {0.5: 3, 1.0: 1}, {1.0: 20, 0.0: 1}, 0),
    ("k/(2m), 20,000 drawn", mixed(2_000, seed=3), mixed(20_000, seed=4), 180_000),
]


def both(week):
    """The week as [flagged, unflagged] Strata and as StratumSums from its histograms."""
    _, flagged, unflagged, unjudged = week
    sizes = (sum(flagged.values()), sum(unflagged.values()) + unjudged)
    strata = [
        Stratum(sizes[0], values_of(flagged), drawn=False),
        Stratum(sizes[1], values_of(unflagged)),
    ]
    sums = [
        sums_from_counts(flagged, size=sizes[0], drawn=False),
        sums_from_counts(unflagged, size=sizes[1], drawn=True),
    ]
    return strata, sums, (flagged, unflagged)


@pytest.mark.parametrize("week", WEEKS, ids=[w[0] for w in WEEKS])
def test_week_estimates_from_counts_are_identical(week):
    strata, sums, histograms = both(week)
    same(mean_from_sums(sums), stratified_mean(strata))
    same(fit_mean(sums), fit_mean(strata))
    same(sample_rate_for(sums), sample_rate_for(strata))
    same(week_precision(sums, action_threshold=0.8), week_precision(strata, action_threshold=0.8))
    for threshold in (0.0, 0.5, 0.75, 0.9, 1.0, 1.01):

        def is_below(v: float, t: float = threshold) -> bool:
            return v < t

        below = [
            sums_from_counts(indicator_counts(h, is_below),
                             size=s.size, drawn=s.drawn)
            for h, s in zip(histograms, strata, strict=True)
        ]
        same(share_from_sums(below), share_below(strata, threshold))
        same(share_from_sums(below),
             stratified_share(indicator_strata(strata, is_below)))


def test_pooled_estimates_from_counts_are_identical():
    weeks = [both(w) for w in WEEKS[:4]]
    strata = [s for s, _, _ in weeks]
    sums = [s for _, s, _ in weeks]
    same(pooled_mean(sums), pooled_mean(strata))
    same(fit_pooled(sums), fit_pooled(strata))
    reviews = [Review(0.9, 1.0, False)] * 12 + [Review(0.5, 0.5, True)] * 5 + [
        Review(1.0, 0.75, False), Review(0.25, 0.5, True), Review(0.0, 1 / 3, False),
    ]
    same(expert_scale(sums, reviews), expert_scale(strata, reviews))


@settings(PROPERTY, max_examples=200)
@given(
    flagged=st.dictionaries(SCORES, st.integers(0, 40), max_size=8),
    unflagged=st.dictionaries(SCORES, st.integers(0, 400), max_size=12),
    unjudged=st.integers(0, 5_000),
    threshold=st.sampled_from([0.5, 0.75, 0.8, 0.9, 1.0]),
)
def test_week_estimates_from_counts_are_identical_for_any_week(
    flagged, unflagged, unjudged, threshold
):
    strata, sums, histograms = both(("", flagged, unflagged, unjudged))
    same(mean_from_sums(sums), stratified_mean(strata))
    same(week_precision(sums, action_threshold=threshold),
         week_precision(strata, action_threshold=threshold))
    below = [
        sums_from_counts(indicator_counts(h, lambda v: v < threshold), size=s.size, drawn=s.drawn)
        for h, s in zip(histograms, strata, strict=True)
    ]
    same(share_from_sums(below), share_below(strata, threshold))
