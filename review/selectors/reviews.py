"""Reads of the weekly review: an expert's queue, one item, the experts' submitted reviews as the
calibration page lists them, which answers an expert reviews blind, and the experts' latest
reviews for the dashboard.

The blind rule is `blind_answer_ids` here; the pages ask it through
`monitoring.selectors.access.blind_answer_ids`, which calls what review registered
(review/extensions.py)."""

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as AuthUser
from django.core.paginator import Page, Paginator
from django.db.models import Count, F, Q, QuerySet

from monitoring.extensions import ExpertReview
from monitoring.models import Claim, UseCase
from monitoring.selectors.access import Role, use_cases_for_user
from review.models import ReviewBatch, ReviewItem, ReviewSubmission

User = AuthUser | AnonymousUser


def blind_answer_ids(*, user: User) -> set[int]:
    """Answers whose judge results this user must not see yet: they wait, unsubmitted, in a
    weekly review of a use case the user is an expert for (blind review, against anchoring).
    A few dozen at most: a batch has 20 answers a week."""
    if not user.is_authenticated:
        return set()
    return set(
        ReviewItem.objects.filter(
            version=0, batch__use_case__in=use_cases_for_user(user=user, role=Role.EXPERT)
        )
        .values_list("answer_id", flat=True)
    )


def expert_reviews_latest(
    *, use_case_ids: Sequence[int], start: datetime, end: datetime
) -> list[ExpertReview]:
    """Each review item's latest submission (imported ones included) of the answers of these
    use cases created in [start, end), where the judge had scored the answer."""
    rows = (
        ReviewSubmission.objects.filter(
            item__batch__use_case_id__in=use_case_ids,
            item__answer__created_at__gte=start,
            item__answer__created_at__lt=end,
            automatic_score__isnull=False,
        )
        .order_by("item_id", "-version")
        .values_list(
            "item_id", "item__batch__use_case_id", "item__answer__created_at",
            "item__answer__flagged", "manual_score", "automatic_score", "item__answer_id",
        )
    )
    out: list[ExpertReview] = []
    seen: set[int] = set()
    for item_id, use_case_id, created, flagged, manual, automatic, answer_id in rows:
        if item_id in seen or automatic is None:
            continue  # an earlier version of an item already counted
        seen.add(item_id)
        out.append(ExpertReview(use_case_id, created, flagged, manual, automatic, answer_id))
    return out


def expert_use_cases(*, user: User) -> QuerySet[UseCase]:
    return use_cases_for_user(user=user, role=Role.EXPERT)


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
    return (after or todo or [None])[0]  # type: ignore[list-item]  # None: nothing left


@dataclasses.dataclass(frozen=True)
class ComparedClaim:
    position: int
    text: str
    added: bool
    manual: str
    judge: str | None  # None for a claim the expert added
    # The judge's evidence, where it gave one: (rank, source) of the chunks and a sentence why.
    evidence: tuple[tuple[int, str], ...] = ()
    reason: str = ""

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
    judge = {c.pk: c for c in item.judge_run.claims.all()}
    sources = dict(item.answer.chunks.values_list("rank", "source"))
    claims = []
    for v in verdicts:
        claim = None if v.added else judge.get(v.claim_id)
        claims.append(ComparedClaim(
            v.position, v.text, v.added, v.label, claim.label if claim else None,
            tuple((r, sources.get(r, "")) for r in claim.evidence_chunks) if claim else (),
            claim.reason if claim else "",
        ))
    manual, automatic = item.manual_score, item.judge_run.score
    difference, sides_differ = _difference(
        manual, automatic, threshold=item.batch.use_case.action_threshold
    )
    return Comparison(
        claims=claims,
        manual_score=manual,
        judge_score=automatic,
        judge_model=item.judge_run.judge_model,
        difference=difference,
        sides_differ=sides_differ,
    )


def _difference(
    manual: float | None, automatic: float | None, *, threshold: float
) -> tuple[float | None, bool]:
    """Expert − judge, and whether the two scores lie on different sides of the threshold."""
    if manual is None or automatic is None:
        return None, False
    return manual - automatic, (manual < threshold) != (automatic < threshold)


# -- the experts' submitted reviews, as the calibration page lists them ---------------------


