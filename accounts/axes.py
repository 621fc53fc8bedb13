"""App configurations Treue gives to the libraries it installs."""

from axes.apps import AppConfig as AxesAppConfig
from django.conf import settings
from django.utils.translation import gettext_lazy as _


class AxesConfig(AxesAppConfig):
    """django-axes (login throttling, accounts/login_throttling.py) under a German name in the
    admin, showing only the records Treue keeps."""

    verbose_name = _("Anmeldesperren")

    def ready(self) -> None:
        super().ready()
        from axes.models import AccessFailureLog
        from django.contrib import admin

        # axes registers its failure log whether or not it is kept (the admin's autodiscovery,
        # earlier in INSTALLED_APPS, has run by now); an always empty list there would suggest
        # failures go unrecorded, while they are in the access attempts as long as they count.
        if not settings.AXES_ENABLE_ACCESS_FAILURE_LOG and admin.site.is_registered(
            AccessFailureLog
        ):
            admin.site.unregister(AccessFailureLog)
