"""The segments' weekly tallies (issue 40), from the rollups (`RollupSegment`,
`RollupSegmentScore`) where they hold the dimension, else from the raw answers: the same
shapes and the same floats either way (tests/dashboard/test_segment_rollups.py compares them).

The judged scores arrive summed (`Scores`: how many, Σ score, Σ score², how many below the
action threshold), added up exactly: a score in millionths (`score_micros`), its sums as
integers, kept by the writers (`RollupSegmentSums`) or summed by the database in decimals, so
that neither the order of summation nor a rescore's subtraction can make the two paths differ;
a week of a segment is one row. The count below the threshold comes from the scores'
histogram (`RollupSegmentScore`), for the dimension shown only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import CharField, Count, DecimalField, F, Q, Sum, Value
from django.db.models.expressions import Expression
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from dashboard.domain.segments import Scores, Tally
from dashboard.selectors.reads import answers_in
from dashboard.selectors.weeks import Week, week_bucket
from monitoring.domain.segments import METADATA
from monitoring.models import (
    Answer,
    RollupSegment,
    RollupSegmentScore,
    RollupSegmentSums,
    Service,
    UseCase,
)
from monitoring.models.rollups import rollups_ready
from monitoring.models.segment_rollups import SCORE_DECIMALS

# The built-in dimensions' fields as the raw answers name them (the service by its name).
RAW_FIELDS = {"model": "model", "service": "service__name", "prompt_version": "prompt_version",
              "source": "source"}


def value_of(dimension: str) -> Expression:
    """The expression of an answer's value in `dimension` ("" where it has none)."""
    if dimension.startswith(METADATA):
        key = dimension[len(METADATA):]
        return Coalesce(Cast(KT(f"metadata__{key}"), CharField()), Value(""),
                        output_field=CharField())
    return Coalesce(F(RAW_FIELDS[dimension]), Value(""), output_field=CharField())


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


def rolled(use_case: UseCase, dimension: str) -> bool:
    """Whether the rollups hold the dimension of the use case in full (the built-in ones once
    the rollups are whole, a declared key once its task counted it)."""
    if dimension.startswith(METADATA):
        return dimension[len(METADATA):] in (use_case.segment_keys_rolled or [])
    return True


def read_many(
    use_case: UseCase, weeks: Sequence[Week], dimensions: Sequence[str], *,
    judged: bool = True, threshold: float | None = None, below: Sequence[str] | None = None,
) -> dict[str, Tallies]:
    """Each dimension's values with their answers and judged scores per week and stratum
    (`judged` False: the volumes alone), and how many scores lie below `threshold` (default:
    the use case's action threshold) for the dimensions in `below` (None: all; the others
    count none: their figures' `below` is not to be shown)."""
    at = use_case.action_threshold if threshold is None else threshold
    counted = list(dimensions) if below is None else [d for d in dimensions if d in below]
    ready = rollups_ready()
    from_rollups = [d for d in dimensions if ready and rolled(use_case, d)]
    raw = [d for d in dimensions if d not in from_rollups]
    parts: dict[str, _Parts] = {}
    if from_rollups:
        parts.update(_from_rollups(use_case, weeks, from_rollups, judged, at, counted))
    if raw:
        parts.update(_from_answers(use_case, weeks, raw, judged, at))
        for d in raw:
            if d not in counted:
                parts[d].forget_below()
    return {d: parts[d].tallies(weeks) for d in dimensions}


