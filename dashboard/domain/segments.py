"""Segments (issue 40): faithfulness by generator model, sending service, prompt version, the
chunks' source and the metadata keys a team lead declares per use case.

Each segment's figure is the use case's estimator applied to the segment's answers alone: its
judged answers are still its flagged ones (all judged) and a random share of the others, so it
is stratified like a week (`statistics.estimates`), pooled over the weeks asked for. Its
difference to the rest of the use case (the other segments of the same dimension together) is
the difference of two independent pooled estimates — disjoint answers, each sampled on its own
hash — with a Wald interval at a level corrected for the number of segments compared
(Bonferroni), and Holm-adjusted p-values (`adjusted.holm`): with ten models and no true
difference, one of them would otherwise differ "significantly" in 40 % of use cases.

A change on the team's side — a new generator model or prompt version — is found from the
volumes alone (`changes`): the week a value starts carrying most of a dimension's answers.

Plain Python (no django): the selectors feed it the sums of judged scores per week and
stratum (`Scores`), from the raw rows or the rollups.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dashboard.domain.adjusted import holm
from dashboard.domain.expert_scale import ExpertScale, Review
from dashboard.domain.expert_weeks import expert_scale_by_week
from dashboard.domain.statistics.cells import (
    MIN_JUDGED,
    Estimate,
    StratumSums,
    unit,
    wilson,
    z_value,
)
from dashboard.domain.statistics.estimates import pooled_mean, share_from_sums
from dashboard.domain.statistics.precision import (
    DECISIVE_HALF_WIDTH,
    sample_rate_for,
    traffic_light,
)

# How many segments of one dimension are shown and compared: the largest by volume; the rest
# stays in "the rest" of each comparison.
MAX_SEGMENTS = 50
# A value carries "most of the volume" from this share on (`changes`): the lower end of its
# share's 95 % Wilson interval above it, so that two models at 55/45 do not trade the lead
# every few weeks by chance, while ten answers of ten from a new model are a change.
MAJORITY = 0.5
# A week needs this many answers before its leading value counts as a change.
MIN_CHANGE_VOLUME = 5
# Weeks on each side of a change whose figures are compared.
CHANGE_WEEKS = 4
CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class Scores:
    """A stratum's judged scores by their sums: how many, Σ score, Σ score² and how many lie
    below the action threshold — what the estimates, the spreads and the share below need, and
    what the database sums for a segment's week (in exact decimals, so that the raw rows and
    the rollups give the same floats)."""

    n: int = 0
    total: float = 0.0
    squares: float = 0.0
    below: int = 0

    @classmethod
    def of(cls, histogram: Mapping[float, int], threshold: float) -> Scores:
        """The sums of a histogram (score → judged answers)."""
        items = [(unit(v), int(k)) for v, k in histogram.items()]
        if any(k < 0 for _, k in items):
            raise ValueError("counts must be at least 0")
        return cls(sum(k for _, k in items), math.fsum(v * k for v, k in items),
                   math.fsum(v * v * k for v, k in items),
                   sum(k for v, k in items if v < threshold))

    def __add__(self, other: Scores) -> Scores:
        return Scores(self.n + other.n, self.total + other.total,
                      self.squares + other.squares, self.below + other.below)

    def minus(self, other: Scores) -> Scores:
        n = max(0, self.n - other.n)
        if not n:
            return Scores()
        return Scores(n, max(0.0, self.total - other.total),
                      max(0.0, self.squares - other.squares), max(0, self.below - other.below))

    def sums(self, size: int, *, drawn: bool, below: bool = False) -> StratumSums:
        """The stratum's sums for the estimators: of the scores, or (`below`) of the indicator
        "below the threshold"."""
        if below:
            total, squares = float(self.below), float(self.below)
        else:
            total, squares = self.total, self.squares
        sq_dev = max(0.0, squares - total * total / self.n) if self.n else 0.0
        return StratumSums(max(size, self.n), self.n, total, sq_dev, drawn)


@dataclass(frozen=True, slots=True)
class Tally:
    """One week of a segment (or of the whole use case): answers per stratum and the judged
    answers' score sums per stratum, [flagged, unflagged]."""

    sizes: tuple[int, int] = (0, 0)
    scores: tuple[Scores, Scores] = (Scores(), Scores())

    @classmethod
    def of(cls, sizes: tuple[int, int],
           histograms: tuple[Mapping[float, int], Mapping[float, int]],
           threshold: float) -> Tally:
        """From each stratum's histogram of judged scores (score → answers)."""
        return cls(sizes, (Scores.of(histograms[0], threshold),
                           Scores.of(histograms[1], threshold)))

    def __add__(self, other: Tally) -> Tally:
        return Tally((self.sizes[0] + other.sizes[0], self.sizes[1] + other.sizes[1]),
                     (self.scores[0] + other.scores[0], self.scores[1] + other.scores[1]))

    @property
    def volume(self) -> int:
        return self.sizes[0] + self.sizes[1]

    @property
    def judged(self) -> int:
        return self.scores[0].n + self.scores[1].n

    def minus(self, other: Tally) -> Tally:
        """This week without `other`'s answers (a segment taken out of the use case)."""
        return Tally(
            (max(0, self.sizes[0] - other.sizes[0]), max(0, self.sizes[1] - other.sizes[1])),
            (self.scores[0].minus(other.scores[0]), self.scores[1].minus(other.scores[1])),
        )

    def strata(self, *, below: bool = False) -> list[StratumSums]:
        """[flagged, unflagged] sums (`below`: of the indicator "below the threshold")."""
        return [scores.sums(size, drawn=h == 1, below=below)
                for h, (size, scores) in enumerate(zip(self.sizes, self.scores, strict=True))]


