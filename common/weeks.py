"""ISO weeks, Monday 00:00 to Monday 00:00 in the site's time zone: parsing a week as people type it
(2026-W07) for every form and query parameter, a week's bounds, last week."""

import re
from datetime import date, datetime, time, timedelta

from django import forms
from django.utils import timezone
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


def iso_week_bounds(*, year: int, week: int) -> tuple[datetime, datetime]:
    """Monday 00:00 to the next Monday 00:00 of an ISO week, in the site's time zone.

    Raises ValueError for a week the year does not have (week 53 of a short year)."""
    monday = date.fromisocalendar(year, week, 1)
    zone = timezone.get_current_timezone()
    start = datetime.combine(monday, time.min, tzinfo=zone)
    return start, datetime.combine(monday + timedelta(days=7), time.min, tzinfo=zone)



def previous_iso_week(*, today: date | None = None) -> str:
    year, week, _ = ((today or timezone.localdate()) - timedelta(days=7)).isocalendar()
    return f"{year}-W{week:02d}"
