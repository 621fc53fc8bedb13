"""Segments (issue 40) from the answers: a dimension's values with their weekly tallies, the
changes on the team's side (a new generator model or prompt version), and the filter that
restricts every figure to segments.

A segment's value as the breakdown names it: the generator model, the service's name, the
prompt version, the best-ranked chunk's source, a declared metadata key's value (as text);
"" where an answer has none.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db.models import CharField, Count, F, Q, Value
from django.db.models.expressions import Expression
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce

from common.db_router import reads_from_replica
from dashboard.domain import segments as segment_stats
from dashboard.domain.expert_scale import Review
from dashboard.domain.segments import Change, SegmentFigure, Tally
from dashboard.domain.statistics.cells import Estimate
from dashboard.selectors.reads import answers_in
from dashboard.selectors.weeks import CAUSES_WEEKS, Week, iso_weeks, week_bucket
from monitoring import extensions
from monitoring.domain.segments import METADATA, Segment, dimensions
from monitoring.models import Answer, UseCase

# The dimensions whose changes are marked on the trend and restart the experts' pool.
CHANGING = ("model", "prompt_version")


def _field(dimension: str) -> str:
    return {
        "model": "model", "service": "service__name", "prompt_version": "prompt_version",
        "source": "source",
    }[dimension] if not dimension.startswith(METADATA) else ""


def value_of(dimension: str) -> Expression:
    """The expression of an answer's value in `dimension` ("" where it has none)."""
    if dimension.startswith(METADATA):
        key = dimension[len(METADATA):]
        return Coalesce(Cast(KT(f"metadata__{key}"), CharField()), Value(""),
                        output_field=CharField())
    return Coalesce(F(_field(dimension)), Value(""), output_field=CharField())


@dataclass(frozen=True)
class SegmentFilter:
    """Segments that restrict every figure: values of one dimension select either, different
    dimensions all of theirs. Empty: no filter."""

    segments: tuple[Segment, ...] = ()
    texts: tuple[str, ...] = field(default=())

    def __bool__(self) -> bool:
        return bool(self.segments)

    def answers(self, prefix: str = "") -> Q:
        """The condition on answers (`prefix`: the path to the answer, e.g. "answer__")."""
        by_dimension: dict[str, list[str]] = defaultdict(list)
        for s in self.segments:
            by_dimension[s.dimension].append(s.value)
        out = Q()
        for dimension, values in by_dimension.items():
            either = Q()
            for value in values:
                either |= _condition(dimension, value, prefix)
            out &= either
        return out


def _condition(dimension: str, value: str, prefix: str) -> Q:
    if dimension.startswith(METADATA):
        key = dimension[len(METADATA):]
        path = f"{prefix}metadata__{key}"
        if value == "":
            return Q(**{f"{path}__isnull": True}) | Q(**{path: None})
        condition = Q(**{path: value})
        # Numbers and booleans as their segments name them (`segment_value`).
        if value in ("true", "false"):
            condition |= Q(**{path: value == "true"})
        else:
            try:
                number = int(value)
            except ValueError:
                try:
                    condition |= Q(**{path: float(value)})
                except ValueError:
                    pass
            else:
                condition |= Q(**{path: number})
        return condition
    return Q(**{f"{prefix}{_field(dimension)}": value})


def segment_filter(segments: Sequence[Segment]) -> SegmentFilter:
    return SegmentFilter(tuple(segments), tuple(s.text for s in segments))


@dataclass(frozen=True)
class Tallies:
    """A dimension over weeks: each value's weekly tallies and the whole use case's."""

    weeks: list[Week]
    segments: dict[str, list[Tally]]
    whole: list[Tally]

    def volumes(self) -> list[dict[str, int]]:
        """Per week, value → answers."""
        return [
            {value: tallies[i].volume for value, tallies in self.segments.items()
             if tallies[i].volume}
            for i in range(len(self.weeks))
        ]


def read_tallies(use_case: UseCase, weeks: Sequence[Week], dimension: str) -> Tallies:
    """The dimension's values with their answers and judged scores per week and stratum."""
    return read_many(use_case, weeks, [dimension])[dimension]


