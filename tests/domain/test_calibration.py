"""Calibration statistics (review.domain.calibration): plain Python, no Django."""

import itertools
import math
import random

import pytest

from review.domain.calibration import (
    MIN_PAIRS_FOR_INTERVAL,
    BiasSummary,
    ReviewedPair,
    bias_summary,
    difference,
    disagrees,
    last_weeks,
    rolling_summary,
    weekly_summaries,
)
from review.domain.cusum import DEFAULT_CUSUM, CusumParams, bernoulli_cusum
from review.domain.kappa import (
    LABELS,
    MIN_CLAIM_PAIRS_FOR_KAPPA,
    Kappa,
    kappa_with_interval,
    weighted_kappa,
)

THRESHOLD = 0.85
U, T, G = LABELS  # UNGEDECKT, TEILWEISE, GEDECKT


def pair(manual, automatic, week="2026-W48", wrong=False):
    return ReviewedPair(manual, automatic, week, wrong)


# -- ReviewedPair, difference, disagrees -----------------------------------------------------

BAD_PAIRS = [
    ("manual above 1", (1.2, 0.5, "2026-W48")),
    ("automatic below 0", (0.5, -0.1, "2026-W48")),
    ("nan", (math.nan, 0.5, "2026-W48")),
    ("bool", (True, 0.5, "2026-W48")),
    ("string score", ("0.5", 0.5, "2026-W48")),
    ("week 54", (0.5, 0.5, "2026-W54")),
    ("W53 in a 52-week year", (0.5, 0.5, "2025-W53")),
    ("week 0", (0.5, 0.5, "2026-W00")),
    ("unpadded week", (0.5, 0.5, "2026-W5")),
    ("date, not week", (0.5, 0.5, "2026-11-30")),
    ("lower-case w", (0.5, 0.5, "2026-w48")),
    ("arabic-indic digits", (0.5, 0.5, "٢٠٢٦-W48")),
]


@pytest.mark.parametrize("args", [c[1] for c in BAD_PAIRS], ids=[c[0] for c in BAD_PAIRS])
def test_reviewed_pair_refuses_bad_values(args):
    with pytest.raises(ValueError):
        ReviewedPair(*args)


@pytest.mark.parametrize("week", ["2026-W53", "2020-W53", "2027-W01", "2026-W48"])
def test_reviewed_pair_accepts_real_weeks(week):
    assert ReviewedPair(0.0, 1.0, week).week == week


def test_reviewed_pair_is_frozen():
    with pytest.raises(AttributeError):
        pair(1.0, 0.5).manual = 0.0


@pytest.mark.parametrize(
    ("manual", "automatic", "expected"),
    [(1.0, 0.5, 0.5), (0.5, 1.0, -0.5), (0.75, 0.75, 0.0), (0.0, 1.0, -1.0)],
)
def test_difference_is_manual_minus_automatic(manual, automatic, expected):
    assert difference(pair(manual, automatic)) == expected


# At 0.85: a score below it is an action signal, a score equal to it is not.
DISAGREE_CASES = [
    ("both above", 0.9, 1.0, False),
    ("both below", 0.5, 0.8, False),
    ("manual at threshold, judge below", 0.85, 0.84, True),
    ("both at threshold", 0.85, 0.85, False),
    ("manual below, judge above", 0.84, 0.86, True),
    ("manual above, judge at 0", 1.0, 0.0, True),
]


@pytest.mark.parametrize(
    ("manual", "automatic", "expected"),
    [c[1:] for c in DISAGREE_CASES],
    ids=[c[0] for c in DISAGREE_CASES],
)
def test_disagrees_on_sides_of_the_threshold(manual, automatic, expected):
    assert disagrees(pair(manual, automatic), THRESHOLD) is expected
    # Which rater is which does not matter for the side.
    assert disagrees(pair(automatic, manual), THRESHOLD) is expected


# -- bias_summary ----------------------------------------------------------------------------

