"""Writes of the weekly review: creating batches, saving and submitting an expert's work, and
the calibration alarms that follow from it."""

import dataclasses
import logging
import time as time_module
from collections.abc import Mapping, Sequence
from datetime import datetime, time

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone, translation
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from alarms.models import Alarm
from alarms.services import alarm_clear, alarm_raise
from common.domain.weeks import format_week, parse_week, shift_week, week_monday, week_of
from jobs import framework as jobs
from judging.domain.scoring import score_labels
from monitoring.models import Answer, UseCase
from review.domain import batches, calibration
from review.models import ReviewBatch, ReviewItem, ReviewSubmission, ReviewVerdict
from review.selectors.calibration import (
    CUSUM_KEY,
    calibration_data,
    drift_alarms_of,
    drift_restart,
)

logger = logging.getLogger(__name__)

LABELS = {choice.value for choice in ReviewVerdict.Label}
# (label, key): the keys 1/2/3 choose a label on the review page.
LABELS_ORDERED = (("GEDECKT", "1"), ("TEILWEISE", "2"), ("UNGEDECKT", "3"))
DECOMPOSITION_PROBLEMS = ("missing", "merged", "invented", "not_self_contained")
MAX_ADDED_CLAIM_CHARS = 2000
MAX_COMMENT_CHARS = 10000


class ReviewError(ValueError):
    """The expert's input cannot be taken as it is; the message says why, in words."""


class ReviewConflict(ReviewError):
    """The item changed since the expert's page showed it (another expert saved or submitted
    it): taking the input would overwrite that unseen. Nothing of the input was taken."""


def _who(user) -> str:
    return user.get_username() if user is not None else _("jemand")


def item_revision(item: ReviewItem) -> str:
    """The state of an item's work as the page was shown: it changes with every save, so a save
    made from an older page (another expert, another window) is told apart."""
    return item.updated_at.isoformat()


@dataclasses.dataclass(frozen=True)
class BatchResult:
    use_case: UseCase
    batch: ReviewBatch | None
    created: bool
    available: int


def current_week(*, now: datetime | None = None) -> str:
    return week_of(timezone.localtime(now).date() if now else timezone.localdate())


def _week_start(week: str) -> datetime:
    return datetime.combine(
        week_monday(week), time.min, tzinfo=timezone.get_current_timezone()
    )


def review_batch_create(*, use_case: UseCase, week: str) -> BatchResult:
    """The batch of `week` for the use case, drawn from the week before; created at most once.

    Nothing is created when the week before has no judged answer (running the command again
    once the judge has caught up creates it then)."""
    existing = ReviewBatch.objects.filter(use_case=use_case, week=week, imported=False).first()
    if existing is not None:
        return BatchResult(use_case, existing, False, existing.available)
    source = shift_week(week, -1)
    start, end = _week_start(source), _week_start(week)
    rows = (
        Answer.objects.filter(
            use_case=use_case, created_at__gte=start, created_at__lt=end,
            status=Answer.Status.JUDGED, current_run__isnull=False, score__isnull=False,
            anonymised_at__isnull=True,  # a batch for a week past retention: nothing to read
        )
        # Already reviewed elsewhere (imported labels): reviewing it again would count it twice.
        .exclude(review_items__batch__imported=True)
        .values_list("id", "in_random_sample", "current_run_id")
    )
    runs = {answer_id: run_id for answer_id, _, run_id in rows}
    candidates = [batches.Candidate(answer_id, random) for answer_id, random, _ in rows]
    drawn = batches.draw_batch(
        candidates, size=use_case.review_batch_size, seed=f"{use_case.slug}:{week}"
    )
    if not drawn:
        return BatchResult(use_case, None, False, 0)
    try:
        with transaction.atomic():
            batch = ReviewBatch.objects.create(
                use_case=use_case, week=week, source_week=source,
                target_size=use_case.review_batch_size, available=len(candidates),
                due_at=_week_start(shift_week(week, 1)),
            )
            ReviewItem.objects.bulk_create(
                ReviewItem(
                    batch=batch, answer_id=d.answer_id, judge_run_id=runs[d.answer_id],
                    position=position, stratum=d.stratum,
                )
                for position, d in enumerate(drawn, start=1)
            )
    except IntegrityError:
        # Another process created the week's batch in the meantime: the unique constraint
        # makes sure there is only one.
        batch = ReviewBatch.objects.get(use_case=use_case, week=week, imported=False)
        return BatchResult(use_case, batch, False, batch.available)
    return BatchResult(use_case, batch, True, len(candidates))