@dataclasses.dataclass(frozen=True)
class SubmittedReview:
    """The latest submitted version of a review item, set beside the judge's verdicts: what
    the expert labelled, scored and wrote, as it was submitted (a later edit that is not yet
    submitted is not in it)."""

    item_id: int
    answer_id: int
    week: str  # the review week (its batch's); the answer is of the week before
    imported: bool  # brought in by import_expert_labels, not given on the review page
    reviewer: str | None  # None: the account was deleted since
    submitted_at: datetime
    version: int
    revising: bool  # reopened after this version: an expert is editing it again
    manual_score: float
    manual_abstention: bool
    judge_score: float | None  # the judge run's score when the expert submitted
    judge_model: str
    difference: float | None  # expert − judge
    sides_differ: bool  # on different sides of the use case's action threshold
    claims: list[ComparedClaim]
    decomposition_wrong: bool
    decomposition_problems: list[str]
    comment: str

    @property
    def disagreements(self) -> int:
        """Claims of the judge that the expert labelled differently."""
        return sum(1 for c in self.claims if c.judge is not None and not c.agrees)

    @property
    def judged_claims(self) -> int:
        return sum(1 for c in self.claims if c.judge is not None)


@dataclasses.dataclass(frozen=True)
class SubmittedReviewPage:
    page: Page  # the paginator's page: its number and neighbours
    reviews: list[SubmittedReview]


def _latest_submissions_for(*, use_case: UseCase, user: User) -> QuerySet[ReviewSubmission]:
    """Each reviewed item's latest submission (a submission's version is the item's count of
    submissions, so the latest has the item's), newest first. An answer this user reviews
    blind is left out, whichever batch its review came from: the blind rule holds here as on
    every other page."""
    return (
        ReviewSubmission.objects.filter(
            item__batch__use_case=use_case, version=F("item__version")
        )
        .exclude(item__answer_id__in=blind_answer_ids(user=user))
        .select_related("item__batch", "item__judge_run", "reviewer")
        .order_by("-submitted_at", "-pk")
    )


def _submitted_reviews(
    subs: Sequence[ReviewSubmission], *, threshold: float
) -> list[SubmittedReview]:
    # Claims the expert added have no judge label; the judge's own are looked up in one go.
    claim_ids = [v["claim_id"] for s in subs for v in s.verdicts if v.get("claim_id")]
    judge = dict(Claim.objects.filter(pk__in=claim_ids).values_list("pk", "label"))
    out = []
    for sub in subs:
        item = sub.item
        claims = [
            ComparedClaim(
                v["position"], v["text"], bool(v.get("added")), v["label"],
                None if v.get("added") else judge.get(v.get("claim_id")),
            )
            for v in sub.verdicts
        ]
        difference, sides_differ = _difference(
            sub.manual_score, sub.automatic_score, threshold=threshold
        )
        out.append(SubmittedReview(
            item_id=item.pk, answer_id=item.answer_id, week=item.batch.week,
            imported=sub.imported or item.batch.imported,
            reviewer=sub.reviewer.get_username() if sub.reviewer else None,
            submitted_at=sub.submitted_at, version=sub.version,
            revising=item.status != ReviewItem.Status.SUBMITTED,
            manual_score=sub.manual_score, manual_abstention=sub.manual_abstention,
            judge_score=sub.automatic_score, judge_model=item.judge_run.judge_model,
            difference=difference, sides_differ=sides_differ, claims=claims,
            decomposition_wrong=sub.decomposition_wrong,
            decomposition_problems=list(sub.decomposition_problems),
            comment=sub.comment,
        ))
    return out


def submitted_reviews_page(
    *, use_case: UseCase, user: User, page: str | int | None, per_page: int
) -> SubmittedReviewPage:
    """One page of the use case's submitted reviews, newest first, as `user` may see them
    (the caller has checked the use case with `calibration_use_cases`)."""
    found = Paginator(_latest_submissions_for(use_case=use_case, user=user),
                      per_page).get_page(page)
    return SubmittedReviewPage(
        page=found,
        reviews=_submitted_reviews(list(found.object_list),
                                   threshold=use_case.action_threshold),
    )


def submitted_review_get(*, use_case: UseCase, user: User, item_id: int) -> SubmittedReview | None:
    """The latest submitted review of one item of the use case; None when it was never
    submitted, belongs to another use case, or its answer is one `user` reviews blind."""
    sub = _latest_submissions_for(use_case=use_case, user=user).filter(item_id=item_id).first()
    if sub is None:
        return None
    return _submitted_reviews([sub], threshold=use_case.action_threshold)[0]


# -- the drift CUSUM of a use case ------------------------------------------------------------


