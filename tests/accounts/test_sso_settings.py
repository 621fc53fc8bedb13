"""Single sign-on's settings: on with TREUE_OIDC_CLIENT_ID, and then refusing to start without
the rest; mapped onto mozilla-django-oidc's names in one place (treue_site/settings.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# integration: each case starts Django in a process of its own.
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SHOW = (
    "import django, json; django.setup(); from django.conf import settings as s;"
    " print(json.dumps({n: getattr(s, n) for n in ('TREUE_OIDC_ENABLED', 'OIDC_RP_CLIENT_ID',"
    " 'OIDC_OP_TOKEN_ENDPOINT', 'OIDC_OP_USER_ENDPOINT', 'OIDC_OP_JWKS_ENDPOINT',"
    " 'OIDC_RP_SCOPES', 'TREUE_OIDC_GROUP_MAP', 'TREUE_OIDC_SESSION_SECONDS',"
    " 'AUTHENTICATION_BACKENDS')}))"
)
FULL = {
    "TREUE_OIDC_CLIENT_ID": "treue", "TREUE_OIDC_CLIENT_SECRET": "s",
    "TREUE_OIDC_ISSUER": "https://id.example", "TREUE_OIDC_AUTHORIZATION_ENDPOINT": "https://id.example/auth",
    "TREUE_OIDC_TOKEN_ENDPOINT": "https://id.example/token",
    "TREUE_OIDC_USERINFO_ENDPOINT": "https://id.example/userinfo",
    "TREUE_OIDC_JWKS_URI": "https://id.example/jwks",
}


def settings_with(**env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TREUE_OIDC_")}
    return subprocess.run(
        [sys.executable, "-c", SHOW], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**base, "DJANGO_SETTINGS_MODULE": "treue_site.settings", "DATABASE_URL": "",
             **env},
    )


def test_off_by_default_and_the_backend_not_listed():
    done = settings_with()
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout.splitlines()[-1])
    assert shown["TREUE_OIDC_ENABLED"] is False
    assert "accounts.oidc.Backend" not in shown["AUTHENTICATION_BACKENDS"]


def test_on_with_every_setting_mapped():
    done = settings_with(**FULL, TREUE_OIDC_SCOPES="openid email groups",
                         TREUE_OIDC_GROUP_MAP='{"0b6f": "lead:kundenservice"}',
                         TREUE_OIDC_SESSION_SECONDS="3600")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout.splitlines()[-1])
    assert shown == {
        "TREUE_OIDC_ENABLED": True, "OIDC_RP_CLIENT_ID": "treue",
        "OIDC_OP_TOKEN_ENDPOINT": "https://id.example/token",
        "OIDC_OP_USER_ENDPOINT": "https://id.example/userinfo",
        "OIDC_OP_JWKS_ENDPOINT": "https://id.example/jwks", "OIDC_RP_SCOPES": "openid email groups",
        "TREUE_OIDC_GROUP_MAP": {"0b6f": "lead:kundenservice"},
        "TREUE_OIDC_SESSION_SECONDS": 3600,
        "AUTHENTICATION_BACKENDS": ["axes.backends.AxesStandaloneBackend",
                                    "django.contrib.auth.backends.ModelBackend",
                                    "accounts.oidc.Backend"],
    }


def test_incomplete_or_wrong_settings_refuse_to_start_and_say_what_is_missing():
    partial = {k: v for k, v in FULL.items() if k != "TREUE_OIDC_JWKS_URI"}
    done = settings_with(**partial)
    assert done.returncode != 0 and "TREUE_OIDC_JWKS_URI (jwks_uri)" in done.stderr
    for bad in ("[1]", "{", '{"a": 1}'):
        done = settings_with(**FULL, TREUE_OIDC_GROUP_MAP=bad)
        assert done.returncode != 0 and "TREUE_OIDC_GROUP_MAP" in done.stderr, bad
