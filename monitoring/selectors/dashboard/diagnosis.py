"""The diagnosis of a use case's last CAUSES_WEEKS weeks: faithfulness by its likely causes
(retrieval similarity, number of chunks, multi-part questions, no chunk passing the threshold),
the trigger's worth (lift of the flagged answers over the random sample) and the threshold tuner.

Each group (a similarity bucket, ...) is estimated like a week: its flagged and its unflagged
answers are two strata, weighted by their sizes (`statistics.stratified_mean`). The answers are
counted per group by one GROUP BY; only the judged ones are read row by row.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, NamedTuple

from django.db.models import Count

from monitoring.domain import causes, statistics, tuner
from monitoring.domain.statistics import Estimate, Lift
from monitoring.judging.domain import cost
from monitoring.models import UseCase
from monitoring.selectors.dashboard.reads import JudgedRow, Usage, _answers_in, _judged_rows, _usage
from monitoring.selectors.dashboard.weeks import CAUSES_WEEKS, Week, _Bucket, _week_of, iso_weeks

SIMILARITY_EDGES = causes.DEFAULT_SIMILARITY_EDGES
# The similarity the "no chunk passed" figure uses when the buckets offer no cutoff (nothing
# turns unfaithful, or too few answers to tell): a usual floor of RAG services for cosine
# similarity; the page names the value it used. Like every cutoff it is a bucket edge, so the
# answers below it are whole buckets.
DEFAULT_SIMILARITY_THRESHOLD = 0.5
assert DEFAULT_SIMILARITY_THRESHOLD in SIMILARITY_EDGES
CHUNK_EDGES = causes.DEFAULT_CHUNK_EDGES
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
    adjusted: causes.Adjusted | None = None
    # A cut-off chosen on half of the weeks and confirmed on the other half: a bucket picked
    # for its dip on the same answers it is shown on proves nothing.
    cutoff_held_out: bool = False

    def effect(self, name: str) -> causes.Effect | None:
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
    judged answers' scores (score → answers), as `_score_counts` makes of the rows. As a
    week's: a stratum is never smaller than what was judged of it, the flagged one is judged
    in full and the unflagged one drawn at random."""
    keys = {key for key, _ in counts} | {key for key, _ in judged}
    out = {}
    for key in keys:
        strata = []
        for flagged in (True, False):
            scores = judged.get((key, flagged), {})
            size = max(counts.get((key, flagged), 0), sum(scores.values()))
            strata.append(statistics.sums_from_counts(scores, size=size, drawn=not flagged))
        out[key] = statistics.mean_from_sums(strata)
    return out


def _score_counts(
    rows: Iterable[tuple[Any, JudgedRow]],
) -> dict[tuple[Any, bool], Counter[float]]:
    """The judged rows' scores per (group, flagged): score → answers."""
    out: dict[tuple[Any, bool], Counter[float]] = defaultdict(Counter)
    for key, row in rows:
        out[key, bool(row.flagged)][row.score] += 1
    return out


def _with_estimates(
    buckets: list[causes.Bucket], estimates: dict[int | None, Estimate]
) -> list[causes.Bucket]:
    """The domain's buckets (labels and bounds, made from no rows) with these estimates; the
    buckets are in index order with the "none" bucket, if any, last."""
    empty = statistics.stratified_mean([])
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


def _held_out_cutoff(
    counts: Callable[..., dict[tuple[Any, bool], int]], rows: Sequence[JudgedRow],
    threshold: float, first: int,
) -> bool:
    """`causes.held_out_cutoff` on the grouped counts: the cut-off is chosen on the even weeks
    of the window and holds only if the odd weeks' answers below it are red as well. `first`:
    the window's first week as the rows count weeks (the cells count from 0)."""
    def even(wk: int) -> bool:
        return wk % 2 == 0

    chosen = _with_estimates(
        causes.similarity_buckets([], edges=SIMILARITY_EDGES),
        _grouped(counts(lambda c: c.sim, even), _score_counts(
            (_index(r.best_chunk_score, SIMILARITY_EDGES), r) for r in rows
            if even(r.week - first))),
    )
    cutoff = causes.similarity_cutoff(chosen, threshold)
    if cutoff is None:
        return False
    index = _index(cutoff, SIMILARITY_EDGES)
    test = _grouped(
        counts(lambda c: c.sim is not None and c.sim < index, lambda wk: not even(wk)),
        _score_counts(
            (r.best_chunk_score is not None and r.best_chunk_score < cutoff, r) for r in rows
            if not even(r.week - first)),
    ).get(True)
    return bool(
        test is not None and not test.too_few
        and statistics.traffic_light(test, threshold) == "red"
    )


