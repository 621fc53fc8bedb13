"""The drift restart travels as a typed record (monitoring.extensions.DriftRestart): the review
app reads its own alarm keys, the dashboard only what the registry hands it."""

from datetime import UTC, datetime

import pytest

from alarms.models import Alarm
from alarms.services import alarm_raise
from alarms.text import Part
from dashboard.selectors.reads import drift_restarts
from dashboard.selectors.weeks import iso_weeks
from monitoring import extensions
from monitoring.extensions import DriftRestart
from review.selectors.calibration import drift_restarts as review_drift_restarts
from tests.review.conftest import ReviewWorld

pytestmark = pytest.mark.django_db
TEXT: list[Part] = [("Drift", {})]


def test_review_reads_its_cusum_alarms_as_typed_restarts(review_world: ReviewWorld) -> None:
    w = review_world
    alarm_raise(use_case=w.use_case, kind=Alarm.Kind.DRIFT, key="cusum:2026-W40", text=TEXT,
                details={"source_week": "2026-W39", "restart": "2026-W41"})
    alarm_raise(use_case=w.use_case, kind=Alarm.Kind.DRIFT, key="cusum:2026-W44", text=TEXT)
    # A bias alarm says the judge is off, not that it changed: no restart.
    alarm_raise(use_case=w.use_case, kind=Alarm.Kind.DRIFT, key="bias:2026-W44", text=TEXT)
    alarm_raise(use_case=w.other, kind=Alarm.Kind.DRIFT, key="cusum:2026-W30", text=TEXT)
    restarts = review_drift_restarts(use_case_ids=[w.use_case.pk])
    assert sorted(restarts, key=lambda r: r.review_week) == [
        DriftRestart(use_case_id=w.use_case.pk, review_week="2026-W40", source_week="2026-W39"),
        DriftRestart(use_case_id=w.use_case.pk, review_week="2026-W44", source_week=None),
    ]
    assert extensions.registry.drift_restarts["review"] is review_drift_restarts


def test_the_dashboard_reads_the_registry_not_alarm_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    weeks = iso_weeks(weeks=8, until=datetime(2026, 11, 18, 12, tzinfo=UTC))  # 2026-W40 … 2026-W47
    labels = [w.label for w in weeks]
    assert labels[0] == "2026-W40" and labels[-1] == "2026-W47"
    registry = extensions.Registry()
    registry.drift_restarts["test"] = lambda *, use_case_ids: [
        DriftRestart(use_case_id=1, review_week="2026-W44", source_week="2026-W42"),
        # Not recorded: the week before its review week.
        DriftRestart(use_case_id=1, review_week="2026-W46", source_week=None),
        # A recorded week outside those shown falls back to the same rule.
        DriftRestart(use_case_id=2, review_week="2026-W41", source_week="2025-W01"),
        DriftRestart(use_case_id=3, review_week="2026-W10", source_week=None),
    ]
    monkeypatch.setattr(extensions, "registry", registry)
    assert drift_restarts([1, 2, 3], weeks) == {
        1: ["2026-W42", "2026-W45"], 2: ["2026-W40"],
    }
