"""What an alarm channel sends, and how a generic webhook's body is signed.

Three kinds of channel: a Slack incoming webhook (`{"text": ...}` with blocks), a Microsoft Teams
incoming webhook (an Adaptive Card in a message, which both Teams' incoming webhooks and its
Workflows webhooks accept) and a generic JSON webhook whose body carries the alarm as data and
is signed with HMAC-SHA256 (docs/alarm-channels.md is the receiver's contract):

    X-Treue-Timestamp: <unix seconds>
    X-Treue-Signature: sha256=<hex of HMAC-SHA256(secret, "<timestamp>." + raw body)>

The timestamp is part of what is signed, so a receiver that refuses old timestamps refuses a
replayed request. Plain Python: the texts arrive translated, the HTTP call lives elsewhere.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

SLACK = "slack"
TEAMS = "teams"
WEBHOOK = "webhook"
KINDS = (SLACK, TEAMS, WEBHOOK)

SIGNATURE_HEADER = "X-Treue-Signature"
TIMESTAMP_HEADER = "X-Treue-Timestamp"
EVENT_HEADER = "X-Treue-Event"
SIGNATURE_PREFIX = "sha256="
# How old a signed request may be before a receiver should refuse it (`signature_valid`).
REPLAY_TOLERANCE_SECONDS = 300
# The version of the generic webhook's payload; a change that removes or renames a field
# raises it.
PAYLOAD_VERSION = 1

_WEEK = re.compile(r"(\d{4}-W\d{2})")


@dataclass(frozen=True)
class AlarmMessage:
    """One alarm (or a channel's test message) as every channel kind needs it.

    `title`, `text` and the `facts`' names are already in the site's language; `figures` are
    the alarm's details as stored (numbers stay numbers)."""

    event: str  # "alarm" or "test"
    alarm_id: int | None
    kind: str  # Alarm.Kind's value ("action", "drift", ...), "test" for a test message
    kind_label: str
    use_case_slug: str
    use_case_name: str
    key: str
    title: str
    text: str
    link: str
    link_label: str
    opened_at: str  # ISO 8601
    figures: dict[str, Any] = field(default_factory=dict)
    facts: tuple[tuple[str, str], ...] = ()

    @property
    def week(self) -> str | None:
        """The ISO week the alarm is about: its figures' "week", else one named in its key
        (drift alarms' keys say "cusum:2026-W40"), else none."""
        week = self.figures.get("week")
        if isinstance(week, str) and week:
            return week
        found = _WEEK.search(self.key)
        return found.group(1) if found else None


# Why an address cannot be a channel's (`url_problem`).
NOT_HTTP = "only http and https addresses"
NO_HOST = "no host"
INVALID = "not a valid address"


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a channel's address (NOT_HTTP, NO_HOST, INVALID), or None.

    Only http and https: a file:, ftp: or gopher: address would let a channel read or reach
    what a web request should not."""
    text = url.strip()
    if not text or any(c.isspace() or ord(c) < 32 for c in text):
        return INVALID
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  (raises on a port that is not a number or out of range)
    except ValueError:
        return INVALID
    if parts.scheme.lower() not in ("http", "https"):
        return NOT_HTTP
    if not parts.hostname:
        return NO_HOST
    return None


def url_hint(url: str) -> str:
    """What a page shows of a channel's secret address: its host and the last 4 characters
    (`hooks.slack.com …a1b2`), enough to tell two channels apart, too little to use."""
    host = urlsplit(url.strip()).hostname or ""
    tail = url.strip()[-4:]
    return f"{host} …{tail}"


def scrub(text: str, url: str) -> str:
    """`text` (an error, a receiver's reply) without the secret address or its path, which a
    page or log would otherwise show in full: replaced by the address's hint."""
    url = url.strip()
    if not url:
        return text
    parts = urlsplit(url)
    secret_parts = [url, parts.path + (f"?{parts.query}" if parts.query else ""), parts.query]
    for part in sorted((p for p in secret_parts if len(p) > 1), key=len, reverse=True):
        text = text.replace(part, url_hint(url) if part == url else "…")
    return text


def slack_payload(message: AlarmMessage) -> dict[str, Any]:
    """A Slack incoming webhook's body: `text` (what notifications and old clients show) and
    blocks with the facts and a button to the use case's page."""
    facts = [f"*{name}:* {value}" for name, value in message.facts]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": message.title[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _slack_escape(message.text)}},
    ]
    if facts:
        blocks.append({"type": "section", "fields": [
            {"type": "mrkdwn", "text": _slack_escape(f)} for f in facts[:10]
        ]})
    blocks.append({"type": "actions", "elements": [{
        "type": "button", "text": {"type": "plain_text", "text": message.link_label},
        "url": message.link,
    }]})
    return {
        "text": f"{message.title}\n{message.text}\n{message.link}",
        "blocks": blocks,
    }


def _slack_escape(text: str) -> str:
    # Slack's mrkdwn reads <…> as links and mentions: a use case named "<!channel>" must not
    # ping a whole channel.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def teams_payload(message: AlarmMessage) -> dict[str, Any]:
    """A Microsoft Teams incoming webhook's body: one Adaptive Card (1.4) in a message."""
    body: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": message.title, "weight": "Bolder", "size": "Medium",
         "wrap": True},
        {"type": "TextBlock", "text": message.text, "wrap": True},
    ]
    if message.facts:
        body.append({"type": "FactSet", "facts": [
            {"title": name, "value": value} for name, value in message.facts
        ]})
    card = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": body,
        "actions": [{"type": "Action.OpenUrl", "title": message.link_label, "url": message.link}],
    }
    return {
        "type": "message",
        "summary": message.title,
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": None,
            "content": card,
        }],
    }


