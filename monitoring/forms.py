"""Filter form of the answer list: bad query parameters become form errors, never a 500."""

from django import forms
from django.utils.translation import gettext_lazy as _

YES_NO = [("", _("alle")), ("1", _("ja")), ("0", _("nein"))]


class AnswerFilterForm(forms.Form):
    use_case = forms.ChoiceField(label=_("Anwendungsfall"), required=False)
    flagged = forms.ChoiceField(label=_("markiert"), choices=YES_NO, required=False)
    sampled = forms.ChoiceField(label=_("in der Stichprobe"), choices=YES_NO, required=False)
    date_from = forms.DateField(
        label=_("von"), required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    date_to = forms.DateField(
        label=_("bis"), required=False, widget=forms.DateInput(attrs={"type": "date"})
    )

    def __init__(self, *args, use_cases=(), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["use_case"].choices = [("", _("alle"))] + [(u.slug, u.name) for u in use_cases]

    def filters(self) -> dict:
        """The valid filters as keyword arguments for selectors.answer_list."""
        if not self.is_valid():
            return {}
        data = self.cleaned_data
        yes_no = {"1": True, "0": False, "": None}
        return {
            "use_case": data["use_case"] or None,
            "flagged": yes_no[data["flagged"]],
            "sampled": yes_no[data["sampled"]],
            "date_from": data["date_from"],
            "date_to": data["date_to"],
        }
