from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class TracesConfig(AppConfig):
    name = "traces"
    verbose_name = _("OpenTelemetry-Traces")

    def ready(self) -> None:
        # Its figures on /metrics, registered where monitoring serves them
        # (monitoring/extensions.py).
        from traces import extensions

        extensions.register()