@dataclass(frozen=True, slots=True)
class Difference:
    """A segment's figure minus the rest's, with its interval at the corrected level."""

    value: float
    low: float
    high: float
    p_adjusted: float  # Holm over the segments compared
    confidence: float  # the level of the interval, corrected for the comparisons
    compared: int  # how many segments were compared

    @property
    def holds(self) -> bool:
        """The corrected interval excludes 0."""
        return self.low > 0 or self.high < 0


@dataclass(frozen=True, slots=True)
class SegmentFigure:
    dimension: str
    value: str
    volume: int
    flagged: int
    share: float  # of the dimension's answers
    estimate: Estimate  # pooled over the weeks
    below: Estimate  # share of answers below the action threshold
    light: str
    rest: Estimate  # the rest of the use case, the same way
    difference: Difference | None  # None: this segment or the rest cannot be estimated
    # Grey: the sample rate at which these weeks would have decided it (None: none can say).
    sample_rate_needed: float | None
    # On the experts' scale where its answers were reviewed (None: no review of them).
    expert: ExpertScale | None = None

    @property
    def decided(self) -> bool:
        return self.light != "grey"


def pooled_of(weeks: Sequence[Tally]) -> Estimate:
    """The weeks' pooled stratified estimate, as the use case's pooled view takes it."""
    return pooled_mean([t.strata() for t in weeks], confidence=CONFIDENCE)


def _merged(weeks: Sequence[Tally]) -> Tally:
    return sum(weeks, Tally())


def _below(weeks: Sequence[Tally]) -> Estimate:
    return share_from_sums(_merged(weeks).strata(below=True))


def breakdown(
    dimension: str,
    segments: Mapping[str, Sequence[Tally]],
    whole: Sequence[Tally],
    *,
    threshold: float,
    confidence: float = CONFIDENCE,
    reviews: Mapping[str, Sequence[Sequence[Review]]] | None = None,
) -> list[SegmentFigure]:
    """The figures of a dimension's segments over the same weeks, largest first.

    ``segments``: value → its weeks (each a Tally, in the order of ``whole``); ``whole``: the
    use case's weeks, all segments together. The segments compared are the MAX_SEGMENTS largest
    with an estimate and a rest to compare with; the interval of each difference is at level
    1 − α/m for m of them, its p-value Holm-adjusted over them. ``reviews``: value → the
    experts' reviews of its answers per week (as ``whole``): each reviewed segment is also put
    on the experts' scale, as the week is (`expert_weeks`). ``threshold`` decides the lights;
    the share below it comes with the tallies (`Scores.below`), counted at the same threshold.
    """
    total = sum(t.volume for t in whole)
    compared = _compare(segments, whole, confidence)
    return [
        _figure(dimension, value, weeks, whole, total, compared, threshold,
                (reviews or {}).get(value))
        for value, weeks in compared.ranked
    ]


