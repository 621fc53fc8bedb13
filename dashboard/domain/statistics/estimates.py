"""Estimates for the team-lead dashboard: faithfulness of a use case per week, with intervals.

Tier 2 judges answers with unequal inclusion probabilities: every flagged answer (π = 1) and a
random share of the others (π = sample rate). The judged answers are therefore a stratified
sample, and the mean over them overweights the flagged ones, which are much less faithful. Every
estimate here is stratified: per stratum h (flagged, unflagged) the judged answers are a simple
random sample of n_h from the stratum's N_h answers (the hash draw is independent of the flag
and of the answer; judge failures are assumed to miss at random), and the population mean is

    ŷ = Σ_h W_h · ȳ_h,    W_h = N_h / N.

The interval ("stratified Wilson", after Kott & Liu 2009) is a Wilson score interval with an
effective sample size n_eff = p̃(1 − p̃) / V, where V is the stratified variance

    V = Σ_h W_h² · (1 − n_h/N_h) · s̃_h² / n_h.

A Wald or t interval (ŷ ± z·√V with the plain sample variance) is useless here: most answers
score exactly 1.0, so a small random stratum often has s_h² = 0 and the interval collapses to
a point; in simulation such intervals cover the truth in about 57-75 % of small weeks. Three
things keep this one honest:

- s̃_h² is the variance of the stratum's judged values plus a pseudo-answer of weight k (half
  of it at 1, half at 0), taken about the shrunk mean p̃_h = (Σy + k/2)/(n_h + k) and divided
  by n_h + k. With all values 1.0 it is p̃_h(1 − p̃_h) > 0, not 0; with a real spread of
  values the pseudo-answer adds O(k/n_h) and vanishes on large samples. For shares (0/1
  values) k = 1, Jeffreys' Beta(½, ½) prior counts: in one stratum s̃² is exactly
  p̃(1 − p̃), and the interval reduces to the textbook Wilson interval for k of n. For means of
  scores k = SCORE_PRIOR = 0.2: a score mixing 1.0 with partial values varies far less than a
  0/1 value of the same mean, so a whole pseudo-answer at 0 and 1 dominated a small sample's
  spread and the intervals covered 97-98 % instead of 95 % (`bench/statistics.py`).
- Wilson rather than ŷ ± z·√V: the score interval is asymmetric near 1, where the weekly
  estimates live, and never leaves [0, 1].
- For means and shares, the strata judged in full (the flagged ones) are a fixed part: their
  contribution Σ W_h·ȳ_h is known, and only the part drawn at random is uncertain. The Wilson
  interval is taken on the drawn part's own mean, whose skew near 0 or 1 is what the interval
  must follow, and the fixed part is added back. Taken on the whole week instead, a share of
  bad answers near 0 is pulled toward the flagged stratum's larger share and its upper end is
  too low (the truth lay above the interval in up to 8 % of simulated weeks).

A stratum judged in full (n_h = N_h) has no sampling error: the finite population correction
removes its variance and its values enter p̃ unshrunk.

Pooled weeks (`pooled_mean`) are stratified over week × stratum cells, each with a
pseudo-answer of its own, but the cells of one stratum share one spread: their sums of squares
(each about its week's shrunk mean) over their degrees of freedom Σ(n_c − 1 + k), as a one-way
analysis of variance pools its groups' variances. That is what pooling assumes anyway: a
stratum's answers vary alike from week to week, whatever their mean. With a spread of its own,
a week whose three or four random answers were all 1.0 claimed p̃(1 − p̃) at its tiny n,
Bernoulli's worst case, as if its unseen answers could only be 0 or 1; where a lenient judge
scores most answers 1.0, V then averaged 1.6-2.9 times the estimate's actual variance. Pooled
over n_c + k with a week's pseudo-answer (k = SCORE_PRIOR, which also made up for the degree
of freedom each week's mean takes), V was still 1.5 times it there and the pooled interval
covered 96.9-97.1 % at 500 answers a week. Over the degrees of freedom, a pseudo-answer of
POOLED_PRIOR = 0.03 per cell is enough: 94.0-95.8 % at 150-500 answers a week
(`bench/statistics.py`). A stratum left with one cell (a pool of one week, or collapsed) has
nothing to pool and is taken as a week is.

Everything here runs on each stratum's sufficient statistics (`StratumSums`: size, judged
count, sum, sum of squared deviations), which a database can aggregate and a simulation can
produce for thousands of weeks without building lists; the list-taking functions reduce their
values to them first. Coverage, bias and width are measured by `bench/statistics.py`.

Plain Python on purpose (no django, no openai): the selectors feed it plain values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from dashboard.domain.statistics.cells import (
    MIN_JUDGED,
    SHARE_LOST,
    SHARE_PRIOR,
    Cell,
    Estimate,
    Fit,
    Stratum,
    StratumSums,
    as_sums,
    estimate_cells,
    fit_cells,
    mean_cell,
    merge_cells,
    summarize,
)

SCORE_PRIOR = 0.2
# Pooled weeks: a stratum's spread is pooled over its week cells by their degrees of freedom
# (`fit_cells`), and the pseudo-answer per week × stratum cell is this much. With the spread over
# n_c + k, as a week takes it, k = SCORE_PRIOR also made up for the n_c − 1 the spread should
# be divided by (a pool of four weeks of seven answers: 24 degrees of freedom, not 28), and where
# a lenient judge leaves most scores at 1.0 it was 1.5 times the spread: the pooled interval
# covered 96.9-97.1 % at 500 answers a week. Measured in bench/statistics.py.
POOLED_PRIOR = 0.03
# A week: its spread over its degrees of freedom too, n_h − 1 of them (WEEK_LOST), with a
# pseudo-answer of WEEK_PRIOR. Over n_h + SCORE_PRIOR, a week of four random answers took 0.8
# of the spread they show, and at 50 answers a week (one or two random ones) the interval held
# the week's truth in 92.0-95.1 % of weeks, missing above. Over n_h − 1 + 0.05: 97-98 % there
# (a week of one or two random answers can only be wide), 94.2-96.7 % at 150-2,000 a week;
# a pseudo-answer of 0.2 over n_h − 1 covered 97-98 % at 150 a week, 0.03 93.2 % at 500
# (bench/statistics.py, `--only small`).
WEEK_PRIOR = 0.05
WEEK_LOST = 1.0


def stratified_mean(strata: Sequence[Stratum], *, confidence: float = 0.95) -> Estimate:
    """Population mean of scores in [0, 1] with a stratified Wilson interval (SCORE_PRIOR).

    The interval is also cut to what the population mean can be at all, given that the
    unjudged answers lie somewhere in [0, 1]: this only removes impossible values, so coverage
    is unchanged, and it makes a nearly fully judged week's interval as narrow as it really is.
    """
    return mean_from_sums([summarize(s) for s in strata], confidence=confidence)


def mean_from_sums(strata: Sequence[StratumSums], *, confidence: float = 0.95) -> Estimate:
    """`stratified_mean` from each stratum's sufficient statistics."""
    return estimate_cells([week_cell(s) for s in strata], confidence)


