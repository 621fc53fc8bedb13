"""The dashboard's weeks: ISO weeks in the site's time zone (Europe/Berlin), Monday 00:00 to
Monday 00:00, as `iso_week_bounds` draws them, and the bucketing of a value by fixed edges in the
database (a timestamp by its week, a similarity by its bucket)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.utils import timezone

from common.weeks import iso_week_bounds
from monitoring.models.buckets import Bucket as _Bucket

# The use-case page's trend: half a year of weeks.
WEEKS = 26
# The overview's small trend per use case.
OVERVIEW_WEEKS = 8
# The pooled view: a week and the 3 before it (1, 4 or 13 on the page). Small use cases judge a
# handful of random answers a week; four weeks of them decide where one cannot.
POOLED_WEEKS = 4
POOLED_CHOICES = (1, 4, 13)
# Causes, the trigger's worth and the tuner pool this many weeks (the current one included):
# one week's judged answers split into buckets are too few, a quarter would hide a change.
CAUSES_WEEKS = 8


@dataclass(frozen=True)
class Week:
    """An ISO week in the site's time zone."""

    year: int
    number: int
    start: datetime
    end: datetime

    @property
    def label(self) -> str:
        return f"{self.year}-W{self.number:02d}"


def iso_weeks(*, weeks: int, until: datetime | date | None = None) -> list[Week]:
    """The `weeks` ISO weeks up to the one holding `until` (default now), oldest first."""
    if weeks < 1:
        raise ValueError("weeks must be at least 1")
    if until is None:
        today = timezone.localdate()
    elif isinstance(until, datetime):
        today = timezone.localtime(until).date()
    else:
        today = until
    monday = today - timedelta(days=today.weekday())
    out = []
    for back in range(weeks - 1, -1, -1):
        year, number, _ = (monday - timedelta(weeks=back)).isocalendar()
        start, end = iso_week_bounds(year=year, week=number)
        out.append(Week(year, number, start, end))
    return out


def week_bucket(field_name: str, weeks: Sequence[Week]) -> _Bucket:
    """The index of a timestamp's week in `weeks` (the query keeps to their span)."""
    return _Bucket(field_name, [w.end for w in weeks[:-1]], datetimes=True)
