"""Reads of answers and use cases. Every query a person triggers goes through the use cases that
person may see: staff see all, others those they are assigned to as expert or team lead."""

from collections.abc import Iterator
from datetime import date, datetime, time, timedelta
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import F, Q, QuerySet, Sum
from django.db.models.expressions import OrderBy
from django.utils import timezone

from common.weeks import iso_week_bounds
from dashboard.domain.csv_export import csv_text
from dashboard.selectors.segments import SegmentFilter
from monitoring.models import Answer, DroppedMonth, RollupDay
from monitoring.models.rollups import next_month, rollups_ready
from monitoring.selectors.access import blind_answer_ids, use_cases_for_user

# The explorer's causes: why an answer may be unfaithful, as far as the stored figures tell.
CAUSE_LOW_SIMILARITY = "low_similarity"  # best chunk similarity below a threshold
CAUSE_NO_CHUNKS = "no_chunks"  # answered without any retrieved chunk
CAUSE_MANY_CHUNKS = "many_chunks"  # more chunks than a generator reads carefully
CAUSE_MULTI_PART = "multi_part"  # a question with several parts
CAUSE_NO_LOGPROBS = "no_logprobs"  # tier 1 could not look: the provider sent no probabilities
CAUSE_ABSTENTION = "abstention"  # the judge found no claims
CAUSES = (
    CAUSE_LOW_SIMILARITY, CAUSE_NO_CHUNKS, CAUSE_MANY_CHUNKS, CAUSE_MULTI_PART,
    CAUSE_NO_LOGPROBS, CAUSE_ABSTENTION,
)
# Below this best-chunk similarity retrieval has usually found nothing that fits; the page lets
# a lead set another value, since the scale depends on the embedding model.
LOW_SIMILARITY_DEFAULT = 0.5
# More chunks than this and the generator tends to mix them up.
MANY_CHUNKS = 10

# The sort orders a person may choose, by the names the page sends. Only these reach order_by,
# so a crafted `sort` cannot order by (and so probe) a field the page does not show. Missing
# values sort last either way: an unjudged answer is not "the worst" nor "the best".
SORTS: dict[str, tuple[OrderBy, ...]] = {
    "-time": (F("created_at").desc(), F("id").desc()),
    "time": (F("created_at").asc(), F("id").asc()),
    "score": (F("score").asc(nulls_last=True), F("id").desc()),
    "-score": (F("score").desc(nulls_last=True), F("id").desc()),
    "similarity": (F("best_chunk_score").asc(nulls_last=True), F("id").desc()),
    "-similarity": (F("best_chunk_score").desc(nulls_last=True), F("id").desc()),
    "chunks": (F("chunk_count").asc(), F("id").desc()),
    "-chunks": (F("chunk_count").desc(), F("id").desc()),
}
DEFAULT_SORT = "-time"


def _cause_filter(cause: str, similarity_below: float | None) -> Q:
    if cause == CAUSE_LOW_SIMILARITY:
        threshold = LOW_SIMILARITY_DEFAULT if similarity_below is None else similarity_below
        # An answer without scored chunks has no similarity to be low; "no_chunks" covers it.
        return Q(best_chunk_score__lt=threshold)
    if cause == CAUSE_NO_CHUNKS:
        return Q(chunk_count=0)
    if cause == CAUSE_MANY_CHUNKS:
        return Q(chunk_count__gt=MANY_CHUNKS)
    if cause == CAUSE_MULTI_PART:
        # None (not yet detected, answers from before the detector) is not multi-part.
        return Q(multi_part=True)
    if cause == CAUSE_NO_LOGPROBS:
        return Q(logprobs_status=Answer.LogprobsStatus.NONE)
    if cause == CAUSE_ABSTENTION:
        return Q(abstention=True)
    raise ValueError(f"unknown cause {cause!r}")