def read_many(
    use_case: UseCase, weeks: Sequence[Week], dimensions: Sequence[str], *,
    judged: bool = True,
) -> dict[str, Tallies]:
    """`read_tallies` of several dimensions from one grouped read of the answers and one of
    the judged ones (grouped by all the dimensions' values at once, then summed per dimension
    here): the page's breakdowns cost two scans of the weeks, not two per dimension.
    `judged` False: the volumes alone (no scores)."""
    names = [f"d{i}" for i in range(len(dimensions))]
    values = {name: value_of(d) for name, d in zip(names, dimensions, strict=True)}
    base = answers_in([use_case.pk], weeks).annotate(wk=week_bucket("created_at", weeks),
                                                     **values)
    counts = base.values_list(*names, "wk", "flagged").annotate(n=Count("*")).order_by()
    sizes: dict[str, defaultdict[str, list[list[int]]]] = {
        d: defaultdict(lambda: [[0, 0] for _ in weeks]) for d in dimensions}
    for row in counts:
        *keys, wk, flagged, n = row
        for d, value in zip(dimensions, keys, strict=True):
            sizes[d][value or ""][wk][0 if flagged else 1] += n
    scores: dict[str, defaultdict[str, list[list[dict[float, int]]]]] = {
        d: defaultdict(lambda: [[{}, {}] for _ in weeks]) for d in dimensions}
    if judged:
        rows = (
            base.filter(status=Answer.Status.JUDGED, score__isnull=False)
            .values_list(*names, "wk", "flagged", "score").annotate(n=Count("*")).order_by()
        )
        for row in rows:
            *keys, wk, flagged, score, n = row
            for d, value in zip(dimensions, keys, strict=True):
                cell = scores[d][value or ""][wk][0 if flagged else 1]
                cell[float(score)] = cell.get(float(score), 0) + n
    out: dict[str, Tallies] = {}
    for d in dimensions:
        segments: dict[str, list[Tally]] = {}
        for value in set(sizes[d]) | set(scores[d]):
            own_sizes, own_scores = sizes[d][value], scores[d][value]
            segments[value] = [
                Tally((own_sizes[i][0], own_sizes[i][1]), (own_scores[i][0], own_scores[i][1]))
                for i in range(len(weeks))
            ]
        whole = [_sum([t[i] for t in segments.values()]) for i in range(len(weeks))]
        out[d] = Tallies(list(weeks), segments, whole)
    return out


def _sum(tallies: Sequence[Tally]) -> Tally:
    sizes = [0, 0]
    scores: list[dict[float, int]] = [{}, {}]
    for t in tallies:
        for h in (0, 1):
            sizes[h] += t.sizes[h]
            for v, k in t.scores[h].items():
                scores[h][v] = scores[h].get(v, 0) + k
    return Tally((sizes[0], sizes[1]), (scores[0], scores[1]))


def segment_reviews(
    use_case: UseCase, weeks: Sequence[Week], dimension: str
) -> dict[str, list[list[Review]]]:
    """The experts' reviews of the weeks' answers by the answers' value in `dimension` and
    week (the latest submission of each, as the weekly figures read them)."""
    ends = [w.end for w in weeks]
    found = [
        r for reviews in extensions.registry.expert_reviews.values()
        for r in reviews(use_case_ids=[use_case.pk], start=weeks[0].start, end=weeks[-1].end)
        if r.answer_id is not None
    ]
    if not found:
        return {}
    values = dict(
        Answer.objects.filter(pk__in=[r.answer_id for r in found])
        .annotate(segment=value_of(dimension)).values_list("pk", "segment")
    )
    out: dict[str, list[list[Review]]] = defaultdict(lambda: [[] for _ in weeks])
    for r in found:
        if r.answer_id in values:
            out[values[r.answer_id] or ""][bisect_right(ends, r.answer_created_at)].append(
                Review(min(1.0, max(0.0, r.manual_score)), min(1.0, max(0.0, r.automatic_score)),
                       r.flagged))
    return dict(out)


@reads_from_replica
def breakdown(
    *, use_case: UseCase, dimension: str, weeks: Sequence[Week] | None = None
) -> list[SegmentFigure]:
    """The dimension's segments over `weeks` (default: the causes' CAUSES_WEEKS up to now),
    on the experts' scale too where their answers were reviewed."""
    span = list(weeks) if weeks else iso_weeks(weeks=CAUSES_WEEKS)
    tallies = read_tallies(use_case, span, dimension)
    return segment_stats.breakdown(
        dimension, tallies.segments, tallies.whole, threshold=use_case.action_threshold,
        reviews=segment_reviews(use_case, span, dimension),
    )


