"""Coverage of the weekly intervals (dashboard.domain.statistics), measured by simulation.

A use case is simulated for 1,000 weeks with a fixed seed and sampled the way the product
samples: every flagged answer is judged, every other one with probability = rate (a draw
independent of the flag), and a few judge runs fail and stay unjudged. The truth is the finite
population's value of each week (all its answers' scores), which is what the dashboard claims
to estimate. Answers are built from claims as the judge scores them: most answers have every
claim supported (score exactly 1.0), the rest are k/m mixtures of 1 / 0.5 / 0 points.

Measured with the seeds below (printed with ``pytest -s``):

| scenario | estimate | coverage | Wald |
| --- | --- | --- | --- |
| 7,000 answers/week (~200 random judged) | mean | 95.8 % | |
| | share below 0.85 | 95.1 % | |
| | claim share | 94.2 % | |
| 300 answers/week (~8 random judged) | mean | 97.3 % | 70.4 % |
| | share below 0.85 | 95.5 % | 72.3 % |

All biases are below 0.001. The small scenario's mean is conservative, which is the price of
not collapsing: with ~8 random answers, most of them 1.0, the data cannot tell 0.93 from 1.0,
and an interval that claims otherwise (Wald, zero width in 18 % of those weeks) misses the
truth in almost one week of three. The full grid of settings (150-50,000 answers a week, 5-40 %
flagged, pooled weeks, the expert scale, the alarms) is `bench/statistics.py`.
"""

import math

import numpy as np
import pytest

from dashboard.domain.statistics.cells import Stratum, z_value
from dashboard.domain.statistics.claims import ClaimStratum, claim_share
from dashboard.domain.statistics.estimates import stratified_mean, stratified_share

WEEKS = 1000
RATE = 0.03
FLAGGED_SHARE = 0.05
JUDGE_FAILURES = 0.02  # judge runs that failed: sampled but unjudged, missing at random
ACTION_THRESHOLD = 0.85


def simulate(seed: int, answers_per_week: int) -> dict:
    """Every answer of WEEKS weeks: week, flagged, claims, supported points, score, judged."""
    rng = np.random.default_rng(seed)
    sizes = rng.poisson(answers_per_week, WEEKS)
    week = np.repeat(np.arange(WEEKS), sizes)
    total = week.size
    flagged = rng.random(total) < FLAGGED_SHARE
    # The use case drifts a little from week to week, so the truth is not one fixed number.
    clean_unflagged = np.clip(rng.normal(0.70, 0.05, WEEKS), 0.4, 0.95)[week]
    clean_flagged = np.clip(rng.normal(0.20, 0.05, WEEKS), 0.0, 0.5)[week]
    claims = 1 + rng.poisson(2.5, total)
    claims[rng.random(total) < 0.03] = 0  # abstentions ("I don't know") score 1.0
    clean = rng.random(total) < np.where(flagged, clean_flagged, clean_unflagged)
    # An answer that is not clean has each claim supported / partly / not with these shares:
    # unflagged 0.7 / 0.1 / 0.2 (mean 0.75), flagged 0.45 / 0.1 / 0.45 (mean 0.5). So the
    # unflagged mean is ~0.93 with ~72 % exactly 1.0, the flagged mean ~0.6.
    points = claims.astype(float)
    dirty = np.flatnonzero(~clean & (claims > 0))
    supported_p = np.where(flagged[dirty], 0.45, 0.7)
    supported = rng.binomial(claims[dirty], supported_p)
    partly = rng.binomial(claims[dirty] - supported, 0.1 / (1 - supported_p))
    points[dirty] = supported + 0.5 * partly
    score = np.where(claims > 0, points / np.maximum(claims, 1), 1.0)
    in_random_sample = rng.random(total) < RATE
    judged = (flagged | in_random_sample) & (rng.random(total) >= JUDGE_FAILURES)
    return {
        "week": week,
        "sizes": sizes,
        "flagged": flagged,
        "claims": claims,
        "points": points,
        "score": score,
        "judged": judged,
    }


