"""Settings of the tiers: the judge (tier 2) and the generator (self-consistency), any
OpenAI-compatible endpoint; investigations; the expert review's calibration and drift alarms;
the alarms' channels.
Read from the environment like the rest (treue_site/settings/__init__.py); a value that cannot
be right refuses to start."""

import base64
import os

from django.core.exceptions import ImproperlyConfigured

from common.env import envfloat, envint

# The judge (tier 2) and the generator (self-consistency), any OpenAI-compatible endpoint.
TREUE_JUDGE_BASE_URL = os.environ.get("TREUE_JUDGE_BASE_URL", "")
TREUE_JUDGE_API_KEY = os.environ.get("TREUE_JUDGE_API_KEY", "")
TREUE_JUDGE_MODEL = os.environ.get("TREUE_JUDGE_MODEL", "")
# Azure OpenAI instead (many companies may use only that): the resource's endpoint
# (https://<resource>.openai.azure.com), its API version, and TREUE_JUDGE_API_KEY or an Entra ID
# (Azure AD) access token; TREUE_JUDGE_MODEL is then the deployment's name.
TREUE_JUDGE_AZURE_ENDPOINT = os.environ.get("TREUE_JUDGE_AZURE_ENDPOINT", "")
TREUE_JUDGE_AZURE_API_VERSION = os.environ.get("TREUE_JUDGE_AZURE_API_VERSION", "2024-10-21")
TREUE_JUDGE_AZURE_AD_TOKEN = os.environ.get("TREUE_JUDGE_AZURE_AD_TOKEN", "")
if TREUE_JUDGE_AZURE_ENDPOINT and TREUE_JUDGE_BASE_URL:
    raise ImproperlyConfigured(
        "set TREUE_JUDGE_BASE_URL or TREUE_JUDGE_AZURE_ENDPOINT, not both: which endpoint judges?"
    )
# A judge model whose verdicts are replayed human labels, not a model's (the demo judge, named
# by scripts/demo.sh): the pages mark its runs as such. Empty: no run is marked.
TREUE_DEMO_JUDGE_MODEL = os.environ.get("TREUE_DEMO_JUDGE_MODEL", "")
# A verdict is one word; a decomposition a list of claims. Caps keep a runaway reply cheap.
TREUE_JUDGE_TIMEOUT_SECONDS = envfloat("TREUE_JUDGE_TIMEOUT_SECONDS", 60.0)
TREUE_JUDGE_MAX_TOKENS_DECOMPOSE = envint("TREUE_JUDGE_MAX_TOKENS_DECOMPOSE", 1500)
TREUE_JUDGE_MAX_TOKENS_VERIFY = envint("TREUE_JUDGE_MAX_TOKENS_VERIFY", 16)
# Claims of one answer verified at once; the endpoint's rate limit is the real bound.
TREUE_JUDGE_CONCURRENCY = envint("TREUE_JUDGE_CONCURRENCY", 8)
# Batched verification: at most this many claims per call (a longer answer takes more calls).
TREUE_JUDGE_BATCH_SIZE = envint("TREUE_JUDGE_BATCH_SIZE", 30)
if TREUE_JUDGE_BATCH_SIZE < 1:
    raise ImproperlyConfigured(
        f"TREUE_JUDGE_BATCH_SIZE must be at least 1, not {TREUE_JUDGE_BATCH_SIZE}"
    )
# One answer's judgement: a decomposition plus its claims, each call bounded by the timeout;
# past this the run is given back and retried (the hard limit is 60 s later).
TREUE_JUDGE_SOFT_TIME_LIMIT_SECONDS = envint("TREUE_JUDGE_SOFT_TIME_LIMIT_SECONDS", 300)
# A claimed run belongs to its worker this long; after that another delivery may take it over.
# Longer than the hard time limit, so a live worker never loses its run.
TREUE_JUDGE_LEASE_SECONDS = envint("TREUE_JUDGE_LEASE_SECONDS", 420)
# The reconciler re-enqueues runs still pending (or with an expired lease) after this long.
TREUE_JUDGE_RECONCILE_AFTER_SECONDS = envint("TREUE_JUDGE_RECONCILE_AFTER_SECONDS", 600)
# Transient failures (timeouts, 429, 5xx) are retried this often before the run fails visibly.
# The waits double from 1-2 s up to the cap of 5-10 minutes: 15 attempts span 34-67 minutes
# of an endpoint being down, about an hour (tests/monitoring/test_judging_service.py).
TREUE_JUDGE_MAX_ATTEMPTS = envint("TREUE_JUDGE_MAX_ATTEMPTS", 15)
TREUE_JUDGE_BACKOFF_MAX_SECONDS = envint("TREUE_JUDGE_BACKOFF_MAX_SECONDS", 600)
TREUE_GENERATOR_BASE_URL = os.environ.get("TREUE_GENERATOR_BASE_URL", "")
TREUE_GENERATOR_API_KEY = os.environ.get("TREUE_GENERATOR_API_KEY", "")
# Self-consistency re-asks: a whole answer per call, so a longer timeout and a larger cap than
# the judge's; retries, backoff and leases are the judge tier's (TREUE_JUDGE_*).
TREUE_GENERATOR_TIMEOUT_SECONDS = envfloat("TREUE_GENERATOR_TIMEOUT_SECONDS", 120.0)
TREUE_GENERATOR_MAX_TOKENS = envint("TREUE_GENERATOR_MAX_TOKENS", 1500)
# Questions of one investigation at most (each costs samples + 1 calls).
TREUE_INVESTIGATION_MAX_QUESTIONS = envint("TREUE_INVESTIGATION_MAX_QUESTIONS", 500)

