"""Ingest: an answer with its tier-1 result and sampling decision, stored once however often it is
sent (replays are compared by content), and handed to the judge when it is in the sample."""

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import orjson
from django.db import (
    DatabaseError,
    IntegrityError,
    connection,
    transaction,
)
from django.db.models import F
from django.utils import timezone
from pydantic import ValidationError

from ingest.decoding import Unreadable
from ingest.domain import logprobs, questions, sampling
from ingest.domain.content_probability import min_content_probability
from ingest.models import RefusalCount
from ingest.schemas import AnswerIn
from ingest.storage import bulk_insert, insert_with_chunks, rolled_back, row_refused
from judging.services.runs import judge_runs_create
from monitoring.domain.segments import metadata_problems
from monitoring.models import (
    Answer,
    AnswerKey,
    Chunk,
    Service,
    UseCase,
)
from monitoring.services import rollups

logger = logging.getLogger(__name__)


WARNING_NO_LOGPROBS = "no logprobs: tier 1 could not check this answer"
WARNING_UNALIGNED = (
    "logprobs do not align with the answer text: stored, but left out of tier 1"
)


class IngestOutcome(Enum):
    """What one answer's ingest came to; the API says it as an HTTP status (monitoring/api)."""

    CREATED = "created"  # stored now
    EXISTING = "existing"  # the same external_id with the same content was stored before
    CONFLICT = "conflict"  # the external_id holds different content
    NOT_ALLOWED = "not_allowed"  # the key may not send to the use case, or it is inactive
    INVALID = "invalid"  # the item is not a valid answer, or the database refused it


@dataclass
class IngestResult:
    """What one answer's ingest came to: the outcome and either the record or errors."""

    outcome: IngestOutcome
    answer: Answer | None = None
    errors: list[dict[str, str]] = field(default_factory=list)


def field_errors(exc: ValidationError, prefix: Sequence[str | int] = ()) -> list[dict[str, str]]:
    """Pydantic's errors as [{field, message}], the field written like `chunks[0].text`."""
    errors = []
    for err in exc.errors(include_url=False):
        loc = [*prefix, *err["loc"]]
        message = err["msg"].removeprefix("Value error, ")
        if not err["loc"] and ": " in message:
            # Checks across fields name their field as "field: message".
            name, message = message.split(": ", 1)
            loc.append(name)
        errors.append({"field": format_loc(loc), "message": message})
    return errors


