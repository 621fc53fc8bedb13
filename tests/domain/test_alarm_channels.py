"""The alarm channels' payloads and the generic webhook's signature (alarms/domain/channels.py),
without Django. The signature is pinned for a known key and body: a receiver written from
docs/alarm-channels.md computes the same hex (here: `openssl dgst -sha256 -hmac`)."""

import hashlib
import hmac
import json

import pytest

from alarms.domain import channels as c

MESSAGE = c.AlarmMessage(
    event="alarm", alarm_id=7, kind="action", kind_label="Handlungssignal",
    use_case_slug="kundenservice", use_case_name="Kundenservice <!channel>", key="2026-W40",
    title="Treue-Alarm: Handlungssignal – Kundenservice", text="Treue 0,78 unter 0,85.",
    link="https://treue.example/use-cases/kundenservice/", link_label="In Treue öffnen",
    opened_at="2026-10-05T08:00:00+00:00",
    figures={"week": "2026-W40", "estimate": 0.78, "low": 0.7, "high": 0.83, "n": 212},
    facts=(("Anwendungsfall", "Kundenservice"), ("Woche", "2026-W40")),
)


def test_signature_is_pinned_for_a_known_key_and_body():
    # printf '%s' '1700000000.{"event":"test"}' | openssl dgst -sha256 -hmac 'whsec-test-key'
    assert c.signature("whsec-test-key", 1700000000, b'{"event":"test"}') == (
        "sha256=366b96dfffee22bdf6690debdbfd3b0aa692d38b1ed2c8d851ea59bbef833709"
    )


def test_signature_covers_the_timestamp_and_every_byte():
    body = b'{"a":1}'
    base = c.signature("k", 100, body)
    assert c.signature("k", 101, body) != base
    assert c.signature("k", 100, b'{"a":2}') != base
    assert c.signature("other", 100, body) != base


@pytest.mark.parametrize(("timestamp", "now", "header_ok", "expected"), [
    ("1000", 1000.0, True, True),
    ("1000", 1299.0, True, True),
    ("1000", 1301.0, True, False),  # a replay after the tolerance
    ("1000", 699.0, True, False),  # from the future beyond the tolerance
    ("x", 1000.0, True, False),
    ("1000", 1000.0, False, False),
])
def test_signature_valid(timestamp, now, header_ok, expected):
    body = b"{}"
    header = c.signature("s", 1000, body) if header_ok else "sha256=" + "0" * 64
    assert c.signature_valid("s", timestamp, body, header, now=now) is expected


def test_webhook_headers_and_payload():
    body = c.body_bytes(c.payload(c.WEBHOOK, MESSAGE))
    headers = c.headers(c.WEBHOOK, body, event="alarm", timestamp=1700000000, secret="s3cret")
    assert headers[c.TIMESTAMP_HEADER] == "1700000000"
    assert headers[c.EVENT_HEADER] == "alarm"
    expected = hmac.new(b"s3cret", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert headers[c.SIGNATURE_HEADER] == f"sha256={expected}"
    data = json.loads(body)
    assert data == {
        "version": 1,
        "event": "alarm",
        "alarm": {
            "id": 7, "kind": "action", "kind_label": "Handlungssignal", "key": "2026-W40",
            "week": "2026-W40", "opened_at": "2026-10-05T08:00:00+00:00",
            "figures": {"week": "2026-W40", "estimate": 0.78, "low": 0.7, "high": 0.83,
                        "n": 212},
        },
        "use_case": {"slug": "kundenservice", "name": "Kundenservice <!channel>"},
        "title": "Treue-Alarm: Handlungssignal – Kundenservice",
        "text": "Treue 0,78 unter 0,85.",
        "link": "https://treue.example/use-cases/kundenservice/",
    }


def test_webhook_needs_its_secret_and_chat_kinds_are_unsigned():
    with pytest.raises(ValueError):
        c.headers(c.WEBHOOK, b"{}", event="alarm", timestamp=1, secret="")
    assert c.SIGNATURE_HEADER not in c.headers(c.SLACK, b"{}", event="alarm", timestamp=1,
                                                 secret=None)


def test_slack_payload_has_text_and_escapes_mentions():
    data = c.payload(c.SLACK, MESSAGE)
    assert MESSAGE.title in data["text"] and MESSAGE.link in data["text"]
    blocks = json.dumps(data["blocks"], ensure_ascii=False)
    assert "<!channel>" not in blocks
    assert data["blocks"][-1]["elements"][0]["url"] == MESSAGE.link


def test_teams_payload_is_an_adaptive_card():
    data = c.payload(c.TEAMS, MESSAGE)
    assert data["type"] == "message"
    (attachment,) = data["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.4"
    assert card["body"][0]["text"] == MESSAGE.title
    assert {"title": "Woche", "value": "2026-W40"} in card["body"][2]["facts"]
    assert card["actions"] == [
        {"type": "Action.OpenUrl", "title": "In Treue öffnen", "url": MESSAGE.link}
    ]


@pytest.mark.parametrize(("key", "figures", "week"), [
    ("2026-W40", {}, "2026-W40"),
    ("cusum:2026-W41", {}, "2026-W41"),
    ("bias", {}, None),
    ("x", {"week": "2026-W02"}, "2026-W02"),
])
def test_week_from_figures_or_key(key, figures, week):
    message = c.AlarmMessage(**{**MESSAGE.__dict__, "key": key, "figures": figures})
    assert message.week == week


@pytest.mark.parametrize(("url", "problem"), [
    ("https://hooks.slack.com/services/T0/B0/xyz", None),
    ("http://127.0.0.1:8080/hook", None),
    ("HTTPS://example.com/x", None),
    ("ftp://example.com/x", c.NOT_HTTP),
    ("file:///etc/passwd", c.NOT_HTTP),
    ("javascript:alert(1)", c.NOT_HTTP),
    ("example.com/hook", c.NOT_HTTP),
    ("https:///nohost", c.NO_HOST),
    ("https://example.com:99999/", c.INVALID),
    ("https://exa mple.com/", c.INVALID),
    ("", c.INVALID),
])
def test_url_problem(url, problem):
    assert c.url_problem(url) == problem


def test_url_hint_shows_host_and_last_four():
    assert c.url_hint("https://hooks.slack.com/services/T000/B000/abcdWXYZ") == (
        "hooks.slack.com …WXYZ"
    )


@pytest.mark.parametrize(("status", "outcome"), [
    (200, c.SENT), (204, c.SENT), (None, c.RETRY), (500, c.RETRY), (503, c.RETRY),
    (429, c.RETRY), (400, c.REFUSED), (404, c.REFUSED), (301, c.REFUSED),
])
def test_reply_outcome(status, outcome):
    assert c.reply_outcome(status) == outcome


def test_scrub_takes_the_secret_address_out_of_an_error():
    url = "https://hooks.slack.com/services/T0/B0/geheim?token=xyz1"
    text = f"error at {url}; path /services/T0/B0/geheim?token=xyz1, query token=xyz1"
    scrubbed = c.scrub(text, url)
    assert "geheim" not in scrubbed and "token=xyz1" not in scrubbed
    assert "hooks.slack.com …xyz1" in scrubbed
    assert c.scrub("HTTP 500: boom", url) == "HTTP 500: boom"