# Differences [0.2, -0.1, 0.0, 0.3, 0.1]:
#   mean = 0.5 / 5 = 0.1
#   deviations 0.1, -0.2, -0.1, 0.2, 0.0; squares sum to 0.10; variance 0.10 / 4 = 0.025
#   sd = 0.158114; se = sqrt(0.025 / 5) = sqrt(0.005) = 0.0707107
#   t(0.975, 4) = 2.776445 -> half width 0.196324 -> interval [-0.096324, 0.296324]
#   t(0.95, 4)  = 2.131847 -> half width 0.150744 (90 %)
#   MAE = (0.2 + 0.1 + 0 + 0.3 + 0.1) / 5 = 0.14
#   at 0.85: pairs 1 (1.0 | 0.8), 4 (0.9 | 0.6), 5 (0.85 | 0.75) disagree -> 3 / 5 = 0.6
#   decomposition marked wrong on pairs 2 and 4 -> 0.4
FIVE = [
    pair(1.0, 0.8),
    pair(0.5, 0.6, wrong=True),
    pair(1.0, 1.0),
    pair(0.9, 0.6, wrong=True),
    pair(0.85, 0.75),
]
SE_FIVE = math.sqrt(0.005)


def test_bias_summary_against_hand_computed_values():
    got = bias_summary(FIVE, action_threshold=THRESHOLD)
    assert got.n == 5
    assert got.too_few is False
    assert got.bias == pytest.approx(0.1)
    assert got.low == pytest.approx(0.1 - 2.776445105 * SE_FIVE)
    assert got.high == pytest.approx(0.1 + 2.776445105 * SE_FIVE)
    assert got.low == pytest.approx(-0.096324, abs=1e-6)
    assert got.high == pytest.approx(0.296324, abs=1e-6)
    assert got.mae == pytest.approx(0.14)
    assert got.threshold_disagreement == pytest.approx(0.6)
    assert got.decomposition_wrong_share == pytest.approx(0.4)


def test_bias_summary_confidence_sets_the_t_quantile():
    got = bias_summary(FIVE, action_threshold=THRESHOLD, confidence=0.90)
    assert got.low == pytest.approx(0.1 - 2.131846786 * SE_FIVE)
    assert got.high == pytest.approx(0.1 + 2.131846786 * SE_FIVE)


def test_bias_summary_threshold_changes_only_the_disagreement():
    # At 0.7 only pair 4 (0.9 | 0.6) straddles the threshold: 1 / 5.
    got = bias_summary(FIVE, action_threshold=0.7)
    assert got.threshold_disagreement == pytest.approx(0.2)
    assert got.bias == pytest.approx(0.1)


SMALL_CASES = [
    # (id, pairs, expected summary)
    ("no pairs", [], BiasSummary(0, None, None, None, None, None, None, True)),
    (
        "one pair: estimates, no interval",
        [pair(0.5, 1.0, wrong=True)],
        BiasSummary(1, -0.5, None, None, 0.5, 1.0, 1.0, True),
    ),
    (
        "four pairs: too few for an interval",
        [pair(1.0, 0.5), pair(1.0, 1.0), pair(1.0, 1.0), pair(1.0, 1.0)],
        BiasSummary(4, 0.125, None, None, 0.125, 0.25, 0.0, True),
    ),
    (
        # sd = 0: the t interval collapses to the point, on purpose (see bias_summary).
        "five identical differences: a point interval",
        [pair(1.0, 1.0)] * 5,
        BiasSummary(5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, False),
    ),
]


@pytest.mark.parametrize(
    ("pairs", "expected"), [c[1:] for c in SMALL_CASES], ids=[c[0] for c in SMALL_CASES]
)
def test_bias_summary_small_samples(pairs, expected):
    assert bias_summary(pairs, action_threshold=THRESHOLD) == expected


