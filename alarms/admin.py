"""Django admin for alarms: a person may only mark one as done (cleared).

Channels and their deliveries are listed too (set up on the use case's channel page).

The list lived under /admin/monitoring/alarm/ before the app had its own; treue_site/urls.py
redirects that address here.
"""

from django.contrib import admin
from django.http import HttpRequest

from alarms.models import Alarm, AlarmChannel, AlarmDelivery


@admin.register(Alarm)
class AlarmAdmin(admin.ModelAdmin):
    """Alarms are raised by the checks; a person may only mark one as done (cleared)."""

    list_display = ("use_case", "kind", "key", "opened_at", "cleared_at", "mailed_at")
    list_filter = ("kind", "use_case")
    readonly_fields = ("use_case", "kind", "key", "message", "details", "opened_at", "mailed_at")
    fields = ("use_case", "kind", "key", "message", "details", "opened_at", "mailed_at",
              "cleared_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(AlarmChannel)
class AlarmChannelAdmin(admin.ModelAdmin):
    """The channels, to find them across use cases; they are set up, tested and changed on
    their use case's page (alarms/views.py), which keeps the address and signing secret out of
    sight: here only the address's host and last 4 characters are shown, never the secrets."""

    list_display = ("name", "use_case", "kind", "url_hint", "active", "created_at")
    list_filter = ("kind", "active", "use_case")
    fields = ("use_case", "kind", "name", "url_hint", "active", "created_at", "created_by")
    readonly_fields = ("use_case", "kind", "url_hint", "created_at", "created_by")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(AlarmDelivery)
class AlarmDeliveryAdmin(admin.ModelAdmin):
    """Each alarm sent to each channel, with its status; read only."""

    list_display = ("alarm", "channel", "status", "http_status", "attempts", "created_at",
                    "finished_at")
    list_filter = ("status", "channel__kind")
    fields = ("alarm", "channel", "status", "http_status", "attempts", "error", "created_at",
              "finished_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
