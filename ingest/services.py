"""Ingest: storing answers with their tier-1 result and sampling decision; use cases, services."""

import functools
import hashlib
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

import orjson
from django.db import (
    DatabaseError,
    DataError,
    IntegrityError,
    InternalError,
    connection,
    models,
    transaction,
)
from django.utils import timezone
from pydantic import ValidationError

from ingest.decoding import Unreadable
from ingest.domain import logprobs, questions, sampling
from ingest.domain.content_probability import min_content_probability
from ingest.schemas import AnswerIn
from judging.services.runs import judge_run_new, judge_runs_create, judge_runs_enqueue_on_commit
from monitoring.models import (
    Answer,
    AnswerKey,
    Chunk,
    JudgeRun,
    RollupCause,
    RollupDay,
    Service,
    UseCase,
)
from monitoring.models.rollups import day_of, week_of
from monitoring.services import rollups

logger = logging.getLogger(__name__)


def _row_refused(error: DatabaseError) -> bool:
    """Whether the database refused one row (a constraint, a value it cannot store, a DBA's
    trigger raising) while the connection stays usable: that item fails, the others of a batch
    do not. A lost connection (OperationalError) is not: that is the API's 503; nor is a
    ProgrammingError (a bug, e.g. a missing migration), which would refuse every item."""
    if isinstance(error, IntegrityError | DataError | InternalError):
        return True
    # PL/pgSQL's RAISE EXCEPTION (raise_exception, P0001), which psycopg reports as a
    # ProgrammingError: a trigger's deliberate refusal.
    return getattr(error.__cause__, "sqlstate", None) == "P0001"


def _rolled_back(error: DatabaseError) -> bool:
    """Whether PostgreSQL ended the transaction to resolve a conflict with another one
    (deadlock, serialization failure: SQLSTATE class 40). Nothing of it was stored and the
    connection is fine, so each answer is tried again on its own; psycopg reports these as
    OperationalError, which would otherwise be a 503."""
    sqlstate = getattr(error.__cause__, "sqlstate", None) or ""
    return sqlstate.startswith("40")


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
            if not _rolled_back(e) or attempt >= INSERT_ATTEMPTS or connection.in_atomic_block:
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
                _insert_with_chunks(answer, chunks)  # counts it in the rollups too
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
        if not _row_refused(e):
            raise
        # The unique (service, external_id) of AnswerKey decides races, not a prior lookup.
        if not isinstance(e, IntegrityError) or not Answer.objects.filter(
            service=answer.service, external_id=answer.external_id
        ).exists():
            return _refused(answer, e)
        return _existing(answer.service, answer.external_id, answer.content_hash, raw)
    return IngestResult(IngestOutcome.CREATED, answer)


def _insert_with_chunks(answer: Answer, chunks: list[Chunk]) -> None:
    """Insert one new answer with its chunks and, when it is sampled, its pending judge run, and
    count it in the rollups (`rollups.answers_added`: the shared lock, then +1 on its day and
    in its causes' buckets), in one PostgreSQL statement: one round trip, and no ORM query
    building, which cost more CPU than the statement itself. The columns are
    the models' own; a unique violation surfaces as IntegrityError as with save(). The run is
    enqueued once the transaction commits."""
    answer_fields, chunk_fields, run_fields, sql = _insert_with_chunks_sql()
    run = judge_run_new(answer=answer) if answer.sampled else None
    params: list[Any] = [
        f.get_db_prep_save(f.pre_save(answer, add=True), connection) for f in answer_fields
    ]
    params += [
        [f.get_db_prep_save(getattr(c, f.attname), connection) for c in chunks]
        for f in chunk_fields
    ]
    params += [answer.service_id, answer.external_id, answer.created_at]
    params += [
        None if run is None else f.get_db_prep_save(f.pre_save(run, add=True), connection)
        for f in run_fields
    ]
    params.append(run is not None)
    params += [rollups.ROLLUP_LOCK, answer.use_case_id,
               answer.use_case_id, day_of(answer.created_at), bool(answer.flagged)]
    week = week_of(answer.created_at)
    for dim, bucket in rollups.Traits.of(answer).buckets():  # sorted, as a batch sorts them
        params += [answer.use_case_id, week, bool(answer.flagged), dim, bucket]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        answer.pk, run_id = cursor.fetchone()
    answer._state.adding = False
    answer._state.db = connection.alias
    for chunk in chunks:
        chunk.answer_id = answer.pk
    if run_id is not None:
        judge_runs_enqueue_on_commit(run_ids=[run_id])


