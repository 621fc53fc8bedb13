"""The alarm channels' pages (staff only): a use case's channels with a form for a new one,
and one channel's page with its settings, a "Test senden" button and its delivery log.

A channel's address is never shown again in full (only its host and last 4 characters); a
generic webhook's signing secret is shown once, on the page that answers its creation.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from alarms import selectors, services
from alarms.forms import ChannelCreateForm, ChannelEditForm
from alarms.models import AlarmChannel
from common.http import AuthenticatedRequest
from monitoring.models import UseCase
from monitoring.selectors.access import use_case_get_for_user

View = Callable[..., HttpResponse]


def staff_use_case(view: View) -> View:
    """Login (else the login page), the use case by its slug among those the person may see
    (else 404, as every page: ids and slugs of others' use cases do not leak), and staff (else
    403): a channel's address reaches into a team's chat, so only staff set channels up."""

    @login_required
    @wraps(view)
    def wrapped(request: AuthenticatedRequest, slug: str, **kwargs: Any) -> HttpResponse:
        use_case = use_case_get_for_user(user=request.user, slug=slug)
        if use_case is None:
            raise Http404
        if not request.user.is_staff:
            raise PermissionDenied
        return view(request, use_case, **kwargs)

    return wrapped


def _channel(use_case: UseCase, pk: int) -> AlarmChannel:
    channel = selectors.channel_get(use_case_id=use_case.pk, pk=pk)
    if channel is None:
        raise Http404
    return channel


@staff_use_case
@require_http_methods(["GET", "POST"])
def channel_list(request: AuthenticatedRequest, use_case: UseCase) -> HttpResponse:
    """The use case's channels and a form for a new one. A new generic webhook's page shows
    its signing secret, once."""
    form = ChannelCreateForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            created = services.alarm_channel_create(
                use_case=use_case, user=request.user, **form.cleaned_data
            )
            if not created.secret:
                messages.success(request, _("Kanal „%(name)s“ angelegt.") % {
                    "name": created.channel.name})
                return redirect("alarms:channel", use_case.slug, created.channel.pk)
            return _channel_page(request, use_case, created.channel, secret=created.secret,
                                 status=201)
        form.mark_first_error()
        status = 400
    return render(request, "alarms/channels.html", {
        "use_case": use_case,
        "channels": selectors.channels_for_use_case(use_case_id=use_case.pk),
        "form": form,
    }, status=status)


def _channel_page(
    request: AuthenticatedRequest, use_case: UseCase, channel: AlarmChannel, *,
    form: ChannelEditForm | None = None, secret: str = "", status: int = 200,
) -> HttpResponse:
    if form is None:
        form = ChannelEditForm(initial={"name": channel.name, "active": channel.active})
    return render(request, "alarms/channel.html", {
        "use_case": use_case,
        "channel": channel,
        "form": form,
        "secret": secret,
        "log": selectors.channel_log(channel=channel),
    }, status=status)


@staff_use_case
@require_http_methods(["GET", "POST"])
def channel_detail(request: AuthenticatedRequest, use_case: UseCase, pk: int) -> HttpResponse:
    channel = _channel(use_case, pk)
    if request.method == "GET":
        return _channel_page(request, use_case, channel)
    form = ChannelEditForm(request.POST)
    if not form.is_valid():
        form.mark_first_error()
        return _channel_page(request, use_case, channel, form=form, status=400)
    services.alarm_channel_update(channel=channel, **form.cleaned_data)
    messages.success(request, _("Gespeichert."))
    return redirect("alarms:channel", use_case.slug, channel.pk)


@staff_use_case
@require_POST
def channel_test(request: AuthenticatedRequest, use_case: UseCase, pk: int) -> HttpResponse:
    """Send a test message now and say how it went."""
    channel = _channel(use_case, pk)
    result = services.alarm_channel_test(channel=channel)
    if result.ok:
        messages.success(request, _("Testnachricht zugestellt (HTTP %(status)s).") % {
            "status": result.http_status})
    else:
        messages.error(request, _("Testnachricht nicht zugestellt: %(error)s") % {
            "error": result.error})
    return redirect("alarms:channel", use_case.slug, channel.pk)


@staff_use_case
@require_POST
def channel_delete(request: AuthenticatedRequest, use_case: UseCase, pk: int) -> HttpResponse:
    channel = _channel(use_case, pk)
    name = channel.name
    services.alarm_channel_delete(channel=channel)
    messages.success(request, _("Kanal „%(name)s“ gelöscht.") % {"name": name})
    return redirect("alarms:channels", use_case.slug)
