from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = _("Übersicht")

    def ready(self) -> None:
        # The action alarm's check of one use case, where a change asks for it
        # (monitoring/extensions.py).
        from dashboard.services import action
        from monitoring import extensions

        extensions.alarm_check_register(name="action", check=action.action_alarms_check_later)
