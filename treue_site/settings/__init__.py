"""Settings, driven by environment variables.

Unset variables give the embedded defaults (SQLite file, an SQLite-backed Celery broker, DEBUG
on): the demo needs nothing installed. Anything that looks like production (DEBUG off) refuses to
start without a SECRET_KEY.
"""

import importlib.util
import json
import os
import re
import tempfile
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from common import queues
from common.broker import transport_options
from common.env import envbool, envfloat, envint

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("TREUE_VAR_DIR", BASE_DIR / "var"))



DEBUG = envbool("DEBUG", "True")
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY is required when DEBUG is False")
    # Only for the embedded demo: a fixed key makes sessions survive restarts of runserver.
    SECRET_KEY = "treue-embedded-demo-key-not-for-production"

ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "*").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    # django-ninja's templates and static files, so /api/v1/docs serves Swagger UI from here.
    "ninja",
    # Only an abstract model (LeasedJob) and the job framework: no tables.
    "jobs",
    # The core: answers, use cases, services, rollups, retention and partitions.
    "monitoring",
    "alarms",
    # The tiers, in the order an answer passes them (CONTRIBUTING.md has the map).
    "ingest",
    "judging",
    "review",
    "investigations",
    "dashboard",
    "accounts",
    # The OTLP/HTTP trace receiver (POST /api/v1/otlp/v1/traces): spans in, answers out.
    "traces",
    # django-axes (login throttling, accounts/login_throttling.py) under its German admin name.
    "accounts.axes.AxesConfig",
]
# The demo (treue_demo: demo data, its seed_demo command, the demo judge/generator server) is an
# app of its own, installed only when the demo runs: scripts/demo.sh sets TREUE_DEMO=True.
# Nothing else imports it.
TREUE_DEMO = envbool("TREUE_DEMO", "False")
if TREUE_DEMO:
    INSTALLED_APPS.append("treue_demo")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # After WhiteNoise, so static files keep their caching; every other response is no-store.
    "common.middleware.NoStoreMiddleware",
    "common.middleware.DatabaseUnavailableMiddleware",
    "common.middleware.ApiErrorsAsJsonMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a login refused for a lock into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "treue_site.urls"
WSGI_APPLICATION = "treue_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# An unset DATABASE_URL is the embedded default: an SQLite file inside the project.
DATABASES = {
    # An empty DATABASE_URL counts as unset, like a missing one.
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'treue.sqlite3'}",
        conn_max_age=envint("DB_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A database that stops answering must cost seconds, not hang every request: a bounded
    # connect (the whole start-up, not just TCP), and TCP keepalives plus tcp_user_timeout, so
    # a connection to a host that went away fails once its data goes unacknowledged for 10 s.
    # Failing, it is the API's 503 with Retry-After (common/middleware.py).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        connect_timeout=envint("DB_CONNECT_TIMEOUT", 5),
        keepalives=1,
        keepalives_idle=10,
        keepalives_interval=5,
        keepalives_count=2,
        tcp_user_timeout=10000,
    )
elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while the worker writes; the timeout rides out short locks.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # The test database is a file, not memory, so that a real `celery worker` process
    # (tests/integration) can open it too; one per test process, so runs side by side do not
    # delete each other's.
    DATABASES["default"]["TEST"] = {
        "NAME": str(Path(tempfile.gettempdir()) / f"treue-test-{os.getpid()}.sqlite3")
    }

# An optional read replica for the dashboards: the overview, the use-case page, the estimates
# API and /metrics read their figures from it (common/db_router.py); everything else, and
# every write, uses the primary. Its options are the primary's. In tests it mirrors the primary.
_replica_url = os.environ.get("DATABASE_REPLICA_URL", "")
if _replica_url:
    DATABASES["replica"] = {
        **DATABASES["default"],
        **dj_database_url.parse(
            _replica_url, conn_max_age=DATABASES["default"].get("CONN_MAX_AGE", 60),
            conn_health_checks=True,
        ),
        "OPTIONS": dict(DATABASES["default"].get("OPTIONS", {})),
        "TEST": {"MIRROR": "default"},
    }
    if DATABASES["replica"]["ENGINE"] != DATABASES["default"]["ENGINE"]:
        raise ImproperlyConfigured(
            "DATABASE_REPLICA_URL must name a database of the same kind as DATABASE_URL"
        )
