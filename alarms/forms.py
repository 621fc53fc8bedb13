"""The alarm channels' forms (staff): a new channel, and changing one. A bad address is a form
error (400), never a 500."""

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from alarms.domain import channels as domain
from alarms.models import AlarmChannel

URL_MAX_CHARS = 2000
_URL_ERRORS = {
    domain.NOT_HTTP: _("Nur http- und https-Adressen sind erlaubt (z. B. "
                       "https://hooks.slack.com/services/…)."),
    domain.NO_HOST: _("Die Adresse nennt keinen Server."),
    domain.INVALID: _("Das ist keine gültige Adresse."),
}


def _clean_url(value: str) -> str:
    value = value.strip()
    problem = domain.url_problem(value)
    if problem is not None:
        raise forms.ValidationError(_URL_ERRORS[problem], code="url")
    return value


class ChannelCreateForm(forms.Form):
    kind = forms.ChoiceField(label=_("Art"), choices=AlarmChannel.Kind.choices)
    name = forms.CharField(label=_("Name"), max_length=100, strip=True)
    url = forms.CharField(
        label=_("Adresse (Webhook-URL)"), max_length=URL_MAX_CHARS, strip=True,
        help_text=_("Wird verschlüsselt gespeichert und danach nie wieder ganz angezeigt."),
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false",
                                      "placeholder": "https://…"}),
    )
    active = forms.BooleanField(label=_("aktiv"), required=False, initial=True)

    def clean_url(self) -> str:
        return _clean_url(self.cleaned_data["url"])

    def mark_first_error(self) -> None:
        _mark_first_error(self)


class ChannelEditForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=100, strip=True)
    url = forms.CharField(
        label=_("Neue Adresse"), max_length=URL_MAX_CHARS, strip=True, required=False,
        help_text=_("Leer lassen, um die gespeicherte Adresse zu behalten."),
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false",
                                      "placeholder": "https://…"}),
    )
    active = forms.BooleanField(label=_("aktiv"), required=False)

    def clean_url(self) -> str:
        value = self.cleaned_data["url"].strip()
        return _clean_url(value) if value else ""

    def mark_first_error(self) -> None:
        _mark_first_error(self)


def _mark_first_error(form: Any) -> None:
    """After a refused save: the first invalid field gets the focus and names its error to a
    screen reader (as the use case's settings form does)."""
    first = True
    for name, field in form.fields.items():
        if name not in form.errors:
            continue
        auto_id = form[name].auto_id
        field.widget.attrs["aria-describedby"] = f"{auto_id}_error"
        if first:
            field.widget.attrs["autofocus"] = True
            first = False
