"""Django admin for use cases, services, answers, judge runs, judge prices and what is known
of the judge endpoints.

A new service's key is generated on save and shown once in a message; only its hash is stored.
The use case form shows the expected weekly judge cost next to the sample rate that drives it.
Judge runs are read-only: they are the audit trail of what the judge said.
"""

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy as _

from monitoring.domain import keys
from monitoring.judging import selectors
from monitoring.judging import selectors as judging_selectors
from monitoring.models import (
    Answer,
    Chunk,
    Claim,
    JudgeEndpoint,
    JudgeMode,
    JudgePrice,
    JudgeRun,
    Service,
    SettingChange,
    UseCase,
)
from monitoring.services import ingest as services
from monitoring.services import tuning


@admin.register(UseCase)
class UseCaseAdmin(admin.ModelAdmin):
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

    def save_model(self, request: HttpRequest, obj: UseCase, form, change: bool) -> None:
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
            {"weekly": selectors.use_case_weekly_cost(use_case=obj)},
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
            {"evidence_tokens": judging_selectors.judge_evidence_tokens(use_case=obj),
             "cost_window_days": judging_selectors.COST_WINDOW_DAYS},
        )
        return mark_safe(" ".join(html.split()))  # escaped by the template


@admin.register(SettingChange)
class SettingChangeAdmin(admin.ModelAdmin):
    """The record of setting changes: read only (made in the app or on the use case here)."""

    list_display = ("changed_at", "use_case", "field", "old_value", "new_value", "changed_by",
                    "source", "note")
    list_filter = ("use_case", "field")
    readonly_fields = list_display

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Service)
class ServiceAdmin(admin.ModelAdmin):
    list_display = ("name", "key_prefix", "active", "created_at", "last_used_at")
    list_filter = ("active",)
    search_fields = ("name", "key_prefix")
    filter_horizontal = ("use_cases",)
    readonly_fields = ("key_prefix", "created_at", "last_used_at")
    exclude = ("key_hash",)
    actions = ["rotate_keys", "revoke_keys"]

    def save_model(self, request: HttpRequest, obj: Service, form, change: bool) -> None:
        if not change:
            key, obj.key_prefix, obj.key_hash = keys.generate_key()
            super().save_model(request, obj, form, change)
            messages.warning(
                request,
                _("Der API-Schlüssel für %(name)s wird nur dieses eine Mal angezeigt: %(key)s")
                % {"name": obj.name, "key": key},
            )
            return
        super().save_model(request, obj, form, change)

    @admin.action(description=_("Neuen Schlüssel erzeugen (der alte wird ungültig)"))
    def rotate_keys(self, request: HttpRequest, queryset) -> None:
        for service in queryset:
            key = services.service_rotate_key(service=service)
            messages.warning(
                request,
                _("Neuer Schlüssel für %(name)s (nur jetzt sichtbar): %(key)s")
                % {"name": service.name, "key": key},
            )

    @admin.action(description=_("Schlüssel widerrufen"))
    def revoke_keys(self, request: HttpRequest, queryset) -> None:
        # The key is looked up among active services only: from now on it is a 401.
        names = sorted(queryset.values_list("name", flat=True))
        queryset.update(active=False)
        messages.success(
            request,
            _("Widerrufen: %(names)s. Anfragen mit diesen Schlüsseln werden ab sofort abgewiesen.")
            % {"names": ", ".join(names)},
        )


class ChunkInline(admin.TabularInline):
    model = Chunk
    extra = 0
    can_delete = False
    readonly_fields = ("rank", "score", "source", "source_chunk_id", "text")
    exclude = ("answer_created_at",)  # the answer's own time, for partitioning


@admin.register(Answer)
class AnswerAdmin(admin.ModelAdmin):
    list_display = ("external_id", "use_case", "service", "created_at", "flagged",
                    "logprobs_status", "sampled", "status")
    list_filter = ("use_case", "flagged", "sampled", "status", "logprobs_status")
    search_fields = ("external_id", "question")
    date_hierarchy = "created_at"
    list_select_related = ("use_case", "service")
    inlines = [ChunkInline]
    readonly_fields = [f.name for f in Answer._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Answers arrive through the ingest API, where they are validated and tier 1 runs.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # Answers are the record: the weekly figures (and their rollups) count them, reviews
        # refer to them. Retention anonymises them instead.
        return False


class ClaimInline(admin.TabularInline):
    model = Claim
    extra = 0
    can_delete = False
    fields = ("position", "text", "label", "raw_reply", "attempts", "cached", "latency_ms",
              "prompt_tokens", "completion_tokens")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    """Read-only: a run is written by the worker alone; rescoring adds runs from the pages."""

    list_display = ("id", "answer", "status", "trigger", "judge_model", "prompt_version",
                    "verify_path", "calls", "prompt_tokens", "cached_tokens", "completion_tokens",
                    "cost", "score", "created_at", "finished_at")
    list_filter = ("status", "trigger", "judge_model", "prompt_version", "verify_path",
                   "answer__use_case")
    search_fields = ("answer__external_id", "judge_model", "error")
    date_hierarchy = "created_at"
    list_select_related = ("answer",)
    inlines = [ClaimInline]
    readonly_fields = [f.name for f in JudgeRun._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # Runs are the history of an answer's scores; deleting one would rewrite it.
        return False


@admin.register(JudgePrice)
class JudgePriceAdmin(admin.ModelAdmin):
    list_display = (
        "judge_model", "prompt_per_1k", "cached_prompt_per_1k", "completion_per_1k", "currency"
    )
    search_fields = ("judge_model",)


@admin.register(JudgeEndpoint)
class JudgeEndpointAdmin(admin.ModelAdmin):
    """What the judge found out about an endpoint and model: written by the worker alone.
    Deleting a row makes the next batched or one-call request find out again (after the
    endpoint or the model changed)."""

    list_display = ("model", "endpoint", "structured_output", "detail", "checked_at")
    list_filter = ("structured_output",)
    search_fields = ("model", "endpoint")
    readonly_fields = ("endpoint", "model", "structured_output", "detail", "checked_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
