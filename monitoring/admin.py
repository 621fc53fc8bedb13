"""Django admin for use cases, services and answers.

A new service's key is generated on save and shown once in a message; only its hash is stored.
"""

from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from monitoring import services
from monitoring.domain import keys
from monitoring.models import Answer, Chunk, Service, UseCase


@admin.register(UseCase)
class UseCaseAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "language", "sample_rate", "logprob_threshold",
                    "action_threshold", "leaves_unreviewed", "active")
    list_filter = ("language", "active", "leaves_unreviewed")
    search_fields = ("name", "slug")
    filter_horizontal = ("experts", "team_leads")
    prepopulated_fields = {"slug": ("name",)}


@admin.register(Service)
class ServiceAdmin(admin.ModelAdmin):
    list_display = ("name", "key_prefix", "active", "created_at", "last_used_at")
    list_filter = ("active",)
    search_fields = ("name", "key_prefix")
    filter_horizontal = ("use_cases",)
    readonly_fields = ("key_prefix", "created_at", "last_used_at")
    exclude = ("key_hash",)
    actions = ["rotate_keys"]

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


class ChunkInline(admin.TabularInline):
    model = Chunk
    extra = 0
    can_delete = False
    readonly_fields = ("rank", "score", "source", "source_chunk_id", "text")


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