def format_loc(loc: Iterable[str | int]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def content_hash(payload: AnswerIn) -> str:
    """A fingerprint of the answer as Treue stores it, to tell a replay from a conflicting reuse
    of an external id. What Treue neither reads nor keeps (top_logprobs, a ChatCompletion's id
    or usage, the key order) does not count."""
    tokens = payload.logprobs.content if payload.logprobs and payload.logprobs.content else []
    document = [
        payload.external_id,
        payload.use_case,
        payload.question,
        payload.answer,
        payload.model,
        [[c.text, c.id, c.score, c.source] for c in payload.chunks],
        [[t["token"], t["logprob"], t.get("bytes")] for t in tokens],
        payload.messages,
        payload.created_at.isoformat() if payload.created_at else None,
        payload.metadata,
    ]
    if payload.prompt_version is not None:
        # Only where given, so that answers stored before it keep their fingerprint.
        document.append(payload.prompt_version)
    return hashlib.sha256(_canonical(document)).hexdigest()


def _canonical(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        # orjson refuses integers beyond 64 bits (allowed in metadata); json does not. The same
        # content always takes the same branch, so the fingerprint stays stable.
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def legacy_content_hash(raw: Any) -> str:
    """The fingerprint of answers stored before December 2026: of the whole item as sent (a
    dict, or its JSON text), top_logprobs and all. Replays of those answers are compared
    with it."""
    if isinstance(raw, bytes | bytearray | memoryview):
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raw = json.loads(bytes(raw).decode("utf-8", "surrogatepass"))
    return hashlib.sha256(_canonical(raw)).hexdigest()


def _logprobs_mapping(payload: AnswerIn) -> dict[str, Any] | None:
    if payload.logprobs is None or payload.logprobs.content is None:
        return None
    return {"content": payload.logprobs.content}


def _build(
    *, service: Service, use_case: UseCase, payload: AnswerIn
) -> tuple[Answer, list[Chunk]]:
    assert payload.answer is not None and payload.model is not None  # ensured by AnswerIn
    threshold = use_case.logprob_threshold
    tier1 = logprobs.analyse_answer(payload.answer, _logprobs_mapping(payload), threshold)
    decision = sampling.decide(
        service_key=str(service.pk),
        external_id=payload.external_id,
        flagged=tier1.flagged,
        rate=use_case.sample_rate,
    )
    scores = [c.score for c in payload.chunks if c.score is not None]
    answer = Answer(
        use_case=use_case,
        service=service,
        external_id=payload.external_id,
        content_hash=content_hash(payload),
        question=payload.question,
        text=payload.answer,
        model=payload.model,
        messages=payload.messages,
        metadata=payload.metadata,
        prompt_version=payload.prompt_version or "",
        # The best-ranked chunk's source: the answer's segment by source (issue 40).
        source=(payload.chunks[0].source or "") if payload.chunks else "",
        created_at=payload.created_at or timezone.now(),
        logprobs_status=tier1.logprobs_status,
        token_data=tier1.compact,
        logprob_threshold=threshold,
        flagged=tier1.flagged,
        uncertain_tokens=[
            {"token": w.word, "probability": w.probability, "position": w.start, "end": w.end}
            for w in tier1.uncertain
        ],
        in_random_sample=decision.in_random_sample,
        sampled=decision.sampled,
        sample_reason=decision.reason,
        inclusion_probability=decision.inclusion_probability,
        status=Answer.Status.QUEUED if decision.sampled else Answer.Status.NOT_SAMPLED,
        chunk_count=len(payload.chunks),
        best_chunk_score=max(scores) if scores else None,
        # For the dashboard: what the threshold tuner needs of the tokens, and a cause.
        min_content_probability=min_content_probability(payload.answer, tier1.compact),
        multi_part=questions.is_multi_part(payload.question, use_case.language),
    )
    chunks = [
        Chunk(
            answer=answer,
            answer_created_at=answer.created_at,
            rank=rank,
            text=c.text,
            score=c.score,
            source_chunk_id=c.id or "",
            source=c.source or "",
        )
        for rank, c in enumerate(payload.chunks, start=1)
    ]
    return answer, chunks


def answer_warnings(answer: Answer) -> list[str]:
    if answer.logprobs_status == Answer.LogprobsStatus.NONE:
        return [WARNING_NO_LOGPROBS]
    if answer.logprobs_status == Answer.LogprobsStatus.UNALIGNED:
        return [WARNING_UNALIGNED]
    return []


class _UseCases:
    """Resolves use case slugs for one request. A use case the key may not send to is a 403
    that reads the same whether it belongs to another tenant (active or not) or does not exist
    at all, so a key cannot probe other tenants' slugs; only the key's own inactive use case
    says that it is inactive.

    `allowed` (slug -> use case) is what the key may send to, when the caller already has it
    (the API's authentication reads it with the service); only a slug outside it costs a query.
    """

    def __init__(
        self, service: Service, slugs: Iterable[str], allowed: Mapping[str, UseCase] | None
    ) -> None:
        if allowed is None:
            allowed = {
                u.slug: u
                for u in service.use_cases.filter(slug__in=set(slugs), active=True)
            }
        self.service = service
        self.allowed = allowed
        self.refused: dict[str, IngestResult] = {}

    def resolve(self, slug: str) -> UseCase | IngestResult:
        if slug in self.allowed:
            return self.allowed[slug]
        if slug not in self.refused:
            own_inactive = self.service.use_cases.filter(slug=slug, active=False).exists()
            message = (
                "this use case is inactive" if own_inactive
                else "this key may not send to this use case"
            )
            self.refused[slug] = IngestResult(
                IngestOutcome.NOT_ALLOWED, errors=[{"field": "use_case", "message": message}]
            )
        return self.refused[slug]


def _existing(service: Service, external_id: str, digest: str, raw: Any) -> IngestResult:
    stored = Answer.objects.select_related("use_case").get(
        service=service, external_id=external_id
    )
    return _compare(stored, digest, raw)


# How often one answer's insert is tried when PostgreSQL ends it to resolve a conflict with
# another transaction (deadlock, serialization failure): nothing of it was stored.
INSERT_ATTEMPTS = 3


def _insert_one(answer: Answer, chunks: list[Chunk], raw: Any) -> IngestResult:
    attempt = 1
    while True:
        try:
            return _insert_once(answer, chunks, raw)
        except DatabaseError as e:
            if not rolled_back(e) or attempt >= INSERT_ATTEMPTS or connection.in_atomic_block:
                raise
        attempt += 1
        _afresh(answer, chunks)


def _afresh(answer: Answer, chunks: list[Chunk]) -> None:
    """Make a new answer of one whose insert failed: it may have been handed an id."""
    answer.pk = None
    answer._state.adding = True
    for chunk in chunks:
        chunk.answer = answer


def _insert_once(answer: Answer, chunks: list[Chunk], raw: Any) -> IngestResult:
    try:
        with transaction.atomic():
            if connection.vendor == "postgresql":
                insert_with_chunks(answer, chunks)  # counts it in the rollups too
            else:
                answer.save(force_insert=True)
                AnswerKey.objects.create(
                    service_id=answer.service_id, external_id=answer.external_id,
                    answer_id=answer.pk, answer_created_at=answer.created_at,
                )
                Chunk.objects.bulk_create(chunks)
                if answer.sampled:
                    judge_runs_create(answers=[answer])
                rollups.answers_added([answer])
    except DatabaseError as e:
        if not row_refused(e):
            raise
        # The unique (service, external_id) of AnswerKey decides races, not a prior lookup.
        if not isinstance(e, IntegrityError) or not Answer.objects.filter(
            service=answer.service, external_id=answer.external_id
        ).exists():
            return _refused(answer, e)
        return _existing(answer.service, answer.external_id, answer.content_hash, raw)
    return IngestResult(IngestOutcome.CREATED, answer)


def _refused(answer: Answer, error: Exception) -> IngestResult:
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
    logger.warning("the database refused answer %r: %s", answer.external_id, reason)
    return IngestResult(
        IngestOutcome.INVALID,
        errors=[{"field": "", "message": f"the database refused this answer: {reason}"}]
    )


def answer_ingest(
    *,
    service: Service,
    payload: AnswerIn,
    raw: Any = None,
    allowed: Mapping[str, UseCase] | None = None,
) -> IngestResult:
    """Store one validated answer with its tier-1 result and sampling decision. `raw` is the
    answer as sent (its JSON text or the parsed dict), for replays of answers stored before
    the fingerprint changed (legacy_content_hash); `allowed` the service's active use cases by
    slug, when the caller has them."""
    use_case = _UseCases(service, [payload.use_case], allowed).resolve(payload.use_case)
    if isinstance(use_case, IngestResult):
        return use_case
    refused = _declared_refused(use_case, payload)
    if refused is not None:
        return refused
    answer, chunks = _build(service=service, use_case=use_case, payload=payload)
    return _insert_one(answer, chunks, raw)


def _declared_refused(use_case: UseCase, payload: AnswerIn) -> IngestResult | None:
    """A 400 for a declared metadata key (a segment) whose value is none: an object, a list,
    or text over the limit."""
    problems = use_case.segment_keys and metadata_problems(payload.metadata, use_case.segment_keys)
    return IngestResult(IngestOutcome.INVALID, errors=[
        {"field": f, "message": m} for f, m in problems]) if problems else None


def answer_ingest_batch(
    *,
    service: Service,
    items: Sequence[Any],
    raws: Sequence[Any] | None = None,
    allowed: Mapping[str, UseCase] | None = None,
) -> list[IngestResult]:
    """Ingest many answers; each item succeeds or fails on its own, results in input order.
    `raws`, when given, holds each item as sent; `allowed` as for answer_ingest.

    The happy path is one query for use cases, one for existing ids and two bulk inserts; only
    when a concurrent request inserts one of the same ids in between does it fall back to
    inserting item by item.
    """
    results: list[IngestResult | None] = [None] * len(items)
    raw_of = raws if raws is not None else items  # read only for a replay
    valid: list[tuple[int, AnswerIn]] = []
    for i, item in enumerate(items):
        if isinstance(item, Unreadable):
            results[i] = IngestResult(
                IngestOutcome.INVALID, errors=[{"field": item.field, "message": item.message}]
            )
            continue
        if not isinstance(item, dict):
            results[i] = IngestResult(
                IngestOutcome.INVALID, errors=[{"field": "", "message": "must be an object"}]
            )
            continue
        try:
            valid.append((i, AnswerIn.model_validate(item)))
        except ValidationError as e:
            results[i] = IngestResult(IngestOutcome.INVALID, errors=field_errors(e))

    use_cases = _UseCases(service, {p.use_case for _, p in valid}, allowed)
    first_of: dict[str, int] = {}  # external id -> index of its first item
    duplicates: list[tuple[int, Answer, list[Chunk]]] = []
    fresh: list[tuple[int, Answer, list[Chunk]]] = []
    for i, payload in valid:
        use_case = use_cases.resolve(payload.use_case)
        if isinstance(use_case, IngestResult):
            results[i] = use_case
            continue
        refused = _declared_refused(use_case, payload)
        if refused is not None:
            results[i] = refused
            continue
        answer, chunks = _build(service=service, use_case=use_case, payload=payload)
        if payload.external_id in first_of:
            duplicates.append((i, answer, chunks))
            continue
        first_of[payload.external_id] = i
        fresh.append((i, answer, chunks))

    stored = {
        a.external_id: a
        for a in Answer.objects.filter(
            service=service, external_id__in=list(first_of)
        ).select_related("use_case")
    }
    # One order for every transaction: two batches inserting the same ids in opposite orders
    # would wait on each other's uncommitted rows until PostgreSQL ends one as a deadlock.
    new = sorted(
        ((i, a, c) for i, a, c in fresh if a.external_id not in stored),
        key=lambda item: item[1].external_id,
    )
    for i, answer, _ in fresh:
        if answer.external_id in stored:
            results[i] = _compare(stored[answer.external_id], answer.content_hash, raw_of[i])
    try:
        with transaction.atomic():
            bulk_insert(Answer, [a for _, a, _ in new], with_ids=True)
            bulk_insert(AnswerKey, [
                AnswerKey(service_id=a.service_id, external_id=a.external_id, answer_id=a.pk,
                          answer_created_at=a.created_at)
                for _, a, _ in new
            ], with_ids=False)
            for _, answer, chunks in new:
                for chunk in chunks:
                    chunk.answer_id = answer.pk
            bulk_insert(Chunk, [c for _, _, cs in new for c in cs], with_ids=False)
            judge_runs_create(answers=[a for _, a, _ in new if a.sampled])
            rollups.answers_added([a for _, a, _ in new])
        for i, answer, _ in new:
            results[i] = IngestResult(IngestOutcome.CREATED, answer)
    except DatabaseError as e:
        if not (row_refused(e) or rolled_back(e)):
            raise
        for i, answer, chunks in new:
            _afresh(answer, chunks)
            results[i] = _insert_one(answer, chunks, raw_of[i])

    for i, answer, chunks in duplicates:
        first = results[first_of[answer.external_id]]
        if first is not None and first.answer is not None:
            results[i] = _compare(first.answer, answer.content_hash, raw_of[i])
        else:
            # The first of the id stored nothing (its content conflicts with a stored answer,
            # or the database refused it): this one is answered as it would be alone.
            results[i] = _insert_one(answer, chunks, raw_of[i])
    return [r if r is not None else IngestResult(IngestOutcome.INVALID) for r in results]


# The outcomes of an answer that are a refusal, by their code on /metrics
# (treue_ingest_answers_refused_total's reason).
ANSWER_REFUSALS = (IngestOutcome.CONFLICT, IngestOutcome.NOT_ALLOWED, IngestOutcome.INVALID)


def answers_refused_count(*, service: Service, results: Iterable[IngestResult]) -> None:
    """Count the answers of an API request that were refused, by outcome (for /metrics and
    the admin): the sender sees each refusal only as its item's status."""
    reasons: dict[str, int] = {}
    for result in results:
        if result.outcome in ANSWER_REFUSALS:
            reasons[result.outcome.value] = reasons.get(result.outcome.value, 0) + 1
    refusals_count(service=service, kind=RefusalCount.Kind.ANSWER, reasons=reasons)


def refusals_count(
    *, service: Service, kind: RefusalCount.Kind, reasons: Mapping[str, int]
) -> None:
    """Add to the refusal counters of a service: `reasons` maps a code of a fixed set (never
    the sender's text: it is a Prometheus label) to how many were refused for it.

    A statement per reason, in a transaction of its own after the answers' own: a failure to
    count is logged and never turns what was stored into an error."""
    try:
        for reason, n in sorted(reasons.items()):
            if n <= 0:
                continue
            counts = RefusalCount.objects.filter(service=service, kind=kind, reason=reason)
            if counts.update(count=F("count") + n):
                continue
            try:
                with transaction.atomic():
                    RefusalCount.objects.create(service=service, kind=kind, reason=reason, count=n)
            except IntegrityError:  # created by a concurrent request in between
                counts.update(count=F("count") + n)
    except DatabaseError as e:
        logger.warning("refusals of %s not counted: %s: %s", service, type(e).__name__, e)


def _compare(stored: Answer, digest: str, raw: Any) -> IngestResult:
    if stored.content_hash == digest or (
        raw is not None and stored.content_hash == legacy_content_hash(raw)
    ):
        return IngestResult(IngestOutcome.EXISTING, stored)
    return IngestResult(
        IngestOutcome.CONFLICT,
        errors=[{
            "field": "external_id",
            "message": "an answer with this external_id and different content already exists",
        }],
    )


