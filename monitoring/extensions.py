"""What other apps contribute to monitoring's work on an answer, without monitoring importing them.

Monitoring anonymises old answers (retention), exports one answer's full record (GDPR Art. 15),
hides the judge's verdicts from an expert who reviews an answer blind, corrects the dashboard's
estimate by the experts' reviews, and serves /metrics. Parts of each belong to other apps — the
weekly review (`review`) and the self-consistency investigations (`investigations`) keep rows
about an answer, the OTLP receiver (`traces`) counts traces — so those apps register their part
here from their AppConfig.ready(), and monitoring calls what is registered. With nothing
registered, monitoring works on its own: nothing is held back or scrubbed beyond its own tables,
the record has only its own parts, no answer is blind, the dashboard has no expert reviews to
correct by, and /metrics has only monitoring's figures. The alarms raised on a use case belong
to other apps too (the action alarm to `dashboard`, drift and missed review to `review`): each
registers how to check its alarms of one use case soon, and a change that can move them (a
setting, imported reviews) asks for that check; with nothing registered it is checked by nobody.

Parts are registered by name; registering a name again replaces the part (ready() may run more
than once in a test process).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Protocol

from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as AuthUser

User = AuthUser | AnonymousUser


class Hold(Enum):
    """Why retention leaves an answer's text alone for now (counted apart in its result)."""

    IN_REVIEW = "in_review"  # a person is still working with it
    FOR_WORKER = "for_worker"  # a background job will still read it (judge, re-asking)


@dataclass(frozen=True)
class ExpertReview:
    """An expert's latest review of one answer: the answer's use case, when it was created,
    its tier-1 flag, and the expert's and the judge's scores."""

    use_case_id: int
    answer_created_at: datetime
    flagged: bool
    manual_score: float
    automatic_score: float
    answer_id: int | None = None  # the answer reviewed (a segment's figures keep its own)


class RecordPart(Protocol):
    """The part of an answer's record under the registered name, as plain values; without
    the judge's verdicts where `include_judge` is false."""

    def __call__(self, *, answer_id: int, include_judge: bool) -> Any: ...


class RetentionHold(Protocol):
    """Those of the answers the contributing app still needs the text of."""

    def __call__(self, *, answer_ids: Sequence[int]) -> set[int]: ...


class RetentionScrubber(Protocol):
    """Blanks the contributing app's texts of these answers. Runs inside the transaction that
    anonymises them, after the answers are locked."""

    def __call__(self, *, answer_ids: Sequence[int]) -> None: ...


class RetentionKeeps(Protocol):
    """Whether the contributing app keeps rows that point at answers created in [start, end):
    such a month is anonymised, never dropped."""

    def __call__(self, *, start: datetime, end: datetime) -> bool: ...


class BlindAnswers(Protocol):
    """The answers whose judge results this person must not see yet."""

    def __call__(self, *, user: User) -> set[int]: ...


class ExpertReviews(Protocol):
    """The latest expert review of each answer of these use cases created in [start, end)."""

    def __call__(
        self, *, use_case_ids: Sequence[int], start: datetime, end: datetime
    ) -> Iterable[ExpertReview]: ...


@dataclass(frozen=True, slots=True)
class DriftRestart:
    """A drift alarm of the expert review: the reviews of `review_week` found the judge changed,
    so the experts' scale starts again from the answers of `source_week` (None where the alarm
    did not record it: the week before the review week)."""

    use_case_id: int
    review_week: str
    source_week: str | None


class DriftRestarts(Protocol):
    """Every drift restart of these use cases, cleared alarms included."""

    def __call__(self, *, use_case_ids: Sequence[int]) -> Iterable[DriftRestart]: ...


class MetricsPart(Protocol):
    """The contributing app's Prometheus metric families (prometheus_client Metric objects),
    read from the database when called: once per scrape of /metrics, before collecting."""

    def __call__(self) -> Iterable[Any]: ...


class AlarmCheck(Protocol):
    """Has the contributing app's alarms of the use case checked (raised or cleared) once the
    surrounding transaction commits: a worker's task, never inside the caller's request."""

    def __call__(self, *, use_case_id: int) -> None: ...


@dataclass
class Registry:
    record_parts: dict[str, RecordPart] = field(default_factory=dict)
    retention_holds: dict[str, tuple[Hold, RetentionHold]] = field(default_factory=dict)
    retention_scrubbers: dict[str, RetentionScrubber] = field(default_factory=dict)
    retention_keeps: dict[str, RetentionKeeps] = field(default_factory=dict)
    blind_answers: dict[str, BlindAnswers] = field(default_factory=dict)
    expert_reviews: dict[str, ExpertReviews] = field(default_factory=dict)
    metrics_parts: dict[str, MetricsPart] = field(default_factory=dict)
    drift_restarts: dict[str, DriftRestarts] = field(default_factory=dict)
    alarm_checks: dict[str, AlarmCheck] = field(default_factory=dict)


# The one registry of the process; a test may swap in an empty Registry() to see monitoring
# alone.
registry = Registry()


def record_part_register(*, name: str, part: RecordPart) -> None:
    """`part` fills the key `name` of an answer's record (monitoring/services/record.py)."""
    registry.record_parts[name] = part


def retention_hold_register(*, name: str, hold: Hold, answers_held: RetentionHold) -> None:
    registry.retention_holds[name] = (hold, answers_held)


def retention_scrubber_register(*, name: str, scrub: RetentionScrubber) -> None:
    registry.retention_scrubbers[name] = scrub


def retention_keeps_register(*, name: str, keeps: RetentionKeeps) -> None:
    registry.retention_keeps[name] = keeps


def blind_answers_register(*, name: str, answers: BlindAnswers) -> None:
    registry.blind_answers[name] = answers


def expert_reviews_register(*, name: str, reviews: ExpertReviews) -> None:
    registry.expert_reviews[name] = reviews


def metrics_part_register(*, name: str, part: MetricsPart) -> None:
    """`part`'s families are added to /metrics (dashboard/views/metrics.py)."""
    registry.metrics_parts[name] = part


def drift_restarts_register(*, name: str, restarts: DriftRestarts) -> None:
    """`restarts` tells the dashboard where the experts' scale starts again after a drift alarm
    (dashboard/selectors/reads.py)."""
    registry.drift_restarts[name] = restarts


def alarm_check_register(*, name: str, check: AlarmCheck) -> None:
    """`check` is asked for by `alarms_check_soon`."""
    registry.alarm_checks[name] = check


def alarms_check_soon(*, use_case_id: int) -> None:
    """After a change that can move the use case's alarms (a setting, imported reviews, seeded
    answers): every app's alarm check of it, after the commit, so that an alarm is raised or
    cleared now rather than at the next hourly check."""
    for check in registry.alarm_checks.values():
        check(use_case_id=use_case_id)
