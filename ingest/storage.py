"""Writing answers in as few round trips as PostgreSQL allows: one statement for an answer with
its chunks, its pending judge run and its rollup counts; COPY for a batch. What the database
refuses for one row (a constraint, a value it cannot store) is told apart from what refuses them
all (a lost connection, a bug)."""

from __future__ import annotations

import functools
import json
import re
from datetime import datetime
from typing import Any, TypeVar

import orjson
from django.db import (
    DatabaseError,
    DataError,
    IntegrityError,
    InternalError,
    connection,
    models,
)

from judging.services.runs import judge_run_new, judge_runs_enqueue_on_commit
from monitoring.domain.segments import segment_values
from monitoring.models import (
    Answer,
    AnswerKey,
    Chunk,
    JudgeRun,
    RollupCause,
    RollupDay,
    RollupSegment,
)
from monitoring.models.rollups import day_of, week_of
from monitoring.services import rollups


def row_refused(error: DatabaseError) -> bool:
    """Whether the database refused one row (a constraint, a value it cannot store, a DBA's
    trigger raising) while the connection stays usable: that item fails, the others of a batch
    do not. A lost connection (OperationalError) is not: that is the API's 503; nor is a
    ProgrammingError (a bug, e.g. a missing migration), which would refuse every item."""
    if isinstance(error, IntegrityError | DataError | InternalError):
        return True
    # PL/pgSQL's RAISE EXCEPTION (raise_exception, P0001), which psycopg reports as a
    # ProgrammingError: a trigger's deliberate refusal.
    return getattr(error.__cause__, "sqlstate", None) == "P0001"


def rolled_back(error: DatabaseError) -> bool:
    """Whether PostgreSQL ended the transaction to resolve a conflict with another one
    (deadlock, serialization failure: SQLSTATE class 40). Nothing of it was stored and the
    connection is fine, so each answer is tried again on its own; psycopg reports these as
    OperationalError, which would otherwise be a 503."""
    sqlstate = getattr(error.__cause__, "sqlstate", None) or ""
    return sqlstate.startswith("40")


def insert_with_chunks(answer: Answer, chunks: list[Chunk]) -> None:
    """Insert one new answer with its chunks and, when it is sampled, its pending judge run, and
    count it in the rollups (`rollups.answers_added`: the shared lock, then +1 on its day, in
    its causes' buckets and in its segments), in one PostgreSQL statement: one round trip, and
    no ORM query building, which cost more CPU than the statement itself. The columns are the
    models' own; a unique violation surfaces as IntegrityError as with save(). The run is
    enqueued once the transaction commits."""
    segments = segment_values(vars(answer), answer.use_case.segment_keys or [])
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
    # Its segments, sorted by dimension as a batch sorts them: one array per column.
    params += [[answer.use_case_id] * len(segments), [week] * len(segments),
               [bool(answer.flagged)] * len(segments), [d for d, _ in segments],
               [v for _, v in segments]]
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
    def key_columns(model: type[models.Model], key: tuple[str, ...]) -> str:
        fields = (model._meta.get_field(name) for name in key)
        return ", ".join(q(_column(f)) for f in fields if isinstance(f, models.Field))

    day_table = q(RollupDay._meta.db_table)
    day_columns = key_columns(RollupDay, rollups.DAY_KEY)
    answers = q("answers")
    cause_table = q(RollupCause._meta.db_table)
    cause_columns = key_columns(RollupCause, rollups.CAUSE_KEY)
    cause_rows = ", ".join(["(%s::bigint, %s::date, %s::boolean, %s::smallint, %s::smallint)"]
                           * len(rollups.TRAITS))
    segment_table = q(RollupSegment._meta.db_table)
    segment_columns = key_columns(RollupSegment, rollups.SEGMENT_KEY)
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
        f" {answers} = {cause_table}.{answers} + excluded.{answers} RETURNING 1 AS ok)"
        # ... then its segments, after all of the causes' rows (an aggregate reads them all).
        f", sg AS (INSERT INTO {segment_table} ({segment_columns}, {answers})"
        f" SELECT v.*, 1 FROM (SELECT count(*) AS n FROM b) AS done,"
        f" unnest(%s::bigint[], %s::date[], %s::boolean[], %s::varchar[], %s::text[]) AS v"
        f" WHERE done.n > 0"
        f" ON CONFLICT ({segment_columns}) DO UPDATE SET"
        f" {answers} = {segment_table}.{answers} + excluded.{answers})"
        f" SELECT a.{q('id')}, (SELECT r.{q('id')} FROM r) FROM a"
    )
    return answer_fields, chunk_fields, run_fields, sql


def _db_type(f: models.Field[Any, Any]) -> str:
    """A concrete field's column type (None only for fields without a column)."""
    db_type = f.db_type(connection)
    assert db_type is not None, f
    return db_type


def _column(f: models.Field[Any, Any]) -> str:
    """A concrete field's column name (None only for fields without a column)."""
    assert f.column is not None, f
    return f.column


_Row = TypeVar("_Row", Answer, Chunk, AnswerKey)


def bulk_insert(model: type[_Row], rows: list[_Row], *, with_ids: bool) -> None:
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
_AS_IS: dict[type[models.Field[Any, Any]], tuple[type, ...]] = {
    models.CharField: (str,),
    models.TextField: (str,),
    models.FloatField: (float,),
    models.BooleanField: (bool,),
    models.PositiveIntegerField: (int,),
    models.BigAutoField: (int,),
    models.ForeignKey: (int,),
}


def _preparer(f: models.Field[Any, Any]) -> Any:
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
