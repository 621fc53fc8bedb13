"""Django admin: the received traces and the counts of what traces came to, read-only. They
hold no content; the spans are deleted when their trace is assembled, and the trace rows after
30 days (the counts stay: traces that were no RAG answer are only counted)."""

from django.contrib import admin
from django.http import HttpRequest

from traces.models import OtlpOutcomeCount, OtlpTrace


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


@admin.register(OtlpOutcomeCount)
class OtlpOutcomeCountAdmin(admin.ModelAdmin):
    list_display = ("service", "outcome", "count")
    list_filter = ("outcome", "service")
    readonly_fields = ("service", "outcome", "count")
    list_select_related = ("service",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
