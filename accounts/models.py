"""Who a user is at the identity provider."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class OidcIdentity(models.Model):
    """A Treue user's account at the OpenID provider: found by issuer and subject, never by
    e-mail (an account with a local admin's address must not log in as that admin)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="oidc_identity", verbose_name=_("Benutzer"))
    issuer = models.CharField(_("Aussteller"), max_length=300)
    subject = models.CharField(_("Kennung beim Aussteller"), max_length=255)
    # The groups of the last login and what they gave, for the admin.
    last_groups = models.JSONField(_("Gruppen der letzten Anmeldung"), default=list)
    last_login_at = models.DateTimeField(_("letzte Anmeldung"), null=True, blank=True)

    class Meta:
        verbose_name = _("Single-Sign-on-Konto")
        verbose_name_plural = _("Single-Sign-on-Konten")
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="oidcidentity_key"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} @ {self.issuer}"
