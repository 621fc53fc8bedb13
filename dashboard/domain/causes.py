"""Causes of unfaithful answers, which are rarely the model: faithfulness by retrieval quality,
by amount of context and by question style.

Every figure is a stratified estimate (dashboard.domain.statistics) within its group: the
judged answers of a group are still flagged answers (all judged) and a random share of the
others, so each group is split into its flagged and unflagged strata and weighted by their
sizes. The rows of one call must come from a period with one sample rate, as the unflagged
stratum is assumed to be one simple random sample. Readings in words are the web layer's job;
this module returns numbers. The causes adjusted for each other: dashboard/domain/adjusted.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from dashboard.domain.statistics.cells import Estimate
from dashboard.domain.statistics.estimates import stratified_mean, week_strata
from dashboard.domain.statistics.precision import traffic_light
from monitoring.domain.moments import DEFAULT_CHUNK_EDGES, DEFAULT_SIMILARITY_EDGES

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class Bucket:
    label: str
    low: float | None  # [low, high); None = unbounded, or (both None) the "none" bucket
    high: float | None
    estimate: Estimate


def _grouped_estimates(
    rows: Iterable[tuple[K, bool, float | None]], keys: Sequence[K]
) -> dict[K, Estimate]:
    groups: dict[K, list[tuple[bool, float | None]]] = {key: [] for key in keys}
    for key, flagged, score in rows:
        groups[key].append((flagged, score))
    return {key: stratified_mean(week_strata(group)) for key, group in groups.items()}


def _edges(edges: Sequence[float]) -> list[float]:
    values = list(edges)
    steps = zip(values, values[1:], strict=False)
    if any(math.isnan(e) for e in values) or any(a >= b for a, b in steps):
        raise ValueError(f"edges must increase strictly, not {edges!r}")
    return values


def _index(value: float, edges: Sequence[float]) -> int:
    """Bucket number of ``value``: 0 below the first edge, len(edges) at or above the last."""
    return sum(1 for edge in edges if value >= edge)


def _number(value: float) -> str:
    return f"{value:g}"


def similarity_buckets(
    rows: Iterable[tuple[float | None, bool, float | None]],
    *,
    edges: Sequence[float] = DEFAULT_SIMILARITY_EDGES,
) -> list[Bucket]:
    """Faithfulness by best chunk similarity, lowest bucket first, then a "none" bucket.

    ``rows`` are (best chunk similarity or None, flagged, score or None if unjudged) for every
    answer. Buckets are [low, high): "<0.5", "0.5–0.6", ..., "≥0.9"; "none" holds answers whose
    chunks came without scores.
    """
    cut = _edges(edges)

    def key(similarity: float | None) -> int | None:
        if similarity is None or math.isnan(similarity):
            return None
        return _index(similarity, cut)

    keys: list[int | None] = [*range(len(cut) + 1), None]
    estimates = _grouped_estimates(((key(s), f, y) for s, f, y in rows), keys)
    return [*_range_buckets(cut, estimates, _number), Bucket("none", None, None, estimates[None])]


def _range_buckets(
    cut: Sequence[float], estimates: Mapping[int | None, Estimate], fmt: Callable[[float], str]
) -> list[Bucket]:
    buckets = []
    for i in range(len(cut) + 1):
        low = cut[i - 1] if i else None
        high = cut[i] if i < len(cut) else None
        if low is None:
            label = f"<{fmt(high)}" if high is not None else "all"
        elif high is None:
            label = f"≥{fmt(low)}"
        else:
            label = f"{fmt(low)}–{fmt(high)}"
        buckets.append(Bucket(label, low, high, estimates[i]))
    return buckets


def similarity_cutoff(buckets: Sequence[Bucket], action_threshold: float) -> float | None:
    """The similarity below which answers turn unfaithful, or None.

    The upper edge of the highest similarity bucket whose whole interval lies below the action
    line (the bucket the traffic light shows red; too few answers never count). The cutoff is
    advice to let the RAG service answer "I don't know" below it, which costs users real
    answers, so it needs evidence, not a point estimate that happens to dip. None when no
    bucket is red, or when even the open top bucket is: then better retrieval would not help,
    and the cause is elsewhere.
    """
    ranged = [b for b in buckets if b.low is not None or b.high is not None]
    # Too few answers never count, even with an interval wholly below the line: the cut-off
    # costs users real answers, and a bucket of a handful is the likeliest to dip by chance
    # among the several buckets looked at.
    red = [
        b for b in ranged
        if not b.estimate.too_few and traffic_light(b.estimate, action_threshold) == "red"
    ]
    if not red:
        return None
    highest = max(red, key=lambda b: -math.inf if b.low is None else b.low)
    return highest.high


def chunk_count_buckets(
    rows: Iterable[tuple[int, bool, float | None]],
    *,
    edges: Sequence[int] = DEFAULT_CHUNK_EDGES,
) -> list[Bucket]:
    """Faithfulness by number of retrieved chunks: "0", "1–2", "3–5", "6–10", "11–20", "21+".

    ``rows`` are (number of chunks, flagged, score or None) for every answer.
    """
    cut = _edges(edges)
    if cut and cut[0] <= 0:
        raise ValueError("the first chunk edge must be above 0")

    def key(count: int) -> int:
        if count < 0:
            raise ValueError(f"a chunk count cannot be negative: {count!r}")
        return _index(count, cut)

    keys = list(range(len(cut) + 1))
    estimates = _grouped_estimates(((key(c), f, y) for c, f, y in rows), keys)
    buckets = []
    for i in keys:
        low = cut[i - 1] if i else 0
        high = cut[i] if i < len(cut) else None
        if high is None:
            label = f"{low}+"
        elif high - low == 1:
            label = str(low)
        else:
            label = f"{low}–{high - 1}"
        buckets.append(Bucket(label, low, high, estimates[i]))
    return buckets


def multi_part_split(
    rows: Iterable[tuple[bool, bool, float | None]],
) -> tuple[Estimate, Estimate]:
    """(single-question estimate, multi-part estimate) from (multi_part, flagged, score) rows."""
    estimates = _grouped_estimates(rows, [False, True])
    return estimates[False], estimates[True]


def no_passing_chunk(
    rows: Iterable[tuple[float | None, bool, float | None]], similarity_threshold: float
) -> Estimate:
    """Faithfulness of answers given although no chunk reached ``similarity_threshold``.

    ``rows`` are (best chunk similarity or None, flagged, score or None) for every answer.
    Answers without chunk scores are left out: whether a chunk passed is unknown for them.
    """
    if math.isnan(similarity_threshold):
        raise ValueError("similarity_threshold is NaN")
    selected = (
        (flagged, score)
        for similarity, flagged, score in rows
        if similarity is not None and similarity < similarity_threshold
    )
    return stratified_mean(week_strata(selected))


@dataclass(frozen=True, slots=True)
class HeldOutCutoff:
    """A similarity cut-off chosen on one half of the weeks and tested on the other."""

    cutoff: float | None  # chosen on the even-numbered weeks (None: no red bucket there)
    test: Estimate | None  # answers below it in the odd-numbered weeks
    holds: bool  # the test half's answers below the cut-off are red too


def held_out_cutoff(
    weeks: Sequence[Iterable[tuple[float | None, bool, float | None]]],
    action_threshold: float,
    *,
    edges: Sequence[float] = DEFAULT_SIMILARITY_EDGES,
) -> HeldOutCutoff:
    """`similarity_cutoff` without choosing and testing on the same answers.

    The cut-off is the edge of the highest red bucket among several: picked on the same data,
    a bucket that dipped by chance looks like a finding. So it is chosen on weeks 0, 2, 4, …
    of ``weeks`` (rows as for `similarity_buckets`) and kept only if the answers below it in
    weeks 1, 3, 5, … are red as well: their interval wholly below the action line.
    """
    chosen = [row for i, week in enumerate(weeks) if i % 2 == 0 for row in week]
    tested = [row for i, week in enumerate(weeks) if i % 2 == 1 for row in week]
    cutoff = similarity_cutoff(similarity_buckets(chosen, edges=edges), action_threshold)
    if cutoff is None:
        return HeldOutCutoff(None, None, False)
    test = no_passing_chunk(tested, cutoff)
    holds = (
        not test.too_few and traffic_light(test, action_threshold) == "red"
    )
    return HeldOutCutoff(cutoff, test, holds)