def per_week_strata(sim: dict, values: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Stratum sizes (weeks × [flagged, unflagged]) and each stratum's judged values."""
    key = sim["week"] * 2 + (~sim["flagged"])
    sizes = np.bincount(key, minlength=2 * WEEKS).reshape(WEEKS, 2)
    judged_key = key[sim["judged"]]
    order = np.argsort(judged_key, kind="stable")
    judged_values = values[sim["judged"]][order]
    counts = np.bincount(judged_key, minlength=2 * WEEKS)
    groups = np.split(judged_values, np.cumsum(counts)[:-1])
    return sizes, groups


def week_truth(sim: dict, values: np.ndarray) -> np.ndarray:
    return np.bincount(sim["week"], values, minlength=WEEKS) / sim["sizes"]


def run(estimator, sim: dict, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value, low, high) per week from the product's estimator; NaN where there is none."""
    sizes, groups = per_week_strata(sim, values)
    out = np.full((WEEKS, 3), np.nan)
    for w in range(WEEKS):
        # As the product builds them (`week_strata`): the flagged stratum is judged in full.
        strata = [Stratum(int(sizes[w, h]), groups[2 * w + h].tolist(), drawn=h == 1)
                  for h in (0, 1)]
        e = estimator(strata)
        if e.value is not None:
            out[w] = e.value, e.low, e.high
    return out[:, 0], out[:, 1], out[:, 2]


def wald(sim: dict, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The interval the product must not use: ŷ ± z·√V with the plain sample variances."""
    sizes, groups = per_week_strata(sim, values)
    z = z_value(0.95)
    out = np.full((WEEKS, 3), np.nan)
    for w in range(WEEKS):
        total = sizes[w].sum()
        value = variance = 0.0
        for h in (0, 1):
            g, size = groups[2 * w + h], sizes[w, h]
            if size and g.size:
                weight = size / total
                value += weight * g.mean()
                s2 = g.var(ddof=1) if g.size > 1 else 0.0
                variance += weight**2 * (1 - g.size / size) * s2 / g.size
        out[w] = value, value - z * math.sqrt(variance), value + z * math.sqrt(variance)
    return out[:, 0], out[:, 1], out[:, 2]


def coverage(truth, low, high) -> float:
    known = ~np.isnan(low)
    return float(np.mean((low[known] <= truth[known]) & (truth[known] <= high[known])))


@pytest.fixture(scope="module")
def large():
    return simulate(seed=20240601, answers_per_week=7000)


@pytest.fixture(scope="module")
def small():
    return simulate(seed=20240602, answers_per_week=300)


def below(values: np.ndarray) -> np.ndarray:
    return (values < ACTION_THRESHOLD).astype(float)


def test_scenario_is_realistic(large, small):
    # The scenario the brief describes: ~5 % flagged, flagged mean ~0.6, unflagged ~0.93
    # with most answers exactly 1.0, ~200 random judged answers a week (~8 in the small one).
    flagged, score = large["flagged"], large["score"]
    assert 0.045 < flagged.mean() < 0.055
    assert 0.55 < score[flagged].mean() < 0.65
    assert 0.90 < score[~flagged].mean() < 0.95
    assert 0.65 < np.mean(score[~flagged] == 1.0) < 0.85
    random_judged = large["judged"] & ~flagged
    assert 180 < random_judged.sum() / WEEKS < 220
    assert 6 < (small["judged"] & ~small["flagged"]).sum() / WEEKS < 11


def test_mean_is_unbiased_and_covers_95_percent(large):
    truth = week_truth(large, large["score"])
    value, low, high = run(stratified_mean, large, large["score"])
    assert not np.isnan(value).any()
    bias = float(np.mean(value - truth))
    cover = coverage(truth, low, high)
    print(f"\n7000/week mean: bias {bias:+.5f}, coverage {cover:.3f}")
    assert abs(bias) < 0.005
    assert 0.93 <= cover <= 0.97
    # The naive mean of judged answers (flagged overrepresented ~7-fold) is badly biased:
    # the reason it must never be shown as "the rate".
    judged = large["judged"]
    naive = np.bincount(large["week"][judged], large["score"][judged]) / np.bincount(
        large["week"][judged]
    )
    assert np.mean(naive - truth) < -0.04


def test_share_below_threshold_covers_95_percent(large):
    values = below(large["score"])
    truth = week_truth(large, values)
    value, low, high = run(stratified_share, large, values)
    bias = float(np.mean(value - truth))
    cover = coverage(truth, low, high)
    print(f"\n7000/week share below {ACTION_THRESHOLD}: bias {bias:+.5f}, coverage {cover:.3f}")
    assert abs(bias) < 0.005
    assert 0.93 <= cover <= 0.97


def test_claim_share_covers_95_percent(large):
    truth = np.bincount(large["week"], large["points"], minlength=WEEKS) / np.bincount(
        large["week"], large["claims"].astype(float), minlength=WEEKS
    )
    key = large["week"] * 2 + (~large["flagged"])
    sizes = np.bincount(key, minlength=2 * WEEKS).reshape(WEEKS, 2)
    judged = large["judged"]
    order = np.argsort(key[judged], kind="stable")
    pairs = list(
        zip(large["points"][judged][order].tolist(), large["claims"][judged][order].tolist(),
            strict=True)
    )
    ends = np.cumsum(np.bincount(key[judged], minlength=2 * WEEKS)).tolist()
    starts = [0, *ends[:-1]]
    value, low, high = np.empty(WEEKS), np.empty(WEEKS), np.empty(WEEKS)
    for w in range(WEEKS):
        strata = [
            ClaimStratum(int(sizes[w, h]), pairs[starts[2 * w + h] : ends[2 * w + h]])
            for h in (0, 1)
        ]
        e = claim_share(strata)
        value[w], low[w], high[w] = e.value, e.low, e.high
    bias = float(np.mean(value - truth))
    cover = coverage(truth, low, high)
    print(f"\n7000/week claim share: bias {bias:+.5f}, coverage {cover:.3f}")
    # A ratio estimator has a bias of order 1/n; with ~550 judged answers it is negligible.
    assert abs(bias) < 0.005
    assert 0.93 <= cover <= 0.97


def test_small_weeks_still_cover_and_wald_does_not(small):
    truth = week_truth(small, small["score"])
    value, low, high = run(stratified_mean, small, small["score"])
    known = ~np.isnan(value)
    # A week without any random judged answer cannot be estimated (0.97^285 ≈ 0.02 %).
    assert known.mean() > 0.99
    cover = coverage(truth, low, high)
    bias = float(np.mean(value[known] - truth[known]))
    assert (high - low)[known].min() > 0.05  # never collapses, even when all values are 1.0
    w_value, w_low, w_high = wald(small, small["score"])
    wald_cover = coverage(truth, w_low, w_high)
    zero_width = float(np.mean((w_high - w_low)[known] < 1e-12))
    print(
        f"\n300/week mean: bias {bias:+.5f}, coverage {cover:.3f}; "
        f"Wald coverage {wald_cover:.3f}, zero-width {zero_width:.2f}"
    )
    assert abs(bias) < 0.01  # ~8 random answers a week: more noise, still no bias
    assert cover >= 0.90
    assert wald_cover < 0.85  # the interval the product must not use
    assert zero_width > 0.1


def test_small_weeks_share_below_threshold(small):
    values = below(small["score"])
    truth = week_truth(small, values)
    _, low, high = run(stratified_share, small, values)
    cover = coverage(truth, low, high)
    _, w_low, w_high = wald(small, values)
    wald_cover = coverage(truth, w_low, w_high)
    print(f"\n300/week share below: coverage {cover:.3f}; Wald coverage {wald_cover:.3f}")
    assert cover >= 0.90
    assert wald_cover < 0.85