def test_too_few_boundary_is_the_named_constant():
    pairs = [pair(1.0, 0.5), pair(0.5, 1.0)] * MIN_PAIRS_FOR_INTERVAL
    below = bias_summary(pairs[: MIN_PAIRS_FOR_INTERVAL - 1], action_threshold=THRESHOLD)
    at = bias_summary(pairs[:MIN_PAIRS_FOR_INTERVAL], action_threshold=THRESHOLD)
    assert below.too_few and below.low is None and below.high is None
    assert at.low is not None and at.bias is not None and at.high is not None
    assert not at.too_few and at.low < at.bias < at.high


def test_identical_nonzero_differences_give_exactly_the_point():
    # 0.9 - 0.6 is not exactly 0.3 in floating point; the interval still is the bias itself.
    got = bias_summary([pair(0.9, 0.6)] * 7, action_threshold=THRESHOLD)
    assert got.low == got.bias == got.high == pytest.approx(0.3)


@pytest.mark.parametrize("confidence", [0.0, 1.0, 95, -0.5])
def test_bias_summary_refuses_bad_confidence(confidence):
    with pytest.raises(ValueError):
        bias_summary(FIVE, action_threshold=THRESHOLD, confidence=confidence)


# -- weeks -----------------------------------------------------------------------------------


def _mixed_weeks():
    # Deliberately out of order and across the 2026/2027 boundary (2026 has a W53).
    return [
        pair(1.0, 0.5, "2027-W01"),
        pair(1.0, 1.0, "2026-W52"),
        pair(0.5, 1.0, "2026-W53"),
        pair(1.0, 0.0, "2027-W01"),
        pair(0.0, 0.0, "2026-W53"),
        pair(1.0, 1.0, "2026-W09"),
    ]


def test_weekly_summaries_group_by_week_in_calendar_order():
    got = weekly_summaries(_mixed_weeks(), action_threshold=THRESHOLD)
    assert list(got) == ["2026-W09", "2026-W52", "2026-W53", "2027-W01"]
    assert {week: s.n for week, s in got.items()} == {
        "2026-W09": 1,
        "2026-W52": 1,
        "2026-W53": 2,
        "2027-W01": 2,
    }
    assert got["2027-W01"].bias == pytest.approx((0.5 + 1.0) / 2)
    assert got["2026-W53"].bias == pytest.approx((-0.5 + 0.0) / 2)
    assert got["2026-W53"].threshold_disagreement == pytest.approx(0.5)
    assert all(s.too_few for s in got.values())


def test_weekly_summaries_of_nothing():
    assert weekly_summaries([], action_threshold=THRESHOLD) == {}


def test_rolling_summary_pools_only_the_given_weeks():
    weeks = last_weeks("2027-W01", 3)  # 2026-W52, 2026-W53, 2027-W01
    got = rolling_summary(_mixed_weeks(), weeks=weeks, action_threshold=THRESHOLD)
    # differences 0.5, 0.0, -0.5, 1.0, 0.0 (W09 left out)
    assert got.n == 5
    assert got.bias == pytest.approx(1.0 / 5)
    assert got.mae == pytest.approx(2.0 / 5)
    assert not got.too_few
    assert got.low is not None and got.bias is not None and got.high is not None
    assert got.low < got.bias < got.high


def test_rolling_summary_without_matching_weeks():
    got = rolling_summary(_mixed_weeks(), weeks=["2025-W01"], action_threshold=THRESHOLD)
    assert got == BiasSummary(0, None, None, None, None, None, None, True)


