"""Django admin for use cases, services, answers, judge runs, judge prices and what is known
of the judge endpoints.

A new service's key is generated on save and shown once in a message; only its hash is stored.
The use case form shows the expected weekly judge cost next to the sample rate that drives it.
Judge runs are read-only: they are the audit trail of what the judge said.
"""


from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from monitoring.domain import keys
from monitoring.models import (
    Answer,
    Chunk,
    Service,
    SettingChange,
)
from monitoring.services.use_cases import service_rotate_key


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
            key = service_rotate_key(service=service)
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


