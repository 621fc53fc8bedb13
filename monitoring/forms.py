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
        """The valid filters as keyword arguments for selectors.answer_list.

        An invalid field is left out on its own: "flagged=1&date_from=garbage" still shows only
        flagged answers, as the form on the page says.
        """
        if not self.is_bound:
            return {}
        self.is_valid()
        data = self.cleaned_data  # holds only the fields that passed
        yes_no = {"1": True, "0": False, "": None}
        return {
            "use_case": data.get("use_case") or None,
            "flagged": yes_no[data.get("flagged", "")],
            "sampled": yes_no[data.get("sampled", "")],
            "date_from": data.get("date_from"),
            "date_to": data.get("date_to"),
        }