WHOLE_YEAR = ["2025-W52", *[f"2026-W{week:02d}" for week in range(1, 54)], "2027-W01"]
LAST_WEEKS_CASES = [
    (
        "across 2026/2027, 2026 has W53",
        "2027-W02",
        4,
        ["2026-W52", "2026-W53", "2027-W01", "2027-W02"],
    ),
    ("across 2020/2021, 2020 has W53", "2021-W01", 3, ["2020-W52", "2020-W53", "2021-W01"]),
    (
        "across 2024/2025, 2024 has 52 weeks",
        "2025-W02",
        4,
        ["2024-W51", "2024-W52", "2025-W01", "2025-W02"],
    ),
    ("ending in W53", "2026-W53", 2, ["2026-W52", "2026-W53"]),
    ("inside a normal year", "2025-W20", 4, ["2025-W17", "2025-W18", "2025-W19", "2025-W20"]),
    ("one week", "2026-W48", 1, ["2026-W48"]),
    ("back over a whole 53-week year", "2027-W01", 55, WHOLE_YEAR),
]


@pytest.mark.parametrize(
    ("week", "count", "expected"),
    [c[1:] for c in LAST_WEEKS_CASES],
    ids=[c[0] for c in LAST_WEEKS_CASES],
)
def test_last_weeks(week, count, expected):
    assert last_weeks(week, count) == expected


@pytest.mark.parametrize(
    ("week", "count"), [("2026-W48", 0), ("2026-W48", -1), ("2026-W48", True), ("2025-W53", 2)]
)
def test_last_weeks_refuses_bad_input(week, count):
    with pytest.raises(ValueError):
        last_weeks(week, count)


# -- weighted kappa --------------------------------------------------------------------------


def from_counts(counts):
    """Claim pairs from a 3x3 count table (rows manual, columns judge, in LABELS order)."""
    return [(LABELS[i], LABELS[j]) for i in range(3) for j in range(3) for _ in range(counts[i][j])]


# Hand-computed example, n = 20 (rows manual, columns judge: U, T, G):
#   observed counts        row sums     expected counts r_i c_j / n
#   U [ 3  1  1 ]           5            U [ 1  1  3 ]
#   T [ 1  2  2 ]           5            T [ 1  1  3 ]
#   G [ 0  1  9 ]          10            G [ 2  2  6 ]
#   col  4  4 12
# disagreement weights w_ij = |i - j| / 2:  [[0, .5, 1], [.5, 0, .5], [1, .5, 0]]
#   sum(w O) = (0.5*1 + 1*1 + 0.5*1 + 0.5*2 + 1*0 + 0.5*1) / 20 = 3.5 / 20 = 0.175
#   sum(w E) = (0.5*1 + 1*3 + 0.5*1 + 0.5*3 + 1*2 + 0.5*2) / 20 = 8.5 / 20 = 0.425
#   kappa_w = 1 - 0.175 / 0.425 = 1 - 7/17 = 10/17 = 0.588235
HAND = [[3, 1, 1], [1, 2, 2], [0, 1, 9]]

KAPPA_CASES = [
    ("hand-computed 3x3", from_counts(HAND), 10 / 17),
    ("perfect agreement", from_counts([[2, 0, 0], [0, 3, 0], [0, 0, 5]]), 1.0),
    ("perfect agreement on two labels", [(G, G), (U, U)], 1.0),
    # counts (U, G) = (G, U) = 1: sum(w O) = 2/2 = 1; E puts 1/4 on each corner: sum(w E) = 1/2
    ("complete opposition", [(U, G), (G, U)], -1.0),
    # one rater constant: observed = expected, no better than chance
    ("judge says GEDECKT to everything", [(U, G), (T, G), (G, G)], 0.0),
    ("one label only, both raters: undefined", [(G, G)] * 30, None),
    ("no pairs: undefined", [], None),
]


@pytest.mark.parametrize(
    ("pairs", "expected"), [c[1:] for c in KAPPA_CASES], ids=[c[0] for c in KAPPA_CASES]
)
def test_weighted_kappa(pairs, expected):
    got = weighted_kappa(pairs)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected)


def test_weighted_kappa_is_symmetric_in_the_raters():
    swapped = [(judge, manual) for manual, judge in from_counts(HAND)]
    assert weighted_kappa(swapped) == pytest.approx(10 / 17)


