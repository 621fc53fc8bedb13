"""Weekly rollups (issue 22): what the dashboards read instead of recounting raw answers.

Kept by the services in the transactions that change what they count (monitoring/rollups): an
ingest adds its answers to `RollupDay`, a judge run's completion moves its answer's judged
state in `RollupScore` (a rescore subtracts the old one). `rebuild_rollups` recomputes them
from the raw rows, and a check compares the two. The pages read them only once `RollupState`
says a complete rebuild made them whole; until then, and for a definition they were not built
with, the pages read the raw rows as before.
"""

from bisect import bisect_right
from collections.abc import Sequence
from datetime import date, datetime, time, timedelta

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from monitoring.domain.moments import (
    DEFAULT_CHUNK_EDGES,
    DEFAULT_SIMILARITY_EDGES,
    MOMENT_KEYS,
    NO_MOMENTS,
    Moments,
)


class OfUseCase(models.Model):
    """A rollup row of one use case."""

    use_case = models.ForeignKey("monitoring.UseCase", on_delete=models.CASCADE,
                                 related_name="+")

    class Meta:
        abstract = True


class RollupDay(OfUseCase):
    """Answers received per use case, local day (Europe/Berlin) of `created_at`, and flag."""

    day = models.DateField()
    flagged = models.BooleanField()
    answers = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = _("Tagessumme")
        verbose_name_plural = _("Tagessummen")
        constraints = [
            models.UniqueConstraint(fields=["use_case", "day", "flagged"],
                                    name="rollupday_key"),
        ]

    def __str__(self) -> str:
        return f"{self.use_case_id} {self.day} {'flagged' if self.flagged else ''}: {self.answers}"


