"""Raising and clearing alarms, and mailing them to the use case's team leads once.

Both the dashboard (action signal) and the weekly review (drift, decomposition, missed review)
raise alarms here. The unique (use case, kind, key) constraint makes raising idempotent: the
hourly check that finds the same condition again finds the row and mails nobody.
"""

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from alarms.models import Alarm
from alarms.text import Part, render, stored

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
