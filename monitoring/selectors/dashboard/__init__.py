"""Reads for the team-lead dashboard: weekly figures per use case, the overview's rows, the
causes, the trigger's worth and the threshold tuner.

By concern: `weeks` (ISO weeks and bucketing in the database), `reads` (what is read, and as
little as possible), `figures` (a use case's weekly figures), `overview`, `diagnosis` (causes,
the trigger's worth, the tuner) and `page` (the use-case page). The statistics live in
`monitoring.domain` (statistics, causes, tuner, expert_scale).

Weeks are ISO weeks in the site's time zone (Europe/Berlin), Monday 00:00 to Monday 00:00, as
`iso_week_bounds` draws them; a week's answers are those created in it, and so are the judge
runs that judged them (a rescore counts in the week of the answer it rescored).
"""

from monitoring.selectors.dashboard.diagnosis import (
    CHUNK_EDGES,
    DEFAULT_SIMILARITY_THRESHOLD,
    SIMILARITY_EDGES,
    TUNER_THRESHOLDS,
    Causes,
    Diagnosis,
    Tuner,
    use_case_diagnosis,
)
from monitoring.selectors.dashboard.figures import WeekFigures, use_case_weeks
from monitoring.selectors.dashboard.overview import (
    OverviewRow,
    cost_currency,
    open_alarms,
    overview_rows,
    setting_changes,
    setting_changes_by_week,
    use_cases_led_by,
    user_leads,
    user_may_tune,
    user_reviews,
)
from monitoring.selectors.dashboard.page import UseCasePage, use_case_page
from monitoring.selectors.dashboard.reads import CLAIM_POINTS, JudgedRow, Usage
from monitoring.selectors.dashboard.weeks import (
    CAUSES_WEEKS,
    OVERVIEW_WEEKS,
    POOLED_CHOICES,
    POOLED_WEEKS,
    WEEKS,
    Week,
    iso_weeks,
)

__all__ = [
    "CAUSES_WEEKS",
    "CHUNK_EDGES",
    "CLAIM_POINTS",
    "DEFAULT_SIMILARITY_THRESHOLD",
    "OVERVIEW_WEEKS",
    "POOLED_CHOICES",
    "POOLED_WEEKS",
    "SIMILARITY_EDGES",
    "TUNER_THRESHOLDS",
    "WEEKS",
    "Causes",
    "Diagnosis",
    "JudgedRow",
    "OverviewRow",
    "Tuner",
    "Usage",
    "UseCasePage",
    "Week",
    "WeekFigures",
    "cost_currency",
    "iso_weeks",
    "open_alarms",
    "overview_rows",
    "use_case_diagnosis",
    "use_case_page",
    "use_case_weeks",
    "use_cases_led_by",
    "setting_changes",
    "setting_changes_by_week",
    "user_leads",
    "user_may_tune",
    "user_reviews",
]
