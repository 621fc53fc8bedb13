"""The diagnosis of a use case's last CAUSES_WEEKS weeks: faithfulness by its likely causes
(retrieval similarity, number of chunks, multi-part questions, no chunk passing the threshold),
the trigger's worth (lift of the flagged answers over the random sample) and the threshold tuner.

Each group (a similarity bucket, ...) is estimated like a week: its flagged and its unflagged
answers are two strata, weighted by their sizes (`statistics.stratified_mean`). The answers are
counted per group by one GROUP BY; only the judged ones are read row by row.
"""

from __future__ import annotations

import dataclasses
import functools
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, NamedTuple

from django.db.models import Count, Q

from dashboard.domain import adjusted as causes_adjusted
from dashboard.domain import causes, tuner
from dashboard.domain.statistics import counts as statistics_counts
from dashboard.domain.statistics import estimates as statistics_estimates
from dashboard.domain.statistics import precision as statistics_precision
from dashboard.domain.statistics.cells import Estimate
from dashboard.domain.statistics.lift import Lift, lift
from dashboard.selectors import rollup_reads
from dashboard.selectors.reads import JudgedRow, Usage, answers_in, judged_rows, read_usage
from dashboard.selectors.segments import SegmentFilter
from dashboard.selectors.weeks import CAUSES_WEEKS, Week, iso_weeks, week_bucket
from judging.domain import cost
from monitoring.domain.moments import DEFAULT_CHUNK_EDGES, DEFAULT_SIMILARITY_EDGES
from monitoring.models import UseCase
from monitoring.models.buckets import Bucket as _Bucket
from monitoring.models.rollups import Dim, on_grid

SIMILARITY_EDGES = DEFAULT_SIMILARITY_EDGES
# The similarity the "no chunk passed" figure uses when the buckets offer no cutoff (nothing
# turns unfaithful, or too few answers to tell): a usual floor of RAG services for cosine
# similarity; the page names the value it used. Like every cutoff it is a bucket edge, so the
# answers below it are whole buckets.
DEFAULT_SIMILARITY_THRESHOLD = 0.5
assert DEFAULT_SIMILARITY_THRESHOLD in SIMILARITY_EDGES
CHUNK_EDGES = DEFAULT_CHUNK_EDGES
TUNER_THRESHOLDS = tuner.DEFAULT_THRESHOLDS


@dataclass(frozen=True)
class Causes:
    """Faithfulness by retrieval similarity, by number of chunks, of multi-part vs single
    questions, and of answers given although no chunk passed the similarity threshold."""

    similarity: list[causes.Bucket]
    cutoff: float | None  # similarity below which answers turn unfaithful; None: none found
    similarity_threshold: float  # the cutoff, or DEFAULT_SIMILARITY_THRESHOLD
    chunks: list[causes.Bucket]
    single: Estimate
    multi: Estimate
    no_passing_chunk: Estimate
    unclassified: int  # answers stored before the multi-part detector existed
    # Each cause's association with the score, the others held fixed (weighted regression,
    # multiplicity-corrected): what a piece of advice must rest on, not a bucket's dip.
    adjusted: causes_adjusted.Adjusted | None = None
    # A cut-off chosen on half of the weeks and confirmed on the other half: a bucket picked
    # for its dip on the same answers it is shown on proves nothing.
    cutoff_held_out: bool = False

    def effect(self, name: str) -> causes_adjusted.Effect | None:
        if self.adjusted is None:
            return None
        return next((e for e in self.adjusted.effects if e.name == name), None)


@dataclass(frozen=True)
class Tuner:
    rows: list[tuner.TunerRow]
    current: float  # the use case's threshold (one of the rows)
    random_sample: int  # judged random-sample answers the lift rests on
    calls_per_answer: float
    calls_measured: bool  # False: cost.ASSUMED_CALLS_PER_ANSWER