def share_from_sums(strata: Sequence[StratumSums], *, confidence: float = 0.95) -> Estimate:
    """`stratified_share` from each stratum's sufficient statistics (of 0/1 values, unchecked:
    Σy² = Σy is the caller's promise)."""
    return estimate_cells([mean_cell(s, SHARE_PRIOR, SHARE_LOST) for s in strata], confidence)


def week_cell(s: StratumSums) -> Cell:
    """A stratum of one week's mean as the estimator takes it (WEEK_PRIOR, WEEK_LOST)."""
    return mean_cell(s, WEEK_PRIOR, WEEK_LOST)


def stratified_share(strata: Sequence[Stratum], *, confidence: float = 0.95) -> Estimate:
    """Population share of 0/1 indicators (e.g. score below the action threshold).

    The same estimator as ``stratified_mean`` with Jeffreys' whole pseudo-answer (SHARE_PRIOR):
    Wilson on the strata drawn at random, the strata judged in full added as a fixed part. With
    one stratum and no finite population correction the interval is exactly ``wilson(k, n)``.
    """
    for s in strata:
        try:
            fine = set(s.values) <= {0, 1}  # the same test as below, at C speed
        except TypeError:
            fine = False
        if fine:
            continue
        for v in s.values:
            if v not in (0, 1):
                raise ValueError(f"a share needs 0/1 values, not {v!r}")
    return share_from_sums([summarize(s) for s in strata], confidence=confidence)


def share_below(
    strata: Sequence[Stratum], threshold: float, *, confidence: float = 0.95
) -> Estimate:
    """Share of the week's answers scoring below ``threshold`` (the action line)."""
    if math.isnan(threshold):
        raise ValueError("threshold is NaN")
    return stratified_share(
        indicator_strata(strata, lambda v: v < threshold), confidence=confidence
    )


