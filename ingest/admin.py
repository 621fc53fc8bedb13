"""Django admin: the counts of what ingest refused (answers of the API, spans of the OTLP
receiver), read-only; the same numbers as /metrics."""

from typing import TYPE_CHECKING

from django.contrib import admin
from django.http import HttpRequest

from ingest.models import RefusalCount

if TYPE_CHECKING:  # django-stubs makes the admin classes generic; Django's cannot be subscripted
    _RefusalCountAdmin = admin.ModelAdmin[RefusalCount]
else:
    _RefusalCountAdmin = admin.ModelAdmin


@admin.register(RefusalCount)
class RefusalCountAdmin(_RefusalCountAdmin):
    list_display = ("service", "kind", "reason", "count")
    list_filter = ("kind", "reason", "service")
    readonly_fields = ("service", "kind", "reason", "count")
    list_select_related = ("service",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: RefusalCount | None = None) -> bool:
        return False