@dataclass(frozen=True)
class Diagnosis:
    """The last CAUSES_WEEKS weeks: causes, the trigger's worth (lift) and the tuner."""

    weeks: int
    causes: Causes
    worth: Lift
    unfaithful_below: float  # an answer counts as unfaithful below this score
    tuner: Tuner


def _grouped(
    counts: dict[tuple[Any, bool], int], judged: Mapping[tuple[Any, bool], Mapping[float, int]]
) -> dict[Any, Estimate]:
    """A stratified estimate per group from (group, flagged) counts of all answers and of the
    judged answers' scores (score → answers), as `Window` gives them. As a
    week's: a stratum is never smaller than what was judged of it, the flagged one is judged
    in full and the unflagged one drawn at random."""
    keys = {key for key, _ in counts} | {key for key, _ in judged}
    out = {}
    for key in keys:
        strata = []
        for flagged in (True, False):
            scores = judged.get((key, flagged), {})
            size = max(counts.get((key, flagged), 0), sum(scores.values()))
            strata.append(statistics_counts.sums_from_counts(scores, size=size, drawn=not flagged))
        out[key] = statistics_estimates.mean_from_sums(strata)
    return out


def _with_estimates(
    buckets: list[causes.Bucket], estimates: dict[int | None, Estimate]
) -> list[causes.Bucket]:
    """The domain's buckets (labels and bounds, made from no rows) with these estimates; the
    buckets are in index order with the "none" bucket, if any, last."""
    empty = statistics_estimates.stratified_mean([])
    keys: list[int | None] = list(range(len(buckets)))
    if buckets and buckets[-1].low is None and buckets[-1].high is None and len(buckets) > 1:
        keys[-1] = None
    return [
        dataclasses.replace(b, estimate=estimates.get(k, empty))
        for b, k in zip(buckets, keys, strict=True)
    ]


def _index(value: float | None, edges: Sequence[float]) -> int | None:
    """The bucket of a value, as _Bucket computes it in the database."""
    if value is None:
        return None
    if value != value:
        return 0  # NaN: no edge is <= it
    return bisect_right(edges, value)  # the edges <= value; the edges are sorted


# What a bucket is of: the rollups' dimensions (an answer is in one bucket of each). A bucket
# is an index for similarity and chunks (None: no similarity), a bool or None for multi-part,
# and for the tuner the probability that stands in for the answer's (None: no log-probs).
SIMILARITY, CHUNKS, MULTI_PART, PROBABILITY = (
    Dim.SIMILARITY, Dim.CHUNKS, Dim.MULTI_PART, Dim.PROBABILITY
)


@dataclass(frozen=True)
class Window:
    """The window's answers as the diagnosis reads them, from the raw rows or the rollups:
    answers per (dim, week, bucket, flagged), the judged answers' scores per (dim, week,
    bucket, flagged, in the random sample) - the probability only for the random sample - and
    the causes' regression, fitted by the source (rows or power sums)."""

    answers: Mapping[tuple[int, int, Any, bool], int]
    judged: Mapping[tuple[int, int, Any, bool, bool], Mapping[float, int]]
    adjusted: causes_adjusted.Adjusted

    @functools.cached_property
    def _answers_by_dim(self) -> dict[int, list[tuple[int, Any, bool, int]]]:
        out: dict[int, list[tuple[int, Any, bool, int]]] = defaultdict(list)
        for (dim, wk, bucket, flagged), n in self.answers.items():
            out[dim].append((wk, bucket, flagged, n))
        return out

    @functools.cached_property
    def _judged_by_dim(
        self,
    ) -> dict[int, list[tuple[int, Any, bool, bool, Mapping[float, int]]]]:
        out: dict[int, list[tuple[int, Any, bool, bool, Mapping[float, int]]]] = (
            defaultdict(list)
        )
        for (dim, wk, bucket, flagged, in_random), scores in self.judged.items():
            out[dim].append((wk, bucket, flagged, in_random, scores))
        return out

    def counts(
        self, dim: int, pick: Callable[[Any], Any] = lambda b: b,
        weeks: Callable[[int], bool] = lambda wk: True,
    ) -> dict[tuple[Any, bool], int]:
        """Answers by (pick(bucket), flagged), of the weeks `weeks` accepts."""
        out: dict[tuple[Any, bool], int] = defaultdict(int)
        for wk, bucket, flagged, n in self._answers_by_dim.get(dim, ()):
            if weeks(wk):
                out[pick(bucket), flagged] += n
        return out

    def scores(
        self, dim: int, pick: Callable[[Any], Any] = lambda b: b,
        weeks: Callable[[int], bool] = lambda wk: True, random_only: bool = False,
    ) -> dict[tuple[Any, bool], Counter[float]]:
        """Judged answers' scores by (pick(bucket), flagged): score → answers."""
        out: dict[tuple[Any, bool], Counter[float]] = defaultdict(Counter)
        for wk, bucket, flagged, in_random, scores in self._judged_by_dim.get(dim, ()):
            if weeks(wk) and (in_random or not random_only):
                out[pick(bucket), flagged].update(scores)
        return out

    def sizes(self) -> tuple[int, int]:
        return _sizes(self.answers)


