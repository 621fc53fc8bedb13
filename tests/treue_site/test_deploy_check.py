"""Production settings: `check --deploy` is clean, bad security settings refuse to start.

Each case runs Django in a subprocess, because settings are read once per process.
"""

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Every case starts Django in a process of its own (settings are read once per process): an
# integration test, outside the fast part.
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
# Variables that a developer's shell or CI may have set and that would change what is tested.
DROP = ("DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "SECURE_SSL_REDIRECT", "SECURE_PROXY_SSL_HEADER",
        "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_HSTS_PRELOAD", "CACHE_URL", "REDIS_URL",
        "CELERY_BROKER_URL", "TREUE_API_RATE_LIMIT", "DATABASE_URL")


def production_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROP}
    env.update(
        DEBUG="False",
        SECRET_KEY=secrets.token_urlsafe(60),
        ALLOWED_HOSTS="treue.example.com",
        TREUE_VAR_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="treue_site.settings",
    )
    env.update(extra)
    return env


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def setting(env: dict[str, str], expression: str) -> Any:
    code = f"import django; django.setup(); from django.conf import settings; print({expression})"
    result = run(env, "-c", code)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_check_deploy_is_clean_with_production_settings(tmp_path: Path) -> None:
    result = run(production_env(tmp_path), "manage.py", "check", "--deploy", "--fail-level",
                 "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_check_deploy_finds_issues_with_the_demo_settings(tmp_path: Path) -> None:
    # The embedded demo (DEBUG on) is not a deployment, and the check must say so.
    env = production_env(tmp_path, DEBUG="True")
    result = run(env, "manage.py", "check", "--deploy")
    assert "security.W018" in result.stdout + result.stderr  # DEBUG


def test_production_refuses_to_start_without_a_secret_key(tmp_path: Path) -> None:
    env = production_env(tmp_path)
    del env["SECRET_KEY"]
    result = run(env, "manage.py", "check")
    assert result.returncode != 0
    assert "SECRET_KEY is required" in result.stderr


def test_production_defaults(tmp_path: Path) -> None:
    env = production_env(tmp_path)
    assert setting(env, "settings.DEBUG") == "False"
    assert setting(env, "settings.SECURE_SSL_REDIRECT") == "True"
    assert setting(env, "settings.SECURE_HSTS_SECONDS") == "31536000"
    assert setting(env, "settings.SESSION_COOKIE_SECURE and settings.CSRF_COOKIE_SECURE") == "True"
    assert setting(env, "settings.SECURE_PROXY_SSL_HEADER") == "None"


def test_ssl_redirect_can_be_turned_off_strictly(tmp_path: Path) -> None:
    assert setting(production_env(tmp_path, SECURE_SSL_REDIRECT="False"),
                   "settings.SECURE_SSL_REDIRECT") == "False"
    result = run(production_env(tmp_path, SECURE_SSL_REDIRECT="no"), "manage.py", "check")
    assert result.returncode != 0
    assert "SECURE_SSL_REDIRECT must be True or False" in result.stderr


def test_proxy_ssl_header_is_opt_in_and_checked(tmp_path: Path) -> None:
    env = production_env(tmp_path, SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO")
    assert setting(env, "settings.SECURE_PROXY_SSL_HEADER") == "('HTTP_X_FORWARDED_PROTO', 'https')"
    result = run(production_env(tmp_path, SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto"),
                 "manage.py", "check")
    assert result.returncode != 0
    assert "SECURE_PROXY_SSL_HEADER must be a request header" in result.stderr


@pytest.mark.parametrize(("extra", "backend", "location"), [
    ({}, "locmem.LocMemCache", "treue-ratelimit"),
    ({"CELERY_BROKER_URL": "redis://10.0.0.5:6379/0"}, "redis.RedisCache",
     "redis://10.0.0.5:6379/0"),
    ({"CELERY_BROKER_URL": "sqla+sqlite:////tmp/x.sqlite3"}, "locmem.LocMemCache",
     "treue-ratelimit"),
    ({"REDIS_URL": "redis://cache:6379/1", "CELERY_BROKER_URL": "redis://broker:6379/0"},
     "redis.RedisCache", "redis://cache:6379/1"),
    ({"CACHE_URL": "redis://c:6379/2", "REDIS_URL": "redis://r:6379/1"}, "redis.RedisCache",
     "redis://c:6379/2"),
    ({"CACHE_URL": "locmem://", "CELERY_BROKER_URL": "redis://broker:6379/0"},
     "locmem.LocMemCache", "treue-ratelimit"),
])
def test_the_rate_limit_counts_in_redis_when_there_is_one(
    tmp_path: Path, extra: dict[str, str], backend: str, location: str
) -> None:
    env = production_env(tmp_path, **extra)
    cache = "settings.CACHES['ratelimit']"
    assert setting(env, f"{cache}['BACKEND']") == f"django.core.cache.backends.{backend}"
    assert setting(env, f"{cache}['LOCATION']") == location
    # Nothing else depends on Redis being up.
    assert setting(env, "settings.CACHES['default']['BACKEND']").endswith("LocMemCache")


def test_a_bad_cache_url_or_rate_limit_refuses_to_start(tmp_path: Path) -> None:
    for extra, message in (
        ({"CACHE_URL": "memcached://x"}, "CACHE_URL/REDIS_URL must be"),
        ({"TREUE_API_RATE_LIMIT": "-1"}, "TREUE_API_RATE_LIMIT must be"),
        ({"TREUE_API_RATE_LIMIT": "lots"}, "TREUE_API_RATE_LIMIT must be an integer"),
    ):
        result = run(production_env(tmp_path, **extra), "manage.py", "check")
        assert result.returncode != 0, extra
        assert message in result.stderr, result.stderr


def test_the_rate_limit_default(tmp_path: Path) -> None:
    assert setting(production_env(tmp_path), "settings.TREUE_API_RATE_LIMIT") == "1200"


REQUESTS = """
import django, json
django.setup()
from django.test import Client
c = Client(HTTP_HOST="treue.example.com")
out = {}
for name, method, path, extra in [
    ("health", "get", "/health", {}),
    ("login", "get", "/login/", {}),
    ("api", "post", "/api/v1/answers", {}),
    ("login_proxied", "get", "/login/", {"HTTP_X_FORWARDED_PROTO": "https"}),
    ("api_proxied", "post", "/api/v1/answers", {"HTTP_X_FORWARDED_PROTO": "https"}),
]:
    r = getattr(c, method)(path, **extra)
    out[name] = [r.status_code, r.get("Location"), r.get("Strict-Transport-Security")]
print(json.dumps(out))
"""


def requests_in_production(env: dict[str, str]) -> dict[str, list[Any]]:
    result = run(env, "-c", REQUESTS)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_plain_http_is_redirected_except_the_health_check(tmp_path: Path) -> None:
    out = requests_in_production(production_env(tmp_path))
    # A load balancer checks health over plain HTTP: no redirect. (503: this var directory's
    # database is not migrated; the answer is the health check's own, not a redirect.)
    assert out["health"][0] in (200, 503) and out["health"][1] is None
    assert out["login"][:2] == [301, "https://treue.example.com/login/"]
    assert out["api"][:2] == [301, "https://treue.example.com/api/v1/answers"]
    # Without SECURE_PROXY_SSL_HEADER the forwarded header is not believed.
    assert out["login_proxied"][0] == 301


def test_behind_a_proxy_that_ends_tls(tmp_path: Path) -> None:
    env = production_env(tmp_path, SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO")
    out = requests_in_production(env)
    assert out["login_proxied"] == [200, None, "max-age=31536000"]
    assert out["api_proxied"][0] == 401  # reaches the API (no key), not a redirect loop
    assert out["health"][0] in (200, 503) and out["health"][1] is None
    assert out["login"][0] == 301  # the proxy's plain-HTTP side is still redirected


def test_two_judge_endpoints_refuse_to_start(tmp_path: Path) -> None:
    result = run(production_env(tmp_path, TREUE_JUDGE_BASE_URL="http://127.0.0.1:9/v1",
                                TREUE_JUDGE_AZURE_ENDPOINT="https://x.openai.azure.com"),
                 "manage.py", "check")
    assert result.returncode != 0
    assert "set TREUE_JUDGE_BASE_URL or TREUE_JUDGE_AZURE_ENDPOINT, not both" in result.stderr
