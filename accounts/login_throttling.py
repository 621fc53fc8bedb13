"""Login throttling with django-axes: the client's address, the lockout page, the records.

settings.py holds the limits (TREUE_LOGIN_*) and the django-axes wiring, accounts/axes.py the
admin's section; this module holds the pieces axes lets a project supply:

- `client_username`: the username as typed, or a digest for one the records cannot hold.
- `client_ip`: REMOTE_ADDR, or behind a proxy the last entry of the header that
  TREUE_CLIENT_IP_HEADER names. Not django-ipware (an extra package whose default order takes
  the left-most X-Forwarded-For entry, which the client writes itself): a lock keyed by a
  username and an address the attacker chooses would be no lock.
- `lockout_response`: the German (or English) page with status 429 and Retry-After, saying how
  many minutes are left and whom to ask.
- `DatabaseHandler`: axes' database records, made safe for what PostgreSQL refuses, and
  without single sign-on's refusals.
"""

import hashlib
import ipaddress
import math
from datetime import timedelta
from typing import Any

from axes.conf import settings as axes_settings
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_cool_off
from django.conf import settings
from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone


def _address(value: str) -> str | None:
    """The address in its canonical form, or None for anything else (a port, a name, a zone)."""
    try:
        address = ipaddress.ip_address(value.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
        return None  # a zone index is not an address the database column takes
    return str(address)


def client_ip(request: HttpRequest) -> str | None:
    """The address a login attempt counts against (AXES_CLIENT_IP_CALLABLE).

    A proxy appends the address it saw to X-Forwarded-For, so the last entry is the one Treue's
    own proxy wrote; entries before it come from the client. A header that is missing or holds
    no address (a request that did not pass the proxy) falls back to the peer's address.
    """
    header = settings.TREUE_CLIENT_IP_HEADER
    if header:
        forwarded = _address(request.META.get(header, "").rsplit(",", 1)[-1])
        if forwarded is not None:
            return forwarded
    return _address(request.META.get("REMOTE_ADDR", ""))


# axes keeps a username in a column of 255 characters; PostgreSQL refuses a longer value and NUL.
_USERNAME_COLUMN = 255
_DIGEST = 64  # hex characters of SHA-256


def client_username(request: HttpRequest, credentials: dict | None = None) -> str | None:
    """The username a login attempt counts against (AXES_USERNAME_CALLABLE): as typed, or for a
    name the records cannot hold (over 255 characters, or with a NUL) its start and a digest of
    the whole. No account has such a name (Django's usernames end at 150); the digest keeps two
    such names apart, so each is locked on its own, and costs no 500 (a 256-character username
    did on PostgreSQL)."""
    field = axes_settings.AXES_USERNAME_FORM_FIELD
    if credentials:
        name = credentials.get(field)
    else:
        name = getattr(request, "data", request.POST).get(field)
    if not isinstance(name, str) or (len(name) <= _USERNAME_COLUMN and "\x00" not in name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return name.replace("\x00", "")[: _USERNAME_COLUMN - _DIGEST - 1] + "#" + digest


def _time_left(request: HttpRequest, credentials: dict | None, cool_off: timedelta) -> timedelta:
    """Until the lock ends: the cool-off counts from the last failure that was recorded (a try
    during the lock is not recorded, AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT=False)."""
    latest = None
    for attempts in AxesDatabaseHandler().get_user_attempts(request, credentials):
        found = attempts.aggregate(latest=Max("attempt_time"))["latest"]
        if found is not None and (latest is None or found > latest):
            latest = found
    if latest is None:
        return cool_off
    return min(cool_off, max(timedelta(0), latest + cool_off - timezone.now()))


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None
) -> HttpResponse:
    """The answer to a login while locked (AXES_LOCKOUT_CALLABLE): 429, like the API's limit."""
    cool_off = get_cool_off(request) or timedelta(minutes=settings.TREUE_LOGIN_COOLOFF_MINUTES)
    seconds = max(1, math.ceil(_time_left(request, credentials, cool_off).total_seconds()))
    response = render(
        request, "registration/locked_out.html", {"minutes": math.ceil(seconds / 60)}, status=429
    )
    response["Retry-After"] = str(seconds)
    return response


class DatabaseHandler(AxesDatabaseHandler):
    """axes' database handler (AXES_HANDLER), with NUL bytes taken out of the request's
    User-Agent and Accept before they are stored: PostgreSQL refuses them in text, which would
    turn a login into a 500. gunicorn rejects such headers itself; other servers may not."""

    @staticmethod
    def _clean(request: HttpRequest | None) -> None:
        if request is None:
            return
        for name in ("axes_user_agent", "axes_http_accept"):
            value = getattr(request, name, None)
            if isinstance(value, str) and "\x00" in value:
                setattr(request, name, value.replace("\x00", ""))

    def user_login_failed(
        self, sender: Any, credentials: dict, request: HttpRequest | None = None, **kwargs: Any
    ) -> None:
        if not credentials.get("username"):
            # Single sign-on's callback (no username, no password guessed): a login the
            # provider vouched for and Treue refused (no role yet) locks nobody out.
            return
        self._clean(request)
        super().user_login_failed(sender, credentials, request, **kwargs)

    def user_logged_in(self, sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
        self._clean(request)
        super().user_logged_in(sender, request, user, **kwargs)

    def user_logged_out(
        self, sender: Any, request: HttpRequest, user: Any, **kwargs: Any
    ) -> None:
        self._clean(request)
        super().user_logged_out(sender, request, user, **kwargs)