def _sizes(answers: Mapping[tuple[int, int, Any, bool], int]) -> tuple[int, int]:
    """(flagged, unflagged) answers of the window: every answer has a chunk count."""
    out = [0, 0]
    for (dim, _, _, flagged), n in answers.items():
        if dim == CHUNKS:
            out[0 if flagged else 1] += n
    return out[0], out[1]


def _window_from_rows(
    cells: Sequence[Cell], rows: Sequence[JudgedRow], first: int,
    thresholds: Sequence[float],
) -> Window:
    """The window from the raw reads: the cells' counts and the judged rows (whose weeks count
    from `first`)."""
    answers: dict[tuple[int, int, Any, bool], int] = defaultdict(int)
    for c in cells:
        stand_in = None if c.low_p is None else (thresholds[c.low_p - 1] if c.low_p else 0.0)
        for dim, bucket in ((SIMILARITY, c.sim), (CHUNKS, c.chunk_bucket),
                            (MULTI_PART, c.multi_part), (PROBABILITY, stand_in)):
            answers[dim, c.wk, bucket, bool(c.flagged)] += c.n
    judged: dict[tuple[int, int, Any, bool, bool], Counter[float]] = defaultdict(Counter)
    for r in rows:
        wk, flagged, in_random = r.week - first, bool(r.flagged), bool(r.in_random_sample)
        for dim, bucket in ((SIMILARITY, _index(r.best_chunk_score, SIMILARITY_EDGES)),
                            (CHUNKS, _index(r.chunk_count, CHUNK_EDGES)),
                            (MULTI_PART, r.multi_part)):
            judged[dim, wk, bucket, flagged, in_random][r.score] += 1
        if in_random:
            judged[PROBABILITY, wk, r.min_content_probability, flagged, True][r.score] += 1
    return Window(answers, judged, causes_adjusted.adjusted_effects(
        [(r.best_chunk_score, r.chunk_count, bool(r.multi_part), r.flagged, r.score)
         for r in rows],
        sizes=_sizes(answers),
    ))


def _window_from_rollups(use_case: UseCase, span: Sequence[Week]) -> Window:
    answers, judged, moments = rollup_reads.causes_from_rollups(use_case.pk, span)
    return Window(answers, judged, causes_adjusted.adjusted_effects_from_moments(
        moments, sizes=_sizes(answers)
    ))


def _held_out_cutoff(window: Window, threshold: float) -> bool:
    """`causes.held_out_cutoff` on the grouped counts: the cut-off is chosen on the even weeks
    of the window and holds only if the odd weeks' answers below it are red as well."""
    def even(wk: int) -> bool:
        return wk % 2 == 0

    def odd(wk: int) -> bool:
        return not even(wk)

    chosen = _with_estimates(
        causes.similarity_buckets([], edges=SIMILARITY_EDGES),
        _grouped(window.counts(SIMILARITY, weeks=even), window.scores(SIMILARITY, weeks=even)),
    )
    cutoff = causes.similarity_cutoff(chosen, threshold)
    if cutoff is None:
        return False
    index = _index(cutoff, SIMILARITY_EDGES)
    below = _below(index)
    test = _grouped(
        window.counts(SIMILARITY, below, odd), window.scores(SIMILARITY, below, odd)
    ).get(True)
    return bool(
        test is not None and not test.too_few
        and statistics_precision.traffic_light(test, threshold) == "red"
    )


