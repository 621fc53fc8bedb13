"""Reads of the calibration page: the judge against the experts week by week (scatter, bias, kappa,
the experts' scale), and the drift check's CUSUM with the week it restarts from."""

import dataclasses
from collections.abc import Sequence
from datetime import datetime, time

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as AuthUser
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from alarms.models import Alarm
from common.domain.weeks import shift_week, week_monday, week_of
from dashboard.domain.expert_scale import Rectifier, Review, rectifier
from monitoring.extensions import DriftRestart
from monitoring.models import Answer, Claim, UseCase
from monitoring.selectors.access import use_cases_for_user
from review.domain import calibration
from review.domain.cusum import (
    CUSUM_SHIFT,
    CUSUM_TARGET_WEEKS,
    REVIEWS_PER_WEEK,
    CusumParams,
    CusumResult,
    cusum_arl,
    cusum_limit,
    cusum_params_for,
)
from review.domain.drift import DriftAlarm, DriftRun, drift_alarms, drift_run
from review.domain.kappa import LABELS, Kappa, kappa_with_interval
from review.models import ReviewSubmission

User = AuthUser | AnonymousUser


CALIBRATION_WEEKS = 26  # the scatter, weekly bias and CUSUM look back half a year


ROLLING_WEEKS = 4


KAPPA_WEEKS = 13  # "over a quarter"


def calibration_use_cases(*, user: User) -> QuerySet[UseCase]:
    return use_cases_for_user(user=user)


@dataclasses.dataclass(frozen=True)
class Point:
    answer_id: int
    item_id: int
    week: str  # the review week (its batch's); the answer is of the week before
    manual: float
    automatic: float
    decomposition_wrong: bool
    flagged: bool  # the answer's tier-1 flag: its stratum, however it got into the batch


@dataclasses.dataclass(frozen=True)
class CalibrationData:
    weeks: list[str]  # the window of review weeks, oldest first
    latest_week: str
    points: list[Point]  # in review order (week, then submission time)
    pairs: list[calibration.ReviewedPair]
    weekly: dict[str, calibration.BiasSummary]  # unweighted: n, MAE, shares
    rolling: calibration.BiasSummary
    kappa: Kappa
    kappa_claims: int
    # Review week → (flagged, unflagged) answers of its source week (the week before), for
    # the weeks with reviews: the strata the bias is weighted by.
    sizes: dict[str, tuple[int, int]]
    # Review week → the bias expert − judge stratified by the answers' flag: top-ups of
    # flagged answers count with their share of the week's answers, not as a random sample.
    weekly_bias: dict[str, Rectifier]
    rolling_bias: Rectifier  # the same over the last ROLLING_WEEKS review weeks

    def reviews(self, weeks: Sequence[str]) -> list[Review]:
        """The reviewed answers of the given review weeks, with their strata."""
        return _reviews(self.points, weeks)

    def sizes_of(self, weeks: Sequence[str]) -> tuple[int, int]:
        """(flagged, unflagged) answers of the source weeks of the given review weeks."""
        return _sizes_of(self.sizes, weeks)

    @property
    def rolling_weeks(self) -> list[str]:
        return self.weeks[-ROLLING_WEEKS:]


def _reviews(points: Sequence[Point], weeks: Sequence[str]) -> list[Review]:
    wanted = set(weeks)
    return [Review(p.manual, p.automatic, p.flagged) for p in points if p.week in wanted]


def _sizes_of(sizes: dict[str, tuple[int, int]], weeks: Sequence[str]) -> tuple[int, int]:
    chosen = [sizes[w] for w in weeks if w in sizes]
    return sum(f for f, _ in chosen), sum(u for _, u in chosen)


def _latest_submissions(*, use_case: UseCase, weeks: list[str]) -> list[ReviewSubmission]:
    # Imported reviews (import_expert_labels) sit in batches of their own and count the same.
    subs = (
        ReviewSubmission.objects.filter(
            item__batch__use_case=use_case, item__batch__week__in=weeks
        )
        .select_related("item__batch")
        .order_by("item_id", "-version")
    )
    latest: dict[int, ReviewSubmission] = {}
    for sub in subs:
        latest.setdefault(sub.item_id, sub)
    return sorted(
        latest.values(),
        key=lambda s: (s.item.batch.week, s.item.submitted_at or s.submitted_at, s.item_id),
    )


def _week_start(week: str) -> datetime:
    # As review.services bounds a batch's source week: Monday 0:00 in the site's time zone.
    return datetime.combine(
        week_monday(week), time.min, tzinfo=timezone.get_current_timezone()
    )


