"""Who calls the API: a RAG service with its bearer key (ServiceKey, rate-limited per key), or
a person logged in to the pages (PersonSession, for the read endpoints)."""

from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer, SessionAuth

from ingest import ratelimit
from monitoring.domain import keys
from monitoring.models import Service, UseCase
from monitoring.selectors.access import service_for_key

# last_used_at is for people ("is this key still in use?"), not an audit log: writing it on
# every request would double the writes of ingest.
LAST_USED_RESOLUTION_SECONDS = 300


class ServiceRequest(HttpRequest):
    """What an endpoint behind ServiceKey gets (for the type checker; ninja sets the
    attributes): the calling service, the active use cases it may send to by slug, and each
    answer as sent (ingest/api/parsing.py)."""

    auth: Service
    treue_use_cases: dict[str, UseCase]
    treue_raw: Any


class CallerRequest(HttpRequest):
    """What an endpoint behind ServiceKey or PersonSession gets: the service or the person."""

    auth: Service | User


class RateLimited(Exception):
    def __init__(self, limited: ratelimit.Limited) -> None:
        super().__init__(f"more than {limited.limit} requests a minute with this key")
        self.retry_after = limited.retry_after


def service_for_token(token: str) -> tuple[Service, dict[str, UseCase]] | None:
    """The service whose key `token` is, with the active use cases it may send to by slug; None
    when no key matches. Raises RateLimited when the key is over its requests a minute. Shared
    by the API (ServiceKey) and the OTLP receiver (traces/api.py)."""
    # The prefix only finds the row; the secret is compared as hashes in constant time,
    # and a revoked service (active=False) is not found at all.
    prefix = keys.key_prefix(token)
    if not prefix:
        return None
    found = service_for_key(prefix)
    digest = found.service.key_hash if found else ""
    if found is None:  # perhaps the key before a rotation, in its grace period
        found = service_for_key(prefix, previous=True)
        digest = found.service.previous_key_hash if found else ""
    if found is None or not keys.key_matches(token, digest):
        return None
    service = found.service
    # Counted once per request, after the key is known to be valid: a batch is one request,
    # and a stranger guessing keys cannot use up a real key's allowance.
    limited = ratelimit.check(service.key_prefix)
    if limited is not None:
        raise RateLimited(limited)
    now = timezone.now()
    if (
        service.last_used_at is None
        or (now - service.last_used_at).total_seconds() > LAST_USED_RESOLUTION_SECONDS
    ):
        Service.objects.filter(pk=service.pk).update(last_used_at=now)
    return service, found.use_cases


class ServiceKey(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Service | None:
        found = service_for_token(token)
        if found is None:
            return None
        service, use_cases = found
        # Ingest resolves use cases against these, without asking the database again.
        request.treue_use_cases = use_cases  # type: ignore[attr-defined]  # ServiceRequest
        return service


class PersonSession(SessionAuth):
    """A person logged in to the pages (Django's session cookie), for the read endpoints.

    Only identifies the person; each operation decides what they may read (the estimates: team
    leads of the use case and staff). CSRF is checked for unsafe methods only, so a GET needs
    no token.
    """

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        user = request.user
        return user if user.is_authenticated else None
