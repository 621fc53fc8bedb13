"""Per-key rate limit of the API: a fixed one-minute window counted in Django's cache.

`TREUE_API_RATE_LIMIT` requests per minute per service key (0 = off). A request over the limit
gets 429 with `Retry-After` = the seconds until its window ends. A batch post counts as one
request: the limit is on calls, the batch size has its own cap.

The counter lives in the `ratelimit` cache (settings.py picks Redis when there is one, else a
per-process LocMemCache, where each web process counts on its own). It is keyed by the key's
prefix, not the service id: the prefix is random per key, so a rotated key starts afresh and
two test databases that both have a service 1 do not share a counter in a shared Redis.

Written here rather than taken from a library: django-ratelimit fails open only on DNS and
memcached errors (a Redis connection error would become a 500), and its system checks reject
LocMemCache and flag Django's own RedisCache; ninja's built-in throttles keep a list of
timestamps per key with a non-atomic get/set and give no Retry-After once the limit is hit.

Fail open: the limit protects Treue from a runaway client, it must never cost an answer. If the
cache fails, the request goes through, and for BREAKER_SECONDS the cache is not asked again,
so a dead or hanging Redis costs one short timeout (see CACHES) every few seconds, not one per
request.
"""

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache

log = logging.getLogger(__name__)

CACHE_ALIAS = "ratelimit"
WINDOW_SECONDS = 60
# Long enough that an outage does not add a timeout to every request, short enough that the
# limit is back soon after the cache is.
BREAKER_SECONDS = 10

_lock = threading.Lock()
_skip_until = 0.0


@dataclass(frozen=True)
class Limited:
    limit: int
    retry_after: int  # whole seconds until the window frees, at least 1


def _cache_usable(now: float) -> bool:
    return now >= _skip_until


def _trip(now: float, error: Exception) -> None:
    global _skip_until
    with _lock:
        first = _skip_until <= now
        _skip_until = now + BREAKER_SECONDS
    if first:
        log.warning("rate limit cache unavailable, not limiting for %ss: %s",
                    BREAKER_SECONDS, error)


def reset_breaker() -> None:
    """For tests: ask the cache again on the next request."""
    global _skip_until
    with _lock:
        _skip_until = 0.0


def _count(key: str) -> int:
    cache = caches[CACHE_ALIAS]
    # The window's key expires a little after the window, so a quiet key leaves nothing behind.
    client = _redis(cache, key)
    if client is not None:
        # One round trip: Django's incr asks whether the key exists first.
        full_key = cache.make_and_validate_key(key)
        pipe = client.pipeline(transaction=False)
        pipe.incr(full_key)
        pipe.expire(full_key, WINDOW_SECONDS + 5)
        count, _ = pipe.execute()
        return int(count)
    try:
        return int(cache.incr(key))
    except ValueError:  # the window's first request (Django raises for a missing key)
        if cache.add(key, 1, WINDOW_SECONDS + 5):
            return 1
        return int(cache.incr(key))  # another request created it in between


def _redis(cache: Any, key: str) -> Any:
    """The redis-py client behind Django's RedisCache; None for any other cache."""
    get_client = getattr(getattr(cache, "_cache", None), "get_client", None)
    if not isinstance(cache, RedisCache) or get_client is None:
        return None
    # Django builds a new client object (and its table of reply handlers) on every call; one
    # per cache object does (redis-py clients are thread-safe, the pool is Django's).
    client = getattr(cache, "_treue_client", None)
    if client is None:
        client = get_client(key, write=True)
        cache._treue_client = client  # type: ignore[attr-defined]  # a memo on Django's object
    return client


def check(key_prefix: str) -> Limited | None:
    """Count one request of this key; a Limited when it is over the limit, else None."""
    limit = settings.TREUE_API_RATE_LIMIT
    if limit <= 0:
        return None
    now = time.time()
    if not _cache_usable(now):
        return None
    window = int(now) // WINDOW_SECONDS
    try:
        count = _count(f"treue:rl:{key_prefix}:{window}")
    except Exception as e:  # any cache failure: let the request through (see module docstring)
        _trip(now, e)
        return None
    if count <= limit:
        return None
    window_end = (window + 1) * WINDOW_SECONDS
    return Limited(limit=limit, retry_after=max(1, math.ceil(window_end - now)))
