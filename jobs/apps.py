from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class JobsConfig(AppConfig):
    """Holds only an abstract model: no tables, no migrations, no admin."""

    name = "jobs"
    verbose_name = _("Hintergrundaufträge")