def _below(index: int | None) -> Callable[[Any], bool]:
    """Is a similarity bucket below the one of this index? (A cut-off is an edge, so "below
    the cut-off" is whole buckets.)"""
    return lambda b: b is not None and index is not None and b < index


class Cell(NamedTuple):
    """A group of the window's answers alike in everything the diagnosis asks about."""

    sim: int | None  # similarity bucket (SIMILARITY_EDGES)
    chunk_bucket: int  # number-of-chunks bucket (CHUNK_EDGES)
    multi_part: bool | None
    flagged: bool
    low_p: int | None  # bucket of the lowest content-word probability (tuner thresholds)
    wk: int  # week index in the window
    n: int  # answers


def _cells(
    use_case: UseCase, span: Sequence[Week], thresholds: Sequence[float], where: Q | None = None,
) -> list[Cell]:
    """All answers of the window (those `where` selects) per (similarity, chunks, multi-part,
    flagged, tuner bucket, week): one GROUP BY."""
    rows = (
        answers_in([use_case.pk], span).filter(where or Q())
        .annotate(
            sim=_Bucket("best_chunk_score", SIMILARITY_EDGES),
            chunk_bucket=_Bucket("chunk_count", CHUNK_EDGES),
            low_p=_Bucket("min_content_probability", thresholds),
            wk=week_bucket("created_at", span),
        )
        .values_list("sim", "chunk_bucket", "multi_part", "flagged", "low_p", "wk")
        .annotate(n=Count("*"))
        .order_by()
    )
    return [Cell(*row) for row in rows]


def _causes(window: Window, threshold: float) -> Causes:
    """Faithfulness by the causes' buckets, each a stratified estimate over the window."""
    similarity = _with_estimates(
        causes.similarity_buckets([], edges=SIMILARITY_EDGES),
        _grouped(window.counts(SIMILARITY), window.scores(SIMILARITY)),
    )
    cutoff = causes.similarity_cutoff(similarity, threshold)
    passing = cutoff if cutoff is not None else DEFAULT_SIMILARITY_THRESHOLD
    below = _below(_index(passing, SIMILARITY_EDGES))
    below_passing = _grouped(window.counts(SIMILARITY, below), window.scores(SIMILARITY, below))
    chunks = _with_estimates(
        causes.chunk_count_buckets([], edges=CHUNK_EDGES),
        _grouped(window.counts(CHUNKS), window.scores(CHUNKS)),
    )
    multi = _grouped(window.counts(MULTI_PART), window.scores(MULTI_PART))
    empty = statistics_estimates.stratified_mean([])
    return Causes(
        similarity=similarity,
        cutoff=cutoff,
        similarity_threshold=passing,
        chunks=chunks,
        single=multi.get(False, empty),
        multi=multi.get(True, empty),
        no_passing_chunk=below_passing.get(True, empty),
        unclassified=sum(window.counts(MULTI_PART, lambda b: b is None).get((True, f), 0)
                         for f in (True, False)),
        cutoff_held_out=_held_out_cutoff(window, threshold),
        adjusted=window.adjusted,
    )


def _worth(window: Window, threshold: float) -> Lift:
    """How much more often a flagged answer is unfaithful than one drawn at random."""
    every = lambda b: None  # noqa: E731  (every judged answer has a chunk bucket)
    flagged = window.scores(CHUNKS, every).get((None, True), Counter())
    random = window.scores(CHUNKS, every, random_only=True)
    drawn = random.get((None, True), Counter()) + random.get((None, False), Counter())
    return lift(
        flagged_bad=sum(n for score, n in flagged.items() if score < threshold),
        flagged_n=sum(flagged.values()),
        random_bad=sum(n for score, n in drawn.items() if score < threshold),
        random_n=sum(drawn.values()),
    )


