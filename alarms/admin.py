"""Django admin for alarms: a person may only mark one as done (cleared).

The list lived under /admin/monitoring/alarm/ before the app had its own; treue_site/urls.py
redirects that address here.
"""

from django.contrib import admin
from django.http import HttpRequest

from alarms.models import Alarm


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