DATABASE_ROUTERS = ["common.db_router.ReplicaRouter"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# django-axes first: it refuses a locked login before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "monitoring:home"  # leads land on the overview, experts on the answers
LOGOUT_REDIRECT_URL = "login"

# Single sign-on by OpenID Connect (accounts/, docs/configuration.md, "Single sign-on"): on when
# TREUE_OIDC_CLIENT_ID is set, and then every endpoint must be. Local accounts keep working.
TREUE_OIDC_CLIENT_ID = os.environ.get("TREUE_OIDC_CLIENT_ID", "")
TREUE_OIDC_ENABLED = bool(TREUE_OIDC_CLIENT_ID)
_OIDC_REQUIRED = {
    "TREUE_OIDC_ISSUER": "the issuer, as in the provider's ID tokens",
    "TREUE_OIDC_CLIENT_SECRET": "the client's secret",
    "TREUE_OIDC_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "TREUE_OIDC_TOKEN_ENDPOINT": "token_endpoint",
    "TREUE_OIDC_USERINFO_ENDPOINT": "userinfo_endpoint",
    "TREUE_OIDC_JWKS_URI": "jwks_uri",
}
_oidc = {name: os.environ.get(name, "") for name in _OIDC_REQUIRED}
if TREUE_OIDC_ENABLED and (_missing := [n for n, v in _oidc.items() if not v]):
    raise ImproperlyConfigured(
        "single sign-on needs " + ", ".join(
            f"{n} ({_OIDC_REQUIRED[n]})" for n in _missing
        ) + " (the endpoints are in the provider's /.well-known/openid-configuration)"
    )
TREUE_OIDC_ISSUER = _oidc["TREUE_OIDC_ISSUER"]
TREUE_OIDC_GROUPS_CLAIM = os.environ.get("TREUE_OIDC_GROUPS_CLAIM", "groups")
TREUE_OIDC_GROUP_PREFIX = os.environ.get("TREUE_OIDC_GROUP_PREFIX", "treue:")
try:
    TREUE_OIDC_GROUP_MAP = json.loads(os.environ.get("TREUE_OIDC_GROUP_MAP", "") or "{}")
except json.JSONDecodeError as e:
    raise ImproperlyConfigured(f"TREUE_OIDC_GROUP_MAP is not JSON: {e}") from e
if not isinstance(TREUE_OIDC_GROUP_MAP, dict) or not all(
    isinstance(k, str) and isinstance(v, str) for k, v in TREUE_OIDC_GROUP_MAP.items()
):
    raise ImproperlyConfigured(
        'TREUE_OIDC_GROUP_MAP must map group ids to roles: {"<id>": "lead:<slug>", …}')
TREUE_OIDC_SESSION_SECONDS = envint("TREUE_OIDC_SESSION_SECONDS", 8 * 3600)
TREUE_OIDC_LABEL = os.environ.get("TREUE_OIDC_LABEL", "Single Sign-on")
# mozilla-django-oidc's names for the same (read by its views and backend; empty while off).
OIDC_RP_CLIENT_ID = TREUE_OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = _oidc["TREUE_OIDC_CLIENT_SECRET"]
OIDC_OP_AUTHORIZATION_ENDPOINT = _oidc["TREUE_OIDC_AUTHORIZATION_ENDPOINT"]
OIDC_OP_TOKEN_ENDPOINT = _oidc["TREUE_OIDC_TOKEN_ENDPOINT"]
OIDC_OP_USER_ENDPOINT = _oidc["TREUE_OIDC_USERINFO_ENDPOINT"]
OIDC_OP_JWKS_ENDPOINT = _oidc["TREUE_OIDC_JWKS_URI"]
OIDC_RP_SIGN_ALGO = os.environ.get("TREUE_OIDC_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = os.environ.get("TREUE_OIDC_SCOPES", "openid email profile")
OIDC_USE_NONCE = True
OIDC_USE_PKCE = True
OIDC_TIMEOUT = (3, 10)
OIDC_STORE_ID_TOKEN = False
OIDC_CREATE_USER = True
LOGIN_REDIRECT_URL_FAILURE = "/login/"
if TREUE_OIDC_ENABLED:
    AUTHENTICATION_BACKENDS.append("accounts.oidc.Backend")

# German first, English second (the UI's words go through gettext).
LANGUAGE_CODE = "de"
LANGUAGES = [("de", "Deutsch"), ("en", "English")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "Europe/Berlin"
USE_I18N = True
USE_TZ = True

# Found, not imported: settings stay quick to load.
_PLOTLY = importlib.util.find_spec("plotly")
if _PLOTLY is None or _PLOTLY.origin is None:
    raise ImproperlyConfigured("plotly is not installed (pip install -r requirements.txt)")

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# plotly.min.js is served from the installed plotly package, never from a CDN: the version the
# figures are built with is the version the browser runs, and no page needs the internet.
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/plotly", Path(_PLOTLY.origin).parent / "package_data"),
]
WHITENOISE_USE_FINDERS = True

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# Behind a TLS-terminating proxy Django sees plain HTTP; name the header the proxy sets (only
# then: a client could send it too) as e.g. SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO,
# which counts a request as HTTPS when that header is "https".
_proxy_ssl_header = os.environ.get("SECURE_PROXY_SSL_HEADER", "")
if _proxy_ssl_header:
    if not re.fullmatch(r"HTTP_[A-Z0-9_]+", _proxy_ssl_header):
        raise ImproperlyConfigured(
            "SECURE_PROXY_SSL_HEADER must be a request header as Django names it, "
            f"e.g. HTTP_X_FORWARDED_PROTO, not {_proxy_ssl_header!r}"
        )
    SECURE_PROXY_SSL_HEADER = (_proxy_ssl_header, "https")
if not DEBUG:
    SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31536000)
    # Treue usually lives on one subdomain of a company's domain: HSTS for every sibling
    # subdomain, or the browsers' preload list, is the domain owner's decision, not Treue's.
    SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", "False")
    SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", "False")
    SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", "True")
    CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", "True")
    # Plain HTTP is redirected to HTTPS. A load balancer's health check often speaks plain HTTP
    # to the backend, so /health is exempt. The API is not: a key sent over plain HTTP has
    # leaked already, and a 301 to a POST shows the client's mistake. Behind a proxy that ends
    # TLS, set SECURE_PROXY_SSL_HEADER, or every request would loop on the redirect.
    SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", "True")
    SECURE_REDIRECT_EXEMPT = [r"^health$"]
    SILENCED_SYSTEM_CHECKS = [
        check
        for check, on in (
            ("security.W005", SECURE_HSTS_INCLUDE_SUBDOMAINS),
            ("security.W021", SECURE_HSTS_PRELOAD),
        )
        if not on
    ]

# Content-Security-Policy (django-csp): scripts only from Treue's own static files (pages pass
# data with json_script, which is not executed), nothing from another origin, no plugins, no
# framing. style-src allows inline styles because plotly.min.js inserts <style> elements as it
# draws (the browser test, run with style-src 'self', sees Chromium block them on every chart
# page); plotly.js has no nonce option for them. Inline styles cannot run code. Style attributes
# alone (style-src-attr) could be refused: drawing the charts and the admin need none, but
# Plotly's hover and zoom are not tested under such a policy, so they stay allowed for now.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    },
}