class RollupScore(OfUseCase):
    """Judged answers per use case, week (its local Monday), stratum and what was judged: the
    score, whether it abstained, and its readable claims (twice the supported points, and how
    many) - a histogram from which the weekly statistics come out exactly."""

    week = models.DateField()
    flagged = models.BooleanField()
    in_random_sample = models.BooleanField()
    abstention = models.BooleanField()
    score = models.FloatField()
    points2 = models.IntegerField()  # 2 × Σ points of the readable claims (halves are exact)
    claims = models.IntegerField()  # readable claims of the current run
    answers = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = _("Wochensumme der Bewertungen")
        verbose_name_plural = _("Wochensummen der Bewertungen")
        constraints = [
            models.UniqueConstraint(
                fields=["use_case", "week", "flagged", "in_random_sample", "abstention",
                        "score", "points2", "claims"],
                name="rollupscore_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.use_case_id} {self.week} {self.score}: {self.answers}"


class RollupUsage(OfUseCase):
    """Judge runs that ended (succeeded or failed) per use case, week of their ANSWER (as the
    weekly figures count a week's cost, rescores included), judge model and prompt version.
    Runs still open are read raw and added."""

    week = models.DateField()
    judge_model = models.CharField(max_length=200)
    prompt_version = models.CharField(max_length=50)
    runs = models.BigIntegerField(default=0)
    succeeded_runs = models.BigIntegerField(default=0)
    failed_runs = models.BigIntegerField(default=0)
    calls = models.BigIntegerField(default=0)
    succeeded_calls = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    cached_tokens = models.BigIntegerField(default=0)
    # Cost in millionths (JudgeRun.cost has six decimals): exact, also where SQLite sums.
    cost_micros = models.BigIntegerField(default=0)
    priced_runs = models.BigIntegerField(default=0)  # runs with a cost
    unpriced_runs = models.BigIntegerField(default=0)  # runs with calls and no cost

    class Meta:
        verbose_name = _("Wochensumme der Prüfläufe")
        verbose_name_plural = _("Wochensummen der Prüfläufe")
        constraints = [
            models.UniqueConstraint(
                fields=["use_case", "week", "judge_model", "prompt_version"],
                name="rollupusage_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.use_case_id} {self.week} {self.judge_model}: {self.runs}"


class RollupUsageDay(OfUseCase):
    """Judge runs that ended per use case, local day (Europe/Berlin) of their END, trigger and
    status: the judge page's usage per day, its failed runs and the cost estimate's calls and
    tokens per call. Written when a run ends, as `RollupUsage`."""

    day = models.DateField()
    trigger = models.CharField(max_length=10)
    status = models.CharField(max_length=10)
    runs = models.BigIntegerField(default=0)
    calls = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    cached_tokens = models.BigIntegerField(default=0)
    cost_micros = models.BigIntegerField(default=0)  # as RollupUsage's
    unpriced_runs = models.BigIntegerField(default=0)  # runs with calls and no cost
    # Runs whose answers retention dropped with their month: gone from the raw rows, counted
    # here still (their calls were made), and left alone by the rebuild and the check.
    dropped = models.BooleanField(default=False)

    class Meta:
        verbose_name = _("Tagessumme der Prüfläufe")
        verbose_name_plural = _("Tagessummen der Prüfläufe")
        constraints = [
            models.UniqueConstraint(fields=["use_case", "day", "trigger", "status", "dropped"],
                                    name="rollupusageday_key"),
        ]

    def __str__(self) -> str:
        return f"{self.use_case_id} {self.day} {self.trigger} {self.status}: {self.runs}"


USAGE_DAY_SUMS = ("runs", "calls", "prompt_tokens", "completion_tokens", "cached_tokens",
                  "cost_micros", "unpriced_runs")


USAGE_SUMS = ("runs", "succeeded_runs", "failed_runs", "calls", "succeeded_calls",
              "prompt_tokens", "completion_tokens", "cached_tokens", "cost_micros",
              "priced_runs", "unpriced_runs")

# The trigger of a run asked for on demand (JudgeRun.Trigger.ON_DEMAND).
ON_DEMAND_TRIGGER = "on_demand"


def in_week_usage(trigger: str) -> bool:
    """Whether a run counts in its answer's week's usage (RollupUsage, and every read of the
    weeks' runs): not an on-demand run. The weeks' judges (model, prompt version) decide where
    the experts' scale pools again, so a verdict asked for on demand of an old answer with
    today's judge would move an estimate (judging/services/on_demand.py). The days' usage
    (RollupUsageDay, by trigger) counts it: it was spent."""
    return trigger != ON_DEMAND_TRIGGER


# What a read of the weeks' runs leaves out (`in_week_usage`).
NOT_IN_WEEK_USAGE = models.Q(trigger=ON_DEMAND_TRIGGER)


class RollupCause(OfUseCase):
    """Answers per use case, week and stratum in each bucket of the diagnosis' causes: one row
    per dimension (`Dim`) and bucket, so that each cause's groups and the tuner's answers per
    content-word probability come out of a few hundred rows a week."""

    week = models.DateField()
    flagged = models.BooleanField()
    dim = models.SmallIntegerField()
    bucket = models.SmallIntegerField()  # NO_BUCKET: no similarity, multi-part unknown, ...
    answers = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = _("Wochensumme nach Ursachen")
        verbose_name_plural = _("Wochensummen nach Ursachen")
        constraints = [
            models.UniqueConstraint(fields=["use_case", "week", "flagged", "dim", "bucket"],
                                    name="rollupcause_key"),
        ]

    def __str__(self) -> str:
        return f"{self.use_case_id} {self.week} {self.dim}/{self.bucket}: {self.answers}"


class RollupCauseScore(OfUseCase):
    """Judged answers per use case, week, stratum, cause bucket and score: the diagnosis'
    estimates per bucket. Similarity, chunks and multi-part for every judged answer; the
    content-word probability only for the random sample (the tuner's lift rests on it)."""

    week = models.DateField()
    flagged = models.BooleanField()
    in_random_sample = models.BooleanField()
    dim = models.SmallIntegerField()
    bucket = models.SmallIntegerField()
    score = models.FloatField()
    answers = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = _("Wochensumme der Bewertungen nach Ursachen")
        verbose_name_plural = _("Wochensummen der Bewertungen nach Ursachen")
        constraints = [
            models.UniqueConstraint(
                fields=["use_case", "week", "flagged", "in_random_sample", "dim", "bucket",
                        "score"],
                name="rollupcausescore_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.use_case_id} {self.week} {self.dim}/{self.bucket} {self.score}"


class RollupMoments(OfUseCase):
    """The power sums of the causes' regression (`Moments`) per use case, week, stratum and
    similarity bucket (DEFAULT_SIMILARITY_EDGES: similarity enters the regression by bucket),
    over the judged answers with a similarity. A rescore moves the score's sums (a float
    subtraction: equal to a recount up to rounding, not bit for bit)."""

    week = models.DateField()
    flagged = models.BooleanField()
    bucket = models.SmallIntegerField(default=0)  # bucket_of(similarity, DEFAULT_SIMILARITY_EDGES)
    n = models.BigIntegerField(default=0)
    s_min = models.FloatField(null=True)
    s_max = models.FloatField(null=True)
    c_min = models.FloatField(null=True)
    c_max = models.FloatField(null=True)
    m_sum = models.BigIntegerField(default=0)
    sums = models.JSONField(default=list)  # in the order of MOMENT_KEYS

    class Meta:
        verbose_name = _("Wochensumme der Regression")
        verbose_name_plural = _("Wochensummen der Regression")
        constraints = [
            models.UniqueConstraint(fields=["use_case", "week", "flagged", "bucket"],
                                    name="rollupmoments_bucket_key"),
        ]

    def __str__(self) -> str:
        return (f"{self.use_case_id} {self.week} {'flagged' if self.flagged else ''} "
                f"similarity bucket {self.bucket}: {self.n}")

    @property
    def moments(self) -> Moments:
        if not self.n:
            return NO_MOMENTS
        assert None not in (self.s_min, self.s_max, self.c_min, self.c_max)
        return Moments(
            int(self.n), float(self.s_min), float(self.s_max),  # type: ignore[arg-type]  # asserted
            float(self.c_min), float(self.c_max),  # type: ignore[arg-type]  # asserted above
            int(self.m_sum), dict(zip(MOMENT_KEYS, map(float, self.sums), strict=True)),
        )


class RollupSealed(OfUseCase):
    """A week of a use case whose raw answers are (partly) gone: retention dropped their month.
    Its rollups are the record now; a rebuild or check leaves them as they are."""

    week = models.DateField()
    sealed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("versiegelte Woche")
        verbose_name_plural = _("versiegelte Wochen")
        constraints = [
            models.UniqueConstraint(fields=["use_case", "week"], name="rollupsealed_key"),
        ]

    def __str__(self) -> str:
        return f"{self.use_case_id} {self.week}"


class DroppedMonth(models.Model):
    """A local month whose answers retention dropped (their partitions are gone): what counts
    answers from the day rollups leaves its days out."""

    month = models.DateField(unique=True)  # its first day
    answers = models.BigIntegerField()
    dropped_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("gelöschter Monat")
        verbose_name_plural = _("gelöschte Monate")

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} ({self.answers})"


class RollupState(models.Model):
    """One row: the definition the rollups were built with, and since when they are whole."""

    definition = models.CharField(max_length=64)
    ready_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("Stand der Wochensummen")
        verbose_name_plural = _("Stand der Wochensummen")

    def __str__(self) -> str:
        return f"{self.definition} ({self.ready_at or 'not ready'})"


# --- keys, one definition for the writers, the rebuild and the readers ----------------------

# Bumped when what a rollup row means changes: rollups built under another definition are not
# read until rebuilt. 2: judge usage per week. 3: the diagnosis' causes, tuner and regression.
# 4: judge usage per day of the runs' end (the judge page). 5: the regression's sums per
# similarity bucket (similarity enters the causes' regression by bucket, issue 39). 6: the
# segments (issue 40).
DEFINITION = "6"


def definition() -> str:
    """What the rollups' keys depend on: this module's version and the site's time zone."""
    from django.conf import settings

    return f"{DEFINITION}:{settings.TIME_ZONE}"


def day_of(moment: datetime) -> date:
    """The local day (site time zone) of an answer's `created_at`."""
    return timezone.localtime(moment).date()


def local_midnight(day: date) -> datetime:
    """The start of a local day (site time zone): where the day rollups' days begin."""
    return datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())


def week_of(moment: datetime) -> date:
    """The local Monday of the ISO week of an answer's `created_at`."""
    return monday_of(day_of(moment))


def monday_of(day: date) -> date:
    """The Monday of a day's ISO week."""
    return day - timedelta(days=day.weekday())


def next_month(month: date) -> date:
    """The first day of the month after this one."""
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def rollups_ready() -> bool:
    """The rollups are whole for the current definition: the pages may read them."""
    state = RollupState.objects.order_by("-pk").first()
    return state is not None and state.ready_at is not None and (
        state.definition == definition()
    )


# --- the diagnosis' buckets -----------------------------------------------------------------


class Dim:
    """What a RollupCause / RollupCauseScore row's bucket is a bucket of."""

    SIMILARITY = 1  # best chunk similarity, DEFAULT_SIMILARITY_EDGES
    CHUNKS = 2  # number of chunks, DEFAULT_CHUNK_EDGES (every answer has one)
    MULTI_PART = 3  # 0 single, 1 multi-part
    PROBABILITY = 4  # lowest content-word probability, PROBABILITY_GRID


NO_BUCKET = -1  # None: no chunk score, multi-part not known, no log-probabilities
# The tuner's thresholds and a use case's logprob_threshold on a grid of hundredths: an answer
# is kept by the number of grid points at or below its probability, which answers "below t?"
# exactly for every t on the grid (i/100 is the same double as the literal 0.i).
PROBABILITY_GRID = tuple(i / 100 for i in range(1, 101))


def bucket_of(value: float | None, edges: Sequence[float]) -> int:
    """The number of edges at or below the value (NaN: 0, as no edge is at or below it);
    NO_BUCKET for None."""
    if value is None:
        return NO_BUCKET
    if value != value:
        return 0
    return bisect_right(edges, value)


def cause_buckets(
    best_chunk_score: float | None, chunk_count: int, multi_part: bool | None,
    min_content_probability: float | None,
) -> tuple[tuple[int, int], ...]:
    """An answer's (dim, bucket) in each of the four dimensions."""
    return (
        (Dim.SIMILARITY, bucket_of(best_chunk_score, DEFAULT_SIMILARITY_EDGES)),
        (Dim.CHUNKS, bucket_of(chunk_count, DEFAULT_CHUNK_EDGES)),
        (Dim.MULTI_PART, NO_BUCKET if multi_part is None else int(multi_part)),
        (Dim.PROBABILITY, bucket_of(min_content_probability, PROBABILITY_GRID)),
    )


def grid_probability(bucket: int) -> float | None:
    """The lower grid point of a probability bucket: the probability the tuner uses in its
    place (None for NO_BUCKET)."""
    if bucket == NO_BUCKET:
        return None
    return PROBABILITY_GRID[bucket - 1] if bucket else 0.0


def on_grid(threshold: float) -> bool:
    """The tuner's counts from the rollups are exact at this threshold."""
    return threshold == 0.0 or threshold in PROBABILITY_GRID
