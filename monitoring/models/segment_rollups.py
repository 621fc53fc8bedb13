"""The segments' weekly rollups (issue 40): answers, judged scores (a histogram: the share
below the threshold) and the judged scores' exact sums (the estimates) per use case, week,
stratum, dimension and value. Kept and rebuilt as the other rollups are
(monitoring/services/rollups.py, segment_rollups.py)."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from monitoring.models.rollups import OfUseCase


class _OfSegment(OfUseCase):
    """A rollup row of one segment's week and stratum."""

    week = models.DateField()
    flagged = models.BooleanField()
    dimension = models.CharField(max_length=80)
    value = models.TextField()

    class Meta:
        abstract = True


class RollupSegment(_OfSegment):
    """Answers per use case, week, stratum and segment (issue 40): one row per dimension
    (`monitoring.domain.segments`: model, service, prompt_version, source, metadata.<key> of a
    declared key) and value, the value as its segment names it ("" where the answer has none;
    for the service its id, as a name can change)."""

    answers = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = _("Wochensumme nach Segmenten")
        verbose_name_plural = _("Wochensummen nach Segmenten")
        constraints = [
            models.UniqueConstraint(fields=["use_case", "week", "flagged", "dimension", "value"],
                                    name="rollupsegment_key"),
        ]
        indexes = [
            # One dimension over many weeks and use cases (the generator models' changes that
            # restart the experts' pool, read by the overview and /metrics). Not covering the
            # count: an index on it would make every ingest's increment a non-HOT update.
            models.Index(fields=["dimension", "use_case", "week"],
                         name="rollupsegment_dimension"),
        ]

    def __str__(self) -> str:
        return f"{self.use_case_id} {self.week} {self.dimension}={self.value}: {self.answers}"


class RollupSegmentScore(_OfSegment):
    """Judged answers per use case, week, stratum, segment and score: the count below the
    action threshold of the dimension a page shows, summed on reading (`segment_reads`)."""

    score = models.FloatField()
    answers = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = _("Wochensumme der Bewertungen nach Segmenten")
        verbose_name_plural = _("Wochensummen der Bewertungen nach Segmenten")
        constraints = [
            models.UniqueConstraint(
                fields=["use_case", "week", "flagged", "dimension", "value", "score"],
                name="rollupsegmentscore_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.use_case_id} {self.week} {self.dimension}={self.value} {self.score}"


class RollupSegmentSums(_OfSegment):
    """The judged answers' sums per use case, week, stratum and segment: how many, Σ score and
    Σ score², the score in millionths (`score_micros`) so that the sums are exact integers (a
    rescore subtracts exactly; the raw reads round the same way). What the segments' estimates
    and differences read, one row per segment and week; the share below the threshold comes
    from `RollupSegmentScore`."""

    judged = models.BigIntegerField(default=0)
    total = models.BigIntegerField(default=0)  # Σ score_micros
    squares = models.BigIntegerField(default=0)  # Σ score_micros²

    class Meta:
        verbose_name = _("Wochensumme der Bewertungssummen nach Segmenten")
        verbose_name_plural = _("Wochensummen der Bewertungssummen nach Segmenten")
        constraints = [
            models.UniqueConstraint(fields=["use_case", "week", "flagged", "dimension", "value"],
                                    name="rollupsegmentsums_key"),
        ]

    def __str__(self) -> str:
        return f"{self.use_case_id} {self.week} {self.dimension}={self.value}: {self.judged}"


# A score in the segments' sums: rounded to millionths (half away from zero, as PostgreSQL
# rounds a double cast to numeric(10, 6)); Σ of their squares stays within 64 bits up to
# nine million judged answers in one segment's week.
SCORE_DECIMALS = 6


def score_micros(score: float) -> int:
    """A score as the segments' sums count it: its millionths, an integer."""
    from decimal import ROUND_HALF_UP, Decimal

    return int(Decimal(f"{score:.15g}").quantize(Decimal(1).scaleb(-SCORE_DECIMALS),
                                                   rounding=ROUND_HALF_UP).scaleb(SCORE_DECIMALS))