def test_weighted_kappa_does_not_depend_on_order():
    pairs = from_counts(HAND)
    random.Random(3).shuffle(pairs)
    assert weighted_kappa(pairs) == pytest.approx(10 / 17)


def test_weighted_kappa_refuses_unknown_labels():
    with pytest.raises(ValueError):
        weighted_kappa([(G, "UNPARSEABLE")])


def textbook_kappa(pairs):
    """kappa_w = 1 - sum(w_ij O_ij) / sum(w_ij E_ij), w_ij = |i - j| / 2, in proportions."""
    n = len(pairs)
    index = {label: i for i, label in enumerate(LABELS)}
    observed = [[0.0] * 3 for _ in range(3)]
    for manual, judge in pairs:
        observed[index[manual]][index[judge]] += 1 / n
    rows = [sum(observed[i]) for i in range(3)]
    cols = [sum(observed[i][j] for i in range(3)) for j in range(3)]
    cells = list(itertools.product(range(3), repeat=2))
    weighted_o = sum(abs(i - j) / 2 * observed[i][j] for i, j in cells)
    weighted_e = sum(abs(i - j) / 2 * rows[i] * cols[j] for i, j in cells)
    return 1 - weighted_o / weighted_e


@pytest.mark.parametrize("seed", range(20))
def test_weighted_kappa_matches_the_textbook_formula(seed):
    rng = random.Random(seed)
    n = rng.randint(5, 60)
    # Mostly agreeing, like a calibrated judge, with random noise on top.
    pairs = []
    for _ in range(n):
        manual = rng.choice(LABELS)
        judge = manual if rng.random() < 0.6 else rng.choice(LABELS)
        pairs.append((manual, judge))
    assert weighted_kappa(pairs) == pytest.approx(textbook_kappa(pairs), abs=1e-12)


# -- bootstrap interval ----------------------------------------------------------------------


def _answers(count, seed=0):
    """(pairs, groups) for `count` answers of 2-6 claims, judge mostly agreeing."""
    rng = random.Random(seed)
    pairs, groups = [], []
    for answer in range(count):
        for _ in range(rng.randint(2, 6)):
            manual = rng.choices(LABELS, weights=[1, 1, 4])[0]
            judge = manual if rng.random() < 0.75 else rng.choice(LABELS)
            pairs.append((manual, judge))
            groups.append(f"answer-{answer}")
    return pairs, groups


def test_interval_contains_the_point_estimate():
    pairs = from_counts([[c * 3 for c in row] for row in HAND])  # n = 60
    got = kappa_with_interval(pairs)
    assert got.n == 60
    assert got.kappa == pytest.approx(10 / 17)
    assert not got.too_few
    assert got.low is not None and got.kappa is not None and got.high is not None
    assert got.low < got.kappa < got.high
    assert -1.0 <= got.low and got.high <= 1.0


def test_interval_is_deterministic_for_a_seed():
    pairs, groups = _answers(20)
    first = kappa_with_interval(pairs, groups=groups, seed=7)
    again = kappa_with_interval(pairs, groups=groups, seed=7)
    other = kappa_with_interval(pairs, groups=groups, seed=8)
    assert first == again
    assert (first.low, first.high) != (other.low, other.high)
    assert first.kappa == other.kappa


def test_more_confidence_gives_a_wider_interval():
    pairs, groups = _answers(20)
    narrow = kappa_with_interval(pairs, groups=groups, confidence=0.8)
    wide = kappa_with_interval(pairs, groups=groups, confidence=0.99)
    assert wide.low is not None and wide.high is not None
    assert narrow.low is not None and narrow.high is not None
    assert wide.low < narrow.low < narrow.high < wide.high


