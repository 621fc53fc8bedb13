from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AlarmsConfig(AppConfig):
    name = "alarms"
    verbose_name = _("Alarme")