@dataclass(frozen=True, slots=True)
class _Compared:
    """A dimension's segments compared with their rests: the ranked segments, and for those
    with a difference its value and standard error, Holm-adjusted p-value, level and count."""

    ranked: list[tuple[str, Sequence[Tally]]]
    raw: dict[str, tuple[float, float]]  # value → (difference, its standard error)
    adjusted: dict[str, float]
    corrected: float
    m: int
    z: float

    def difference(self, value: str) -> Difference | None:
        if value not in self.raw:
            return None
        d, se = self.raw[value]
        # A difference of two scores in [0, 1] lies in [−1, 1]; so does its interval.
        return Difference(d, max(-1.0, d - self.z * se), min(1.0, d + self.z * se),
                          self.adjusted[value], self.corrected, self.m)


def _compare(
    segments: Mapping[str, Sequence[Tally]], whole: Sequence[Tally], confidence: float
) -> _Compared:
    ranked = sorted(segments.items(), key=lambda kv: (-sum(t.volume for t in kv[1]), kv[0]))
    ranked = ranked[:MAX_SEGMENTS]
    raw: dict[str, tuple[float, float]] = {}
    floor = spreads(whole)
    for value, weeks in ranked:
        if len(weeks) != len(whole):
            raise ValueError("every segment needs the weeks of the whole use case")
        rest_weeks = [w.minus(s) for w, s in zip(whole, weeks, strict=True)]
        if too_few(weeks) or too_few(rest_weeks):
            continue
        mine, theirs = model_mean(weeks, floor), model_mean(rest_weeks, floor)
        if mine is None or theirs is None:
            continue
        raw[value] = (mine[0] - theirs[0], math.sqrt(mine[1] + theirs[1]))
    # With two segments, each against the rest is one comparison, not two.
    m = len(raw) if len(ranked) > 2 else min(1, len(raw))
    corrected = 1 - (1 - confidence) / max(1, m)
    p_values = {v: _p_value(d, se) for v, (d, se) in raw.items()}
    adjusted = dict(zip(p_values, holm(list(p_values.values())), strict=True))
    return _Compared(ranked, raw, adjusted, corrected, m, z_value(corrected))


def too_few(weeks: Sequence[Tally]) -> bool:
    """`pooled_of(weeks).too_few` without the estimate: nothing judged where there are answers,
    fewer than MIN_JUDGED judged in all, or a drawn stratum with fewer than MIN_JUDGED of its
    own (as `pooled_mean` asks of the pooled weeks)."""
    n_all = 0
    for h in (0, 1):
        n = sum(t.scores[h].n for t in weeks)
        size = sum(max(t.sizes[h], t.scores[h].n) for t in weeks)
        if size and not n:
            return True
        if h == 1 and 0 < n < min(size, MIN_JUDGED):
            return True
        n_all += n
    return n_all < MIN_JUDGED


def _figure(
    dimension: str, value: str, weeks: Sequence[Tally], whole: Sequence[Tally], total: int,
    compared: _Compared, threshold: float, reviews: Sequence[Sequence[Review]] | None,
) -> SegmentFigure:
    estimate = pooled_of(weeks)
    rest = pooled_of([w.minus(s) for w, s in zip(whole, weeks, strict=True)])
    light = traffic_light(estimate, threshold)
    merged = _merged(weeks)
    needed = None
    if light == "grey" and merged.volume:
        needed = sample_rate_for(merged.strata(), half_width=DECISIVE_HALF_WIDTH)
    return SegmentFigure(
        dimension=dimension, value=value, volume=merged.volume, flagged=merged.sizes[0],
        share=merged.volume / total if total else 0.0, estimate=estimate,
        below=_below(weeks), light=light, rest=rest, difference=compared.difference(value),
        sample_rate_needed=needed, expert=_expert(weeks, reviews),
    )