def test_cluster_bootstrap_resamples_answers_not_claims():
    pairs, groups = _answers(20)
    # Every claim of every answer four times: the same 20 answers, no new information.
    repeated_pairs = [p for p in pairs for _ in range(4)]
    repeated_groups = [g for g in groups for _ in range(4)]
    by_answer = kappa_with_interval(pairs, groups=groups)
    by_answer_repeated = kappa_with_interval(repeated_pairs, groups=repeated_groups)
    by_claim_repeated = kappa_with_interval(repeated_pairs)
    # Resampling answers sees through the repetition (kappa does not change when every count
    # is multiplied, and the draws depend on the number of answers only) ...
    assert by_answer_repeated.low == pytest.approx(by_answer.low)
    assert by_answer_repeated.high == pytest.approx(by_answer.high)
    # ... resampling claims one by one takes it for 4x the data and is much too narrow.
    assert by_claim_repeated.low is not None and by_claim_repeated.high is not None
    assert by_answer_repeated.low is not None and by_answer_repeated.high is not None
    claim_width = by_claim_repeated.high - by_claim_repeated.low
    answer_width = by_answer_repeated.high - by_answer_repeated.low
    assert claim_width < 0.7 * answer_width


def test_cluster_bootstrap_ignores_the_names_of_answers():
    pairs, groups = _answers(20)
    # Same answers, ids renamed: units are numbered by first appearance, not by their ids.
    renamed = [g.replace("answer-", "a") for g in groups]
    assert kappa_with_interval(pairs, groups=renamed) == kappa_with_interval(pairs, groups=groups)


TOO_FEW_CASES = [
    ("no pairs", [], None, Kappa(0, None, None, None, True)),
    ("three claims", [(G, G), (U, U), (T, G)], None, None),
    ("one claim short", from_counts(HAND)[1:], None, None),
    ("many claims, four answers", from_counts(HAND) * 2, [i % 4 for i in range(40)], None),
]


@pytest.mark.parametrize(
    ("pairs", "groups", "exact"), [c[1:] for c in TOO_FEW_CASES], ids=[c[0] for c in TOO_FEW_CASES]
)
def test_too_few_claims_or_answers_give_no_interval(pairs, groups, exact):
    got = kappa_with_interval(pairs, groups=groups)
    assert got.too_few
    assert got.low is None and got.high is None
    assert got.kappa == weighted_kappa(pairs)
    if exact is not None:
        assert got == exact


def test_enough_claims_and_answers_give_an_interval():
    pairs = from_counts(HAND)
    assert len(pairs) == MIN_CLAIM_PAIRS_FOR_KAPPA
    assert not kappa_with_interval(pairs).too_few
    grouped = kappa_with_interval(pairs, groups=[i % MIN_PAIRS_FOR_INTERVAL for i in range(20)])
    assert not grouped.too_few and grouped.low is not None


def test_undefined_kappa_has_no_interval():
    got = kappa_with_interval([(G, G)] * 40)
    assert got == Kappa(40, None, None, None, False)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"groups": ["a"] * 19},
        {"resamples": 0},
        {"resamples": 1.5},
        {"confidence": 1.0},
    ],
)
def test_kappa_with_interval_refuses_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        kappa_with_interval(from_counts(HAND), **kwargs)


# -- Bernoulli CUSUM -------------------------------------------------------------------------

LN2 = math.log(2)  # ln(p1/p0) for p0 = 0.25, p1 = 0.5
LN23 = math.log(2 / 3)  # ln((1 - p1)/(1 - p0)) = ln(0.5 / 0.75) = -0.405465
SMALL = CusumParams(p0=0.25, p1=0.5, limit=1.2)