def _filtered(
    *,
    user: User | AnonymousUser,
    use_case: str | None = None,
    week: tuple[int, int] | None = None,
    flagged: bool | None = None,
    sampled: bool | None = None,
    status: str | None = None,
    score_min: float | None = None,
    score_max: float | None = None,
    cause: str | None = None,
    similarity_below: float | None = None,
    date_from: date | None = None,
    date_to: date | None = None,
    sort: str | None = None,
    segment: SegmentFilter | None = None,
) -> QuerySet[Answer]:
    # The permitted use cases are resolved first and passed as constants: given a subquery, the
    # planner cannot know that it is one use case of ten and walks all of its answers instead
    # of the newest few by (use_case, created_at) — 650 ms instead of 1 ms at a million answers.
    allowed = dict(use_cases_for_user(user=user).values_list("slug", "id"))
    if use_case:
        allowed = {use_case: allowed[use_case]} if use_case in allowed else {}
    answers = Answer.objects.filter(use_case_id__in=sorted(allowed.values()))
    if week is not None:
        start, end = iso_week_bounds(year=week[0], week=week[1])
        answers = answers.filter(created_at__gte=start, created_at__lt=end)
    if flagged is not None:
        answers = answers.filter(flagged=flagged)
    if sampled is not None:
        answers = answers.filter(sampled=sampled)
    if status:
        answers = answers.filter(status=status)
    if score_min is not None:
        answers = answers.filter(score__gte=score_min)
    if score_max is not None:
        answers = answers.filter(score__lte=score_max)
    if cause:
        answers = answers.filter(_cause_filter(cause, similarity_below))
    if segment:
        answers = answers.filter(segment.answers())
    # Local days as bounds on created_at itself: `created_at__date` casts every row's value to
    # a local date first, which no index (and no partition) can answer.
    if date_from:
        answers = answers.filter(created_at__gte=_local_midnight(date_from))
    if date_to:
        answers = answers.filter(created_at__lt=_local_midnight(date_to + timedelta(days=1)))
    return answers.order_by(*SORTS.get(sort or DEFAULT_SORT, SORTS[DEFAULT_SORT]))


def _local_midnight(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time(0)))


# The filters the day rollup can count exactly (the others need the answers themselves).
_COUNTABLE = {"use_case", "week", "flagged", "date_from", "date_to", "sort"}


def answer_count(*, user: User | AnonymousUser, **filters: Any) -> int | None:
    """How many answers `answer_list` holds, from the day rollups, where they can say it
    exactly (filters by use case, week, flag and dates only, and the rollups whole); None: the
    caller counts the answers. The explorer's first page of a use case of millions of answers
    need not count them all."""
    if not rollups_ready() or any(
        value is not None and name not in _COUNTABLE for name, value in filters.items()
    ):
        return None
    allowed = dict(use_cases_for_user(user=user).values_list("slug", "id"))
    use_case = filters.get("use_case")
    if use_case:
        allowed = {use_case: allowed[use_case]} if use_case in allowed else {}
    days = RollupDay.objects.filter(use_case_id__in=sorted(allowed.values()))
    week = filters.get("week")
    if week is not None:
        start, end = iso_week_bounds(year=week[0], week=week[1])
        days = days.filter(day__gte=timezone.localtime(start).date(),
                           day__lt=timezone.localtime(end).date())
    if filters.get("flagged") is not None:
        days = days.filter(flagged=filters["flagged"])
    if filters.get("date_from"):
        days = days.filter(day__gte=filters["date_from"])
    if filters.get("date_to"):
        days = days.filter(day__lte=filters["date_to"])
    # Months retention dropped keep their figures in the rollups, not their answers.
    for month in DroppedMonth.objects.values_list("month", flat=True):
        days = days.exclude(day__gte=month, day__lt=next_month(month))
    return days.aggregate(n=Sum("answers"))["n"] or 0


