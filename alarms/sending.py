"""The one HTTP call of an alarm channel: post a body, say what the reply means.

httpx with a short timeout (TREUE_ALARM_CHANNEL_TIMEOUT_SECONDS), no redirects followed (a
webhook that moved answers 3xx and is refused: its new address must be entered), and the
reply read as SENT, RETRY or REFUSED (alarms.domain.channels.reply_outcome). Never raises for
what the network or the receiver does: every failure is a `Reply` with its error.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from django.conf import settings

from alarms.domain.channels import REFUSED, RETRY, reply_outcome, scrub

# How much of a receiver's error reply is kept in the delivery log.
REPLY_CHARS = 300
USER_AGENT = "Treue-Alarm/1"


@dataclass(frozen=True)
class Reply:
    outcome: str  # SENT, RETRY or REFUSED
    http_status: int | None
    error: str


def post(url: str, body: bytes, headers: dict[str, str]) -> Reply:
    """Post, and say what came of it; the error never holds the address (it is a secret)."""
    reply = _post(url, body, headers)
    return Reply(reply.outcome, reply.http_status, scrub(reply.error, url))


def _post(url: str, body: bytes, headers: dict[str, str]) -> Reply:
    timeout = settings.TREUE_ALARM_CHANNEL_TIMEOUT_SECONDS
    try:
        response = httpx.post(
            url, content=body, headers={**headers, "User-Agent": USER_AGENT},
            timeout=timeout, follow_redirects=False,
        )
    except httpx.TimeoutException:
        return Reply(RETRY, None, f"no reply within {timeout:g} s")
    except httpx.HTTPError as e:
        return Reply(RETRY, None, f"{type(e).__name__}: {e}"[:REPLY_CHARS * 2])
    except ValueError as e:  # an address httpx cannot use (checked on entry, but stored before)
        return Reply(REFUSED, None, f"invalid address: {e}")
    outcome = reply_outcome(response.status_code)
    if outcome == RETRY or outcome == REFUSED:
        text = response.text[:REPLY_CHARS].strip()
        error = f"HTTP {response.status_code}" + (f": {text}" if text else "")
        return Reply(outcome, response.status_code, error)
    return Reply(outcome, response.status_code, "")
