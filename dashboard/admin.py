"""Django admin of use cases: their settings with the judge cost a sample rate brings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.contrib.auth.models import User
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy as _

from judging.selectors.costs import COST_WINDOW_DAYS, use_case_weekly_cost
from judging.selectors.paths import judge_evidence_tokens
from monitoring.models import (
    JudgeMode,
    SettingChange,
    UseCase,
)
from monitoring.services import tuning

if TYPE_CHECKING:  # django-stubs makes ModelAdmin generic; Django's cannot be subscripted
    _UseCaseAdmin = admin.ModelAdmin[UseCase]
else:
    _UseCaseAdmin = admin.ModelAdmin


@admin.register(UseCase)
class UseCaseAdmin(_UseCaseAdmin):
    list_display = ("name", "slug", "language", "sample_rate", "logprob_threshold",
                    "action_threshold", "leaves_unreviewed", "retention_days", "active")
    list_filter = ("language", "active", "leaves_unreviewed")
    search_fields = ("name", "slug")
    filter_horizontal = ("experts", "team_leads")
    prepopulated_fields = {"slug": ("name",)}
    fields = ("name", "slug", "language", "sample_rate", "expected_weekly_cost",
              "logprob_threshold", "action_threshold", "judge_mode", "judge_evidence",
              "evidence_tokens", "leaves_unreviewed", "review_batch_size", "retention_days",
              "retention_deletes", "experts", "team_leads", "active")
    readonly_fields = ("expected_weekly_cost", "evidence_tokens")

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        # A new use case is judged batched (existing ones keep their mode until changed).
        return {"judge_mode": JudgeMode.BATCHED, **super().get_changeform_initial_data(request)}

    def save_model(
        self, request: HttpRequest, obj: UseCase, form: forms.ModelForm[UseCase], change: bool
    ) -> None:
        # A threshold, the sample rate or the judge's evidence changed here is recorded as in
        # the app (who, old, new).
        before = (
            UseCase.objects.filter(pk=obj.pk).values(*tuning.TUNABLE).first()
            if change else None
        )
        super().save_model(request, obj, form, change)
        if before:
            user = request.user if isinstance(request.user, User) else None
            tuning.setting_changes_record(use_case=obj, user=user, before=before,
                                          source=SettingChange.Source.ADMIN)

    @admin.display(description=_("Erwartete Prüfkosten pro Woche"))
    def expected_weekly_cost(self, obj: UseCase | None) -> str:
        if obj is None or obj.pk is None:
            return str(_("wird nach dem Anlegen aus den Antworten der letzten 4 Wochen geschätzt"))
        html = render_to_string(
            "monitoring/_weekly_cost.html",
            {"weekly": use_case_weekly_cost(use_case=obj)},
        )
        # The admin turns line breaks of a read-only value into <br>; the template's own line
        # breaks are layout, not content. The template escaped everything it inserted.
        return mark_safe(" ".join(html.split()))

    @admin.display(description=_("Antwort-Token der Belege"))
    def evidence_tokens(self, obj: UseCase | None) -> str:
        # What the judge's evidence costs, measured on the use case's batched runs.
        if obj is None or obj.pk is None:
            return str(_("etwa 25 Antwort-Token je Aussage; gemessen wird nach dem Anlegen"))
        html = render_to_string(
            "monitoring/_evidence_tokens.html",
            {"evidence_tokens": judge_evidence_tokens(use_case=obj),
             "cost_window_days": COST_WINDOW_DAYS},
        )
        return mark_safe(" ".join(html.split()))  # escaped by the template