def source_sizes(*, use_case: UseCase, weeks: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Review week → (flagged, unflagged) answers of the use case created in its source week.

    All answers count, judged or not: they are the population the reviewed ones stand for."""
    out = {}
    for week in weeks:
        source = shift_week(week, -1)
        counts = Answer.objects.filter(
            use_case=use_case, created_at__gte=_week_start(source),
            created_at__lt=_week_start(week),
        ).aggregate(total=Count("id"), flagged=Count("id", filter=Q(flagged=True)))
        out[week] = (counts["flagged"], counts["total"] - counts["flagged"])
    return out


def calibration_data(*, use_case: UseCase, now: datetime | None = None) -> CalibrationData:
    now = now or timezone.now()
    latest = week_of(timezone.localtime(now).date())
    weeks = [shift_week(latest, -k) for k in range(CALIBRATION_WEEKS - 1, -1, -1)]
    subs = [
        (s, s.automatic_score) for s in _latest_submissions(use_case=use_case, weeks=weeks)
        if s.automatic_score is not None
    ]
    flagged = dict(
        Answer.objects.filter(pk__in=[s.item.answer_id for s, _ in subs])
        .values_list("pk", "flagged")
    )
    points = [
        Point(s.item.answer_id, s.item_id, s.item.batch.week, s.manual_score,
              automatic, s.decomposition_wrong, flagged[s.item.answer_id])
        for s, automatic in subs
    ]
    pairs = [
        calibration.ReviewedPair(p.manual, p.automatic, p.week, p.decomposition_wrong)
        for p in points
    ]
    threshold = use_case.action_threshold
    weekly = calibration.weekly_summaries(pairs, action_threshold=threshold)
    rolling_weeks = weeks[-ROLLING_WEEKS:]
    rolling = calibration.rolling_summary(
        pairs, weeks=rolling_weeks, action_threshold=threshold
    )
    sizes = source_sizes(use_case=use_case, weeks=sorted(set(weekly) | set(rolling_weeks)))
    for week in weekly:
        # A stratum has at least as many answers as reviews of them; should a count fall
        # short (a clock at a week's edge, a flag changed after the review), the reviews set
        # the floor rather than the page and the alarm check failing.
        reviewed_flagged = sum(p.flagged for p in points if p.week == week)
        sizes[week] = (max(sizes[week][0], reviewed_flagged),
                       max(sizes[week][1], weekly[week].n - reviewed_flagged))
    kappa_weeks = set(weeks[-KAPPA_WEEKS:])
    claim_pairs, groups = _claim_pairs([s for s, _ in subs if s.item.batch.week in kappa_weeks])
    return CalibrationData(
        weeks=weeks,
        latest_week=latest,
        points=points,
        pairs=pairs,
        weekly=weekly,
        rolling=rolling,
        kappa=kappa_with_interval(claim_pairs, groups=groups),
        kappa_claims=len(claim_pairs),
        sizes=sizes,
        weekly_bias={
            week: rectifier(sizes[week], _reviews(points, [week])) for week in weekly
        },
        rolling_bias=rectifier(_sizes_of(sizes, rolling_weeks),
                               _reviews(points, rolling_weeks)),
    )


@dataclasses.dataclass(frozen=True)
class DriftCusum:
    """The drift CUSUM as the alarm runs it: over the reviewed pairs since its last restart,
    with its in-control rate estimated from those of them before the watched weeks."""

    params: CusumParams
    estimated: bool  # False when any of TREUE_CUSUM_P0, _P1, _LIMIT is set
    baseline_reviews: int  # reviews the in-control rate was estimated from
    baseline_disagreements: int
    restart: str | None  # the first review week watched since the last drift alarm
    watched: list[str]  # the review weeks in which a crossing raises an alarm
    pairs: list[calibration.ReviewedPair]  # the pairs run through the CUSUM
    result: CusumResult
    # Mean weeks between false alarms at the in-control rate, at REVIEWS_PER_WEEK reviews a
    # week (the Markov chain's run length, `calibration.cusum_arl`).
    false_alarm_weeks: float

    @property
    def crossed(self) -> int | None:
        """Index into `pairs` of the first crossing of the limit in a watched week."""
        watched = set(self.watched)
        return next((i for i in self.result.alarms if self.pairs[i].week in watched), None)


# The key of a CUSUM drift alarm: its review week after the prefix (review/services.py).
CUSUM_KEY = "cusum:"


def drift_restarts(*, use_case_ids: Sequence[int]) -> list[DriftRestart]:
    """The drift restarts of these use cases, as the dashboard asks them
    (monitoring/extensions.py): the CUSUM's alarms only, as a bias alarm says the judge is off,
    not that it changed."""
    rows = Alarm.objects.filter(
        use_case_id__in=use_case_ids, kind=Alarm.Kind.DRIFT, key__startswith=CUSUM_KEY,
    ).values_list("use_case_id", "key", "details")
    out = []
    for use_case_id, key, details in rows:
        recorded = details.get("source_week") if isinstance(details, dict) else None
        out.append(DriftRestart(
            use_case_id=use_case_id, review_week=key.removeprefix(CUSUM_KEY),
            source_week=recorded if isinstance(recorded, str) else None,
        ))
    return out


def drift_restart(*, use_case: UseCase) -> str | None:
    """The review week the drift CUSUM starts from: the week after the latest week in which it
    raised an alarm (cleared or not). Its reviews up to then measured a judge that has since
    changed, and the ones that crossed the limit have been used."""
    restarts = [
        details.get("restart") or shift_week(key.removeprefix(CUSUM_KEY), 1)
        for key, details in Alarm.objects.filter(
            use_case=use_case, kind=Alarm.Kind.DRIFT, key__startswith=CUSUM_KEY
        ).values_list("key", "details")
    ]
    # ISO weeks "YYYY-Www" compare as text in calendar order.
    return max(restarts, default=None)


def drift_cusum(
    *, use_case: UseCase, data: CalibrationData, restart: str | None = None
) -> DriftCusum:
    """The drift CUSUM over `data`'s pairs from `restart` on (see `drift_restart`), as
    `review.domain.drift.drift_run` runs it.

    Watched are the last ROLLING_WEEKS review weeks; the in-control rate p0 is estimated from
    the pairs since the restart in the weeks before them (`calibration.cusum_params_for`: a
    Beta prior until there are enough), and the limit is set for CUSUM_TARGET_WEEKS weeks
    between false alarms at 20 reviews a week. TREUE_CUSUM_P0/P1/LIMIT, when set, win over
    the estimates (`cusum_params`)."""
    weeks, disagreements = _observations(use_case=use_case, data=data)
    run = drift_run(weeks, disagreements, restart=restart, watched_from=data.rolling_weeks[0],
                    params_for=_params_for)
    return _drift_cusum(data, run, restart)


def drift_alarms_of(
    *, use_case: UseCase, data: CalibrationData, restart: str | None
) -> list[DriftAlarm]:
    """The drift alarms one check raises from `restart` on
    (`review.domain.drift.drift_alarms`)."""
    weeks, disagreements = _observations(use_case=use_case, data=data)
    return drift_alarms(weeks, disagreements, restart=restart,
                        watched_from=data.rolling_weeks[0], params_for=_params_for)


def _observations(*, use_case: UseCase, data: CalibrationData) -> tuple[list[str], list[bool]]:
    threshold = use_case.action_threshold
    return ([p.week for p in data.pairs],
            [calibration.disagrees(p, threshold) for p in data.pairs])


def _params_for(disagreements: int, reviews: int) -> CusumParams:
    return cusum_params(disagreements=disagreements, reviews=reviews)[0]


def _drift_cusum(data: CalibrationData, run: DriftRun, restart: str | None) -> DriftCusum:
    params = run.params
    return DriftCusum(
        params=params, estimated=_estimated(), baseline_reviews=run.baseline_reviews,
        baseline_disagreements=run.baseline_disagreements, restart=restart,
        watched=data.rolling_weeks, pairs=data.pairs[run.start:], result=run.result,
        false_alarm_weeks=cusum_arl(params, params.p0) / REVIEWS_PER_WEEK,
    )


def _estimated() -> bool:
    """Whether the CUSUM's parameters are estimated: none of TREUE_CUSUM_P0, _P1, _LIMIT set."""
    return (settings.TREUE_CUSUM_P0 is None and settings.TREUE_CUSUM_P1 is None
            and settings.TREUE_CUSUM_LIMIT is None)


def cusum_params(*, disagreements: int, reviews: int) -> tuple[CusumParams, bool]:
    """The CUSUM's parameters and whether they are estimated: each of TREUE_CUSUM_P0, _P1 and
    _LIMIT that is set wins over its estimate (p1 then defaults to p0 + CUSUM_SHIFT and the
    limit to the one for CUSUM_TARGET_WEEKS weeks between false alarms at that p0, p1)."""
    estimate = cusum_params_for(disagreements=disagreements, reviews=reviews)
    if _estimated():
        return estimate, True
    p0, p1, limit = (settings.TREUE_CUSUM_P0, settings.TREUE_CUSUM_P1,
                     settings.TREUE_CUSUM_LIMIT)
    p0 = estimate.p0 if p0 is None else p0
    if p1 is None:
        # As cusum_params_for sets it for an estimated p0.
        p1 = round(min(0.95, p0 + CUSUM_SHIFT), 4)
    try:
        if limit is None:
            limit = cusum_limit(
                p0, p1, arl=CUSUM_TARGET_WEEKS * REVIEWS_PER_WEEK)
        params = CusumParams(p0, p1, limit)
    except ValueError as e:
        raise ImproperlyConfigured(
            f"TREUE_CUSUM_P0/P1/LIMIT: {e} (p0 = {p0}, p1 = {p1}, limit = {limit}; "
            "an unset one is estimated for the use case)"
        ) from e
    return params, False


def _claim_pairs(subs: list[ReviewSubmission]) -> tuple[list[tuple[str, str]], list[int]]:
    """(manual, judge) label pairs for the judge's claims the experts labelled; claims the
    expert added have no judge label, and unreadable judge verdicts are no label at all."""
    claim_ids = [v["claim_id"] for s in subs for v in s.verdicts if v.get("claim_id")]
    judge = dict(Claim.objects.filter(pk__in=claim_ids).values_list("pk", "label"))
    pairs, groups = [], []
    for sub in subs:
        for verdict in sub.verdicts:
            label = judge.get(verdict.get("claim_id"))
            if label in LABELS and verdict.get("label") in LABELS:
                pairs.append((verdict["label"], label))
                groups.append(sub.item_id)
    return pairs, groups
