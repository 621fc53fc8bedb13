"""Django admin for the weekly review: batches and their items, read-only.

Verdicts are given on the review page, where blindness and the audit trail are kept; the admin
only shows them.
"""

from django.contrib import admin
from django.http import HttpRequest

from review.models import JudgeComparison, ReviewBatch, ReviewItem, ReviewSubmission, ShadowRun


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class ReviewItemInline(admin.TabularInline):
    model = ReviewItem
    fields = ("position", "answer", "stratum", "status", "reviewer", "manual_score", "version")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(ReviewBatch)
class ReviewBatchAdmin(ReadOnlyAdmin):
    list_display = ("use_case", "week", "source_week", "target_size", "available", "due_at",
                    "finished_at")
    list_filter = ("use_case",)
    inlines = [ReviewItemInline]


class ReviewSubmissionInline(admin.TabularInline):
    model = ReviewSubmission
    fields = ("version", "reviewer", "submitted_at", "manual_score", "automatic_score",
              "decomposition_wrong", "comment", "verdicts")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(ReviewItem)
class ReviewItemAdmin(ReadOnlyAdmin):
    list_display = ("batch", "position", "answer", "status", "reviewer", "manual_score",
                    "version")
    list_filter = ("status", "batch__use_case")
    inlines = [ReviewSubmissionInline]


class ShadowRunInline(admin.TabularInline):
    model = ShadowRun
    fields = ("submission", "status", "calls", "prompt_tokens", "cost", "score", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(JudgeComparison)
class JudgeComparisonAdmin(ReadOnlyAdmin):
    """Started on the calibration page (Prüfmodelle vergleichen), where the cost is shown first;
    here only shown."""

    list_display = ("use_case", "judge_model", "judge_mode", "requested", "created_by",
                    "created_at", "adopted_at")
    list_filter = ("use_case", "judge_mode")
    inlines = [ShadowRunInline]
