"""The calibration alarms on evidence (issue 17, point 5): the drift CUSUM with its in-control
rate estimated per use case and restarted at each of its alarms, and the judge's bias tested
against the tolerance itself, stratified by the answers' flag.

Reviews are brought in through `import_expert_labels`' service, which counts like the review
page (a steady run of many weeks through the page would take minutes); the weeks are relative
to today, because the calibration figures look back from now.
"""

import json
import math
from collections.abc import Sequence
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from scipy import stats

from alarms.models import Alarm
from common.domain.weeks import shift_week
from monitoring.models import Answer
from review import services
from review.domain.cusum import CusumParams, cusum_limit, cusum_params_for
from review.imports import expert_labels_import
from review.models import ReviewSubmission
from review.selectors.calibration import calibration_data, drift_cusum, drift_restart
from tests.review.conftest import ReviewWorld, batch_for
from tests.review.test_alarms import alarms, batch_of, review
from tests.review.test_calibration_page import calibration, dd

# A submit's alarm check runs as its task would, in-process (tests/review/conftest.py).
pytestmark = pytest.mark.usefixtures("alarm_worker")

G, T, U = "GEDECKT", "TEILWEISE", "UNGEDECKT"
Z_95 = 1.6448536  # one-sided 95 % normal quantile


def imported(world: ReviewWorld, week: str, reviews: Sequence[tuple[str, float]], *,
             prefix: str) -> list[Answer]:
    """Answers of the week before `week`, judged with one claim labelled as given, each with
    the expert's score imported in order: the review batch `week` of the use case."""
    source = shift_week(week, -1)
    answers = [
        world.answer(f"{prefix}{i}", week=source, claims=[(f"Aussage {prefix}{i}.", label)])
        for i, (label, _) in enumerate(reviews)
    ]
    report = expert_labels_import(
        use_case=world.use_case, reviewer=world.users["expert"],
        lines=[json.dumps({"external_id": a.external_id, "score": score})
               for a, (_, score) in zip(answers, reviews, strict=True)],
    )
    assert not report.errors and len(report.imported) == len(reviews)
    return answers


# One reviewed answer per character: "." expert and judge agree (both 1.0); "+" and "-" on
# different sides of the action threshold 0.85, judge too strict (0.0 against the expert's 1.0)
# or too lenient (1.0 against 0.0). Alternating signs keep the mean bias near 0, so that only
# the CUSUM can see them.
SIDES = {".": (G, 1.0), "+": (U, 1.0), "-": (G, 0.0)}


def pattern(world: ReviewWorld, week: str, marks: str, *, prefix: str) -> None:
    imported(world, week, [SIDES[m] for m in marks], prefix=prefix)


def check(world: ReviewWorld, capture: Any) -> list[Alarm]:
    with capture(execute=True):
        return services.review_alarms_check(use_case=world.use_case)


def drift_keys(world: ReviewWorld) -> list[str]:
    return [a.key for a in alarms(world, Alarm.Kind.DRIFT)]


# 3 of every 20 reviewed answers on the other side: a use case whose normal rate is 0.15.
STEADY = "....+......-...+...."