def finding(
    dimension: str,
    segments: Mapping[str, Sequence[Tally]],
    whole: Sequence[Tally],
    *,
    threshold: float,
    confidence: float = CONFIDENCE,
) -> tuple[SegmentFigure | None, int]:
    """`leading_finding(breakdown(...))` and the number of differences compared, with the
    figure of the leading segment alone: the page's finding over every dimension costs the
    comparisons, not every segment's estimates."""
    compared = _compare(segments, whole, confidence)
    holding = [(value, weeks) for value, weeks in compared.ranked
               if (d := compared.difference(value)) is not None and d.holds]
    if not holding:
        return None, max((d.compared for d in map(compared.difference, compared.raw)
                          if d is not None), default=0)

    def rank(item: tuple[str, Sequence[Tally]]) -> tuple[float, bool, int]:
        d, _ = compared.raw[item[0]]
        return (round(abs(d), 9), d < 0, sum(t.volume for t in item[1]))

    value, weeks = max(holding, key=rank)
    figure = _figure(dimension, value, weeks, whole, sum(t.volume for t in whole), compared,
                     threshold, None)
    return figure, compared.m


# The pseudo-answer of each stratum's spread in `model_mean`: one answer at the stratum's own
# mean's Bernoulli spread, so that a stratum judged all 1.0 does not claim no spread at all.
SPREAD_PRIOR = 1.0


def model_mean(
    weeks: Sequence[Tally], floor: Sequence[float] = (0.0, 0.0)
) -> tuple[float, float] | None:
    """The segment's mean over its weeks and its variance as an estimate of what the segment
    produces, not of the answers it happened to produce: the weekly estimate's variance is
    about this week's answers (a stratum judged in full has none), but whether a model is worse
    than the rest is a question about the process behind them, and under it the flagged
    answers are a sample too. So: week × stratum cells weighted by their answers, each stratum's
    spread pooled over its weeks (sum of squares over n − 1, plus SPREAD_PRIOR) but never
    below ``floor`` (the whole use case's, `spreads`), and no finite population correction.
    Scores crowd at 1.0, so a segment's twenty random answers, all 1.0, claim almost no spread:
    with its own spread alone, a difference to the rest was called in a quarter to nine tenths
    of use cases without one (`bench/statistics.py --only segments`). None where a non-empty
    stratum has no judged answer."""
    cells: list[tuple[int, int, float, int]] = []  # (answers, judged, mean, stratum)
    spreads: list[float] = []
    for h in (0, 1):
        sizes = [t.sizes[h] for t in weeks]
        sums = [t.scores[h].sums(t.sizes[h], drawn=h == 1) for t in weeks]
        size, n = sum(max(a, s.n) for a, s in zip(sizes, sums, strict=True)), sum(s.n for s in sums)
        if size and not n:
            return None
        if not size:
            spreads.append(0.0)
            continue
        total = math.fsum(s.total for s in sums)
        if any(s.size and not s.n for s in sums):  # a week without a judged answer: collapse
            mean = total / n
            squares = math.fsum(s.sq_dev + s.n * (s.total / s.n - mean) ** 2
                                for s in sums if s.n)
            cells.append((size, n, mean, h))
            dof = n - 1
        else:
            cells += [(s.size, s.n, s.total / s.n, h) for s in sums if s.size]
            squares = math.fsum(s.sq_dev for s in sums)
            dof = n - sum(1 for s in sums if s.n)
        shrunk = (total + 0.5) / (n + 1)
        spreads.append(max(floor[h], (squares + SPREAD_PRIOR * shrunk * (1 - shrunk))
                           / max(dof + SPREAD_PRIOR, SPREAD_PRIOR)))
    answers = sum(c[0] for c in cells)
    if not answers:
        return None
    value = math.fsum(size * mean for size, _, mean, _ in cells) / answers
    variance = math.fsum((size / answers) ** 2 * spreads[h] / n for size, n, _, h in cells)
    return value, variance


