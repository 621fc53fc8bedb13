"""Raising and clearing alarms, mailing them to the use case's team leads once, and sending
them to the use case's alarm channels (Slack, Microsoft Teams, signed webhooks).

Both the dashboard (action signal) and the weekly review (drift, decomposition, missed review)
raise alarms here. The unique (use case, kind, key) constraint makes raising idempotent: the
hourly check that finds the same condition again finds the row and mails nobody.

A channel's delivery is a leased job (jobs.framework) per (alarm, channel), published once the
alarm's transaction commits; its task posts the message, retried with backoff, each attempt
logged. Nothing of it can fail or hold up the check that raised the alarm.
"""

import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import DatabaseError, IntegrityError, transaction
from django.urls import reverse
from django.utils import formats, timezone, translation
from django.utils.translation import gettext as _

from alarms import crypto, sending
from alarms.domain import channels as domain
from alarms.models import Alarm, AlarmChannel, AlarmDelivery, DeliveryAttempt
from alarms.text import Part, render, stored
from jobs import framework as jobs

if TYPE_CHECKING:  # a type only: the alarms app imports no app above it at run time
    from monitoring.models import UseCase

logger = logging.getLogger(__name__)


def alarm_raise(
    *,
    use_case: "UseCase",
    kind: str,
    key: str,
    text: Sequence[Part],
    details: dict | None = None,
) -> Alarm | None:
    """Open the alarm unless it exists; returns the new alarm, or None when it already was.

    `text` is the message as sentences (alarms.text): kept with the alarm and rendered in each
    reader's language; the stored `message` is its rendering in the site's language (the mail,
    the admin's search). An alarm that was cleared stays cleared for the same key: a week that
    recovered and then dips again under a new key (a later week) raises a new alarm.
    """
    with translation.override(settings.LANGUAGE_CODE):
        message = render(stored(text))
    try:
        with transaction.atomic():
            alarm = Alarm.objects.create(
                use_case=use_case, kind=kind, key=key, message=message,
                message_parts=stored(text), details=details or {},
            )
    except IntegrityError:
        return None
    transaction.on_commit(lambda: alarm_mail(alarm_id=alarm.pk))
    _deliveries_start(alarm)
    return alarm


def alarm_clear(
    *, use_case: "UseCase", kind: str, key: str | None = None, keep_key: str | None = None
) -> int:
    """Clear open alarms of one kind: the one with `key`, or all but `keep_key`, or all.

    Returns how many were cleared."""
    open_alarms = Alarm.objects.filter(use_case=use_case, kind=kind, cleared_at__isnull=True)
    if key is not None:
        open_alarms = open_alarms.filter(key=key)
    if keep_key is not None:
        open_alarms = open_alarms.exclude(key=keep_key)
    return open_alarms.update(cleared_at=timezone.now())


def alarm_mail(*, alarm_id: int) -> bool:
    """Mail the alarm to the use case's team leads, once (a conditional UPDATE claims it)."""
    claimed = Alarm.objects.filter(pk=alarm_id, mailed_at__isnull=True).update(
        mailed_at=timezone.now()
    )
    if not claimed:
        return False
    alarm = Alarm.objects.select_related("use_case").get(pk=alarm_id)
    recipients = sorted(
        {u.email for u in alarm.use_case.team_leads.all() if u.email and u.is_active}
    )
    if not recipients:
        return False
    with translation.override(settings.LANGUAGE_CODE):
        subject = _("Treue-Alarm: %(kind)s – %(use_case)s") % {
            "kind": alarm.get_kind_display(), "use_case": alarm.use_case.name,
        }
        body = "\n\n".join([
            alarm.text,
            _("Anwendungsfall: %(name)s (%(slug)s)")
            % {"name": alarm.use_case.name, "slug": alarm.use_case.slug},
        ])
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, recipients)
    except OSError:
        # The alarm is stored and shown either way; a mail server that is down must not undo
        # it. Unclaim so that the next check mails it.
        logger.exception("could not mail alarm %s", alarm_id)
        Alarm.objects.filter(pk=alarm_id).update(mailed_at=None)
        return False
    return True


# --- alarm channels --------------------------------------------------------------------------

