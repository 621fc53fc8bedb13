"""Expert scores from elsewhere, written as review submissions: the work behind
`python manage.py import_expert_labels FILE --use-case SLUG --reviewer USER`.

Each readable line (see `review.domain.imports`) becomes one submitted review of the answer,
marked as imported, in the use case's imported batch of the week the answer would have been
reviewed (the week after it was given). The calibration page, its alarms and the expert-scale
estimate read it like a review given on the page. The stratum is the answer's own (random
sample or flagged), so an estimate can weight it by its inclusion probability.

Every line is its own transaction: a bad line is reported with its number and costs nothing
else. An answer already reviewed (imported before, or submitted on the page) is left as it is
and reported, so running a file twice imports nothing twice.

Reviews imported move the use case's experts' scale, calibration and its alarms: they are
checked once the import is done (`monitoring.extensions.alarms_check_soon`), not an hour later.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import datetime, time

from django.contrib.auth.models import User
from django.db import DataError, IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from common.domain.weeks import shift_week, week_monday, week_of
from judging.domain.scoring import score_labels
from monitoring import extensions
from monitoring.models import Answer, JudgeRun, UseCase
from review.domain.imports import LabelLine, LineError, OverlongLine, parse_lines
from review.models import ReviewBatch, ReviewItem, ReviewSubmission, ReviewVerdict


@dataclasses.dataclass
class ImportReport:
    imported: list[int] = dataclasses.field(default_factory=list)  # line numbers
    already: list[tuple[int, str]] = dataclasses.field(default_factory=list)  # (line, why)
    errors: list[LineError] = dataclasses.field(default_factory=list)


class _Refused(Exception):
    def __init__(self, message: str, *, already: bool = False) -> None:
        super().__init__(message)
        self.already = already


def expert_labels_import(
    *, use_case: UseCase, reviewer: User, lines: Iterable[str | bytes | OverlongLine]
) -> ImportReport:
    report = ImportReport()
    for parsed in parse_lines(lines):
        if isinstance(parsed, LineError):
            report.errors.append(parsed)
            continue
        try:
            with transaction.atomic():
                _import_line(parsed, use_case=use_case, reviewer=reviewer)
        except _Refused as e:
            if e.already:
                report.already.append((parsed.line, str(e)))
            else:
                report.errors.append(LineError(parsed.line, str(e), parsed.external_id))
        except IntegrityError:
            # The same answer twice in one file, or a review written meanwhile.
            report.already.append((parsed.line, "already reviewed"))
        except DataError as e:
            # A value the database cannot hold that the line's checks let through: this line
            # is refused, the file goes on.
            report.errors.append(LineError(parsed.line, f"the database refused it: {e}".strip(),
                                           parsed.external_id))
        else:
            report.imported.append(parsed.line)
    if report.imported:
        extensions.alarms_check_soon(use_case_id=use_case.pk)
    return report


def _answer(line: LabelLine, use_case: UseCase) -> Answer:
    matches = list(
        Answer.objects.filter(external_id=line.external_id)
        .select_related("use_case", "current_run")[:50]
    )
    here = [a for a in matches if a.use_case_id == use_case.pk]
    if not matches:
        raise _Refused(f"no answer with external_id {line.external_id!r}")
    if not here:
        raise _Refused(f"the answer {line.external_id!r} belongs to another use case")
    if len(here) > 1:
        raise _Refused(
            f"{len(here)} answers of this use case have external_id {line.external_id!r} "
            "(sent by different services)"
        )
    return here[0]


def _import_line(line: LabelLine, *, use_case: UseCase, reviewer: User) -> None:
    answer = _answer(line, use_case)
    run = answer.current_run
    if run is None or run.status != JudgeRun.Status.SUCCEEDED or run.score is None:
        raise _Refused("the answer has no judge score yet (an expert score is set against it)")
    items = list(ReviewItem.objects.filter(answer=answer).select_related("batch"))
    if any(i.version > 0 for i in items):
        raise _Refused("already reviewed", already=True)
    if items:
        raise _Refused(
            f"the answer waits in the open review of week {items[0].batch.week}: "
            "review it there"
        )
    claims = list(run.claims.order_by("position"))
    if line.labels is not None:
        if len(line.labels) != len(claims):
            raise _Refused(
                f"{len(line.labels)} labels for the judge's {len(claims)} claims "
                "(one label per claim, in the judge's order)"
            )
        result = score_labels(list(line.labels))
        score, abstention = result.score, result.abstention
    else:
        score, abstention = line.score, False
    assert score is not None  # labels are checked words: every one scores

    source_week = week_of(timezone.localtime(answer.created_at).date())
    week = shift_week(source_week, 1)
    batch = _imported_batch(use_case=use_case, week=week, source_week=source_week)
    position = (batch.items.aggregate(top=Max("position"))["top"] or 0) + 1
    now = timezone.now()
    item = ReviewItem.objects.create(
        batch=batch, answer=answer, judge_run=run, position=position,
        stratum=(ReviewItem.Stratum.RANDOM if answer.in_random_sample
                 else ReviewItem.Stratum.FLAGGED),
        status=ReviewItem.Status.SUBMITTED, reviewer=reviewer, version=1, submitted_at=now,
        manual_score=score, manual_abstention=abstention,
    )
    verdicts = []
    if line.labels is not None:
        ReviewVerdict.objects.bulk_create(
            ReviewVerdict(item=item, claim=claim, position=claim.position, label=label)
            for claim, label in zip(claims, line.labels, strict=True)
        )
        verdicts = [
            {"position": c.position, "claim_id": c.pk, "text": c.text, "label": label,
             "added": False}
            for c, label in zip(claims, line.labels, strict=True)
        ]
    ReviewSubmission.objects.create(
        item=item, version=1, reviewer=reviewer, submitted_at=now, manual_score=score,
        manual_abstention=abstention, automatic_score=run.score, verdicts=verdicts,
        imported=True,
    )
    ReviewBatch.objects.filter(pk=batch.pk).update(finished_at=now)


def _imported_batch(*, use_case: UseCase, week: str, source_week: str) -> ReviewBatch:
    """The week's batch of imported reviews, locked for the next position."""
    batch, _ = ReviewBatch.objects.get_or_create(
        use_case=use_case, week=week, imported=True,
        defaults={
            "source_week": source_week, "target_size": 0,
            "due_at": datetime.combine(week_monday(shift_week(week, 1)),
                                       time.min, tzinfo=timezone.get_current_timezone()),
        },
    )
    return ReviewBatch.objects.select_for_update().get(pk=batch.pk)
