"""The weekly expert review (tier 3): batches, the answers in them and the experts' verdicts.

A batch belongs to one use case and one ISO week and holds answers judged in the week before.
An item is one answer to review, shown with the claims of the judge run it was drawn with. The
expert's current work lives on the item and its verdicts (saved as it goes); every submission
is also written to an immutable `ReviewSubmission`, so an edit after submitting keeps the
earlier version.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from jobs.models import LeasedJob
from monitoring.models import Answer, Claim, JudgeMode, JudgeRun, JudgeUsage, UseCase


class ReviewBatch(models.Model):
    use_case = models.ForeignKey(
        UseCase, on_delete=models.CASCADE, related_name="review_batches",
        verbose_name=_("Anwendungsfall"),
    )
    week = models.CharField(_("Woche"), max_length=8)  # ISO week of the review, "2026-W49"
    source_week = models.CharField(_("Antworten aus Woche"), max_length=8)
    target_size = models.PositiveSmallIntegerField(_("Sollgröße"))
    # How many judged answers the source week had; fewer than target_size: all were taken.
    available = models.PositiveIntegerField(_("verfügbare Antworten"), default=0)
    created_at = models.DateTimeField(_("angelegt"), auto_now_add=True)
    due_at = models.DateTimeField(_("fällig am"))
    finished_at = models.DateTimeField(_("abgeschlossen"), null=True, blank=True)
    # Expert scores brought in by `import_expert_labels` (an annotation tool, an earlier round)
    # sit in a batch of their own per week: never in an expert's queue, never due, and never in
    # the way of the week's own batch, which beat still draws.
    imported = models.BooleanField(_("importiert"), default=False)

    class Meta:
        ordering = ["-week", "use_case__name"]
        verbose_name = _("Wochenprüfung")
        verbose_name_plural = _("Wochenprüfungen")
        constraints = [
            models.UniqueConstraint(
                fields=["use_case", "week", "imported"], name="review_batch_unique_week"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.use_case.slug} {self.week}"

    @property
    def due(self) -> datetime:
        """The last moment of the review week, for display (due_at is the next Monday 0:00)."""
        return timezone.localtime(self.due_at) - timedelta(seconds=1)


class ReviewItem(models.Model):
    class Status(models.TextChoices):
        OPEN = "open", _("offen")
        IN_PROGRESS = "in_progress", _("begonnen")
        SUBMITTED = "submitted", _("abgegeben")

    class Stratum(models.TextChoices):
        RANDOM = "random", _("Zufallsstichprobe")
        FLAGGED = "flagged", _("markiert")

    batch = models.ForeignKey(
        ReviewBatch, on_delete=models.CASCADE, related_name="items",
        verbose_name=_("Wochenprüfung"),
    )
    answer = models.ForeignKey(
        Answer, on_delete=models.PROTECT, related_name="review_items", verbose_name=_("Antwort"),
        db_constraint=False,  # answers are partitioned by month on PostgreSQL
    )
    # The judge run whose claims the expert labels and whose score the manual one is set against.
    judge_run = models.ForeignKey(
        JudgeRun, on_delete=models.PROTECT, related_name="+", verbose_name=_("Prüflauf")
    )
    position = models.PositiveSmallIntegerField(_("Position"))
    stratum = models.CharField(_("Schicht"), max_length=10, choices=Stratum.choices)
    status = models.CharField(
        _("Status"), max_length=12, choices=Status.choices, default=Status.OPEN
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="review_items", verbose_name=_("Fachexperte/Fachexpertin"),
    )
    decomposition_wrong = models.BooleanField(_("Zerlegung falsch"), default=False)
    # Which ways the decomposition is wrong: missing, merged, invented, not_self_contained.
    decomposition_problems = models.JSONField(_("Zerlegungsfehler"), default=list, blank=True)
    comment = models.TextField(_("Kommentar"), blank=True)
    manual_score = models.FloatField(_("Treue (manuell)"), null=True, blank=True)
    manual_abstention = models.BooleanField(_("Enthaltung (manuell)"), default=False)
    version = models.PositiveIntegerField(_("Fassung"), default=0)  # number of submissions
    updated_at = models.DateTimeField(_("geändert am"), auto_now=True)
    submitted_at = models.DateTimeField(_("abgegeben am"), null=True, blank=True)

    class Meta:
        ordering = ["batch", "position"]
        verbose_name = _("Antwort der Wochenprüfung")
        verbose_name_plural = _("Antworten der Wochenprüfung")
        constraints = [
            models.UniqueConstraint(fields=["batch", "answer"], name="review_item_unique_answer"),
            models.UniqueConstraint(fields=["batch", "position"], name="review_item_position"),
        ]

    def __str__(self) -> str:
        return f"{self.batch} #{self.position}"


class ReviewVerdict(models.Model):
    """The expert's label for one claim: a claim of the judge run, or one the expert added."""

    class Label(models.TextChoices):
        GEDECKT = "GEDECKT", "GEDECKT"
        TEILWEISE = "TEILWEISE", "TEILWEISE"
        UNGEDECKT = "UNGEDECKT", "UNGEDECKT"

    item = models.ForeignKey(ReviewItem, on_delete=models.CASCADE, related_name="verdicts")
    claim = models.ForeignKey(Claim, null=True, blank=True, on_delete=models.PROTECT,
                              related_name="+")
    position = models.PositiveSmallIntegerField()
    added_text = models.TextField(blank=True)  # the text of a claim the expert added
    label = models.CharField(max_length=10, choices=Label.choices, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["item", "position"]
        constraints = [
            models.UniqueConstraint(fields=["item", "position"], name="review_verdict_position"),
        ]

    def __str__(self) -> str:
        return f"{self.item_id}#{self.position}"

    @property
    def added(self) -> bool:
        return self.claim_id is None

    @property
    def text(self) -> str:
        """The claim's text: the judge's claim, or the one the expert added."""
        return self.added_text if self.claim is None else self.claim.text


class ReviewSubmission(models.Model):
    """One submitted version of an item, never changed afterwards: the audit trail."""

    item = models.ForeignKey(
        ReviewItem, on_delete=models.CASCADE, related_name="submissions",
        verbose_name=_("Antwort der Wochenprüfung"),
    )
    version = models.PositiveIntegerField(_("Fassung"))
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+",
        verbose_name=_("Fachexperte/Fachexpertin"),
    )
    submitted_at = models.DateTimeField(_("abgegeben am"))
    manual_score = models.FloatField(_("Treue (manuell)"))
    manual_abstention = models.BooleanField(_("Enthaltung (manuell)"), default=False)
    automatic_score = models.FloatField(_("Treue (Prüfmodell)"), null=True)
    # [{position, claim_id, text, label, added}] as submitted.
    verdicts = models.JSONField(_("Urteile"))
    decomposition_wrong = models.BooleanField(_("Zerlegung falsch"), default=False)
    decomposition_problems = models.JSONField(_("Zerlegungsfehler"), default=list)
    comment = models.TextField(_("Kommentar"), blank=True)
    # Brought in by import_expert_labels rather than given on the review page; counts the same.
    imported = models.BooleanField(_("importiert"), default=False)

    class Meta:
        ordering = ["item", "version"]
        verbose_name = _("abgegebene Fassung")
        verbose_name_plural = _("abgegebene Fassungen")
        constraints = [
            models.UniqueConstraint(fields=["item", "version"], name="review_submission_version"),
        ]

    def __str__(self) -> str:
        return f"{self.item_id} v{self.version}"


