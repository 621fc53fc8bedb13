"""Forms of the pages: the answer list's filters, and rescoring with another judge model.

Bad input becomes a form error, never a 500.
"""

import re
from collections.abc import Iterable
from typing import Any

from django import forms
from django.core import validators
from django.core.exceptions import ValidationError
from django.utils import formats
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from common.weeks import parse_iso_week
from dashboard.selectors import answers
from dashboard.selectors.segments import segment_filter
from monitoring.domain.segments import Segment, SegmentError, check_declared, parse_segments
from monitoring.models import Answer, SettingChange, UseCase

YES_NO = [("", _("alle")), ("1", _("ja")), ("0", _("nein"))]


SORT_CHOICES = [
    ("-time", _("neueste zuerst")),
    ("time", _("älteste zuerst")),
    ("score", _("Treue aufsteigend")),
    ("-score", _("Treue absteigend")),
    ("similarity", _("beste Ähnlichkeit aufsteigend")),
    ("-similarity", _("beste Ähnlichkeit absteigend")),
    ("chunks", _("Abschnitte aufsteigend")),
    ("-chunks", _("Abschnitte absteigend")),
]
CAUSE_LABELS = {
    answers.CAUSE_LOW_SIMILARITY: _("geringe Ähnlichkeit der Abschnitte"),
    answers.CAUSE_NO_CHUNKS: _("keine Abschnitte"),
    answers.CAUSE_MANY_CHUNKS: _("mehr als %(n)s Abschnitte"),
    answers.CAUSE_MULTI_PART: _("mehrteilige Frage"),
    answers.CAUSE_NO_LOGPROBS: _("keine Logprobs"),
    answers.CAUSE_ABSTENTION: _("Enthaltung"),
}


class SegmentsInput(forms.TextInput):
    """A repeatable text input: one box per segment given (`?segment=…&segment=…`), and an
    empty one for another."""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> list[str]:
        values = data.getlist(name) if hasattr(data, "getlist") else data.get(name) or []
        values = [values] if isinstance(values, str) else values
        return [v for v in values if isinstance(v, str) and v.strip()]

    def format_value(self, value: Any) -> Any:
        return value

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None,
               renderer: Any = None) -> SafeString:
        values = [v for v in (value or []) if v] if isinstance(value, list) else (
            [value] if value else [])
        boxes = []
        for i, v in enumerate([*values, ""]):
            box_attrs = dict(attrs or {})
            if i and "id" in box_attrs:
                box_attrs["id"] = f"{box_attrs['id']}_{i}"
            boxes.append(super().render(name, v, box_attrs, renderer))
        return mark_safe(" ".join(boxes))  # each box rendered (and escaped) by Django