def webhook_payload(message: AlarmMessage) -> dict[str, Any]:
    """The generic webhook's body: the alarm as data (docs/alarm-channels.md)."""
    return {
        "version": PAYLOAD_VERSION,
        "event": message.event,
        "alarm": {
            "id": message.alarm_id,
            "kind": message.kind,
            "kind_label": message.kind_label,
            "key": message.key,
            "week": message.week,
            "opened_at": message.opened_at,
            "figures": message.figures,
        },
        "use_case": {"slug": message.use_case_slug, "name": message.use_case_name},
        "title": message.title,
        "text": message.text,
        "link": message.link,
    }


def payload(channel_kind: str, message: AlarmMessage) -> dict[str, Any]:
    if channel_kind == SLACK:
        return slack_payload(message)
    if channel_kind == TEAMS:
        return teams_payload(message)
    if channel_kind == WEBHOOK:
        return webhook_payload(message)
    raise ValueError(f"unknown channel kind {channel_kind!r}")


def body_bytes(data: dict[str, Any]) -> bytes:
    """The JSON body as sent: UTF-8, keys sorted, no spaces. The signature covers these exact
    bytes; a receiver verifies the raw body, never a re-serialisation of it."""
    return json.dumps(
        data, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
    ).encode("utf-8")


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """`sha256=` and the hex HMAC-SHA256 of `<timestamp>.<body>` under `secret` (UTF-8)."""
    signed = str(int(timestamp)).encode("ascii") + b"." + body
    digest = hmac.new(secret.encode("utf-8"), signed, hashlib.sha256).hexdigest()
    return SIGNATURE_PREFIX + digest


def signature_valid(
    secret: str, timestamp: str, body: bytes, header: str, *, now: float,
    tolerance: float = REPLAY_TOLERANCE_SECONDS,
) -> bool:
    """What a receiver checks: the timestamp is a number no further than `tolerance` seconds
    from `now`, and the signature matches (compared in constant time)."""
    try:
        sent = int(timestamp)
    except ValueError:
        return False
    if abs(now - sent) > tolerance:
        return False
    return hmac.compare_digest(signature(secret, sent, body), header)


def headers(
    channel_kind: str, body: bytes, *, event: str, timestamp: int, secret: str | None
) -> dict[str, str]:
    """The request's headers: JSON for every kind; for the generic webhook the event, the
    timestamp and the signature."""
    found = {"Content-Type": "application/json; charset=utf-8"}
    if channel_kind == WEBHOOK:
        if not secret:
            raise ValueError("a generic webhook needs its signing secret")
        found[EVENT_HEADER] = event
        found[TIMESTAMP_HEADER] = str(int(timestamp))
        found[SIGNATURE_HEADER] = signature(secret, timestamp, body)
    return found


# --- what a reply means ----------------------------------------------------------------------

SENT = "sent"
RETRY = "retry"  # the receiver may take it later: a timeout, a refused connection, 429, 5xx
REFUSED = "refused"  # asking again cannot help: 4xx (a revoked Slack hook answers 404/410)


def reply_outcome(status: int | None) -> str:
    """SENT, RETRY or REFUSED for an HTTP status (None: no reply at all)."""
    if status is None:
        return RETRY
    if 200 <= status < 300:
        return SENT
    if status in (408, 425, 429) or status >= 500:
        return RETRY
    return REFUSED