class _Parts:
    """One dimension's sums as they are read: value → week → stratum."""

    def __init__(self, weeks: int) -> None:
        self.weeks = weeks
        self.sizes: defaultdict[str, list[list[int]]] = defaultdict(
            lambda: [[0, 0] for _ in range(weeks)])
        # [n, Σ micros, Σ micros², below] per value, week and stratum: exact integers until
        # the end (a score in millionths, `score_micros`)
        self.sums: defaultdict[str, list[list[list[int]]]] = defaultdict(
            lambda: [[[0, 0, 0, 0], [0, 0, 0, 0]] for _ in range(weeks)])

    def add_size(self, value: str, week: int, flagged: bool, n: int) -> None:
        self.sizes[value][week][0 if flagged else 1] += n

    def add_scores(self, value: str, week: int, flagged: bool, n: int, total: int,
                   squares: int) -> None:
        """`total`, `squares`: Σ of the scores' millionths, and of their squares."""
        cell = self.sums[value][week][0 if flagged else 1]
        cell[0] += n
        cell[1] += total
        cell[2] += squares

    def add_below(self, value: str, week: int, flagged: bool, below: int) -> None:
        self.sums[value][week][0 if flagged else 1][3] += below

    def forget_below(self) -> None:
        for weeks in self.sums.values():
            for week in weeks:
                for cell in week:
                    cell[3] = 0

    def tallies(self, weeks: Sequence[Week]) -> Tallies:
        segments: dict[str, list[Tally]] = {}
        whole_sizes = [[0, 0] for _ in range(self.weeks)]
        whole_sums = [[[0, 0, 0, 0], [0, 0, 0, 0]] for _ in range(self.weeks)]
        for value in set(self.sizes) | set(self.sums):
            sizes = self.sizes[value]
            sums = self.sums.get(value)
            out = []
            for i in range(self.weeks):
                for h in (0, 1):
                    whole_sizes[i][h] += sizes[i][h]
                    if sums is not None:
                        cell, into = sums[i][h], whole_sums[i][h]
                        for j in range(4):
                            into[j] += cell[j]
                out.append(Tally((sizes[i][0], sizes[i][1]), _NONE if sums is None else
                                 (_scores(sums[i][0]), _scores(sums[i][1]))))
            segments[value] = out
        whole = [Tally((whole_sizes[i][0], whole_sizes[i][1]),
                       (_scores(whole_sums[i][0]), _scores(whole_sums[i][1])))
                 for i in range(self.weeks)]
        return Tallies(list(weeks), segments, whole)


_NONE = (Scores(), Scores())


def _scores(cell: list[int]) -> Scores:
    n, total, squares, below = cell
    # Integer division is correctly rounded: the same float from the same exact sum.
    return Scores(n, total / _MICROS, squares / _MICROS**2, below) if n else Scores()


_MICROS = 10**SCORE_DECIMALS


def _score_sums(threshold: float) -> dict[str, Any]:
    """The aggregates of the judged answers' scores: how many, Σ and Σ² of the scores rounded
    to millionths as `score_micros` rounds them (a cast to numeric(10, 6)), and how many lie
    below the threshold."""
    score = Cast(F("score"), DecimalField(max_digits=10, decimal_places=SCORE_DECIMALS))
    wide = DecimalField(max_digits=38, decimal_places=2 * SCORE_DECIMALS)
    return {"n": Count("*"), "total": Sum(score, output_field=wide),
            "squares": Sum(score * score, output_field=wide),
            "below": Count("pk", filter=Q(score__lt=threshold))}


def _micros(value: Any, power: int = 1) -> int:
    """A sum of millionths (power 1) or of their squares (2) read as a decimal: the integer."""
    return int(Decimal(value or 0).scaleb(power * SCORE_DECIMALS))


def _from_answers(
    use_case: UseCase, weeks: Sequence[Week], dimensions: Sequence[str], judged: bool,
    threshold: float,
) -> dict[str, _Parts]:
    """From the raw answers: one grouped read of the answers and one of the judged ones,
    grouped by all the dimensions' values at once and summed per dimension here."""
    names = [f"d{i}" for i in range(len(dimensions))]
    values = {name: value_of(d) for name, d in zip(names, dimensions, strict=True)}
    base = answers_in([use_case.pk], weeks).annotate(wk=week_bucket("created_at", weeks),
                                                     **values)
    parts = {d: _Parts(len(weeks)) for d in dimensions}
    for *keys, wk, flagged, n in (
        base.values_list(*names, "wk", "flagged").annotate(n=Count("*")).order_by()
    ):
        for d, value in zip(dimensions, keys, strict=True):
            parts[d].add_size(value or "", wk, flagged, n)
    if judged:
        for *keys, wk, flagged, n, total, squares, below in (
            base.filter(status=Answer.Status.JUDGED, score__isnull=False)
            .values_list(*names, "wk", "flagged").annotate(**_score_sums(threshold)).order_by()
        ):
            micros, squares_micros = _micros(total), _micros(squares, 2)
            for d, value in zip(dimensions, keys, strict=True):
                parts[d].add_scores(value or "", wk, flagged, n, micros, squares_micros)
                parts[d].add_below(value or "", wk, flagged, below)
    return parts


