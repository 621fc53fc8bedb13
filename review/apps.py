from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ReviewConfig(AppConfig):
    name = "review"
    verbose_name = _("Prüfung")

    def ready(self) -> None:
        # Its part of retention, the answer record, the blind rule and the dashboard's expert
        # reviews, registered where monitoring calls them (monitoring/extensions.py).
        from review import extensions

        extensions.register()