DELIVERY = jobs.JobKind(
    model=AlarmDelivery,
    task="alarms.tasks.deliver_alarm",
    what="alarm delivery",
    # An alarm cleared, or a channel switched off, after the alarm was raised is still
    # delivered: the alarm was open when raised. A deleted channel takes its deliveries along.
)
# A signing secret: 32 random bytes, url-safe text.
SECRET_BYTES = 32


class ChannelUnavailable(Exception):
    """The receiver did not take the message but may later (no reply, 429, 5xx): retried."""


@dataclass(frozen=True)
class ChannelCreated:
    channel: AlarmChannel
    # The generic webhook's signing secret, to be shown once; empty for Slack and Teams.
    secret: str


@dataclass(frozen=True)
class TestResult:
    ok: bool
    http_status: int | None
    error: str


def _deliveries_start(alarm: Alarm) -> None:
    """A delivery per active channel of the alarm's use case, published on commit. A failure
    here is logged and leaves the alarm (and its mail) as raised."""
    try:
        with transaction.atomic():
            channel_ids = list(AlarmChannel.objects.filter(
                use_case_id=alarm.use_case_id, active=True
            ).values_list("pk", flat=True))
            ids = [
                AlarmDelivery.objects.create(alarm=alarm, channel_id=channel_id).pk
                for channel_id in channel_ids
            ]
        jobs.publish_on_commit(DELIVERY, ids)
    except DatabaseError:
        logger.exception("could not queue the channel deliveries of alarm %s", alarm.pk)


def alarm_channel_create(
    *, use_case: "UseCase", kind: str, name: str, url: str, user: User | None,
    active: bool = True,
) -> ChannelCreated:
    """A new channel; a generic webhook gets its signing secret (returned, shown once)."""
    problem = domain.url_problem(url)
    if problem is not None:
        raise ValueError(problem)
    secret = secrets.token_urlsafe(SECRET_BYTES) if kind == AlarmChannel.Kind.WEBHOOK else ""
    channel = AlarmChannel.objects.create(
        use_case=use_case, kind=kind, name=name, active=active, created_by=user,
        url_encrypted=crypto.encrypt(url.strip()), url_hint=domain.url_hint(url),
        secret_encrypted=crypto.encrypt(secret) if secret else "",
    )
    return ChannelCreated(channel, secret)


def alarm_channel_update(
    *, channel: AlarmChannel, name: str, active: bool, url: str = ""
) -> AlarmChannel:
    """Rename, switch on or off, and (with `url`) give the channel a new address; an empty
    `url` keeps the stored one, which no page shows."""
    channel.name = name
    channel.active = active
    fields = ["name", "active"]
    if url:
        problem = domain.url_problem(url)
        if problem is not None:
            raise ValueError(problem)
        channel.url_encrypted = crypto.encrypt(url.strip())
        channel.url_hint = domain.url_hint(url)
        fields += ["url_encrypted", "url_hint"]
    channel.save(update_fields=fields)
    return channel


def alarm_channel_delete(*, channel: AlarmChannel) -> None:
    channel.delete()


def _site_language() -> translation.override:
    return translation.override(settings.LANGUAGE_CODE)


def _link(slug: str) -> str:
    return settings.TREUE_SITE_URL + reverse("monitoring:use_case", args=[slug])


def alarm_message(*, alarm: Alarm) -> domain.AlarmMessage:
    """The alarm as its channels say it, in the site's language (like the mail)."""
    use_case = alarm.use_case
    with _site_language():
        kind_label = str(alarm.get_kind_display())
        message = domain.AlarmMessage(
            event="alarm", alarm_id=alarm.pk, kind=alarm.kind, kind_label=kind_label,
            use_case_slug=use_case.slug, use_case_name=use_case.name, key=alarm.key,
            title=_("Treue-Alarm: %(kind)s – %(use_case)s") % {
                "kind": kind_label, "use_case": use_case.name},
            text=alarm.text,
            link=_link(use_case.slug), link_label=_("In Treue öffnen"),
            opened_at=alarm.opened_at.isoformat(), figures=dict(alarm.details or {}),
        )
        facts = [(_("Anwendungsfall"), f"{use_case.name} ({use_case.slug})"),
                 (_("Art"), kind_label)]
        if message.week:
            facts.append((_("Woche"), message.week))
        facts.append((_("ausgelöst"), formats.date_format(
            timezone.localtime(alarm.opened_at), "DATETIME_FORMAT")))
    return replace(message, facts=tuple(facts))