@dataclass(frozen=True)
class ChangeFigures:
    """A change on the team's side with the use case's figures before and after it."""

    change: Change
    week: Week
    before: Estimate
    after: Estimate


@reads_from_replica
def team_changes(
    *, use_case: UseCase, weeks: Sequence[Week], dimensions: Sequence[str] = CHANGING
) -> list[ChangeFigures]:
    """The weeks a new generator model or prompt version started carrying most answers, with
    the pooled estimate of up to CHANGE_WEEKS weeks before and from the change on, oldest
    first. The weeks before `weeks` are read too, so that a change in its first week is seen."""
    span = list(weeks)
    if not span:
        return []
    lead = segment_stats.CHANGE_WEEKS
    wide = iso_weeks(weeks=len(span) + lead, until=span[-1].start)
    volumes = read_many(use_case, wide, dimensions, judged=False)
    found = [
        change for dimension in dimensions
        for change in segment_stats.changes(dimension, volumes[dimension].volumes(), since=lead)
    ]
    if not found:
        return []
    # The use case's figures around each change: its judged scores read only now, once.
    whole = read_many(use_case, wide, ["service"])["service"].whole
    out: list[ChangeFigures] = []
    for change in found:
        before, after = segment_stats.change_window(len(wide), change)
        out.append(ChangeFigures(
            change, wide[change.week],
            segment_stats.pooled_of([whole[i] for i in before]),
            segment_stats.pooled_of([whole[i] for i in after]),
        ))
    return sorted(out, key=lambda c: (c.week.start, c.change.dimension))


@dataclass(frozen=True)
class SegmentsView:
    """What the use-case page shows of segments: the changes on the team's side within its
    weeks, the largest difference that holds over all dimensions, and the breakdown of one."""

    dimensions: list[str]
    dimension: str
    figures: list[SegmentFigure]  # the breakdown of `dimension`
    finding: SegmentFigure | None  # the largest holding difference of any dimension
    compared: int  # the differences looked at for it (all dimensions)
    changes: list[ChangeFigures]
    weeks: list[Week]  # the breakdown's
    hidden: bool = False  # the reader does not lead the use case: no segment is shown


@reads_from_replica
def segments_view(
    *, use_case: UseCase, weeks: Sequence[Week], dimension: str, until_weeks: int = CAUSES_WEEKS,
    shown: bool = True,
) -> SegmentsView:
    """The page's segments: the breakdowns and the changes over the last CAUSES_WEEKS of
    `weeks`. `dimension` must be one of the use case's."""
    names = segment_stats_dimensions(use_case)
    recent = list(weeks)[-until_weeks:]
    if not shown:  # nothing read, nothing shown (`hidden`)
        return SegmentsView(names, dimension, [], None, 0, [], recent, hidden=True)
    tallies = read_many(use_case, recent, names)
    by_dimension = {
        name: segment_stats.breakdown(
            name, tallies[name].segments, tallies[name].whole,
            threshold=use_case.action_threshold,
            # Reviews only where the table shows them: the finding reads the judge's scale.
            reviews=segment_reviews(use_case, recent, name) if name == dimension else None,
        )
        for name in names
    }
    leading = [f for f in (segment_stats.leading_finding(figures)
                           for figures in by_dimension.values()) if f is not None]
    finding = max(leading, key=lambda f: abs(f.difference.value) if f.difference else 0.0,
                  default=None)
    compared = sum(
        max((f.difference.compared for f in figures if f.difference), default=0)
        for figures in by_dimension.values()
    )
    return SegmentsView(
        dimensions=names, dimension=dimension, figures=by_dimension[dimension],
        finding=finding, compared=compared,
        # The changes of the breakdown's weeks only, until the segments are in the rollups
        # (issue 40, point 4): over all the page's 26 weeks their raw read cost 160 ms at a
        # million answers.
        changes=team_changes(use_case=use_case, weeks=recent), weeks=recent,
    )


def segment_stats_dimensions(use_case: UseCase) -> list[str]:
    """The use case's dimensions: the built-in ones and its declared metadata keys."""
    return dimensions(use_case.segment_keys or [])
