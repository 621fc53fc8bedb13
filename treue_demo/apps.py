from django.apps import AppConfig


class TreueDemoConfig(AppConfig):
    name = "treue_demo"
    verbose_name = "Demo"