@functools.cache
def _insert_with_chunks_sql() -> tuple[list[Any], list[Any], list[Any], str]:
    q = connection.ops.quote_name

    def columns(fields: list[Any]) -> str:
        return ", ".join(q(f.column) for f in fields)

    def placeholders(fields: list[Any]) -> str:
        return ", ".join(["%s"] * len(fields))

    answer_fields = [f for f in Answer._meta.concrete_fields if not f.primary_key]
    chunk_link = Chunk._meta.get_field("answer")
    chunk_fields = [
        f for f in Chunk._meta.concrete_fields if not f.primary_key and f is not chunk_link
    ]
    run_link = JudgeRun._meta.get_field("answer")
    run_fields = [
        f for f in JudgeRun._meta.concrete_fields if not f.primary_key and f is not run_link
    ]
    # Arrays of the columns' base types: a cast to varchar(n) would cut a longer value without
    # an error, where the insert into the column refuses it.
    arrays = ", ".join(
        f"%s::{re.sub(r'[(].*[)]', '', _db_type(f))}[]" for f in chunk_fields
    )
    day_table = q(RollupDay._meta.db_table)
    day_fields = [RollupDay._meta.get_field(name) for name in rollups.DAY_KEY]
    day_columns = ", ".join(q(_column(f)) for f in day_fields if isinstance(f, models.Field))
    answers = q("answers")
    cause_table = q(RollupCause._meta.db_table)
    cause_columns = ", ".join(
        q(_column(f)) for f in (RollupCause._meta.get_field(name) for name in
                                rollups.CAUSE_KEY)
        if isinstance(f, models.Field)
    )
    cause_rows = ", ".join(["(%s::bigint, %s::date, %s::boolean, %s::smallint, %s::smallint)"]
                           * len(rollups.TRAITS))
    sql = (
        f"WITH a AS (INSERT INTO {q(Answer._meta.db_table)} ({columns(answer_fields)})"
        f" VALUES ({placeholders(answer_fields)}) RETURNING {q('id')})"
        f", c AS (INSERT INTO {q(Chunk._meta.db_table)}"
        f" ({q(chunk_link.column)}, {columns(chunk_fields)})"
        f" SELECT a.{q('id')}, x.* FROM a, unnest({arrays}) AS x)"
        # Its key: the unique (service, external id), a violation here is a replay.
        f", k AS (INSERT INTO {q(AnswerKey._meta.db_table)}"
        f" ({q('service_id')}, {q('external_id')}, {q('answer_id')}, {q('answer_created_at')})"
        f" SELECT %s, %s, a.{q('id')}, %s::timestamptz FROM a RETURNING 1 AS ok)"
        f", r AS (INSERT INTO {q(JudgeRun._meta.db_table)}"
        f" ({q(run_link.column)}, {columns(run_fields)})"
        f" SELECT a.{q('id')}, {placeholders(run_fields)} FROM a WHERE %s"
        f" RETURNING {q('id')})"
        # The rollups: a SELECT in a WITH runs only where it is read, so the day's row reads
        # the lock (and the answer: nothing is counted for an answer not inserted), and the
        # key: its unique check may wait on another transaction's uncommitted key, and must
        # do so before this one locks the day's row, which that transaction (a batch counting
        # its answers after its keys) may be about to lock: a deadlock otherwise. (PostgreSQL
        # runs the parts no one reads last first: the day's row came before the key.)
        f", lk AS (SELECT 1 AS ok FROM (SELECT pg_advisory_xact_lock_shared(%s, %s)) s)"
        f", d AS (INSERT INTO {day_table} ({day_columns}, {answers})"
        f" SELECT %s, %s::date, %s, 1 FROM lk, a, k"
        f" ON CONFLICT ({day_columns}) DO UPDATE SET"
        f" {answers} = {day_table}.{answers} + excluded.{answers} RETURNING 1 AS ok)"
        # ... then its week's bucket of each cause. The parts of one statement run in no set
        # order, unless one reads another's result: these rows are made from the day's, so the
        # day's row is locked first, as every writer orders them (else a deadlock with a batch).
        f", b AS (INSERT INTO {cause_table} ({cause_columns}, {answers})"
        f" SELECT v.*, 1 FROM d, (VALUES {cause_rows}) AS v"
        f" ON CONFLICT ({cause_columns}) DO UPDATE SET"
        f" {answers} = {cause_table}.{answers} + excluded.{answers})"
        f" SELECT a.{q('id')}, (SELECT r.{q('id')} FROM r) FROM a"
    )
    return answer_fields, chunk_fields, run_fields, sql