# Caches. "ratelimit" holds the API's per-key request counters (ingest/ratelimit.py). They
# must be shared by every web process, so they go to Redis when there is one: CACHE_URL if set,
# else REDIS_URL, else the Celery broker when that is Redis. Without Redis (the embedded
# default) each process counts on its own in memory, so N processes allow up to N times the
# limit. Timeouts are short: the limit fails open, and a dead Redis must cost milliseconds.
# "default" stays in process memory, so that nothing else depends on Redis being up.
_broker_url = os.environ.get("CELERY_BROKER_URL", "")
_cache_url = (
    os.environ.get("CACHE_URL")
    or os.environ.get("REDIS_URL")
    or (_broker_url if _broker_url.startswith(("redis://", "rediss://")) else "")
)
if _cache_url.startswith(("redis://", "rediss://", "unix://")):
    _ratelimit_cache = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": _cache_url,
        "KEY_PREFIX": "treue",
        "OPTIONS": {"socket_connect_timeout": 0.25, "socket_timeout": 0.25},
    }
elif _cache_url in ("", "locmem://"):
    _ratelimit_cache = {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "treue-ratelimit",
    }
else:
    raise ImproperlyConfigured(
        "CACHE_URL/REDIS_URL must be a redis://, rediss:// or unix:// URL (or locmem://)"
    )
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "ratelimit": _ratelimit_cache,
}
# Requests per minute per service key on the API; 0 turns the limit off.
TREUE_API_RATE_LIMIT = envint("TREUE_API_RATE_LIMIT", 1200)
if TREUE_API_RATE_LIMIT < 0:
    raise ImproperlyConfigured("TREUE_API_RATE_LIMIT must be 0 (off) or a positive number")