def spreads(weeks: Sequence[Tally]) -> tuple[float, float]:
    """Each stratum's spread of scores over the weeks (about each week's mean), [flagged,
    unflagged]: the floor of every segment's in `model_mean`."""
    out = []
    for h in (0, 1):
        sums = [t.scores[h].sums(t.sizes[h], drawn=h == 1) for t in weeks]
        n = sum(s.n for s in sums)
        dof = n - sum(1 for s in sums if s.n)
        out.append(math.fsum(s.sq_dev for s in sums) / dof if dof > 0 else 0.0)
    return out[0], out[1]


def _expert(weeks: Sequence[Tally], reviews: Sequence[Sequence[Review]] | None
            ) -> ExpertScale | None:
    if not reviews or not any(reviews):
        return None
    return expert_scale_by_week([t.strata() for t in weeks], list(reviews))


def _p_value(difference: float, se: float) -> float:
    """Two-sided normal p-value of a difference over its standard error."""
    if se <= 0:
        return 0.0 if difference else 1.0
    return math.erfc(abs(difference) / se / math.sqrt(2))


def leading_finding(figures: Sequence[SegmentFigure]) -> SegmentFigure | None:
    """The largest difference that holds (its corrected interval excludes 0), or None; of
    two as large (two segments mirror each other), the worse segment."""
    holding = [f for f in figures if f.difference is not None and f.difference.holds]
    if not holding:
        return None
    return max(holding, key=lambda f: (round(abs(f.difference.value), 9) if f.difference else 0.0,
                                       bool(f.difference and f.difference.value < 0), f.volume))


@dataclass(frozen=True, slots=True)
class Change:
    """The week a value starts carrying most of a dimension's answers."""

    dimension: str
    week: int  # index into the weeks given
    before: str  # the value that led before ("" where none led)
    after: str
    share: float  # of the week's answers that `after` carried


def changes(
    dimension: str, volumes: Sequence[Mapping[str, int]], *, since: int = 0
) -> list[Change]:
    """The weeks (from index `since` on) whose leading value — more than MAJORITY of the
    week's answers beyond chance (the lower end of the share's Wilson interval), at
    MIN_CHANGE_VOLUME answers or more — differs from the latest leading value before it.
    ``volumes``: per week, value → answers. A gradual switch is marked in the week the new
    value clearly passes half; a week without a leader changes nothing."""
    out: list[Change] = []
    leader: str | None = None
    for i, week in enumerate(volumes):
        total = sum(week.values())
        if total < MIN_CHANGE_VOLUME:
            continue
        value, n = max(week.items(), key=lambda kv: (kv[1], kv[0]))
        if wilson(n, total)[0] <= MAJORITY:
            continue
        if leader is not None and value != leader and i >= since:
            out.append(Change(dimension, i, leader, value, n / total))
        leader = value
    return out


def change_window(weeks: int, change: Change) -> tuple[range, range]:
    """The weeks compared around a change: up to CHANGE_WEEKS before it and from it on."""
    return (
        range(max(0, change.week - CHANGE_WEEKS), change.week),
        range(change.week, min(weeks, change.week + CHANGE_WEEKS)),
    )


def enough_judged(weeks: Sequence[Tally]) -> bool:
    """Whether a segment's weeks hold MIN_JUDGED judged answers at all."""
    return sum(t.judged for t in weeks) >= MIN_JUDGED


# /metrics labels a segment's series by its value: the TOP_LABELS largest and OTHER for the rest,
# so that a use case with hundreds of prompt versions cannot blow up Prometheus' series.
TOP_LABELS = 10
OTHER = "other"


def top_values(counts: Mapping[str, int], k: int = TOP_LABELS) -> dict[str, int]:
    """The k largest values (ties by name) and OTHER with the sum of the rest (if any)."""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    out = dict(ranked[:k])
    rest = sum(n for _, n in ranked[k:])
    if rest:
        out[OTHER] = out.get(OTHER, 0) + rest
    return out
