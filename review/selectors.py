"""Reads of the weekly review: an expert's queue, one item, the calibration figures.

Which answers an expert must not see the judge's verdicts of yet is answered in
`monitoring.selectors.answers.blind_answer_ids`, since the monitoring pages ask it."""

import dataclasses
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from monitoring.models import Claim, UseCase
from review.domain import batches, calibration
from review.models import ReviewBatch, ReviewItem, ReviewSubmission

CALIBRATION_WEEKS = 26  # the scatter, weekly bias and CUSUM look back half a year
ROLLING_WEEKS = 4
KAPPA_WEEKS = 13  # "over a quarter"

User = AbstractBaseUser | AnonymousUser


def expert_use_cases(*, user: User) -> QuerySet[UseCase]:
    if not user.is_authenticated:
        return UseCase.objects.none()
    return UseCase.objects.filter(experts=user)


def batches_for_expert(*, user: User) -> QuerySet[ReviewBatch]:
    return (
        ReviewBatch.objects.filter(use_case__in=expert_use_cases(user=user), imported=False)
        .select_related("use_case")
        .annotate(
            total=Count("items"),
            done=Count("items", filter=~Q(items__version=0)),
        )
        .order_by("-week", "use_case__name")
    )


def item_get_for_expert(*, user: User, pk: int) -> ReviewItem | None:
    return (
        ReviewItem.objects.filter(pk=pk, batch__use_case__in=expert_use_cases(user=user))
        .select_related("batch__use_case", "answer", "judge_run", "reviewer")
        .first()
    )


def batch_items(*, batch: ReviewBatch) -> list[ReviewItem]:
    return list(batch.items.select_related("answer", "reviewer").order_by("position"))


def next_item(*, item: ReviewItem) -> ReviewItem | None:
    """The next item of the batch that still needs work, after this one, wrapping around."""
    todo = list(
        ReviewItem.objects.filter(batch_id=item.batch_id, version=0)
        .exclude(pk=item.pk).order_by("position")
    )
    after = [i for i in todo if i.position > item.position]
    return (after or todo or [None])[0]


@dataclasses.dataclass(frozen=True)
class ComparedClaim:
    position: int
    text: str
    added: bool
    manual: str
    judge: str | None  # None for a claim the expert added

    @property
    def agrees(self) -> bool:
        return self.judge == self.manual


@dataclasses.dataclass(frozen=True)
class Comparison:
    claims: list[ComparedClaim]
    manual_score: float | None
    judge_score: float | None
    judge_model: str
    difference: float | None
    sides_differ: bool


def item_comparison(*, item: ReviewItem, verdicts: list) -> Comparison:
    """The expert's verdicts beside the judge's, for an item that was submitted."""
    assert item.status == ReviewItem.Status.SUBMITTED, "blind until submitted"
    judge = {c.pk: c.label for c in item.judge_run.claims.all()}
    claims = [
        ComparedClaim(
            v.position, v.added_text if v.added else v.claim.text, v.added, v.label,
            None if v.added else judge.get(v.claim_id),
        )
        for v in verdicts
    ]
    manual, automatic = item.manual_score, item.judge_run.score
    threshold = item.batch.use_case.action_threshold
    both = manual is not None and automatic is not None
    return Comparison(
        claims=claims,
        manual_score=manual,
        judge_score=automatic,
        judge_model=item.judge_run.judge_model,
        difference=manual - automatic if both else None,
        sides_differ=both and ((manual < threshold) != (automatic < threshold)),
    )


def may_view_calibration(*, user: User, use_case: UseCase) -> bool:
    if not user.is_authenticated:
        return False
    if user.is_staff:
        return True
    return (
        use_case.team_leads.filter(pk=user.pk).exists()
        or use_case.experts.filter(pk=user.pk).exists()
    )


def calibration_use_cases(*, user: User) -> QuerySet[UseCase]:
    if not user.is_authenticated:
        return UseCase.objects.none()
    if user.is_staff:
        return UseCase.objects.all()
    return UseCase.objects.filter(Q(experts=user) | Q(team_leads=user)).distinct()


@dataclasses.dataclass(frozen=True)
class Point:
    answer_id: int
    item_id: int
    week: str
    manual: float
    automatic: float
    decomposition_wrong: bool


@dataclasses.dataclass(frozen=True)
class CalibrationData:
    weeks: list[str]  # the window, oldest first
    latest_week: str
    points: list[Point]  # in review order (week, then submission time)
    pairs: list[calibration.ReviewedPair]
    weekly: dict[str, calibration.BiasSummary]
    rolling: calibration.BiasSummary
    kappa: calibration.Kappa
    kappa_claims: int


def _latest_submissions(*, use_case: UseCase, weeks: list[str]) -> list[ReviewSubmission]:
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


def calibration_data(*, use_case: UseCase, now: datetime | None = None) -> CalibrationData:
    now = now or timezone.now()
    latest = batches.week_of(timezone.localtime(now).date())
    weeks = [batches.shift_week(latest, -k) for k in range(CALIBRATION_WEEKS - 1, -1, -1)]
    subs = [
        s for s in _latest_submissions(use_case=use_case, weeks=weeks)
        if s.automatic_score is not None
    ]
    points = [
        Point(s.item.answer_id, s.item_id, s.item.batch.week, s.manual_score,
              s.automatic_score, s.decomposition_wrong)
        for s in subs
    ]
    pairs = [
        calibration.ReviewedPair(p.manual, p.automatic, p.week, p.decomposition_wrong)
        for p in points
    ]
    threshold = use_case.action_threshold
    weekly = calibration.weekly_summaries(pairs, action_threshold=threshold)
    rolling = calibration.rolling_summary(
        pairs, weeks=weeks[-ROLLING_WEEKS:], action_threshold=threshold
    )
    kappa_weeks = set(weeks[-KAPPA_WEEKS:])
    claim_pairs, groups = _claim_pairs([s for s in subs if s.item.batch.week in kappa_weeks])
    return CalibrationData(
        weeks=weeks,
        latest_week=latest,
        points=points,
        pairs=pairs,
        weekly=weekly,
        rolling=rolling,
        kappa=calibration.kappa_with_interval(claim_pairs, groups=groups),
        kappa_claims=len(claim_pairs),
    )


def _claim_pairs(subs: list[ReviewSubmission]) -> tuple[list[tuple[str, str]], list[int]]:
    """(manual, judge) label pairs for the judge's claims the experts labelled; claims the
    expert added have no judge label, and unreadable judge verdicts are no label at all."""
    claim_ids = [v["claim_id"] for s in subs for v in s.verdicts if v.get("claim_id")]
    judge = dict(Claim.objects.filter(pk__in=claim_ids).values_list("pk", "label"))
    pairs, groups = [], []
    for sub in subs:
        for verdict in sub.verdicts:
            label = judge.get(verdict.get("claim_id"))
            if label in calibration.LABELS and verdict.get("label") in calibration.LABELS:
                pairs.append((verdict["label"], label))
                groups.append(sub.item_id)
    return pairs, groups
