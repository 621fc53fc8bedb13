from django.apps import AppConfig


class JobsConfig(AppConfig):
    """Holds only an abstract model and the framework: no tables, no migrations, no admin (so
    no name a person reads either)."""

    name = "jobs"