class JudgeComparison(models.Model):
    """A candidate judge (model and mode) tried as a shadow on the experts' latest reviews of a
    use case: it verifies the claims the experts labelled, and its verdicts are set against
    theirs beside the current judge's. Nothing it finds changes an answer's score or an
    estimate; adopting it makes it the use case's judge from then on."""

    use_case = models.ForeignKey(
        UseCase, on_delete=models.CASCADE, related_name="judge_comparisons",
        verbose_name=_("Anwendungsfall"),
    )
    judge_model = models.CharField(_("Prüfmodell"), max_length=200)
    judge_mode = models.CharField(_("Prüfmodus"), max_length=12, choices=JudgeMode.choices)
    requested = models.PositiveIntegerField(_("Antworten verlangt"))
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+",
        verbose_name=_("angelegt von"),
    )
    created_at = models.DateTimeField(_("angelegt"), auto_now_add=True)
    adopted_at = models.DateTimeField(_("übernommen am"), null=True, blank=True)
    adopted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+", verbose_name=_("übernommen von"),
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("Vergleich der Prüfmodelle")
        verbose_name_plural = _("Vergleiche der Prüfmodelle")

    def __str__(self) -> str:
        return f"{self.use_case} · {self.judge_model} ({self.judge_mode})"


class ShadowRun(LeasedJob, JudgeUsage):
    """One answer of a comparison, judged by the candidate: the claims of the reviewed judge run
    that the expert labelled, verified in the candidate's mode. A leased job like a judge run,
    but never the answer's: it writes only itself."""

    class Status(models.TextChoices):
        PENDING = "pending", _("wartet")
        RUNNING = "running", _("läuft")
        SUCCEEDED = "succeeded", _("fertig")
        FAILED = "failed", _("fehlgeschlagen")

    status = models.CharField(
        _("Status"), max_length=10, choices=Status.choices, default=Status.PENDING
    )
    comparison = models.ForeignKey(
        JudgeComparison, on_delete=models.CASCADE, related_name="runs",
        verbose_name=_("Vergleich"),
    )
    # The expert's submission the candidate is set against (its item names the answer and the
    # judge run whose claims it verifies).
    submission = models.ForeignKey(
        ReviewSubmission, on_delete=models.CASCADE, related_name="+",
        verbose_name=_("abgegebene Fassung"),
    )
    started_at = models.DateTimeField(_("gestartet"), null=True, blank=True)
    # [{claim_id, position, label, raw, chunks, reason}] in the order of the claims.
    verdicts = models.JSONField(_("Urteile"), default=list, blank=True)
    score = models.FloatField(_("Treue"), null=True, blank=True)

    class Meta:
        ordering = ["comparison", "id"]
        verbose_name = _("Schattenlauf")
        verbose_name_plural = _("Schattenläufe")
        constraints = [
            models.UniqueConstraint(
                fields=["comparison", "submission"], name="shadowrun_once_per_submission"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.comparison_id}:{self.submission_id}"