def _test_message(channel: AlarmChannel) -> domain.AlarmMessage:
    use_case = channel.use_case
    now = timezone.now()
    with _site_language():
        return domain.AlarmMessage(
            event="test", alarm_id=None, kind="test", kind_label=_("Testnachricht"),
            use_case_slug=use_case.slug, use_case_name=use_case.name, key="test",
            title=_("Treue: Testnachricht – %(use_case)s") % {"use_case": use_case.name},
            text=_("Dieser Kanal ist eingerichtet: Alarme des Anwendungsfalls %(name)s kommen "
                   "hier an.") % {"name": use_case.name},
            link=_link(use_case.slug), link_label=_("In Treue öffnen"),
            opened_at=now.isoformat(),
            facts=((_("Anwendungsfall"), f"{use_case.name} ({use_case.slug})"),
                   (_("Kanal"), channel.name)),
        )


def _send(channel: AlarmChannel, message: domain.AlarmMessage) -> sending.Reply:
    """Build, sign and post the message; a stored secret that cannot be opened is a refusal
    (retrying cannot help)."""
    try:
        url = crypto.decrypt(channel.url_encrypted)
        secret = crypto.decrypt(channel.secret_encrypted) if channel.secret_encrypted else None
    except crypto.SecretUnreadable as e:
        return sending.Reply(domain.REFUSED, None, f"{e}: enter the address again")
    body = domain.body_bytes(domain.payload(channel.kind, message))
    try:
        headers = domain.headers(
            channel.kind, body, event=message.event, timestamp=int(time.time()), secret=secret
        )
    except ValueError as e:
        return sending.Reply(domain.REFUSED, None, str(e))
    return sending.post(url, body, headers)


def _attempt_record(
    channel_id: int, reply: sending.Reply, *, started: datetime,
    delivery_id: int | None = None, number: int = 1,
) -> None:
    DeliveryAttempt.objects.create(
        channel_id=channel_id, delivery_id=delivery_id, number=number, started_at=started,
        finished_at=timezone.now(), ok=reply.outcome == domain.SENT,
        http_status=reply.http_status, error=reply.error[: jobs.MAX_ERROR_CHARS],
    )


def alarm_channel_test(*, channel: AlarmChannel) -> TestResult:
    """Send a test message now (a staff member waits for it, within the channel's timeout)
    and log it with the channel's attempts."""
    started = timezone.now()
    reply = _send(channel, _test_message(channel))
    _attempt_record(channel.pk, reply, started=started)
    return TestResult(reply.outcome == domain.SENT, reply.http_status, reply.error)


def alarm_delivery_execute(*, delivery_id: int) -> str:
    """The task's work: claim the delivery, post the alarm, log the attempt; after a reply
    that may change, give it back and raise ChannelUnavailable (the task retries)."""
    token = jobs.claim(DELIVERY, delivery_id)
    if token is None:
        return "not claimed"
    delivery = AlarmDelivery.objects.select_related("alarm__use_case", "channel__use_case").get(
        pk=delivery_id
    )
    started = timezone.now()
    try:
        reply = _send(delivery.channel, alarm_message(alarm=delivery.alarm))
    except Exception as e:  # a bug here must fail this delivery visibly, not loop
        logger.exception("alarm delivery %s failed", delivery_id)
        reply = sending.Reply(domain.REFUSED, None, f"{type(e).__name__}: {e}")
    _attempt_record(delivery.channel_id, reply, started=started, delivery_id=delivery_id,
                    number=delivery.attempts)
    if reply.outcome == domain.SENT:
        jobs.finish(DELIVERY, delivery_id, token, status=AlarmDelivery.Status.SENT,
                    http_status=reply.http_status, error="")
        return "sent"
    if reply.outcome == domain.RETRY:
        jobs.release(DELIVERY, delivery_id, token, reason=reply.error, retry_in=0,
                     http_status=reply.http_status)
        raise ChannelUnavailable(reply.error)
    jobs.fail(DELIVERY, delivery_id, token, reason=reply.error, http_status=reply.http_status)
    return "refused"


def alarm_delivery_give_up(*, delivery_id: int, reason: str) -> None:
    jobs.give_up(DELIVERY, delivery_id, reason=reason)


def alarm_deliveries_reconcile() -> int:
    """Re-publish deliveries whose message was lost; fail those whose worker died too often."""
    return jobs.reconcile(DELIVERY)