class AnswerFilterForm(forms.Form):
    """The answer explorer's filters and sort order, from the query string."""

    use_case = forms.ChoiceField(label=_("Anwendungsfall"), required=False)
    week = forms.CharField(
        label=_("Woche"), required=False, max_length=50, strip=True,
        widget=forms.TextInput(attrs={"placeholder": "2026-W07", "size": 9}),
    )
    flagged = forms.ChoiceField(label=_("markiert"), choices=YES_NO, required=False)
    sampled = forms.ChoiceField(label=_("in der Stichprobe"), choices=YES_NO, required=False)
    status = forms.ChoiceField(
        label=_("Status"), choices=[("", _("alle")), *Answer.Status.choices], required=False
    )
    score_min = forms.FloatField(
        label=_("Treue ab"), required=False, min_value=0.0, max_value=1.0,
        widget=forms.NumberInput(attrs={"step": "0.01", "size": 5}),
    )
    score_max = forms.FloatField(
        label=_("Treue bis"), required=False, min_value=0.0, max_value=1.0,
        widget=forms.NumberInput(attrs={"step": "0.01", "size": 5}),
    )
    cause = forms.ChoiceField(label=_("Ursache"), required=False)
    similarity_below = forms.FloatField(
        label=_("Ähnlichkeit unter"), required=False, min_value=0.0, max_value=1.0,
        help_text=_("Schwelle für „geringe Ähnlichkeit“"),
        widget=forms.NumberInput(attrs={
            "step": "0.01", "size": 5, "placeholder": f"{answers.LOW_SIMILARITY_DEFAULT}",
        }),
    )
    date_from = forms.DateField(
        label=_("von"), required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    date_to = forms.DateField(
        label=_("bis"), required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    sort = forms.ChoiceField(label=_("Sortierung"), choices=SORT_CHOICES, required=False)
    segment = forms.Field(
        label=_("Segment"), required=False, widget=SegmentsInput(attrs={
            "placeholder": "model:gpt-4o-mini", "size": 22}),
        help_text=_("DIMENSION:WERT, etwa model:gpt-4o-mini, service:…, prompt_version:…, "
                    "source:… oder metadata.SCHLÜSSEL:…"),
    )

    def __init__(self, *args: Any, use_cases: Iterable[UseCase] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        use_cases = list(use_cases)
        self._declared = {u.slug: list(u.segment_keys or []) for u in use_cases}
        use_case, cause = self.fields["use_case"], self.fields["cause"]
        assert isinstance(use_case, forms.ChoiceField) and isinstance(cause, forms.ChoiceField)
        use_case.choices = [("", _("alle"))] + [(u.slug, u.name) for u in use_cases]
        cause.choices = [("", _("alle"))] + [
            (c, CAUSE_LABELS[c] % {"n": answers.MANY_CHUNKS}) for c in answers.CAUSES
        ]

    def clean_week(self) -> tuple[int, int] | None:
        value = self.cleaned_data["week"].upper()
        if not value:
            return None
        return parse_iso_week(value)

    def clean_segment(self) -> list[Segment]:
        """The segments asked for: the selected use case's dimensions, or, across use cases,
        the built-in ones and every key one of them declares."""
        values = self.cleaned_data.get("segment") or []
        chosen = self.data.get("use_case") if hasattr(self.data, "get") else None
        if chosen and chosen in self._declared:
            declared = self._declared[chosen]
        else:
            declared = sorted({k for keys in self._declared.values() for k in keys})
        try:
            return parse_segments([str(v) for v in values], declared)
        except SegmentError as e:
            raise forms.ValidationError(e.message, code="segment") from None

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        low, high = data.get("score_min"), data.get("score_max")
        if low is not None and high is not None and low > high:
            # Neither end is applied: which of the two was mistyped is anyone's guess.
            self.add_error("score_min", _("„Treue ab“ darf nicht über „Treue bis“ liegen."))
            self.add_error("score_max", _("„Treue bis“ darf nicht unter „Treue ab“ liegen."))
        return data

    def filters(self) -> dict[str, Any]:
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
            "week": data.get("week"),
            "flagged": yes_no[data.get("flagged", "")],
            "sampled": yes_no[data.get("sampled", "")],
            "status": data.get("status") or None,
            "score_min": data.get("score_min"),
            "score_max": data.get("score_max"),
            "cause": data.get("cause") or None,
            "similarity_below": data.get("similarity_below"),
            "date_from": data.get("date_from"),
            "date_to": data.get("date_to"),
            "sort": data.get("sort") or None,
            "segment": segment_filter(data["segment"]) if data.get("segment") else None,
        }


class _LimitInPageNumbers:
    """A min/max validator whose message writes its limit as the page writes numbers
    ("größer oder gleich 0,01" on a German page, not "0.01" beside the page's "0,80")."""

    def __init__(self, validator: validators.BaseValidator) -> None:
        self.validator = validator

    def __call__(self, value: float) -> None:
        try:
            self.validator(value)
        except ValidationError:
            limit = formats.number_format(f"{self.validator.limit_value:g}")
            raise ValidationError(self.validator.message, code=self.validator.code,
                                  params={"limit_value": limit}) from None


class PageNumberField(forms.FloatField):
    """A decimal number typed as the page writes it: "0,80" on a German page, "0.80" on
    every page; its value is shown the same way.

    A text input with a decimal keyboard, not type=number: Chromium's number input drops a
    German reader's comma ("0,80" was sent as "080", issue 41), and the browser's own check
    would speak the browser's language, not the page's."""

    def __init__(self, *, min_value: float, max_value: float, **kwargs: Any) -> None:
        super().__init__(localize=True, widget=forms.TextInput(attrs={"inputmode": "decimal"}),
                         **kwargs)
        self.validators += [_LimitInPageNumbers(validators.MinValueValidator(min_value)),
                            _LimitInPageNumbers(validators.MaxValueValidator(max_value))]


class TuningForm(forms.Form):
    """A team lead's change of the use case's tuning; a field left empty stays as it is. The
    sample rate in percent, as the pages show it."""

    logprob_threshold = PageNumberField(
        label=_("Wahrscheinlichkeits-Schwelle"), required=False, min_value=0.0, max_value=1.0,
        help_text=_("Inhaltstragende Token unter dieser Wahrscheinlichkeit markieren die Antwort."),
    )
    sample_percent = PageNumberField(
        label=_("Stichprobenrate (%)"), required=False, min_value=0.01, max_value=100.0,
        help_text=_("Anteil der nicht markierten Antworten, die geprüft werden (sinnvoll: 2–5 %)."),
    )
    action_threshold = PageNumberField(
        label=_("Handlungsschwelle"), required=False, min_value=0.0, max_value=1.0,
        help_text=_("Treue unter diesem Wert ist ein Handlungssignal."),
    )
    note = forms.CharField(
        label=pgettext_lazy("setting change", "Anlass"), required=False, max_length=200,
        strip=True,
    )
    # The tuner's "use this threshold" says where it came from; the form itself is "settings".
    source = forms.ChoiceField(
        label=_("Herkunft"), choices=SettingChange.Source.choices, required=False,
        initial=SettingChange.Source.SETTINGS, widget=forms.HiddenInput,
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not self.errors and not self.values():
            raise forms.ValidationError(_("Keine Einstellung angegeben."), code="empty")
        return data

    def mark_first_error(self) -> None:
        """After a refused save: the first invalid field gets the focus, and each invalid field
        names its error to a screen reader (Django marks it aria-invalid itself)."""
        first = True
        for name, field in self.fields.items():
            if name not in self.errors or field.widget.is_hidden:
                continue
            auto_id = self[name].auto_id
            described = f"{auto_id}_error" + (f" {auto_id}_helptext" if field.help_text else "")
            field.widget.attrs["aria-describedby"] = described
            if first:
                field.widget.attrs["autofocus"] = True
                first = False

    def values(self) -> dict[str, float]:
        """The settings given, by the use case's field names (the rate as a fraction)."""
        data = getattr(self, "cleaned_data", {})
        out = {name: data[name] for name in ("logprob_threshold", "action_threshold")
               if data.get(name) is not None}
        if data.get("sample_percent") is not None:
            out["sample_rate"] = round(data["sample_percent"] / 100, 6)
        return out




class SegmentKeysForm(forms.Form):
    """The metadata keys whose values become segments (issue 40): comma- or space-separated."""

    segment_keys = forms.CharField(
        label=_("Eigene Segment-Schlüssel"), required=False, max_length=800, strip=True,
        help_text=_("Schlüssel der Metadaten, höchstens 10, etwa: abteilung, sprache, kanal."),
    )

    def clean_segment_keys(self) -> list[str]:
        text = self.cleaned_data["segment_keys"]
        keys = [k for k in re.split(r"[,\s]+", text) if k]
        try:
            return check_declared(keys)
        except ValueError as e:
            raise forms.ValidationError(str(e), code="keys") from None
