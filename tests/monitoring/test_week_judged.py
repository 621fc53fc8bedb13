"""A week's judged answers as histograms (`WeekJudged`) give the very figures the row lists
gave: the seam a rollup path will hand the same objects through (issue 22)."""

import random

from dashboard.domain.statistics import claims as statistics_claims
from dashboard.domain.statistics import estimates as statistics_estimates
from dashboard.domain.statistics.cells import Stratum, summarize
from dashboard.selectors.figures import _shares, _sums
from dashboard.selectors.judged import NO_CLAIMS, WeekJudged, judged_by_week
from dashboard.selectors.reads import JudgedRow


def rows(seed: int, n: int) -> tuple[list[JudgedRow], dict[int, tuple[float, int]]]:
    rng = random.Random(seed)
    out, claims = [], {}
    for i in range(n):
        m = rng.choice([0, 1, 2, 3, 5, 7])
        points = rng.randint(0, 2 * m) / 2
        score = 1.0 if m == 0 else points / m
        run = None if rng.random() < 0.05 else i
        if run is not None and m and rng.random() < 0.95:  # some runs' claims unreadable
            claims[run] = (points, m)
        out.append(JudgedRow(7, rng.randint(0, 2), rng.random() < 0.3, score, m == 0,
                             run_id=run))
    return out, claims


def test_histograms_give_the_lists_figures_to_the_last_bit():
    judged, claims = rows(1, 400)
    weeks = judged_by_week(judged, claims, claims_from=1)
    assert set(weeks) == {(7, 0), (7, 1), (7, 2)}
    assert weeks[7, 0].flagged.claims is None and weeks[7, 1].flagged.claims is not None
    for (_, wk), week in weeks.items():
        mine = [r for r in judged if r.week == wk]
        parts = [[r for r in mine if r.flagged], [r for r in mine if not r.flagged]]
        sizes = (len(parts[0]) + 3, len(parts[1]) * 10)
        strata = [Stratum(size, [r.score for r in part], drawn=h == 1)
                  for h, (size, part) in enumerate(zip(sizes, parts, strict=True))]
        assert _sums(sizes, week) == [summarize(s) for s in strata]
        shares = _shares(sizes, week, 0.8, claims=wk >= 1)
        assert shares.below == statistics_estimates.share_below(strata, 0.8)
        assert shares.abstention == statistics_estimates.stratified_share([
            Stratum(
                s.size, [1.0 if r.abstention else 0.0 for r in part], s.drawn)
            for s, part in zip(strata, parts, strict=True)])
        if wk >= 1:
            assert shares.claims == statistics_claims.claim_share([
                statistics_claims.ClaimStratum(s.size, [
                    NO_CLAIMS if r.run_id is None else claims.get(r.run_id, NO_CLAIMS)
                    for r in part], s.drawn)
                for s, part in zip(strata, parts, strict=True)])
        else:
            assert shares.claims is None


def test_a_stratum_is_never_smaller_than_what_was_judged_of_it():
    judged, _ = rows(2, 50)
    week = WeekJudged.from_rows([r for r in judged if r.week == 0])
    got = _sums((0, 0), week)  # counted before the answers were stored
    assert [s.size for s in got] == [week.flagged.n, week.unflagged.n]
    assert WeekJudged().flagged.n == 0 and WeekJudged().unflagged.claims is None