class _Cell(NamedTuple):
    """A group of the window's answers alike in everything the diagnosis asks about."""

    sim: int | None  # similarity bucket (SIMILARITY_EDGES)
    chunk_bucket: int  # number-of-chunks bucket (CHUNK_EDGES)
    multi_part: bool | None
    flagged: bool
    low_p: int | None  # bucket of the lowest content-word probability (tuner thresholds)
    wk: int  # week index in the window
    n: int  # answers


def _cells(use_case: UseCase, span: Sequence[Week], thresholds: Sequence[float]) -> list[_Cell]:
    """All answers of the window per (similarity, chunks, multi-part, flagged, tuner bucket,
    week): one GROUP BY."""
    rows = (
        _answers_in([use_case.pk], span)
        .annotate(
            sim=_Bucket("best_chunk_score", SIMILARITY_EDGES),
            chunk_bucket=_Bucket("chunk_count", CHUNK_EDGES),
            low_p=_Bucket("min_content_probability", thresholds),
            wk=_week_of("created_at", span),
        )
        .values_list("sim", "chunk_bucket", "multi_part", "flagged", "low_p", "wk")
        .annotate(n=Count("*"))
        .order_by()
    )
    return [_Cell(*row) for row in rows]


def _counter(cells: Sequence[_Cell]) -> Callable[..., dict[tuple[Any, bool], int]]:
    """counts(pick, weeks): the answers of the cells of `weeks` (a test on the week index) by
    (pick(cell), flagged)."""
    def counts(
        pick: Callable[[_Cell], Any], weeks: Callable[[int], bool] = lambda wk: True
    ) -> dict[tuple[Any, bool], int]:
        out: dict[tuple[Any, bool], int] = defaultdict(int)
        for cell in cells:
            if weeks(cell.wk):
                out[pick(cell), cell.flagged] += cell.n
        return out

    return counts


def _causes(
    cells: Sequence[_Cell], rows: Sequence[JudgedRow], threshold: float, first: int
) -> Causes:
    """Faithfulness by the causes' buckets, each a stratified estimate over the window."""
    counts = _counter(cells)
    similarity = _with_estimates(
        causes.similarity_buckets([], edges=SIMILARITY_EDGES),
        _grouped(counts(lambda c: c.sim), _score_counts(
            (_index(r.best_chunk_score, SIMILARITY_EDGES), r) for r in rows)),
    )
    cutoff = causes.similarity_cutoff(similarity, threshold)
    passing = cutoff if cutoff is not None else DEFAULT_SIMILARITY_THRESHOLD
    passing_index = _index(passing, SIMILARITY_EDGES)
    below_passing = _grouped(
        counts(lambda c: c.sim is not None and c.sim < passing_index),
        _score_counts(
            (r.best_chunk_score is not None and r.best_chunk_score < passing, r) for r in rows),
    )
    chunks = _with_estimates(
        causes.chunk_count_buckets([], edges=CHUNK_EDGES),
        _grouped(counts(lambda c: c.chunk_bucket), _score_counts(
            (_index(r.chunk_count, CHUNK_EDGES), r) for r in rows)),
    )
    multi = _grouped(counts(lambda c: c.multi_part),
                     _score_counts((r.multi_part, r) for r in rows))
    empty = statistics.stratified_mean([])
    return Causes(
        similarity=similarity,
        cutoff=cutoff,
        similarity_threshold=passing,
        chunks=chunks,
        single=multi.get(False, empty),
        multi=multi.get(True, empty),
        no_passing_chunk=below_passing.get(True, empty),
        unclassified=sum(c.n for c in cells if c.multi_part is None),
        cutoff_held_out=_held_out_cutoff(counts, rows, threshold, first),
        adjusted=causes.adjusted_effects(
            [(r.best_chunk_score, r.chunk_count, bool(r.multi_part), r.flagged, r.score)
             for r in rows],
            sizes=(sum(c.n for c in cells if c.flagged), sum(c.n for c in cells if not c.flagged)),
        ),
    )