def pooled_mean(
    weeks: Sequence[Sequence[Stratum]] | Sequence[Sequence[StratumSums]],
    *,
    confidence: float = 0.95,
) -> Estimate:
    """One estimate over several weeks (e.g. a week and the 3 before it): the mean of all their
    answers, stratified over week × stratum cells, with the same fields as a week's.

    Every week gives its strata in the same order ([flagged, unflagged] as `week_strata`). A
    week whose stratum h is not empty but has no judged answer (a small week whose random draw
    hit nothing) would leave the pooled estimate undefined; instead, that stratum is collapsed
    over the weeks (one cell of all their stratum-h answers), assuming its mean does not differ
    from the other weeks' - the usual collapsed-strata remedy, and what pooling assumes anyway.
    ``too_few`` asks MIN_JUDGED of each drawn stratum over the pooled weeks, not of each week.
    Answers of the same sample rate in the same stratum could be pooled in one cell; cells per
    week also keep a change of the sample rate within the window unbiased. The cells of a
    stratum share one spread, pooled over its weeks (see the module's docstring), so a week of
    a few answers all 1.0 does not stand for its stratum's spread alone.
    """
    cells, n_by, short = _pooled_cells(weeks, POOLED_PRIOR, pooled=True)
    estimate = estimate_cells(cells, confidence, pooled=True)
    too_few = estimate.too_few if estimate.value is None else (
        estimate.n < MIN_JUDGED or short
    )
    return Estimate(
        estimate.value, estimate.low, estimate.high, estimate.n, estimate.population,
        n_by, too_few,
    )


def fit_pooled(
    weeks: Sequence[Sequence[Stratum]] | Sequence[Sequence[StratumSums]],
    *,
    prior: float = POOLED_PRIOR,
    pooled: bool = True,
) -> Fit | None:
    """The working parts behind `pooled_mean` (None when it is unknown).

    ``prior`` is the pseudo-answer's weight per week × stratum cell; ``pooled`` False takes a
    stratum's shared spread over n_c + k per cell, as one week takes its own, instead of over
    its degrees of freedom (the expert scale's judge part: see `expert_scale`).
    """
    return fit_cells(_pooled_cells(weeks, prior, pooled=pooled)[0], ratio=False, pooled=pooled)


def _pooled_cells(
    weeks: Sequence[Sequence[Stratum]] | Sequence[Sequence[StratumSums]],
    prior: float,
    *,
    pooled: bool,
) -> tuple[list[Cell], tuple[int, ...], bool]:
    """The week × stratum cells (collapsed where a stratum has an unjudged week), the judged
    answers per stratum, and whether a drawn stratum has fewer than MIN_JUDGED of them.

    ``prior`` per cell; ``pooled``: a stratum left with one non-empty cell (one week, or
    collapsed) has no spread to pool and takes SCORE_PRIOR, as a week does, so the pool of
    one week is that week's estimate.
    """
    layout = {len(week) for week in weeks}
    if len(layout) > 1:
        raise ValueError(f"every week needs the same strata, not {sorted(layout)} of them")
    columns = list(zip(*[[as_sums(s) for s in week] for week in weeks], strict=True))
    cells: list[Cell] = []
    n_by: list[int] = []
    short = False
    for h, column in enumerate(columns):
        stratum = [replace(mean_cell(s, prior), stratum=h) for s in column]
        if any(c.size > 0 and c.n == 0 for c in stratum):
            stratum = [merge_cells(stratum)]
        if pooled and sum(c.size > 0 for c in stratum) < 2:
            stratum = [replace(c, prior=WEEK_PRIOR, lost=WEEK_LOST) for c in stratum]
        n = sum(c.n for c in stratum)
        cells += stratum
        size = sum(c.size for c in stratum)
        n_by.append(n)
        short = short or (column[0].drawn and 0 < n < min(size, MIN_JUDGED))
    return cells, tuple(n_by), short


def fit_mean(
    strata: Sequence[Stratum] | Sequence[StratumSums], *, confidence: float = 0.95
) -> tuple[Estimate, Fit | None]:
    """The estimate of the mean and the working parts behind it (None when it is unknown)."""
    cells = [week_cell(as_sums(s)) for s in strata]
    return estimate_cells(cells, confidence), fit_cells(cells, ratio=False)


def week_strata(rows: Iterable[tuple[bool, float | None]]) -> list[Stratum]:
    """[flagged stratum, unflagged stratum] from (flagged, score or None) of EVERY answer.

    Unjudged answers (not sampled, pending or failed) count in the stratum size only.
    """
    sizes = [0, 0]
    values: list[list[float]] = [[], []]
    for flagged, score in rows:
        h = 0 if flagged else 1
        sizes[h] += 1
        if score is not None:
            values[h].append(score)
    return [Stratum(sizes[0], values[0], drawn=False), Stratum(sizes[1], values[1])]


def indicator_strata(
    strata: Sequence[Stratum], predicate: Callable[[float], bool]
) -> list[Stratum]:
    """The same strata with each value replaced by 1.0 where ``predicate`` holds, else 0.0."""
    return [
        Stratum(s.size, [1.0 if predicate(v) else 0.0 for v in s.values], s.drawn) for s in strata
    ]