def test_a_steady_rate_of_015_raises_no_drift_alarm_where_the_fixed_p0_010_did(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any, settings: Any,
    login: Any, mailoutbox: list,
) -> None:
    w = review_world
    week = services.current_week()
    # A week before the 4 watched ones sets the in-control rate: 3 of 20. Then, still 3 of 20
    # a week, the three of one week come at its end and those of the next at its start
    # ("+-+ . -+-"), as happens by chance now and then at 0.15. This week's review has begun.
    pattern(w, shift_week(week, -4), STEADY, prefix="b")
    pattern(w, shift_week(week, -1), "." * 17 + "+-+", prefix="c")
    pattern(w, week, ".-+-", prefix="d")
    assert ReviewSubmission.objects.filter(imported=True).count() == 44

    # Estimated: p0 is the 80 % quantile of Beta(3 + 3, 17 + 17) = 0.1952, p1 = p0 + 0.1 =
    # 0.2952, the limit 4.28 for 156 weeks (the chain: 164.7). Each disagreement adds
    # ln(p1/p0) = 0.4136, each agreement takes 0.1327 off: 3 × 0.4136 − 0.1327 + 3 × 0.4136
    # = 2.35 < 4.28. (Tuned to a rise of 0.2 for 52 weeks before, the same reviews came to
    # 3.95, just below that limit's 4.22.)
    assert check(w, django_capture_on_commit_callbacks) == []
    assert drift_keys(w) == []
    html = calibration(login(w.users["lead"]))
    assert dd(html, "cusum") == (
        "üblich bis 20 %, Alarm bei 30 %; Grenze 4,28, Stand 2,35; ein Fehlalarm im Mittel "
        "alle 165 Wochen bei 20 Prüfungen pro Woche "
        '<span class="muted">(geschätzt aus 20 Prüfungen vor den letzten 4 Wochen)</span>'
    )

    # The fixed p0 = 0.10, p1 = 0.30, h = 6 of before (now an explicit override) adds
    # ln 3 = 1.099 and takes 0.251 off: 3.30 − 0.25 + 3.30 = 6.34 ≥ 6, a false alarm.
    settings.TREUE_CUSUM_P0, settings.TREUE_CUSUM_P1, settings.TREUE_CUSUM_LIMIT = 0.1, 0.3, 6
    raised = check(w, django_capture_on_commit_callbacks)
    assert [a.key for a in raised] == [f"cusum:{week}"]
    assert raised[0].details["p0"] == 0.1 and raised[0].details["limit"] == 6
    assert f"(fest eingestellt; neu ab {shift_week(week, 1)} nach einem Drift-Alarm)" in dd(
        calibration(login(w.users["lead"])), "cusum")
    assert len(mailoutbox) == 1


def test_overrides_are_taken_one_by_one(review_world: ReviewWorld, settings: Any) -> None:
    w = review_world
    data = calibration_data(use_case=w.use_case)
    prior = cusum_params_for(disagreements=0, reviews=0)
    drift = drift_cusum(use_case=w.use_case, data=data)
    assert (drift.params, drift.estimated) == (prior, True)
    settings.TREUE_CUSUM_P0 = 0.12
    drift = drift_cusum(use_case=w.use_case, data=data)
    # p1 = p0 + 0.1 and the limit for 156 weeks at 20 reviews a week, as for an estimated p0.
    assert drift.params == CusumParams(0.12, 0.22, cusum_limit(0.12, 0.22, arl=156 * 20))
    assert not drift.estimated
    settings.TREUE_CUSUM_LIMIT = 5.0
    assert drift_cusum(use_case=w.use_case, data=data).params == CusumParams(
        0.12, 0.22, 5.0)
    settings.TREUE_CUSUM_P1 = 0.1  # not above p0: a configuration that cannot work
    with pytest.raises(ImproperlyConfigured, match="TREUE_CUSUM_P0/P1/LIMIT"):
        drift_cusum(use_case=w.use_case, data=data)


def test_a_clear_drift_still_fires(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any, mailoutbox: list,
) -> None:
    w = review_world
    week = services.current_week()
    pattern(w, shift_week(week, -5), STEADY, prefix="a")
    pattern(w, shift_week(week, -4), STEADY, prefix="b")
    # This week the judge lands on the other side of the line answer after answer. At
    # p0 = 0.1873 (6 of 40: the 80 % quantile of Beta(9, 51)), p1 = 0.2873, limit 4.25 for 156
    # weeks, ten in a row reach 10 × 0.42782 = 4.28 ≥ 4.25; nine do not (3.85). The baseline
    # weeks end on four agreements: S is 0 when this week begins.
    items = batch_of(w, [(U,), (G,)] * 6, week=week, prefix="c")
    expert_labels = [(G,), (U,)] * 6
    for n, (item, labels) in enumerate(zip(items, expert_labels, strict=True), 1):
        with django_capture_on_commit_callbacks(execute=True):
            review(item, labels, user=w.users["expert"])
        assert len(drift_keys(w)) == (n >= 10), n
    [alarm] = alarms(w, Alarm.Kind.DRIFT)
    assert alarm.key == f"cusum:{week}"
    assert alarm.details["restart"] == shift_week(week, 1)
    assert alarm.details["source_week"] == shift_week(week, -1)
    assert (alarm.details["p0"], alarm.details["p1"], alarm.details["limit"]) == (
        0.1873, 0.2873, 4.25)
    assert alarm.details["cusum"] == pytest.approx(10 * math.log(0.2873 / 0.1873), abs=1e-9)
    assert "bis 19 % der geprüften Antworten, gewarnt wird bei 29 %" in alarm.message
    assert [m.subject for m in mailoutbox] == ["Treue-Alarm: Kalibrierungsdrift – Rechtsauskunft"]