def review_batches_create(*, week: str | None = None) -> list[BatchResult]:
    """One batch per active use case for `week` (default: the current ISO week)."""
    week = format_week(*parse_week(week)) if week is not None else current_week()
    return [
        review_batch_create(use_case=use_case, week=week)
        for use_case in UseCase.objects.filter(active=True).order_by("slug")
    ]


def wait_for_judge(*, week: str, seconds: float, poll: float = 2.0) -> int:
    """Wait until no sampled answer of the week before `week` waits for the judge, at most
    `seconds`; returns how many still wait."""
    source = shift_week(week, -1)
    waiting = Answer.objects.filter(
        use_case__active=True,
        created_at__gte=_week_start(source), created_at__lt=_week_start(week),
        status__in=[Answer.Status.QUEUED, Answer.Status.JUDGING],
    )
    deadline = time_module.monotonic() + seconds
    while (count := waiting.count()) and time_module.monotonic() < deadline:
        time_module.sleep(poll)
    return count


@dataclasses.dataclass(frozen=True)
class ItemInput:
    """What the review form sends; every field optional, so autosave can send a part."""

    labels: Mapping[int, str] = dataclasses.field(default_factory=dict)  # position → label
    decomposition_wrong: bool | None = None
    problems: Sequence[str] | None = None
    comment: str | None = None
    new_claim: str = ""
    remove_claim: int | None = None
    # item_revision of the page the input was made on; None: not checked.
    revision: str | None = None


def problem_choices() -> list[tuple[str, str]]:
    """The ways a claim decomposition can be wrong, with their names in words."""
    names = {
        "missing": _("eine Aussage fehlt"),
        "merged": _("Aussagen zusammengelegt"),
        "invented": _("Aussage steht nicht in der Antwort"),
        "not_self_contained": _("Aussage nicht für sich verständlich"),
    }
    return [(key, names[key]) for key in DECOMPOSITION_PROBLEMS]


def bias_tolerance() -> float:
    return settings.TREUE_CALIBRATION_BIAS_TOLERANCE


def _check_input(data: ItemInput) -> None:
    for position, label in data.labels.items():
        if label and label not in LABELS:
            raise ReviewError(_("Unbekanntes Urteil „%(label)s“ für Aussage %(pos)s.")
                              % {"label": label, "pos": position})
    if data.problems is not None:
        unknown = set(data.problems) - set(DECOMPOSITION_PROBLEMS)
        if unknown:
            raise ReviewError(_("Unbekannte Art von Zerlegungsfehler: %(kinds)s")
                              % {"kinds": ", ".join(sorted(unknown))})
    if data.comment is not None and len(data.comment) > MAX_COMMENT_CHARS:
        raise ReviewError(_("Der Kommentar ist zu lang (höchstens %(n)s Zeichen).")
                          % {"n": MAX_COMMENT_CHARS})
    if len(data.new_claim) > MAX_ADDED_CLAIM_CHARS:
        raise ReviewError(_("Die neue Aussage ist zu lang (höchstens %(n)s Zeichen).")
                          % {"n": MAX_ADDED_CLAIM_CHARS})


def review_item_open(*, item: ReviewItem) -> list[ReviewVerdict]:
    """The item's verdict rows, created from the judge run's claims on first opening."""
    verdicts = list(item.verdicts.select_related("claim").order_by("position"))
    if verdicts or item.version:
        return verdicts
    claims = item.judge_run.claims.order_by("position")
    ReviewVerdict.objects.bulk_create(
        [ReviewVerdict(item=item, claim=c, position=i) for i, c in enumerate(claims, start=1)],
        ignore_conflicts=True,  # two tabs opening the item at once create the rows once
    )
    return list(item.verdicts.select_related("claim").order_by("position"))


