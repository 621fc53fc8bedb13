from django.apps import AppConfig


class InvestigationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "investigations"
    verbose_name = "Konsistenzprüfungen"

    def ready(self) -> None:
        # Its part of retention and of the answer record, registered where monitoring calls
        # them (monitoring/extensions.py).
        from investigations import extensions

        extensions.register()