def _worth(rows: Sequence[JudgedRow], threshold: float) -> Lift:
    """How much more often a flagged answer is unfaithful than one drawn at random."""
    flagged = [r for r in rows if r.flagged]
    random = [r for r in rows if r.in_random_sample]
    return statistics.lift(
        flagged_bad=sum(1 for r in flagged if r.score < threshold),
        flagged_n=len(flagged),
        random_bad=sum(1 for r in random if r.score < threshold),
        random_n=len(random),
    )


def _tuner(
    use_case: UseCase, cells: Sequence[_Cell], rows: Sequence[JudgedRow],
    usage: dict[tuple[int, int], Usage], *, first: int, weeks: int,
    thresholds: tuple[float, ...],
) -> Tuner:
    """What each tier-1 threshold would flag, catch and cost over the window."""
    # Each answer's lowest content-word probability, represented by the lower edge of its
    # bucket between two thresholds: the tuner only asks "below t?" for these thresholds.
    probabilities: list[float | None] = []
    for cell in cells:
        stand_in = None if cell.low_p is None else (
            thresholds[cell.low_p - 1] if cell.low_p else 0.0
        )
        probabilities.extend([stand_in] * cell.n)
    sample = [(r.min_content_probability, r.score) for r in rows if r.in_random_sample]
    recent = [u for (_, wk), u in usage.items() if wk >= first]
    ok_runs = sum(u.succeeded_runs for u in recent)
    ok_calls = sum(u.succeeded_calls for u in recent)
    calls_per_answer = ok_calls / ok_runs if ok_runs else cost.ASSUMED_CALLS_PER_ANSWER
    table = tuner.threshold_table(
        min_probabilities=probabilities,
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
        random_sample=len(sample),
        calls_per_answer=calls_per_answer,
        calls_measured=bool(ok_runs),
    )


def use_case_diagnosis(
    *, use_case: UseCase, until: datetime | date | None = None,
    judged: Sequence[JudgedRow] | None = None, usage: dict[tuple[int, int], Usage] | None = None,
    weeks: Sequence[Week] | None = None,
) -> Diagnosis:
    """Causes, the trigger's worth and the tuner over the last CAUSES_WEEKS weeks.

    `weeks` with `judged` and `usage` hand over what the weekly figures already read for these
    weeks (their last CAUSES_WEEKS are used), so the page reads each table once.
    """
    span = list(weeks) if weeks is not None else iso_weeks(weeks=CAUSES_WEEKS, until=until)
    first = max(0, len(span) - CAUSES_WEEKS)
    span = span[first:]
    if judged is None or usage is None:
        ids = [use_case.pk]
        judged, usage, first = _judged_rows(ids, span), _usage(ids, span), 0
    rows = [r for r in judged if r.use_case_id == use_case.pk and r.week >= first]
    thresholds = tuple(sorted({*TUNER_THRESHOLDS, use_case.logprob_threshold}))
    cells = _cells(use_case, span, thresholds)
    threshold = use_case.action_threshold
    return Diagnosis(
        weeks=len(span),
        causes=_causes(cells, rows, threshold, first),
        worth=_worth(rows, threshold),
        unfaithful_below=threshold,
        tuner=_tuner(
            use_case, cells, rows, usage, first=first, weeks=len(span), thresholds=thresholds
        ),
    )
