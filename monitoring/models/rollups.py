"""Weekly rollups (issue 22): what the dashboards read instead of recounting raw answers.

Kept by the services in the transactions that change what they count (monitoring/rollups): an
ingest adds its answers to `RollupDay`, a judge run's completion moves its answer's judged
state in `RollupScore` (a rescore subtracts the old one). `rebuild_rollups` recomputes them
from the raw rows, and a check compares the two. The pages read them only once `RollupState`
says a complete rebuild made them whole; until then, and for a definition they were not built
with, the pages read the raw rows as before.
"""

from datetime import date, datetime, timedelta

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class RollupDay(models.Model):
    """Answers received per use case, local day (Europe/Berlin) of `created_at`, and flag."""

    use_case = models.ForeignKey("monitoring.UseCase", on_delete=models.CASCADE,
                                 related_name="+")
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


class RollupScore(models.Model):
    """Judged answers per use case, week (its local Monday), stratum and what was judged: the
    score, whether it abstained, and its readable claims (twice the supported points, and how
    many) - a histogram from which the weekly statistics come out exactly."""

    use_case = models.ForeignKey("monitoring.UseCase", on_delete=models.CASCADE,
                                 related_name="+")
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


class RollupUsage(models.Model):
    """Judge runs that ended (succeeded or failed) per use case, week of their ANSWER (as the
    weekly figures count a week's cost, rescores included), judge model and prompt version.
    Runs still open are read raw and added."""

    use_case = models.ForeignKey("monitoring.UseCase", on_delete=models.CASCADE,
                                 related_name="+")
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


USAGE_SUMS = ("runs", "succeeded_runs", "failed_runs", "calls", "succeeded_calls",
              "prompt_tokens", "completion_tokens", "cached_tokens", "cost_micros",
              "priced_runs", "unpriced_runs")


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
# read until rebuilt. 2: judge usage per week.
DEFINITION = "2"


def definition() -> str:
    """What the rollups' keys depend on: this module's version and the site's time zone."""
    from django.conf import settings

    return f"{DEFINITION}:{settings.TIME_ZONE}"


def day_of(moment: datetime) -> date:
    """The local day (site time zone) of an answer's `created_at`."""
    return timezone.localtime(moment).date()


def week_of(moment: datetime) -> date:
    """The local Monday of the ISO week of an answer's `created_at`."""
    day = day_of(moment)
    return day - timedelta(days=day.weekday())


def points2_of(label: str) -> int | None:
    """Twice a claim label's points (GEDECKT 2, TEILWEISE 1, UNGEDECKT 0); None: unreadable,
    which counts neither as a claim nor as points (as in the answer's own score)."""
    return POINTS2.get(label)


POINTS2 = {"GEDECKT": 2, "TEILWEISE": 1, "UNGEDECKT": 0}


def rollups_ready() -> bool:
    """The rollups are whole for the current definition: the pages may read them."""
    state = RollupState.objects.order_by("-pk").first()
    return state is not None and state.ready_at is not None and (
        state.definition == definition()
    )
