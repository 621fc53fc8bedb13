from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from accounts.models import OidcIdentity


@admin.register(OidcIdentity)
class OidcIdentityAdmin(admin.ModelAdmin):
    """Read only: the provider makes these at a login; deleting one unlinks the user (whose
    next single sign-on makes a new user)."""

    list_display = ["user", "subject", "issuer", "last_login_at"]
    search_fields = ["user__username", "subject"]
    readonly_fields = ["user", "issuer", "subject", "last_groups", "last_login_at"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
