"""ISO weeks, Monday 00:00 to Monday 00:00 in the site's time zone: parsing a week as people type it
(2026-W07) for every form and query parameter, a week's bounds, last week."""

from datetime import date, datetime, time, timedelta

from django import forms
from django.utils import timezone
from django.utils.translation import gettext as _

from common.domain.weeks import YEARS, WeekError, parse_week


def parse_iso_week(value: str) -> tuple[int, int]:
    """(year, week) of an ISO week written YYYY-Www (common/domain/weeks.py reads it); a
    ValidationError that says what is wrong, in the page's language."""
    try:
        return parse_week(value)
    except WeekError as e:
        if e.code == "year":
            message = _("Bitte ein Jahr zwischen %(first)s und %(last)s angeben.") % {
                "first": YEARS[0], "last": YEARS[1]}
        elif e.code == "no_such_week":
            message = _("Das Jahr %(year)s hat keine Kalenderwoche %(week)s.") % {
                "year": e.year, "week": e.week}
        else:
            message = _("Bitte eine Woche im Format JJJJ-Www angeben, z. B. 2026-W07.")
        raise forms.ValidationError(message, code=e.code) from None


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
