"""bench/statistics.py's count reference: the mid-p interval against hand-computed bounds, the
reference on either scale by hand, and which over-96 % cells the target check counts as the
count's discreteness; and bench/simulation.py's running week, looked at every hour."""

import dataclasses
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

from bench.simulation import _ARRIVAL, SAMPLE_RATE, Stratum, Weeks, _running_sums, use_case

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    # Loaded by path: run as a module named "statistics" it would shadow the standard library.
    spec = importlib.util.spec_from_file_location("treue_bench_statistics",
                                                  ROOT / "bench" / "statistics.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.mark.parametrize(("k", "n"), [(0, 12), (1, 12), (3, 47), (12, 12), (5, 10)])
def test_mid_p_puts_half_the_observed_count_in_each_tail(bench, k, n) -> None:
    low, high = bench._mid_p(k, n)
    assert 0 <= low <= k / n <= high <= 1
    if k > 0:  # P(X > k) + ½P(X = k) = 2.5 % at the lower bound
        assert binom.sf(k, n, low) + 0.5 * binom.pmf(k, n, low) == pytest.approx(0.025, abs=1e-9)
    else:
        assert low == 0
    if k < n:
        assert binom.cdf(k - 1, n, high) + 0.5 * binom.pmf(k, n, high) == pytest.approx(
            0.025, abs=1e-9)
    else:
        assert high == 1


def test_mid_p_by_hand_at_none_of_twelve(bench) -> None:
    # k = 0: ½(1 − q)^12 = 0.025, q = 1 − 0.05^(1/12) = 0.2209.
    assert bench._mid_p(0, 12)[1] == pytest.approx(1 - 0.05 ** (1 / 12), abs=1e-9)


def test_only_cells_whose_reference_is_over_96_are_excused(bench) -> None:
    cell = bench.CoverageCell
    cells = [
        cell("weekly", "500/wk lenient", False, 0.963, 0.977),  # the count: excused
        cell("pooled", "300/wk", False, 0.964, 0.961),  # within 0.5 points of it: excused
        cell("expert", "300/wk", False, 0.973, 0.963),  # a point over it: missed
        cell("weekly", "500/wk strict", False, 0.963, 0.955),  # the estimator: missed
        cell("pooled", "50000/wk", False, 0.962, None),  # no reference: missed
        cell("expert", "150/wk", True, 0.931, None),  # smallest setting: 93 % is enough
        cell("expert", "2000/wk", False, 0.939, None),  # elsewhere it is not
        cell("below", "500/wk", False, 0.95, None),
    ]
    verdict = bench.coverage_misses(cells)
    assert verdict.missed == [
        "weekly coverage 96.3 % at 500/wk strict",
        "pooled coverage 96.2 % at 50000/wk",
        "expert coverage 97.3 % at 300/wk, 93.9 % at 2000/wk",
    ]
    assert verdict.discrete == ["weekly 96.3 % at 500/wk lenient (reference 97.7 %)",
                                "pooled 96.4 % at 300/wk (reference 96.1 %)"]
    assert verdict.noise == verdict.smallest_over == []


def test_the_smallest_setting_has_a_floor_and_no_ceiling(bench) -> None:
    # The issue: "coverage 94-96 % (≥ 93 % in the smallest setting)".
    cell = bench.CoverageCell
    verdict = bench.coverage_misses([
        cell("expert", "150/wk lenient", True, 0.969, 0.959),
        cell("pooled", "150/wk strict", True, 0.925, None),
    ])
    assert verdict.missed == ["pooled coverage 92.5 % at 150/wk strict"]
    assert verdict.smallest_over == ["expert 96.9 % at 150/wk lenient"]


@pytest.mark.parametrize(("coverage", "intervals", "missed"), [
    (0.9625, 8_000, False),  # 0.25 over 96 %, two standard errors are 0.49: listed
    (0.9655, 8_000, True),  # 0.55 over: missed
    (0.9655, 2_000, False),  # at 2,000 pools two standard errors are 0.97 points
    (0.9355, 8_000, False),  # 0.45 under 94 %: listed
    (0.9345, 8_000, True),
    (0.9625, 0, True),  # without a count, no Monte Carlo slack
])
def test_monte_carlo_error_is_listed_not_missed(bench, coverage, intervals, missed) -> None:
    cell = bench.CoverageCell("expert", "10000/wk", False, coverage, None, intervals)
    verdict = bench.coverage_misses([cell])
    assert bool(verdict.missed) is missed
    assert bool(verdict.noise) is not missed
    if intervals:
        assert cell.tolerance == pytest.approx(2 * math.sqrt(0.95 * 0.05 / intervals))


def _one_week(**values):
    fields = [f.name for f in dataclasses.fields(Weeks)]
    arrays = {name: np.zeros((1, 1, 2)) for name in fields if name != "disagreements"}
    for name, pair in values.items():
        arrays[name][0, 0] = pair
    return Weeks(**arrays, disagreements=np.zeros((1, 1)))


@pytest.mark.parametrize(("scale", "fixed", "drawn", "k"), [
    ("judge", 0.08, 11.0 / 12, 2),  # the judge's scores and their count below 1.0
    ("expert", 0.07, 10.4 / 12, 3),  # the experts' scores of the same judged answers
])
def test_count_reference_by_hand(bench, scale, fixed, drawn, k) -> None:
    # 10 flagged answers (all judged) and 90 unflagged (12 judged), a shortfall of 0.4.
    weeks = _one_week(size=(10, 90), n=(10, 12), total=(8.0, 11.0), short=(3, 2),
                      expert_total=(7.0, 10.4), expert_short=(4, 3))
    value, low, high = bench._reference(weeks, 0, range(1), 0.4, scale)
    q_low, q_high = bench._mid_p(k, 12)
    assert value == pytest.approx(fixed + 0.9 * drawn)
    assert low == pytest.approx(fixed + 0.9 * (1 - q_high * 0.4))
    assert high == pytest.approx(fixed + 0.9 * (1 - q_low * 0.4))


def test_count_reference_needs_a_judged_drawn_answer(bench) -> None:
    weeks = _one_week(size=(10, 90), n=(10, 0), total=(8.0, 0.0))
    assert bench._reference(weeks, 0, range(1), 0.4, "expert") is None


def test_shortfall_on_each_scale(bench) -> None:
    # Three kinds of answer: (expert, judge) = (1, 1), (0.5, 1), (0.8, 0.6) at 50/30/20 %.
    stratum = Stratum(np.array([1.0, 0.5, 0.8]), np.array([1.0, 1.0, 0.6]),
                            np.array([0.5, 0.3, 0.2]))
    assert bench._shortfall(stratum) == pytest.approx(0.4)
    assert bench._shortfall(stratum, "expert") == pytest.approx((0.3 * 0.5 + 0.2 * 0.2) / 0.5)


def test_the_running_week_is_seen_cumulatively_at_each_of_168_looks() -> None:
    from dashboard.domain.headline import RUNNING_LOOKS

    case = use_case(5, flagged_share=0.2, expert_mean=0.9, judge="strict", bias=0.0)
    looks = _running_sums(np.random.default_rng(3), case, 2_000)
    assert len(looks) == RUNNING_LOOKS == len(_ARRIVAL)
    assert _ARRIVAL.sum() == pytest.approx(1.0)
    for h in (0, 1):
        sizes = [look[h].size for look in looks]
        judged = [look[h].n for look in looks]
        assert sizes == sorted(sizes) and judged == sorted(judged)
        assert all(n <= size for n, size in zip(judged, sizes, strict=True))
        assert all(look[h].drawn == (h == 1) for look in looks)
    # Monday's office hours (8-18 h) bring more answers than the night before them.
    assert looks[17][1].size - looks[7][1].size > looks[7][1].size
    flagged, unflagged = looks[-1]
    assert flagged.n >= 0.9 * flagged.size  # judged in full, but for failed runs
    assert unflagged.n == pytest.approx(SAMPLE_RATE * unflagged.size, rel=0.5)
    assert 0 < unflagged.total <= unflagged.n