def _tuner(
    use_case: UseCase, window: Window, usage: dict[tuple[int, int], Usage], *, first: int,
    weeks: int, thresholds: tuple[float, ...],
) -> Tuner:
    """What each tier-1 threshold would flag, catch and cost over the window."""
    # Each answer's lowest content-word probability, represented by the lower edge of its
    # bucket (between two thresholds, or two hundredths): the tuner only asks "below t?" for
    # these thresholds.
    answers: Counter[float | None] = Counter()
    for (p, _), n in window.counts(PROBABILITY).items():
        answers[p] += n
    sample: Counter[tuple[float | None, float]] = Counter()
    for (p, _), scores in window.scores(PROBABILITY, random_only=True).items():
        for score, n in scores.items():
            sample[p, score] += n
    recent = [u for (_, wk), u in usage.items() if wk >= first]
    ok_runs = sum(u.succeeded_runs for u in recent)
    ok_calls = sum(u.succeeded_calls for u in recent)
    calls_per_answer = ok_calls / ok_runs if ok_runs else cost.ASSUMED_CALLS_PER_ANSWER
    table = tuner.threshold_table_from_counts(
        answers=answers,
        random_sample=sample,
        rate=use_case.sample_rate,
        weeks=weeks,
        calls_per_answer=calls_per_answer,
        unfaithful_below=use_case.action_threshold,
        thresholds=thresholds,
    )
    return Tuner(
        rows=table,
        current=use_case.logprob_threshold,
        random_sample=sum(sample.values()),
        calls_per_answer=calls_per_answer,
        calls_measured=bool(ok_runs),
    )


def use_case_diagnosis(
    *, use_case: UseCase, until: datetime | date | None = None,
    judged: Sequence[JudgedRow] | None = None, usage: dict[tuple[int, int], Usage] | None = None,
    weeks: Sequence[Week] | None = None, segment: SegmentFilter | None = None,
) -> Diagnosis:
    """Causes, the trigger's worth and the tuner over the last CAUSES_WEEKS weeks (of the
    `segment`'s answers alone where it is given, read from the raw rows).

    `weeks` with `judged` and `usage` hand over what the weekly figures already read for these
    weeks (their last CAUSES_WEEKS are used), so the page reads each table once. Without
    `judged`, the window comes from the rollups once they are whole (and the tuner's thresholds
    lie on their grid of hundredths), else from the raw rows.
    """
    span = list(weeks) if weeks is not None else iso_weeks(weeks=CAUSES_WEEKS, until=until)
    first = max(0, len(span) - CAUSES_WEEKS)
    span = span[first:]
    ids = [use_case.pk]
    thresholds = tuple(sorted({*TUNER_THRESHOLDS, use_case.logprob_threshold}))
    ready = rollup_reads.rollups_ready()
    where = segment.answers() if segment else None
    if usage is None:
        usage = (rollup_reads.usage_from_rollups(ids, span) if ready and where is None
                 else read_usage(ids, span,
                                 where=segment.answers("answer__") if segment else None))
        first = 0
    if judged is None and ready and where is None and all(map(on_grid, thresholds)):
        window = _window_from_rollups(use_case, span)
    else:
        if judged is None:
            judged, first = judged_rows(ids, span, where=where), 0
        rows = [r for r in judged if r.use_case_id == use_case.pk and r.week >= first]
        window = _window_from_rows(_cells(use_case, span, thresholds, where), rows, first,
                                   thresholds)
    threshold = use_case.action_threshold
    return Diagnosis(
        weeks=len(span),
        causes=_causes(window, threshold),
        worth=_worth(window, threshold),
        unfaithful_below=threshold,
        tuner=_tuner(use_case, window, usage, first=first, weeks=len(span),
                     thresholds=thresholds),
    )
