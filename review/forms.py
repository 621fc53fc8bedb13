"""Forms of the review app: the candidate judge of a judge comparison."""

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from monitoring.models import JudgeMode
from review.shadow.selectors import DEFAULT_ANSWERS, MAX_ANSWERS


class JudgeComparisonForm(forms.Form):
    judge_model = forms.CharField(
        label=_("Prüfmodell (Kandidat)"), max_length=200,
        help_text=_("Name des Modells am eingestellten Endpunkt (TREUE_JUDGE_BASE_URL)."),
    )
    judge_mode = forms.ChoiceField(
        label=_("Prüfmodus"), choices=JudgeMode.choices, initial=JudgeMode.BATCHED
    )
    answers = forms.IntegerField(
        label=_("Geprüfte Antworten"), min_value=1, max_value=MAX_ANSWERS,
        initial=DEFAULT_ANSWERS,
        help_text=_("die neuesten von Fachleuten geprüften Antworten"),
    )

    def clean_judge_model(self) -> Any:
        model = self.cleaned_data["judge_model"].strip()
        if not model:
            raise forms.ValidationError(_("Bitte ein Prüfmodell angeben."))
        return model