def test_after_a_drift_alarm_the_cusum_starts_again(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any, login: Any,
    mailoutbox: list,
) -> None:
    w = review_world
    week = services.current_week()
    # A judge that rarely disagrees (1 of 20: p0 = 0.1369, p1 = 0.2369, up 0.54839, down
    # 0.12314, limit 4.40) drifts three weeks ago: the 9th disagreement in a row crosses
    # (4.94; eight make 4.39).
    pattern(w, shift_week(week, -5), "....+" + "." * 15, prefix="a")
    drifted = shift_week(week, -3)
    pattern(w, drifted, "+-+-+-+-+-", prefix="c")
    [alarm] = check(w, django_capture_on_commit_callbacks)
    assert alarm.key == f"cusum:{drifted}"
    assert alarm.details["restart"] == shift_week(drifted, 1)
    assert alarm.details["source_week"] == shift_week(drifted, -1)
    assert alarm.details["baseline_reviews"] == 20
    assert alarm.details["cusum"] == pytest.approx(9 * 0.548387, abs=1e-5)

    # Since, 6 of 20 a week, ten of them in a row across two weeks. Measured from the restart
    # (no reviews of its own yet before the watched weeks: the prior's p0 = 0.212, p1 = 0.312,
    # up 0.38642, limit 4.24) that is 3.86, no alarm. Without the restart the old judge's p0
    # would still rule (and the disagreement after the crossing would count too): a second
    # alarm, at the 9th of the ten.
    pattern(w, shift_week(week, -1), "." * 14 + "+-+-+-", prefix="d")
    pattern(w, week, "+-+-", prefix="e")
    assert check(w, django_capture_on_commit_callbacks) == []
    data = calibration_data(use_case=w.use_case)
    assert drift_restart(use_case=w.use_case) == shift_week(drifted, 1)
    without = drift_cusum(use_case=w.use_case, data=data)
    assert [without.pairs[i].week for i in without.result.alarms] == [drifted, week]
    html = calibration(login(w.users["lead"]))
    assert dd(html, "cusum").startswith("üblich bis 21 %, Alarm bei 31 %; Grenze 4,24, "
                                        "Stand 3,86")
    assert f"neu ab {shift_week(drifted, 1)} nach einem Drift-Alarm" in dd(
        html, "cusum")

    # An eleventh in a row is a new drift, measured from the restart: 11 × 0.38642 = 4.2506
    # ≥ 4.24.
    pattern(w, week, "+", prefix="f")
    raised = check(w, django_capture_on_commit_callbacks)
    assert [a.key for a in raised] == [f"cusum:{week}"]
    assert raised[0].details["baseline_reviews"] == 0
    # The first alarm's week is still watched: it stays open beside the new one.
    assert [a.cleared_at is None for a in alarms(w, Alarm.Kind.DRIFT)] == [True, True]
    assert len(mailoutbox) == 2


# -- the bias against the tolerance -----------------------------------------------------------


def bias_week(world: ReviewWorld, differences: Sequence[float], *, unreviewed: int,
              prefix: str) -> None:
    """This week's reviews of answers the judge scored 0.5 (one claim TEILWEISE), the expert
    0.5 + d; both below the action threshold, so no CUSUM disagreement. `unreviewed` more
    answers of the week were not reviewed."""
    week = services.current_week()
    imported(world, week, [(T, 0.5 + d) for d in differences], prefix=prefix)
    world.unjudged(f"{prefix}x", unreviewed, week=shift_week(week, -1))


def t_factor(df: int) -> float:
    """(t/z)² for the reviews' degrees of freedom, one-sided 95 %."""
    return (stats.t.ppf(0.95, df) / Z_95) ** 2