# Login throttling (django-axes) on /login/ and /admin/login/. A username is locked from one
# address after TREUE_LOGIN_FAILURE_LIMIT wrong passwords within TREUE_LOGIN_COOLOFF_MINUTES, for
# that many minutes after the last one; the page (429) says how long and to ask an admin, who can
# lift it in the admin (Anmeldesperren > Zugriffsversuche: delete) or with
# `manage.py axes_reset_username USER`. Keyed by username and address together: an attacker
# cannot lock a person out (from her own address she still logs in), nor colleagues behind the
# attacker's address; trying many usernames from one address gets each only the limit. While
# locked, no password is checked, and trying again does not push the end back (the page would
# lie). A successful login starts the count afresh. Successful logins are kept (the admin's
# access logs); failures only as long as they count.
TREUE_LOGIN_FAILURE_LIMIT = envint("TREUE_LOGIN_FAILURE_LIMIT", 5)
TREUE_LOGIN_COOLOFF_MINUTES = envint("TREUE_LOGIN_COOLOFF_MINUTES", 15)
for _name, _value in (
    ("TREUE_LOGIN_FAILURE_LIMIT", TREUE_LOGIN_FAILURE_LIMIT),
    ("TREUE_LOGIN_COOLOFF_MINUTES", TREUE_LOGIN_COOLOFF_MINUTES),
):
    if _value < 1:
        raise ImproperlyConfigured(f"{_name} must be at least 1, not {_value}")
# Behind a reverse proxy every request comes from the proxy's address, and all would share one
# count per username. Name the header the proxy sets to the client's address (it must overwrite
# or append to a client's own), e.g. HTTP_X_FORWARDED_FOR or HTTP_X_REAL_IP: its last entry is
# then the client's address. Unset, a header the client could send is never trusted.
TREUE_CLIENT_IP_HEADER = os.environ.get("TREUE_CLIENT_IP_HEADER", "")
if TREUE_CLIENT_IP_HEADER and not re.fullmatch(r"HTTP_[A-Z0-9_]+", TREUE_CLIENT_IP_HEADER):
    raise ImproperlyConfigured(
        "TREUE_CLIENT_IP_HEADER must be a request header as Django names it, "
        f"e.g. HTTP_X_FORWARDED_FOR, not {TREUE_CLIENT_IP_HEADER!r}"
    )
AXES_FAILURE_LIMIT = TREUE_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=TREUE_LOGIN_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_ENABLE_ACCESS_FAILURE_LOG = False
AXES_VERBOSE = False  # no start-up banner from every manage.py command and worker
AXES_HANDLER = "accounts.login_throttling.DatabaseHandler"
AXES_CLIENT_IP_CALLABLE = "accounts.login_throttling.client_ip"
AXES_USERNAME_CALLABLE = "accounts.login_throttling.client_username"
AXES_LOCKOUT_CALLABLE = "accounts.login_throttling.lockout_response"

# Mail: alarms go to the use case's team leads. The console backend (the default) prints them,
# so a demo or a machine without a mail server loses nothing and needs nothing.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", "False")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "treue@localhost")

# Alarm channels (Slack, Teams, signed webhooks): treue_site/settings/tiers.py.

# Ingest limits. The whole batch (up to 500 answers) must fit; a single answer has its own cap.
TREUE_MAX_BODY_BYTES = envint("TREUE_MAX_BODY_BYTES", 2 * 1024 * 1024)
TREUE_MAX_BATCH_BODY_BYTES = envint("TREUE_MAX_BATCH_BODY_BYTES", 64 * 1024 * 1024)
TREUE_MAX_BATCH_ITEMS = 500
# /metrics: a scraper sends this as a bearer token; empty (the default) = staff sessions only.
TREUE_METRICS_TOKEN = os.environ.get("TREUE_METRICS_TOKEN", "")
# /health. Every consuming worker writes a heartbeat this often; a newest heartbeat older than
# the stale limit (three missed beats) makes the worker "stale". The oldest answer waiting for
# the judge may be this old before the report says "degraded": shorter than the 34-67 minutes a
# judge endpoint that is down is retried (TREUE_JUDGE_MAX_ATTEMPTS) before runs fail, so that an
# outage shows while its answers still wait rather than only after they failed.
# The broker ping gives up after its timeout; a load balancer's probe must not hang on it.
TREUE_HEALTH_HEARTBEAT_SECONDS = envfloat("TREUE_HEALTH_HEARTBEAT_SECONDS", 30.0)
TREUE_HEALTH_WORKER_STALE_SECONDS = envfloat("TREUE_HEALTH_WORKER_STALE_SECONDS", 90.0)
TREUE_HEALTH_BACKLOG_SECONDS = envfloat("TREUE_HEALTH_BACKLOG_SECONDS", 1800.0)
TREUE_HEALTH_BROKER_TIMEOUT_SECONDS = envfloat("TREUE_HEALTH_BROKER_TIMEOUT_SECONDS", 1.5)
if not 0 < TREUE_HEALTH_BROKER_TIMEOUT_SECONDS <= 2:
    raise ImproperlyConfigured("TREUE_HEALTH_BROKER_TIMEOUT_SECONDS must be above 0 and at most 2")