def _from_rollups(
    use_case: UseCase, weeks: Sequence[Week], dimensions: Sequence[str], judged: bool,
    threshold: float, below: Sequence[str] = (),
) -> dict[str, _Parts]:
    """From the rollups: the answers, the judged answers' sums (one row per segment and
    week), and for the dimensions in `below` the count below the threshold (summed over the
    scores' histogram)."""
    mondays = {timezone.localtime(w.start).date(): i for i, w in enumerate(weeks)}
    where = {"use_case_id": use_case.pk, "week__in": list(mondays),
             "dimension__in": list(dimensions)}
    names = _service_names(use_case, dimensions)
    parts = {d: _Parts(len(weeks)) for d in dimensions}
    for dimension, value, week, flagged, n in (
        RollupSegment.objects.filter(**where)
        .values_list("dimension", "value", "week", "flagged", "answers")
    ):
        if n:
            parts[dimension].add_size(names.get((dimension, value), value), mondays[week],
                                      flagged, n)
    if judged:
        for dimension, value, week, flagged, n, total, squares in (
            RollupSegmentSums.objects.filter(**where)
            .values_list("dimension", "value", "week", "flagged", "judged", "total", "squares")
        ):
            if n:
                parts[dimension].add_scores(names.get((dimension, value), value),
                                            mondays[week], flagged, n, total, squares)
        counted = [d for d in dimensions if d in below]
        for dimension, value, week, flagged, n in (
            RollupSegmentScore.objects.filter(**{**where, "dimension__in": counted},
                                              score__lt=threshold)
            .values_list("dimension", "value", "week", "flagged")
            .annotate(n=Sum("answers")).order_by()
        ) if counted else ():
            if n:
                parts[dimension].add_below(names.get((dimension, value), value),
                                           mondays[week], flagged, n)
    return parts


def _service_names(use_case: UseCase, dimensions: Sequence[str]) -> dict[tuple[str, str], str]:
    """The rollups keep a service by its id: its name now, as the raw answers name it (every
    service's: one that no longer sends to the use case still named its answers)."""
    if "service" not in dimensions:
        return {}
    return {("service", str(pk)): name for pk, name in Service.objects.values_list("pk", "name")}


def week_volumes(
    use_case_ids: Sequence[int], week: Sequence[Week], dimensions: Sequence[str]
) -> dict[tuple[int, str], dict[str, int]]:
    """(use case, dimension) → value → answers in the one week given, for dimensions named
    alike raw and rolled (not the service): from the rollups once they are whole, else one
    grouped read of the week's answers (/metrics, every scrape)."""
    out: dict[tuple[int, str], dict[str, int]] = defaultdict(dict)
    if rollups_ready():
        rows: Any = (
            RollupSegment.objects.filter(
                use_case_id__in=use_case_ids, dimension__in=list(dimensions),
                week=timezone.localtime(week[0].start).date())
            .values_list("use_case_id", "dimension", "value").annotate(n=Sum("answers"))
            .order_by()
        )
        for use_case_id, dimension, value, n in rows:
            if n:
                bucket = out[use_case_id, dimension]
                bucket[value] = bucket.get(value, 0) + n
        return dict(out)
    names = {f"d{i}": value_of(d) for i, d in enumerate(dimensions)}
    rows = (
        answers_in(list(use_case_ids), week).annotate(**names)
        .values_list("use_case_id", *names).annotate(n=Count("*")).order_by()
    )
    for use_case_id, *values, n in rows:
        for dimension, value in zip(dimensions, values, strict=True):
            bucket = out[use_case_id, dimension]
            bucket[value or ""] = bucket.get(value or "", 0) + n
    return dict(out)
