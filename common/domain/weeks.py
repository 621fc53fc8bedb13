"""ISO weeks as Treue writes them ("2026-W49"): the one parser every form, command, API and
import reads a week with, and the arithmetic on them. Plain values; the weeks' bounds in the
site's time zone are common/weeks.py's.

One range of years for all of them, 2000 to 2999: a week outside it is a typing error, and the
bound keeps the weeks around one (the source week of a review, a trend's first week) and date
arithmetic far from date.min and date.max.
"""

import re
from datetime import date, timedelta

# ASCII digits only: \d would take Arabic-Indic or full-width digits too, and a week typed so
# would be stored as typed: the same ISO week under another spelling.
WEEK_RE = re.compile(r"([0-9]{4})-W([0-9]{2})")
YEARS = (2000, 2999)


class WeekError(ValueError):
    """Why a text is no ISO week: `code` is "format", "year" or "no_such_week"."""

    def __init__(self, code: str, message: str, *, year: int = 0, week: int = 0) -> None:
        super().__init__(message)
        self.code, self.year, self.week = code, year, week


def parse_week(text: str) -> tuple[int, int]:
    """`"2026-W49"` → `(2026, 49)`; WeekError for anything else, a year outside YEARS, or a week
    the year lacks (W00, W54, W53 of a year with 52)."""
    match = WEEK_RE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise WeekError("format", f"{text!r} is not an ISO week like 2026-W49")
    year, week = int(match.group(1)), int(match.group(2))
    if not YEARS[0] <= year <= YEARS[1]:
        raise WeekError("year", f"the year must lie between {YEARS[0]} and {YEARS[1]}",
                        year=year, week=week)
    try:
        date.fromisocalendar(year, week, 1)
    except ValueError:
        raise WeekError("no_such_week", f"{year} has no ISO week {week}",
                        year=year, week=week) from None
    return year, week


def format_week(year: int, week: int) -> str:
    return f"{year:04d}-W{week:02d}"


def week_of(day: date) -> str:
    """The ISO week a day lies in."""
    year, week, _ = day.isocalendar()
    return format_week(year, week)


def week_monday(week: str) -> date:
    year, number = parse_week(week)
    return date.fromisocalendar(year, number, 1)


def shift_week(week: str, weeks: int) -> str:
    """The ISO week `weeks` later (negative: earlier), across year boundaries."""
    return week_of(week_monday(week) + timedelta(weeks=weeks))