def _db_type(f: models.Field) -> str:
    """A concrete field's column type (None only for fields without a column)."""
    db_type = f.db_type(connection)
    assert db_type is not None, f
    return db_type


def _column(f: models.Field) -> str:
    """A concrete field's column name (None only for fields without a column)."""
    assert f.column is not None, f
    return f.column


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
    answer, chunks = _build(service=service, use_case=use_case, payload=payload)
    return _insert_one(answer, chunks, raw)


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
            _bulk_insert(Answer, [a for _, a, _ in new], with_ids=True)
            _bulk_insert(AnswerKey, [
                AnswerKey(service_id=a.service_id, external_id=a.external_id, answer_id=a.pk,
                          answer_created_at=a.created_at)
                for _, a, _ in new
            ], with_ids=False)
            for _, answer, chunks in new:
                for chunk in chunks:
                    chunk.answer_id = answer.pk
            _bulk_insert(Chunk, [c for _, _, cs in new for c in cs], with_ids=False)
            judge_runs_create(answers=[a for _, a, _ in new if a.sampled])
            rollups.answers_added([a for _, a, _ in new])
        for i, answer, _ in new:
            results[i] = IngestResult(IngestOutcome.CREATED, answer)
    except DatabaseError as e:
        if not (_row_refused(e) or _rolled_back(e)):
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


def _bulk_insert(
    model: type[Answer] | type[Chunk] | type[AnswerKey], rows: list, *, with_ids: bool
) -> None:
    """Insert many new rows: by COPY on PostgreSQL, else by bulk_create.

    Django's bulk_create sends each column as an array parameter (UNNEST), which psycopg
    quotes in Python element by element; for answers, whose token data is a JSON document of
    some thousand values, that quoting and PostgreSQL's parsing of it cost more than all of
    tier 1. COPY streams the rows through psycopg's C writer instead. The ids come from the
    table's sequence first, so the objects get their primary keys as bulk_create gives them.
    A unique violation still surfaces as Django's IntegrityError.
    """
    if not rows:
        return
    if connection.vendor != "postgresql":
        model.objects.bulk_create(rows)
        return
    table = model._meta.db_table
    fields = [f for f in model._meta.concrete_fields if with_ids or not f.primary_key]
    with connection.cursor() as cursor, connection.wrap_database_errors:
        raw = cursor.cursor
        if with_ids:
            raw.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                [table, len(rows)],
            )
            for obj, (pk,) in zip(rows, raw.fetchall(), strict=True):
                obj.pk = pk
        stamped = [f for f in fields if getattr(f, "auto_now_add", False)]
        for obj in rows:
            for f in stamped:
                f.pre_save(obj, add=True)
        columns = ", ".join(connection.ops.quote_name(_column(f)) for f in fields)
        prepared = [(f.attname, _preparer(f)) for f in fields]
        with raw.copy(f"COPY {connection.ops.quote_name(table)} ({columns}) FROM STDIN") as copy:
            for obj in rows:
                copy.write_row([prepare(getattr(obj, name)) for name, prepare in prepared])
    for obj in rows:
        obj._state.adding = False
        obj._state.db = connection.alias


# Fields whose values, of these Python types, PostgreSQL's COPY takes as they are: Django's
# get_db_prep_save would hand them back unchanged, at a call per value (a tenth of a batch's
# CPU). Any other value still goes through it.
_AS_IS: dict[type[models.Field], tuple[type, ...]] = {
    models.CharField: (str,),
    models.TextField: (str,),
    models.FloatField: (float,),
    models.BooleanField: (bool,),
    models.PositiveIntegerField: (int,),
    models.BigAutoField: (int,),
    models.ForeignKey: (int,),
}


def _preparer(f: models.Field) -> Any:
    """How a value of the field becomes COPY's: JSON as text, plain values as they are,
    the rest by Django."""
    if isinstance(f, models.JSONField):
        return _json_text
    plain = _AS_IS.get(type(f))
    if type(f) is models.DateTimeField:
        plain = (datetime,)  # when aware (a naive one goes to Django, which makes it aware)

    def prepare(value: Any) -> Any:
        if value is None or (plain is not None and type(value) in plain and (
                type(value) is not datetime or value.tzinfo is not None)):
            return value
        return f.get_db_prep_save(value, connection)

    return prepare


def _json_text(value: Any) -> str | None:
    """A JSON column's value as COPY's text: orjson, a few times faster than the json module
    Django would use on the token data; json where orjson refuses (unpaired surrogates were
    rejected at validation, but integers beyond 64 bits in metadata are allowed)."""
    if value is None:
        return None
    try:
        return orjson.dumps(value).decode()
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value)


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


