"""Segments (issue 40): a dimension's values with their figures (the tallies come from
segment_reads.py: the rollups or the raw answers), the changes on the team's side (a new
generator model or prompt version), and the filter that restricts every figure to segments.

A segment's value as the breakdown names it: the generator model, the service's name, the
prompt version, the best-ranked chunk's source, a declared metadata key's value (as text);
"" where an answer has none.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db.models import Q

from common.db_router import reads_from_replica
from dashboard.domain import segments as segment_stats
from dashboard.domain.expert_scale import Review
from dashboard.domain.segments import Change, SegmentFigure
from dashboard.domain.statistics.cells import Estimate
from dashboard.selectors.segment_reads import RAW_FIELDS, read_many, value_of
from dashboard.selectors.weeks import CAUSES_WEEKS, Week, iso_weeks
from monitoring import extensions
from monitoring.domain.segments import METADATA, Segment, dimensions
from monitoring.models import Answer, UseCase
from monitoring.models.rollups import rollups_ready

# The dimensions whose changes are marked on the trend and restart the experts' pool.
CHANGING = ("model", "prompt_version")


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
    return Q(**{f"{prefix}{RAW_FIELDS[dimension]}": value})


def segment_filter(segments: Sequence[Segment]) -> SegmentFilter:
    return SegmentFilter(tuple(segments), tuple(s.text for s in segments))


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
    tallies = read_many(use_case, span, [dimension])[dimension]
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
    whole = read_many(use_case, wide, ["service"], below=[])["service"].whole  # the fewest values
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
    tallies = read_many(use_case, recent, names, below=[dimension])  # the table shows it
    # The shown dimension in full (with the experts' scale); of every dimension only the
    # comparisons and the leading figure, which is all the finding needs.
    figures = segment_stats.breakdown(
        dimension, tallies[dimension].segments, tallies[dimension].whole,
        threshold=use_case.action_threshold,
        reviews=segment_reviews(use_case, recent, dimension),
    )
    leading: list[SegmentFigure] = []
    compared = 0
    for name in names:
        found, m = segment_stats.finding(name, tallies[name].segments, tallies[name].whole,
                                         threshold=use_case.action_threshold)
        compared += m
        if found is not None:
            leading.append(found)
    finding = max(leading, key=lambda f: abs(f.difference.value) if f.difference else 0.0,
                  default=None)
    return SegmentsView(
        dimensions=names, dimension=dimension, figures=figures,
        finding=finding, compared=compared,
        # The changes of all the page's weeks from the rollups; read raw (before a rebuild),
        # those of the breakdown's weeks only: over 26 weeks that read cost 160 ms at a
        # million answers.
        changes=team_changes(use_case=use_case,
                             weeks=list(weeks) if rollups_ready() else recent),
        weeks=recent,
    )


def segment_stats_dimensions(use_case: UseCase) -> list[str]:
    """The use case's dimensions: the built-in ones and its declared metadata keys."""
    return dimensions(use_case.segment_keys or [])