# S_t with up = ln 2 = 0.693147, down = ln(2/3) = -0.405465, h = 1.2:
#   T: 0 + 0.693147              = 0.693147
#   F: 0.693147 - 0.405465       = 0.287682
#   T: 0.287682 + 0.693147       = 0.980829
#   T: 0.980829 + 0.693147       = 1.673976 >= 1.2: alarm at index 3, restart from 0
#   F: max(0, 0 - 0.405465)      = 0           (without the restart: 1.268511)
#   F: max(0, 0 - 0.405465)      = 0
#   T: 0 + 0.693147              = 0.693147
CUSUM_CASES = [
    (
        "hand-computed with an alarm and restart",
        [True, False, True, True, False, False, True],
        [LN2, LN2 + LN23, 2 * LN2 + LN23, 3 * LN2 + LN23, 0.0, 0.0, LN2],
        3,
    ),
    ("no observations", [], [], None),
    ("only agreements stay at 0", [False] * 5, [0.0] * 5, None),
    # T, T: 1.386294 >= 1.2, alarm at 1, restart; T: 0.693147 (not 2.079442), F: 0.287682;
    # T, T: 0.980829, 1.673976, second alarm (alarm_at keeps the first)
    (
        "a second alarm needs new evidence",
        [True, True, True, False, True, True],
        [LN2, 2 * LN2, LN2, LN2 + LN23, 2 * LN2 + LN23, 3 * LN2 + LN23],
        1,
    ),
]


@pytest.mark.parametrize(
    ("observations", "statistic", "alarm_at"),
    [c[1:] for c in CUSUM_CASES],
    ids=[c[0] for c in CUSUM_CASES],
)
def test_bernoulli_cusum(observations, statistic, alarm_at):
    got = bernoulli_cusum(observations, SMALL)
    assert got.statistic == pytest.approx(statistic)
    assert got.alarm_at == alarm_at
    assert got.current == pytest.approx(statistic[-1] if statistic else 0.0)


def test_current_stays_above_the_limit_when_the_last_observation_alarms():
    got = bernoulli_cusum([True, True], SMALL)
    assert got.alarm_at == 1
    assert got.current == pytest.approx(2 * LN2)
    assert got.current >= SMALL.limit


def test_alarm_exactly_at_the_limit():
    # S reaches h exactly: ln 2 twice against h = 2 ln 2 (an alarm is S_t >= h).
    got = bernoulli_cusum([True, True], CusumParams(0.25, 0.5, 2 * LN2))
    assert got.alarm_at == 1


@pytest.mark.parametrize(
    ("p0", "p1", "limit"),
    [(0.3, 0.1, 5.0), (0.1, 0.1, 5.0), (0.0, 0.3, 5.0), (0.1, 1.0, 5.0), (0.1, 0.3, 0.0)],
)
def test_cusum_params_refuse_nonsense(p0, p1, limit):
    with pytest.raises(ValueError):
        CusumParams(p0, p1, limit)


def test_default_cusum_watches_the_documented_rates():
    assert (DEFAULT_CUSUM.p0, DEFAULT_CUSUM.p1) == (0.10, 0.30)
    up, down = math.log(3), math.log(7 / 9)
    # A calibrated week (2 disagreements in 20) pulls the statistic back to 0 ...
    calibrated = ([True] + [False] * 9) * 2
    assert bernoulli_cusum(calibrated, DEFAULT_CUSUM).current == 0.0
    # ... a week at p1 (6 in 20, spread out) climbs by 6 ln 3 + 14 ln(7/9) = 3.07, about half
    # the limit: two such weeks alarm.
    drifting = ([True] + [False] * 2) * 6 + [False] * 2
    week = bernoulli_cusum(drifting, DEFAULT_CUSUM)
    assert week.alarm_at is None
    assert week.current == pytest.approx(6 * up + 14 * down)
    assert bernoulli_cusum(drifting * 2, DEFAULT_CUSUM).alarm_at is not None


def test_bernoulli_cusum_lists_every_crossing() -> None:
    # p0 = 0.1, p1 = 0.3, h = 1.0: one disagreement adds ln 3 = 1.0986 >= 1 and alarms; the
    # statistic restarts at 0, so each later disagreement alarms again on its own.
    params = CusumParams(p0=0.1, p1=0.3, limit=1.0)
    result = bernoulli_cusum([False, True, False, False, True, True], params)
    assert result.alarms == (1, 4, 5)
    assert result.alarm_at == 1
    assert bernoulli_cusum([False, False], params).alarms == ()
