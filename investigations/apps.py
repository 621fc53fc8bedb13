from django.apps import AppConfig


class InvestigationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "investigations"
    verbose_name = "Konsistenzprüfungen"
