"""Django admin of the judge tier: judge runs with their claims (read-only, the audit trail of what
the judge said), judge prices, and what is known of each judge endpoint."""

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.functional import lazy
from django.utils.translation import gettext

from monitoring.domain.prices import LIST_PRICES_AS_OF, LIST_PRICES_SOURCES
from monitoring.models import (
    Claim,
    JudgeEndpoint,
    JudgePrice,
    JudgeRun,
)
from monitoring.services.prices import past_runs_price_on_commit


def _list_prices_note() -> str:
    return gettext(
        "Voreingestellt sind Listenpreise Stand %(as_of)s in US-Dollar (Quellen: %(sources)s); "
        "sie lassen sich hier ändern. Ein neuer oder geänderter Preis gilt auch für die "
        "früheren Prüfläufe des Modells, die noch ohne Preis sind."
    ) % {"as_of": LIST_PRICES_AS_OF, "sources": ", ".join(LIST_PRICES_SOURCES)}


LIST_PRICES_NOTE = lazy(_list_prices_note, str)()

if TYPE_CHECKING:  # django-stubs makes the admin classes generic; Django's cannot be subscripted
    _ClaimInline = admin.TabularInline[Claim, JudgeRun]
    _JudgeRunAdmin = admin.ModelAdmin[JudgeRun]
    _JudgePriceAdmin = admin.ModelAdmin[JudgePrice]
    _JudgeEndpointAdmin = admin.ModelAdmin[JudgeEndpoint]
else:
    _ClaimInline = admin.TabularInline
    _JudgeRunAdmin = _JudgePriceAdmin = _JudgeEndpointAdmin = admin.ModelAdmin


class ClaimInline(_ClaimInline):
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
class JudgeRunAdmin(_JudgeRunAdmin):
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
class JudgePriceAdmin(_JudgePriceAdmin):
    list_display = (
        "judge_model", "prompt_per_1k", "cached_prompt_per_1k", "completion_per_1k", "currency"
    )
    search_fields = ("judge_model",)
    fieldsets = [(None, {
        "fields": ("judge_model", "prompt_per_1k", "cached_prompt_per_1k", "completion_per_1k",
                   "currency"),
        "description": LIST_PRICES_NOTE,
    })]

    def save_model(self, request: HttpRequest, obj: JudgePrice, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        # The model's past runs that ran without a price get one, on a worker.
        past_runs_price_on_commit(judge_model=obj.judge_model)


@admin.register(JudgeEndpoint)
class JudgeEndpointAdmin(_JudgeEndpointAdmin):
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
