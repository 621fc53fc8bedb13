"""mozilla-django-oidc, made Treue's: the token's audience and issuer are checked (the library
checks neither), users are found by issuer and subject (not by e-mail), and the provider's
groups set the roles at every login (accounts.services)."""

import logging
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest
from django.utils.translation import gettext as _
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from accounts import services
from accounts.domain.groups import claim_at, roles_from_groups

logger = logging.getLogger(__name__)


class Backend(OIDCAuthenticationBackend):
    """Listed in AUTHENTICATION_BACKENDS only when single sign-on is configured."""

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        try:
            user: User | None = super().authenticate(request, **kwargs)
        except (requests.RequestException, SuspiciousOperation, ValueError) as e:
            # The provider unreachable or answering nonsense, a token that does not verify:
            # the login fails with a message, never with a server error.
            logger.warning("single sign-on failed: %s", e)
            if request is not None:
                messages.error(request, _(
                    "Die Anmeldung über Single Sign-on ist fehlgeschlagen. Bitte erneut "
                    "versuchen oder an die Administration wenden."))
            return None
        return user

    def retrieve_matching_jwk(self, token: bytes | str) -> jwt.PyJWK:
        """The provider's key that signed the token: the one of its `kid`, or, for a token
        without one, the provider's only key of the token's algorithm."""
        response = requests.get(self.OIDC_OP_JWKS_ENDPOINT, timeout=self.get_settings(
            "OIDC_TIMEOUT", None))
        response.raise_for_status()
        keys = response.json().get("keys")
        header = jwt.get_unverified_header(token)
        if not isinstance(keys, list):
            raise SuspiciousOperation("the provider's JWKS holds no keys")
        kid, alg = header.get("kid"), header.get("alg")
        usable = [k for k in keys if isinstance(k, dict) and k.get("alg", alg) == alg
                  and k.get("use", "sig") == "sig"]
        matching = [k for k in usable if k.get("kid") == kid] if kid is not None else usable
        if len(matching) != 1:
            raise SuspiciousOperation(
                f"no single key of the provider for kid {kid!r} and algorithm {alg!r}")
        try:
            return jwt.PyJWK(matching[0])
        except jwt.PyJWTError as e:
            raise SuspiciousOperation(f"the provider's key is not usable: {e}") from e

    def get_payload_data(self, token: bytes | str, key: Any) -> dict[str, Any]:
        """The ID token's claims, its signature, expiry, audience (this client) and issuer
        checked, with the one algorithm configured."""
        header = jwt.get_unverified_header(token)
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(f"the ID token is signed with {header.get('alg')!r}")
        try:
            payload: dict[str, Any] = jwt.decode(
                token, key, algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID, issuer=settings.TREUE_OIDC_ISSUER,
                options={"require": ["exp", "iat", "sub", "iss", "aud"]},
            )
        except jwt.InvalidTokenError as e:
            raise SuspiciousOperation(f"the ID token does not verify: {e}") from e
        return payload

    def get_or_create_user(self, access_token: str, id_token: str,
                           payload: dict[str, Any]) -> User | None:
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if not isinstance(userinfo, dict) or userinfo.get("sub") != payload.get("sub"):
            # OpenID Connect Core 5.3.2: the userinfo must be of the ID token's subject.
            raise SuspiciousOperation("the userinfo is not of the ID token's subject")
        claims = {**payload, **userinfo}
        groups = claim_at(claims, settings.TREUE_OIDC_GROUPS_CLAIM)
        roles = roles_from_groups(groups, prefix=settings.TREUE_OIDC_GROUP_PREFIX,
                                  group_map=settings.TREUE_OIDC_GROUP_MAP)
        try:
            return services.sso_login(issuer=settings.TREUE_OIDC_ISSUER, claims=claims,
                                      roles=roles, groups=groups)
        except services.Refused as refused:
            logger.info("single sign-on of %s refused: %s", claims.get("sub"), refused.reason)
            messages.error(self.request, _(
                "Ihr Konto hat keine Rolle in Treue. Bitte an die Administration wenden."
            ) if refused.reason == "no_role" else _("Ihr Konto in Treue ist deaktiviert."))
            return None
