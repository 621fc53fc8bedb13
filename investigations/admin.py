from django.contrib import admin

from investigations.models import Investigation, Question


class QuestionInline(admin.TabularInline):
    model = Question
    extra = 0
    can_delete = False
    fields = ("position", "answer", "status", "consistent", "reason", "generator_calls",
              "judge_calls", "cost", "error")
    readonly_fields = fields
    show_change_link = False

    def has_add_permission(self, request: object, obj: object = None) -> bool:
        return False


@admin.register(Investigation)
class InvestigationAdmin(admin.ModelAdmin):
    """Read-only: investigations are started and cancelled on their pages, where the cost is
    shown first."""

    list_display = ("pk", "use_case", "created_at", "status", "selection", "requested",
                    "samples", "temperature", "created_by")
    list_filter = ("status", "use_case")
    inlines = [QuestionInline]

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False
