"""bench/expert_sim.py (statistics.py --only expert): the scenarios the issue names are there,
and a row misses its targets only beyond two Monte Carlo standard errors."""

from types import SimpleNamespace

from bench.expert_sim import Tally, scenarios


def tally(covered: int, above: int, below: int, none: int = 0) -> Tally:
    out = Tally()
    n = covered + above + below
    out.covered, out.above, out.below, out.none = covered, above, below, none
    out.error, out.width = [0.0] * n, [0.1] * n
    return out


def test_the_issues_scenarios_are_there() -> None:
    groups = {s.group for s in scenarios()}
    assert groups == {"uneven volume, judge change in weeks 3-4",
                      "judge change in the newest week", "in control, ≥ 20 % flagged",
                      "strict judge, ≥ 2,000 answers a week"}
    uneven = [s for s in scenarios() if s.group.startswith("uneven")]
    # Four times the volume in two of four weeks, the judge changed from week 3 (index 2) on.
    for s in uneven:
        low = min(s.volumes)
        assert sorted(s.volumes) == [low, low, 4 * low, 4 * low]
    assert all(s.restart == 2 and s.judges[1] != s.judges[2] for s in uneven)
    newest = [s for s in scenarios() if s.group == "judge change in the newest week"]
    assert {s.restart for s in newest} == {3}
    assert all(s.volumes[0] >= 2_000 for s in scenarios() if s.group.startswith("strict"))
    assert all(s.flagged >= 0.2 for s in scenarios() if s.group.startswith("in control"))


def test_a_row_misses_only_beyond_the_monte_carlo_error() -> None:
    # 1,000 pools: a coverage's standard error is 0.69 points, a 3.5 % tail's 0.58.
    assert tally(950, 25, 25).misses() == ([], [])
    assert tally(965, 20, 15).misses() == ([], ["covers 96.5 %"])
    assert tally(980, 10, 10).misses() == (["covers 98.0 %"], [])
    assert tally(940, 52, 8).misses() == (["truth above in 5.2 %"], [])
    assert tally(955, 40, 5).misses() == ([], ["truth above in 4.0 %"])
    assert tally(0, 0, 0, none=1000).misses() == ([], [])


def test_a_pool_without_a_figure_counts_as_none() -> None:
    t = Tally()
    t.add(SimpleNamespace(value=None, too_few=True), 0.9)
    t.add(SimpleNamespace(value=0.9, low=0.8, high=0.95, too_few=True), 0.9)
    t.add(SimpleNamespace(value=0.9, low=0.8, high=0.95, too_few=False), 0.97)
    assert (t.none, t.n, t.above, t.covered) == (2, 1, 1, 0)
    assert t.row().endswith(" 67%")