def _orders_or_filters_by_score(filters: dict[str, Any]) -> bool:
    """Filtering or sorting by score would tell an expert a blind answer's score by where it
    appears, so such a list leaves the blind answers out."""
    return (
        filters.get("score_min") is not None or filters.get("score_max") is not None
        or (filters.get("sort") or "").lstrip("-").startswith("score")
        or filters.get("cause") == "abstention"
    )


def answer_list(*, user: User | AnonymousUser, **filters: Any) -> QuerySet[Answer]:
    """The explorer's answers: those of the user's use cases that pass the filters, sorted.

    The filters are the keyword arguments of `_filtered`, as AnswerFilterForm.filters() gives them.
    """
    answers = _filtered(user=user, **filters)
    if _orders_or_filters_by_score(filters):
        blind = blind_answer_ids(user=user)
        answers = answers.exclude(pk__in=blind) if blind else answers
    return answers.select_related("use_case", "service").defer(
        "messages", "token_data", "metadata"
    )


EXPORT_COLUMNS = (
    ("id", "id"),
    ("created_at", "created_at"),
    ("use_case", "use_case__slug"),
    ("service", "service__name"),
    ("external_id", "external_id"),
    ("question", "question"),
    ("answer", "text"),
    ("model", "model"),
    ("flagged", "flagged"),
    ("sampled", "sampled"),
    ("sample_reason", "sample_reason"),
    ("inclusion_probability", "inclusion_probability"),
    ("status", "status"),
    ("score", "score"),
    ("abstention", "abstention"),
    ("chunk_count", "chunk_count"),
    ("best_chunk_score", "best_chunk_score"),
    ("logprobs_status", "logprobs_status"),
    ("uncertain_words", "uncertain_tokens"),
)
EXPORT_HEADER = tuple(name for name, _ in EXPORT_COLUMNS)
# Left empty for an answer the exporting expert reviews blind (see blind_answer_ids).
_JUDGE_COLUMNS = {EXPORT_HEADER.index(name) for name in ("score", "abstention")}
# Rows fetched per round trip: large enough that the round trips do not dominate, small enough
# that a batch of long answers (up to 100 kB of text each) stays a few hundred MB at worst.
EXPORT_CHUNK_SIZE = 2000


def answer_export_values(
    *, user: User | AnonymousUser, **filters: Any
) -> Iterator[tuple[Any, ...]]:
    """The filtered answers as rows of plain values (without the header), in the list's order:
    numbers, booleans, aware datetimes, text as stored, None for a missing figure. The CSV and
    the XLSX export write these, each in its own way.

    Read with a database iterator over plain tuples, EXPORT_CHUNK_SIZE rows at a time, so an
    export of a million answers never holds more than one batch in memory.
    """
    # Read before the rows stream: the blind set is small, and hiding must not depend on it
    # being fetched in the middle of an export.
    blind = blind_answer_ids(user=user)
    answers = _filtered(user=user, **filters)
    if blind and _orders_or_filters_by_score(filters):
        answers = answers.exclude(pk__in=blind)
    rows = answers.values_list(*(source for _, source in EXPORT_COLUMNS)).iterator(
        chunk_size=EXPORT_CHUNK_SIZE
    )
    return (_export_values(row, blind) for row in rows)


def answer_export_rows(
    *, user: User | AnonymousUser, **filters: Any
) -> Iterator[tuple[Any, ...]]:
    """answer_export_values as CSV rows: text a spreadsheet will not evaluate (csv_text); times
    and truth values as they are, for the dialect to write."""
    values = answer_export_values(user=user, **filters)
    return (tuple(_csv_cell(c) for c in row) for row in values)


def _export_values(row: tuple[Any, ...], blind: set[int]) -> tuple[Any, ...]:
    *cells, uncertain = row
    if cells[0] in blind:
        cells = [None if i in _JUDGE_COLUMNS else c for i, c in enumerate(cells)]
    words = " ".join(str(t.get("token", "")) for t in uncertain or () if isinstance(t, dict))
    return (*cells, words)


def _csv_cell(value: Any) -> Any:
    if isinstance(value, str):
        return csv_text(value)
    return value


