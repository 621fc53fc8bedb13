"""The form that sets up an investigation. Bad input becomes a form error, never a 500."""

import re
from typing import Any

from django import forms
from django.conf import settings
from django.core.validators import MaxValueValidator
from django.utils.translation import gettext_lazy as _

from investigations.models import Investigation
from monitoring.models import UseCase

_IDS_RE = re.compile(r"^[\d\s,;]*$")
MAX_MODEL_LENGTH = 200


class InvestigationForm(forms.Form):
    use_case = forms.ChoiceField(label=_("Anwendungsfall"))
    selection = forms.ChoiceField(
        label=_("Fragen"), choices=Investigation.Selection.choices,
        initial=Investigation.Selection.LATEST,
    )
    n = forms.IntegerField(
        label=_("Anzahl N"), min_value=1, initial=20,
        help_text=_("Wie viele Antworten erneut gestellt werden."),
    )
    answers = forms.CharField(
        label=_("Antwort-IDs"), required=False, max_length=20000,
        help_text=_("Nur für „im Explorer gewählte Antworten“: IDs, durch Komma getrennt."),
        widget=forms.TextInput(attrs={"size": 40}),
    )
    samples = forms.IntegerField(
        label=_("Stichproben je Frage"), min_value=2, max_value=10, initial=3
    )
    temperature = forms.FloatField(
        label=_("Temperatur"), min_value=0.05, max_value=2.0, initial=0.7,
        widget=forms.NumberInput(attrs={"step": "0.05"}),
    )
    generator_model = forms.CharField(
        label=_("Generator-Modell"), required=False, max_length=MAX_MODEL_LENGTH,
        help_text=_("Leer: jede Antwort mit ihrem eigenen Modell."),
    )

    def __init__(self, *args: Any, use_cases: list[UseCase], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        use_case_field = self.fields["use_case"]
        assert isinstance(use_case_field, forms.ChoiceField)
        use_case_field.choices = [(uc.slug, uc.name) for uc in use_cases]
        n_field = self.fields["n"]
        assert isinstance(n_field, forms.IntegerField)
        n_field.max_value = settings.TREUE_INVESTIGATION_MAX_QUESTIONS
        self.fields["n"].validators.append(
            MaxValueValidator(settings.TREUE_INVESTIGATION_MAX_QUESTIONS)
        )
        self.fields["n"].widget.attrs["max"] = settings.TREUE_INVESTIGATION_MAX_QUESTIONS
        self.use_cases = {uc.slug: uc for uc in use_cases}

    def clean_answers(self) -> list[int]:
        raw = self.cleaned_data.get("answers") or ""
        if not _IDS_RE.match(raw):
            raise forms.ValidationError(_("Nur Zahlen, durch Komma getrennt."))
        ids = [int(part) for part in re.split(r"[\s,;]+", raw) if part]
        if len(ids) > settings.TREUE_INVESTIGATION_MAX_QUESTIONS:
            raise forms.ValidationError(
                _("Höchstens %(n)s Antworten.") % {"n": settings.TREUE_INVESTIGATION_MAX_QUESTIONS}
            )
        return list(dict.fromkeys(ids))

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if data.get("selection") == Investigation.Selection.CHOSEN:
            if not data.get("answers") and "answers" not in self.errors:
                self.add_error("answers", _("Bitte Antworten im Explorer wählen oder IDs angeben."))
            elif data.get("answers"):
                data["n"] = len(data["answers"])
                self.errors.pop("n", None)
        return data

    @property
    def chosen_use_case(self) -> UseCase:
        return self.use_cases[self.cleaned_data["use_case"]]