def test_a_bias_above_the_tolerance_by_chance_raises_no_alarm(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any
) -> None:
    w = review_world
    # 20 of 40 answers reviewed: 10 agree, 10 with the expert 0.24 above the judge. Mean 0.12,
    # its t interval 0.062 … 0.178 excludes 0: the old rule (|bias| > 0.1 and the interval
    # without 0) raised an alarm. Against the tolerance the evidence is not there:
    # s̃² = (Σ(d − 0.12)² + offset²)/20 = (0.288 + 0.0635)/20 (offset² = (0.1225 + Σd²)/(1 + k̂)
    # with Σd² = 0.576, k̂ = (Σd)²/Σd² = 10), V = (1 − 20/40)·s̃²/20·(t/z)²,
    # lower bound 0.12 − z·√V = 0.084 < 0.1.
    bias_week(w, [0.0] * 10 + [0.24] * 10, unreviewed=20, prefix="q")
    variance = 0.5 * (0.288 + (0.1225 + 0.576) / 11) / 20 / 20 * t_factor(19)
    assert 0.12 - Z_95 * variance**0.5 == pytest.approx(0.0838, abs=1e-4)
    assert check(w, django_capture_on_commit_callbacks) == []
    assert drift_keys(w) == []


@pytest.mark.parametrize(("tolerance", "alarm"), [(0.1, False), (0.0, True)])
def test_a_bias_of_005_is_within_a_tolerance_of_01(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any, settings: Any,
    tolerance: float, alarm: bool,
) -> None:
    w = review_world
    settings.TREUE_CALIBRATION_BIAS_TOLERANCE = tolerance
    # 20 of 40 answers, each 0.05 above the judge: s̃² = offset²/20 (the floor), offset² =
    # (0.1225 + 20·0.05²)/(1 + 20) as k̂ = (Σd)²/Σd² = 20; V = 0.5·s̃²/20·(t/z)², lower bound
    # 0.05 − z·√V = 0.0445: above 0, not above 0.1.
    bias_week(w, [0.05] * 20, unreviewed=20, prefix="s")
    low = 0.05 - Z_95 * (0.5 * (0.1225 + 0.05) / 21 / 20 / 20 * t_factor(19)) ** 0.5
    assert low == pytest.approx(0.0445, abs=1e-4)
    raised = check(w, django_capture_on_commit_callbacks)
    assert [a.key for a in raised] == ([f"bias:{services.current_week()}"] if alarm else [])
    if alarm:
        assert raised[0].details["low"] == pytest.approx(low, abs=1e-6)
        assert "mit 95 % Sicherheit ≥ +0.04, jenseits der Toleranz von ±0.00" in (
            raised[0].message)


def test_flagged_top_ups_are_weighted_in_the_bias_alarm(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any
) -> None:
    w = review_world
    week = services.current_week()
    source = shift_week(week, -1)
    w.use_case.review_batch_size = 10
    w.use_case.save(update_fields=["review_batch_size"])
    # 5 answers of the random sample, on which expert and judge agree, and 5 flagged ones
    # outside it that fill the batch up, the expert 0.5 above the judge on each.
    for i in range(5):
        w.answer(f"r{i}", week=source, claims=[(f"Aussage r{i}.", G)])
    flagged = [w.answer(f"f{i}", week=source, flagged=True, claims=[(f"Aussage f{i}.", U)])
               for i in range(5)]
    Answer.objects.filter(pk__in=[a.pk for a in flagged]).update(in_random_sample=False)
    batch = batch_for(use_case=w.use_case, week=week)
    assert sorted(batch.items.values_list("stratum", flat=True)) == ["flagged"] * 5 + ["random"] * 5
    # 35 more unflagged answers of the week were not drawn: the flagged are 5 of 45.
    w.unjudged("u", 35, week=source)
    with django_capture_on_commit_callbacks(execute=True):
        for item in batch.items.select_related("answer"):
            review(item, (T,) if item.answer.flagged else (G,), user=w.users["expert"])
    # Taken as a random sample the bias would be 0.25, its lower bound far above 0.1. Weighted
    # by the week's answers it is 5/45 · 0.5 = 0.056, within the tolerance.
    assert drift_keys(w) == []
    data = calibration_data(use_case=w.use_case)
    assert data.rolling.bias == pytest.approx(0.25)
    assert data.rolling_bias.value == pytest.approx(5 / 45 * 0.5)
