"""Django admin: the counts of what ingest refused (answers of the API, spans of the OTLP
receiver), read-only; the same numbers as /metrics."""

from django.contrib import admin
from django.http import HttpRequest

from ingest.models import RefusalCount


@admin.register(RefusalCount)
class RefusalCountAdmin(admin.ModelAdmin):
    list_display = ("service", "kind", "reason", "count")
    list_filter = ("kind", "reason", "service")
    readonly_fields = ("service", "kind", "reason", "count")
    list_select_related = ("service",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