# Weekly review and calibration (tier 3). The drift CUSUM watches, per reviewed answer, whether
# the expert and the judge fall on different sides of the action threshold. Unset (None), its
# in-control rate p0 is estimated per use case from its own reviews, p1 = p0 + 0.2, and the
# limit is computed for 52 weeks between false alarms at 20 reviews a week
# (review/domain/calibration.py, cusum_params_for). Each one set here wins over its estimate.
TREUE_CUSUM_P0 = envfloat("TREUE_CUSUM_P0", 0) if os.environ.get("TREUE_CUSUM_P0") else None
TREUE_CUSUM_P1 = envfloat("TREUE_CUSUM_P1", 0) if os.environ.get("TREUE_CUSUM_P1") else None
TREUE_CUSUM_LIMIT = (
    envfloat("TREUE_CUSUM_LIMIT", 0) if os.environ.get("TREUE_CUSUM_LIMIT") else None
)
# Drift by bias: evidence (one-sided, 95 %) that the judge's stratified bias over the last 4
# weeks lies beyond ± this (DESIGN.md: 0.1).
TREUE_CALIBRATION_BIAS_TOLERANCE = envfloat("TREUE_CALIBRATION_BIAS_TOLERANCE", 0.1)
# More than this share of reviewed answers with a wrong claim decomposition is an alarm, once
# at least TREUE_DECOMPOSITION_MIN_REVIEWS answers were reviewed in the 4 weeks (below that,
# two wrong ones out of five would already alarm).
TREUE_DECOMPOSITION_ALARM_SHARE = envfloat("TREUE_DECOMPOSITION_ALARM_SHARE", 0.2)
TREUE_DECOMPOSITION_MIN_REVIEWS = envint("TREUE_DECOMPOSITION_MIN_REVIEWS", 10)

# Alarm channels (alarms/, docs/alarm-channels.md): Slack, Microsoft Teams and signed webhooks.
# The address where people reach Treue, for the link in every alarm a channel sends (a worker
# has no request to take it from).
TREUE_SITE_URL = os.environ.get("TREUE_SITE_URL", "http://127.0.0.1:8000").rstrip("/")
# The channels' addresses and signing secrets are stored encrypted (Fernet). Keys: one or more
# Fernet keys, comma-separated; the first encrypts, all decrypt (to rotate, put the new key
# first). Unset: a key derived from SECRET_KEY (changing SECRET_KEY then makes the stored
# channels unreadable: enter their addresses again).
TREUE_ALARM_CHANNEL_KEYS = [
    k.strip() for k in os.environ.get("TREUE_ALARM_CHANNEL_KEYS", "").split(",") if k.strip()
]
for _key in TREUE_ALARM_CHANNEL_KEYS:
    try:
        _key_ok = len(base64.urlsafe_b64decode(_key.encode("ascii"))) == 32
    except ValueError:  # not base64, or not ASCII
        _key_ok = False
    if not _key_ok:
        raise ImproperlyConfigured(
            "TREUE_ALARM_CHANNEL_KEYS: each key must be a Fernet key (32 bytes, url-safe base64)"
        )
# One delivery's HTTP call; a receiver slower than this is retried (TREUE_JUDGE_MAX_ATTEMPTS).
TREUE_ALARM_CHANNEL_TIMEOUT_SECONDS = envfloat("TREUE_ALARM_CHANNEL_TIMEOUT_SECONDS", 5.0)
if not 0 < TREUE_ALARM_CHANNEL_TIMEOUT_SECONDS <= 30:
    raise ImproperlyConfigured("TREUE_ALARM_CHANNEL_TIMEOUT_SECONDS must be above 0 and at most 30")
