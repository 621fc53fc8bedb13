"""Forms of the judge pages: rescoring an answer or a week with a judge model."""

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from common.weeks import parse_iso_week
from judging.selectors.runs import same_model
from judging.services.rescoring import same_model_reason


class RescoreForm(forms.Form):
    """The judge model for a rescore. Refuses the answer's own generator model, and says why."""

    judge_model = forms.CharField(label=_("Prüfmodell"), max_length=200, strip=True)

    def __init__(self, *args: Any, generator_model: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.generator_model = generator_model

    def clean_judge_model(self) -> str:
        model: str = self.cleaned_data["judge_model"]  # a CharField: a str
        if self.generator_model is not None and same_model(model, self.generator_model):
            raise forms.ValidationError(same_model_reason(model), code="same_model")
        return model


class WeekRescoreForm(RescoreForm):
    """All judged answers of one ISO week (YYYY-Www) with another judge model."""

    week = forms.CharField(
        label=_("Woche"), max_length=50, strip=True,
        help_text=_("ISO-Kalenderwoche, z. B. 2026-W07"),
        widget=forms.TextInput(attrs={"placeholder": "2026-W07", "size": 9}),
    )
    field_order = ["week", "judge_model"]

    def clean_week(self) -> tuple[int, int]:
        return parse_iso_week(self.cleaned_data["week"].upper())
