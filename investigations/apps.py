from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class InvestigationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "investigations"
    verbose_name = _("Konsistenzprüfungen")

    def ready(self) -> None:
        # Its part of retention and of the answer record, registered where monitoring calls
        # them (monitoring/extensions.py).
        from investigations import extensions

        extensions.register()