@transaction.atomic
def review_item_save(*, item: ReviewItem, user, data: ItemInput) -> ReviewItem:
    """Save the expert's work as it goes. Saving a submitted item starts a new version."""
    _check_input(data)
    item = ReviewItem.objects.select_for_update().get(pk=item.pk)
    if item.status == ReviewItem.Status.SUBMITTED and item.reviewer_id == user.pk:
        # The second request of a double click on "Abgeben", held here until the first one had
        # submitted: what it carries was submitted already (review_item_submit then does nothing).
        return item
    if data.revision is not None and data.revision != item_revision(item):
        # Two experts (or two windows) saving by turns would overwrite each other unnoticed.
        raise ReviewConflict(
            _("Diese Antwort wurde inzwischen anderswo geändert (%(when)s), von jemand anderem "
              "oder in einem anderen Fenster. Ihre letzte Eingabe wurde nicht gespeichert; laden "
              "Sie die Seite neu, um mit dem aktuellen Stand weiterzuarbeiten.")
            % {"when": date_format(timezone.localtime(item.updated_at), "DATETIME_FORMAT")}
        )
    review_item_open(item=item)
    verdicts = {v.position: v for v in item.verdicts.all()}
    for position, label in data.labels.items():
        verdict = verdicts.get(position)
        if verdict is None:
            raise ReviewError(_("Aussage %(pos)s gibt es hier nicht.") % {"pos": position})
        if verdict.label != label:
            verdict.label = label
            verdict.save(update_fields=["label", "updated_at"])
    if data.remove_claim is not None:
        verdict = verdicts.get(data.remove_claim)
        if verdict is None or not verdict.added:
            raise ReviewError(_("Nur selbst ergänzte Aussagen können entfernt werden."))
        verdict.delete()
    text = data.new_claim.strip()
    if text:
        top = item.verdicts.aggregate(top=Max("position"))["top"] or 0
        ReviewVerdict.objects.create(item=item, position=top + 1, added_text=text)
    if data.problems is not None:
        item.decomposition_problems = [p for p in DECOMPOSITION_PROBLEMS if p in data.problems]
    has_added = item.verdicts.filter(claim__isnull=True).exists()
    if has_added and "missing" not in item.decomposition_problems:
        # A claim the expert had to add is a claim the decomposition missed.
        item.decomposition_problems = [
            p for p in DECOMPOSITION_PROBLEMS if p in {*item.decomposition_problems, "missing"}
        ]
    if data.decomposition_wrong is not None:
        item.decomposition_wrong = data.decomposition_wrong
    # Naming a way in which the decomposition is wrong says that it is wrong.
    if item.decomposition_problems:
        item.decomposition_wrong = True
    if data.comment is not None:
        item.comment = data.comment
    if item.status == ReviewItem.Status.OPEN:
        item.status = ReviewItem.Status.IN_PROGRESS
    if item.reviewer_id is None:
        item.reviewer = user
    item.save()
    return item


@transaction.atomic
def review_item_reopen(*, item: ReviewItem, user) -> ReviewItem:
    """Edit a submitted item again; the submitted version stays in the audit trail."""
    item = ReviewItem.objects.select_for_update().get(pk=item.pk)
    if item.status == ReviewItem.Status.SUBMITTED:
        item.status = ReviewItem.Status.IN_PROGRESS
        item.reviewer = user
        item.save(update_fields=["status", "reviewer", "updated_at"])
    return item


def review_item_submit(*, item: ReviewItem, user) -> ReviewItem:
    """Submit the item: every claim needs a label. Writes a new immutable version."""
    with transaction.atomic():
        item = (ReviewItem.objects.select_for_update(of=("self",))
                .select_related("judge_run").get(pk=item.pk))
        if item.status == ReviewItem.Status.SUBMITTED:
            if item.reviewer_id == user.pk:
                # A double click or a resent form: the submitted version stands, nothing new.
                return item
            raise ReviewConflict(
                _("%(who)s hat diese Antwort inzwischen abgegeben (Fassung %(v)s). Ihre Eingabe "
                  "wurde nicht übernommen; mit „Bearbeiten“ legen Sie eine neue Fassung an.")
                % {"who": _who(item.reviewer), "v": item.version}
            )
        verdicts = review_item_open(item=item)
        missing = [v.position for v in verdicts if not v.label]
        if missing:
            raise ReviewError(_("Noch ohne Urteil: Aussage %(list)s.")
                              % {"list": ", ".join(str(p) for p in missing)})
        result = score_labels([v.label for v in verdicts])
        assert result.score is not None  # every claim has a label, and every label scores
        now = timezone.now()
        item.version += 1
        item.status = ReviewItem.Status.SUBMITTED
        item.reviewer = user
        item.submitted_at = now
        item.manual_score = result.score
        item.manual_abstention = result.abstention
        item.save()
        ReviewSubmission.objects.create(
            item=item, version=item.version, reviewer=user, submitted_at=now,
            manual_score=result.score, manual_abstention=result.abstention,
            automatic_score=item.judge_run.score,
            verdicts=[
                {
                    "position": v.position, "claim_id": v.claim_id,
                    "text": v.text,
                    "label": v.label, "added": v.added,
                }
                for v in verdicts
            ],
            decomposition_wrong=item.decomposition_wrong,
            decomposition_problems=item.decomposition_problems,
            comment=item.comment,
        )
        batch = ReviewBatch.objects.select_for_update().get(pk=item.batch_id)
        if batch.finished_at is None and not batch.items.filter(version=0).exists():
            batch.finished_at = now
            batch.save(update_fields=["finished_at"])
        review_alarms_check_later(use_case_id=batch.use_case_id)
    return item


