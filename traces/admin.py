"""Django admin: the received traces, read-only (what each came to and why). They hold no
content; their spans are deleted when they are assembled."""

from django.contrib import admin
from django.http import HttpRequest

from traces.models import OtlpTrace


@admin.register(OtlpTrace)
class OtlpTraceAdmin(admin.ModelAdmin):
    list_display = ("trace_id", "service", "status", "outcome", "span_count", "last_span_at",
                    "finished_at")
    list_filter = ("status", "outcome", "service")
    search_fields = ("trace_id",)
    readonly_fields = [f.name for f in OtlpTrace._meta.fields]
    list_select_related = ("service",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
