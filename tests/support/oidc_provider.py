"""A real OpenID provider for the single sign-on tests: oidc-provider-mock (Flask and authlib)
on a thread, at http://localhost:<port>, and Treue's settings pointed at it.

Accounts are made at the provider with `provider.user(sub, groups=[...], ...)`; a login goes
through the real authorization-code flow with PKCE and nonce (`provider.login(client, sub)`):
Treue's redirect, the provider's login form answered for `sub`, Treue's callback, whose token,
JWKS and userinfo requests are real HTTP to the provider.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

CLIENT_ID = "treue-test"
CLIENT_SECRET = "geheim-1234"


@dataclass
class Provider:
    url: str

    def user(self, sub: str, **claims: Any) -> None:
        """Make or change the provider's account `sub` (claims: groups, email, names...)."""
        response = httpx.put(f"{self.url}/users/{sub}", json=claims, timeout=5)
        assert response.status_code == 204, response.text

    def authorize(self, location: str, sub: str) -> str:
        """Answer the provider's login form as `sub`: the URL it sends the browser back to."""
        assert location.startswith(self.url + "/oauth2/authorize?"), location
        response = httpx.post(location, data={"sub": sub}, timeout=5)
        assert response.status_code == 302, response.text
        return response.headers["location"]

    def login(self, client: Any, sub: str, next_url: str = "") -> Any:
        """The whole flow in Treue's test client; Treue's answer to the callback."""
        start = client.get("/oidc/authenticate/" + (f"?next={next_url}" if next_url else ""))
        assert start.status_code == 302, start.content
        back = urlsplit(self.authorize(start["Location"], sub))
        assert back.path == "/oidc/callback/", back
        return client.get(back.path, {k: v[0] for k, v in parse_qs(back.query).items()})


@pytest.fixture
def oidc_provider(settings: Any) -> Iterator[Provider]:
    from oidc_provider_mock import run_server_in_thread

    with run_server_in_thread(port=0, require_nonce=True) as server:
        url = f"http://localhost:{server.server_port}"
        settings.TREUE_OIDC_ENABLED = True
        settings.TREUE_OIDC_ISSUER = url
        settings.OIDC_RP_CLIENT_ID = CLIENT_ID
        settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
        settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{url}/oauth2/authorize"
        settings.OIDC_OP_TOKEN_ENDPOINT = f"{url}/oauth2/token"
        settings.OIDC_OP_USER_ENDPOINT = f"{url}/userinfo"
        settings.OIDC_OP_JWKS_ENDPOINT = f"{url}/jwks"
        settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS,
                                            "accounts.oidc.Backend"]
        yield Provider(url)
