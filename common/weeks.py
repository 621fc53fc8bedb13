"""ISO weeks as people type them (2026-W07): the one parser of every form and query parameter that
takes a week."""

import re
from datetime import date

from django import forms
from django.utils.translation import gettext_lazy as _

WEEK_RE = re.compile(r"^(\d{4})-W(\d{2})$", re.ASCII)


# Weeks outside these years are typing errors; the bounds also keep date arithmetic (a week's
# end, the time zone) far from date.min and date.max.
WEEK_YEARS = (2000, 2999)


def parse_iso_week(value: str) -> tuple[int, int]:
    """(year, week) of an ISO week written YYYY-Www; a ValidationError that says what is wrong."""
    match = WEEK_RE.match(value)
    if not match:
        raise forms.ValidationError(
            _("Bitte eine Woche im Format JJJJ-Www angeben, z. B. 2026-W07."), code="format"
        )
    year, week = int(match.group(1)), int(match.group(2))
    if not WEEK_YEARS[0] <= year <= WEEK_YEARS[1]:
        raise forms.ValidationError(
            _("Bitte ein Jahr zwischen %(first)s und %(last)s angeben.")
            % {"first": WEEK_YEARS[0], "last": WEEK_YEARS[1]},
            code="year",
        )
    try:
        date.fromisocalendar(year, week, 1)
    except ValueError:
        raise forms.ValidationError(
            _("Das Jahr %(year)s hat keine Kalenderwoche %(week)s.")
            % {"year": year, "week": week},
            code="no_such_week",
        ) from None
    return year, week