# The task that checks one use case's review alarms (review/tasks.py), published by name.
REVIEW_ALARMS_TASK = "review.tasks.check_use_case_review_alarms"


def review_alarms_check_later(*, use_case_id: int) -> None:
    """Once the submit commits, a worker checks the use case's review alarms: the drift check
    (its CUSUM over half a year of reviews, a mail) stays out of the expert's request. A message
    the broker loses costs an hour at most: `check_review_alarms` checks every use case hourly."""
    transaction.on_commit(
        lambda: jobs.publish_each(REVIEW_ALARMS_TASK, [use_case_id], what="review alarm check")
    )


def review_alarms_check(*, use_case: UseCase, now: datetime | None = None) -> list[Alarm]:
    """Raise (or clear) the review alarms of one use case: drift, decomposition, missed review.

    Their messages are stored in the site's language, as they are mailed, whichever expert's
    request (in whichever language) raised them."""
    with translation.override(settings.LANGUAGE_CODE):
        return _review_alarms_check(use_case=use_case, now=now)


def _review_alarms_check(*, use_case: UseCase, now: datetime | None) -> list[Alarm]:
    now = now or timezone.now()
    raised: list[Alarm | None] = []
    data = calibration_data(use_case=use_case, now=now)
    week = data.latest_week
    rolling = data.rolling
    keep: set[str] = set()  # the drift alarms that stay open

    # Drift by the CUSUM over "expert and judge on different sides of the action threshold",
    # from its last restart on. A crossing in a watched week raises an alarm that records the
    # restart: the next review week. The next drift is measured from there, with the in-control
    # rate estimated anew, so the reviews that raised one alarm cannot raise another.
    # At most once per watched week: each crossing moves the restart past it
    # (`review.domain.drift.drift_alarms`, which the bench replays week after week).
    for crossing in drift_alarms_of(
            use_case=use_case, data=data, restart=drift_restart(use_case=use_case)):
        crossed, restart = crossing.week, crossing.restart
        params = crossing.run.params
        raised.append(alarm_raise(
            use_case=use_case, kind=Alarm.Kind.DRIFT, key=f"{CUSUM_KEY}{crossed}",
            text=[(gettext_noop(
                "Kalibrierungsdrift: Prüfmodell und Fachexperten liegen seit %(week)s "
                "auffällig oft auf verschiedenen Seiten der Handlungsschwelle (CUSUM: "
                "erwartet sind hier bis %(p0).0f %% der geprüften Antworten, gewarnt wird bei "
                "%(p1).0f %%)."
            ), {"week": crossed, "p0": 100 * params.p0, "p1": 100 * params.p1})],
            details={
                "cusum": crossing.statistic, "week": crossed,
                "source_week": shift_week(crossed, -1), "restart": restart,
                "p0": params.p0, "p1": params.p1, "limit": params.limit,
                "baseline_reviews": crossing.run.baseline_reviews,
            },
        ))
    # A CUSUM alarm stays open while its week is watched (the last 4 weeks).
    keep |= {f"{CUSUM_KEY}{w}" for w in data.rolling_weeks}

    # Drift by bias: evidence that the judge's bias over the last 4 weeks lies beyond the
    # tolerance, a one-sided test on the bias stratified by the answers' flag (flagged top-ups
    # of a batch weighted by their share of the weeks' answers).
    tolerance = bias_tolerance()
    test = calibration.bias_beyond_tolerance(
        sizes=data.sizes_of(data.rolling_weeks), reviews=data.reviews(data.rolling_weeks),
        tolerance=tolerance,
    )
    if test.beyond:
        assert test.bias is not None and test.low is not None and test.high is not None
        # One alarm (and one mail) while the bias stays beyond the tolerance, named by the
        # week it was first found in; a new one once it has come back and goes off again.
        episode = Alarm.objects.filter(
            use_case=use_case, kind=Alarm.Kind.DRIFT, key__startswith="bias:",
            cleared_at__isnull=True,
        ).values_list("key", flat=True).first()
        key = episode or f"bias:{week}"
        keep.add(key)
        if episode is None:
            bound = (f"≥ {test.low:+.2f}" if test.direction == "strict"
                     else f"≤ {test.high:+.2f}")
            raised.append(alarm_raise(
                use_case=use_case, kind=Alarm.Kind.DRIFT, key=key,
                text=[(gettext_noop(
                    "Kalibrierungsdrift: In den letzten 4 Wochen weicht die manuelle Bewertung "
                    "im Mittel um %(bias)+.2f von der automatischen ab (nach Stichprobe "
                    "gewichtet, n = %(n)s); mit 95 %% Sicherheit %(bound)s, jenseits der "
                    "Toleranz von ±%(tolerance).2f."
                ), {"bias": test.bias, "n": test.n, "bound": bound, "tolerance": tolerance})],
                details={"bias": test.bias, "low": test.low, "high": test.high, "n": test.n,
                         "tolerance": tolerance, "direction": test.direction},
            ))
    for key in Alarm.objects.filter(
        use_case=use_case, kind=Alarm.Kind.DRIFT, cleared_at__isnull=True
    ).exclude(key__in=keep).values_list("key", flat=True):
        alarm_clear(use_case=use_case, kind=Alarm.Kind.DRIFT, key=key)

    # Decomposition quality over the last 4 weeks.
    share = rolling.decomposition_wrong_share
    if (share is not None and rolling.n >= settings.TREUE_DECOMPOSITION_MIN_REVIEWS
            and share > settings.TREUE_DECOMPOSITION_ALARM_SHARE):
        raised.append(alarm_raise(
            use_case=use_case, kind=Alarm.Kind.DECOMPOSITION, key=week,
            text=[(gettext_noop(
                "Die Zerlegung in Aussagen ist bei %(share).0f %% der geprüften Antworten der "
                "letzten 4 Wochen falsch (n = %(n)s): Prüf-Prompt oder Prüfmodell ansehen."
            ), {"share": 100 * share, "n": rolling.n})],
            details={"share": share, "n": rolling.n},
        ))
    else:
        alarm_clear(use_case=use_case, kind=Alarm.Kind.DECOMPOSITION)

    # Missed review: a batch past its due date that is not finished.
    for batch in ReviewBatch.objects.filter(use_case=use_case, imported=False):
        if batch.finished_at is None and batch.due_at <= now:
            done = batch.items.exclude(version=0).count()
            raised.append(alarm_raise(
                use_case=use_case, kind=Alarm.Kind.MISSED_REVIEW, key=batch.week,
                text=[(gettext_noop(
                    "Die Wochenprüfung %(week)s ist nicht rechtzeitig fertig geworden: "
                    "%(done)s von %(total)s Antworten geprüft."
                ), {"week": batch.week, "done": done, "total": batch.items.count()})],
                details={"done": done},
            ))
        elif batch.finished_at is not None:
            alarm_clear(use_case=use_case, kind=Alarm.Kind.MISSED_REVIEW, key=batch.week)
    return [a for a in raised if a is not None]


def review_alarms_check_for(*, use_case_id: int) -> list[Alarm]:
    """The review alarms of one use case by its id (the task after a submit); none for a use
    case that is gone or inactive."""
    use_case = UseCase.objects.filter(pk=use_case_id, active=True).first()
    return [] if use_case is None else review_alarms_check(use_case=use_case)


def review_alarms_check_all(*, now: datetime | None = None) -> int:
    count = 0
    for use_case in UseCase.objects.filter(active=True):
        count += len(review_alarms_check(use_case=use_case, now=now))
    return count