if TREUE_HEALTH_HEARTBEAT_SECONDS <= 0 or (
    TREUE_HEALTH_WORKER_STALE_SECONDS <= TREUE_HEALTH_HEARTBEAT_SECONDS
):
    raise ImproperlyConfigured(
        "TREUE_HEALTH_WORKER_STALE_SECONDS must be longer than TREUE_HEALTH_HEARTBEAT_SECONDS (> 0)"
    )
# OpenTelemetry (traces/, docs/api.md). A trace is assembled into an answer once its
# root span has arrived and no span of it has come for the quiet period; one whose root never
# comes (its top span's parent lives in another service that does not export here) after the
# orphan period, with its topmost span as root. The body limit holds before and after gzip.
TREUE_OTLP_QUIET_SECONDS = envfloat("TREUE_OTLP_QUIET_SECONDS", 30.0)
TREUE_OTLP_ORPHAN_SECONDS = envfloat("TREUE_OTLP_ORPHAN_SECONDS", 600.0)
TREUE_OTLP_MAX_BODY_BYTES = envint("TREUE_OTLP_MAX_BODY_BYTES", 64 * 1024 * 1024)
TREUE_OTLP_MAX_SPANS_PER_TRACE = envint("TREUE_OTLP_MAX_SPANS_PER_TRACE", 2000)
if TREUE_OTLP_QUIET_SECONDS < 0 or TREUE_OTLP_ORPHAN_SECONDS <= TREUE_OTLP_QUIET_SECONDS:
    raise ImproperlyConfigured(
        "TREUE_OTLP_QUIET_SECONDS must be 0 or more and TREUE_OTLP_ORPHAN_SECONDS longer"
    )
if TREUE_OTLP_MAX_BODY_BYTES < 1 or TREUE_OTLP_MAX_SPANS_PER_TRACE < 1:
    raise ImproperlyConfigured(
        "TREUE_OTLP_MAX_BODY_BYTES and TREUE_OTLP_MAX_SPANS_PER_TRACE must be positive"
    )
# Django's own cap must not cut in before ours, or a big batch would get Django's error page.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(TREUE_MAX_BATCH_BODY_BYTES, TREUE_OTLP_MAX_BODY_BYTES)
DATA_UPLOAD_MAX_NUMBER_FIELDS = 10000

# The tiers' own settings: the judge, the generator, investigations, the expert review.
from treue_site.settings.tiers import *  # noqa: E402, F403

# Celery. An unset CELERY_BROKER_URL is the embedded broker: kombu's SQLAlchemy transport on an
# SQLite file, a real background worker with no server to install.
CELERY_BROKER_URL = os.environ.get(
    "CELERY_BROKER_URL", f"sqla+sqlite:///{VAR_DIR / 'celery-broker.sqlite3'}"
)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TIMEZONE = TIME_ZONE
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = envint("CELERY_TASK_SOFT_TIME_LIMIT", 300)
CELERY_TASK_TIME_LIMIT = envint("CELERY_TASK_TIME_LIMIT", 360)
# A broker that is down or hung must not hang ingest: publishing gives up within seconds, and the
# answer stays marked for the judge so the reconciler can dispatch it later (common/broker.py).
CELERY_BROKER_CONNECTION_TIMEOUT = 2
# A worker retries its broker connection for ever (Celery gives up after 100 retries, about 47
# minutes, and exits): a long Redis outage must not need someone to start the workers again.
CELERY_BROKER_CONNECTION_MAX_RETRIES: int | None = None
CELERY_BROKER_TRANSPORT_OPTIONS = transport_options(CELERY_BROKER_URL)
# Four queues (ingest follow-up, judge, investigations, housekeeping; common/queues.py), so
# that each kind of work can have its own workers; a worker without --queues consumes all four.
# The prefix goes in front of every queue name (several installations on one Redis).
TREUE_QUEUE_PREFIX = os.environ.get("TREUE_QUEUE_PREFIX", "")
CELERY_TASK_QUEUES = queues.task_queues(TREUE_QUEUE_PREFIX)
CELERY_TASK_ROUTES = queues.task_routes(TREUE_QUEUE_PREFIX)
CELERY_TASK_DEFAULT_QUEUE = queues.default_queue(TREUE_QUEUE_PREFIX)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    # httpx (httpx2 under openai 3) logs every judge call at INFO; the judge run stores them.
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
    },
}

VAR_DIR.mkdir(parents=True, exist_ok=True)
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns on every request when it is missing
