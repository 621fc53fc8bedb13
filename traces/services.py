"""Writes of the trace receiver: holding received spans (`otlp_spans_receive`), and assembling
each quiet trace into an answer through monitoring's ingest service (`otlp_traces_assemble_due`,
run by Celery beat, and `otlp_trace_assemble` for one trace).

A trace is a leased job (jobs/): claimed by a conditional UPDATE, so of two sweeps exactly one
assembles it; a sweep that dies mid-way leaves it running under a lease that expires, and the
next sweep takes it up again. The answer's external_id is the trace id, so a second assembly of
the same trace meets the stored answer (EXISTING) and stores nothing twice.
"""

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import orjson
import psycopg
from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Count, F, OuterRef, Q, Subquery, Window
from django.db.models.functions import Coalesce, Now, RowNumber
from django.utils import timezone
from pydantic import ValidationError

from ingest.models import RefusalCount
from ingest.schemas import AnswerIn
from ingest.services import answer_ingest, field_errors, refusals_count
from jobs import framework
from jobs.framework import JobKind
from monitoring.models import Service, UseCase
from traces.domain import assembly
from traces.domain.assembly import Assembled, NotAnswer, Outcome
from traces.domain.spans import SpanRecord, is_relevant, skeleton, use_case_of
from traces.models import OtlpOutcomeCount, OtlpSpan, OtlpTrace

logger = logging.getLogger(__name__)

# A sweep assembles at most this many traces; the rest wait for the next one (every 10 s).
SWEEP_BATCH = 200
# Finished trace rows (no content: ids, outcome, counts) are kept this long, so that a span
# arriving after its trace was assembled is refused as late rather than starting a new trace.
KEEP_FINISHED = timedelta(days=30)
PURGE_BATCH = 5000
MAX_DETAIL_CHARS = 2000

REASON_NOT_ALLOWED = (
    "treue.use_case {slug} names no use case this key may send to (the key's use cases: "
    "manage.py create_service --use-case, or the admin)"
)
REASON_TOO_MANY = "the trace has more spans than TREUE_OTLP_MAX_SPANS_PER_TRACE ({limit})"
REASON_LATE = (
    "arrived after its trace was assembled; raise TREUE_OTLP_QUIET_SECONDS if spans of one "
    "trace come further apart"
)

KIND = JobKind(
    model=OtlpTrace,
    task="traces.tasks.assemble_due_traces",
    what="trace",
    # Not while spans still arrive: every span moves not_before on by the quiet period.
    claimable=Q(not_before__isnull=True) | Q(not_before__lte=Now()),
)


# Why spans are refused one by one, as the code /metrics counts them by
# (treue_otlp_spans_refused_total's reason: a fixed set, never the sender's text).
SPAN_INVALID = "invalid_span"  # a bad id, an attribute that cannot be stored (traces.decoding)
SPAN_NOT_ALLOWED = "use_case_not_allowed"
SPAN_TOO_MANY = "trace_too_large"
SPAN_LATE = "late"
SPAN_REFUSALS = (SPAN_INVALID, SPAN_NOT_ALLOWED, SPAN_TOO_MANY, SPAN_LATE)
# How much of a refused treue.use_case the message to the exporter repeats.
MAX_SLUG_CHARS = 64
# How much of the reasons a warning repeats (each refused slug is a reason of its own).
MAX_LOG_CHARS = 1000


@dataclass
class Received:
    """What became of a request's spans: accepted (held, or dropped as noise of a trace that is
    no RAG answer) and rejected, with a count per reason (the message to the exporter) and per
    code (SPAN_REFUSALS, for /metrics)."""

    accepted: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)

    def reject(self, reason: str, count: int = 1, *, code: str) -> None:
        if count:
            self.rejected[reason] = self.rejected.get(reason, 0) + count
            self.codes[code] = self.codes.get(code, 0) + count


def otlp_spans_receive(
    *,
    service: Service,
    spans: Sequence[SpanRecord],
    allowed: Mapping[str, UseCase],
    now: datetime | None = None,
) -> Received:
    """Hold the spans of a request in the database, in one transaction: once this returns, a
    span acknowledged is on disk and a restart loses nothing.

    Spans of a trace without any RAG instrumentation (an HTTP request of an instrumented web
    service) are not stored: when such a trace's root arrives it is counted as not_rag. A span
    of a trace that already has a row is stored (irrelevant ones as a skeleton), unless the
    trace was assembled already (then it is late).

    Six statements whatever the number of spans and traces (and one per use case named): the
    cost of a request grows with its spans only in Python and in the rows written."""
    now = now or timezone.now()
    received = Received()
    by_trace: dict[str, list[SpanRecord]] = {}
    named: dict[str, str] = {}  # trace id -> the first use case one of its spans names
    for span in spans:
        slug = use_case_of(span)
        if slug is not None:
            if slug not in allowed:
                shown = slug if len(slug) <= MAX_SLUG_CHARS else slug[:MAX_SLUG_CHARS] + "…"
                received.reject(REASON_NOT_ALLOWED.format(slug=repr(shown)),
                                code=SPAN_NOT_ALLOWED)
                continue
            named.setdefault(span.trace_id, slug)
        by_trace.setdefault(span.trace_id, []).append(span)
    if not by_trace:
        return received

    limit = settings.TREUE_OTLP_MAX_SPANS_PER_TRACE
    quiet = timedelta(seconds=settings.TREUE_OTLP_QUIET_SECONDS)
    with transaction.atomic():
        rows = _lock(service, list(by_trace))
        new = [
            (trace_id, named.get(trace_id, ""))
            for trace_id, group in by_trace.items()
            if trace_id not in rows and any(is_relevant(s) for s in group)
        ]
        if new:
            # A concurrent request may create the same trace: the unique constraint decides,
            # and the row is locked below either way.
            _create(service, new, now)
            rows.update(_lock(service, [trace_id for trace_id, _ in new]))
        not_rag = 0
        stored: list[tuple[int, str, str, dict[str, Any]]] = []
        touched: list[int] = []
        roots: list[int] = []
        use_cases: dict[str, list[int]] = {}
        for trace_id, group in by_trace.items():
            row = rows.get(trace_id)
            if row is None:
                # No RAG span in it so far: noise, accepted and dropped; counted once, when the
                # trace's root arrives.
                received.accepted += len(group)
                not_rag += any(s.is_root for s in group)
                continue
            if row.status != OtlpTrace.Status.PENDING:
                received.reject(REASON_LATE, len(group), code=SPAN_LATE)
                continue
            room = max(limit - row.span_count, 0)
            received.reject(REASON_TOO_MANY.format(limit=limit), max(len(group) - room, 0),
                            code=SPAN_TOO_MANY)
            group = group[:room]
            received.accepted += len(group)
            stored += [
                (row.pk, s.span_id, s.parent_span_id,
                 (s if is_relevant(s) else skeleton(s)).to_data())
                for s in group
            ]
            touched.append(row.pk)
            if any(s.is_root for s in group):
                roots.append(row.pk)
            if not row.use_case and trace_id in named:
                use_cases.setdefault(named[trace_id], []).append(row.pk)
        _store(stored)
        _touch(touched, roots, last_span_at=now, not_before=now + quiet)
        for slug, pks in use_cases.items():
            OtlpTrace.objects.filter(pk__in=pks, use_case="").update(use_case=slug)
        if not_rag:
            _count(service.pk, Outcome.NOT_RAG, not_rag)
    return received


def otlp_refusals_record(
    *, service: Service, codes: Mapping[str, int], reasons: Mapping[str, int]
) -> None:
    """Spans of a request refused one by one: counted by code for /metrics and the admin, and
    logged with their reasons. The exporter gets them as `partial_success`, which an SDK
    reports as a success: this is where an operator sees that answers went missing."""
    logger.warning(
        "OTLP export of service %s: %d span%s refused: %s", service.name,
        sum(codes.values()), "s" if sum(codes.values()) != 1 else "",
        "; ".join(f"{count} × {reason}" for reason, count in reasons.items())[:MAX_LOG_CHARS],
    )
    refusals_count(service=service, kind=RefusalCount.Kind.OTLP_SPAN, reasons=codes)


# --- the receiver's statements ----------------------------------------------------------------
#
# On PostgreSQL each is one statement with its lists as arrays, bound by the server and sent in
# binary: Django binds on the client, which quotes every element of a list in Python (2 s of a
# request of 10,000 single-span traces, bench/otlp.py; these take 0.1 s). Elsewhere (the
# embedded SQLite) the ORM's bulk statements.

T, S = OtlpTrace, OtlpSpan  # short, for the statements' table and column names


@dataclass(frozen=True)
class _Held:
    """What the receiver reads of a locked trace row."""

    pk: int
    status: str
    span_count: int
    use_case: str


def _lock(service: Service, trace_ids: Sequence[str]) -> dict[str, _Held]:
    """The trace rows of these ids, locked until the transaction ends: an assembly's claim
    waits for this request's spans, or this request sees the trace claimed. In id order: two
    requests of the same traces wait for each other instead of deadlocking."""
    if connection.vendor == "postgresql":
        found = _bound(
            f"SELECT {_c(T, 'trace_id')}, {_c(T, 'id')}, {_c(T, 'status')},"
            f" {_c(T, 'span_count')}, {_c(T, 'use_case')} FROM {_t(T)}"
            f" WHERE {_c(T, 'service')} = %s AND {_c(T, 'trace_id')} = ANY(%b)"
            f" ORDER BY {_c(T, 'id')} FOR UPDATE",
            [service.pk, list(trace_ids)],
        )
    else:
        found = list(
            OtlpTrace.objects.select_for_update()
            .filter(service=service, trace_id__in=trace_ids).order_by("pk")
            .values_list("trace_id", "pk", "status", "span_count", "use_case")
        )
    return {trace_id: _Held(*held) for trace_id, *held in found}


def _create(service: Service, new: Sequence[tuple[str, str]], now: datetime) -> None:
    """Pending trace rows of (trace id, use case), in trace id order (see _lock); an id that
    exists already is left as it is."""
    new = sorted(new)
    if connection.vendor != "postgresql":
        OtlpTrace.objects.bulk_create([
            OtlpTrace(service=service, trace_id=trace_id, last_span_at=now, not_before=now,
                      use_case=use_case)
            for trace_id, use_case in new
        ], ignore_conflicts=True)
        return
    # Every other column as a new row of the model has it (defaults, auto_now_add).
    template = OtlpTrace(service=service, trace_id="", last_span_at=now, not_before=now)
    varying = ("trace_id", "use_case")
    fields = [f for f in OtlpTrace._meta.concrete_fields
              if not f.primary_key and f.name not in varying]
    constants = ", ".join(f"%s::{_base_type(f)}" for f in fields)
    _bound(
        f"INSERT INTO {_t(T)} ({', '.join(_c(T, f.name) for f in fields)},"
        f" {_c(T, 'trace_id')}, {_c(T, 'use_case')})"
        f" SELECT {constants}, n.trace_id, n.use_case"
        " FROM unnest(%b::text[], %b::text[]) AS n(trace_id, use_case) ORDER BY n.trace_id"
        " ON CONFLICT DO NOTHING",
        [*(f.get_db_prep_save(f.pre_save(template, True), connection) for f in fields),
         [trace_id for trace_id, _ in new], [use_case for _, use_case in new]],
    )


def _store(spans: Sequence[tuple[int, str, str, dict[str, Any]]]) -> None:
    """Span rows of (trace pk, span id, parent span id, data); a span stored already (an
    exporter's retry) is left as it is."""
    if not spans:
        return
    if connection.vendor != "postgresql":
        OtlpSpan.objects.bulk_create([
            OtlpSpan(trace_id=pk, span_id=span_id, parent_span_id=parent, data=data)
            for pk, span_id, parent, data in spans
        ], ignore_conflicts=True)
        return
    pks, span_ids, parents, data = zip(*spans, strict=True)
    _bound(
        f"INSERT INTO {_t(S)} ({_c(S, 'trace')}, {_c(S, 'span_id')}, {_c(S, 'parent_span_id')},"
        f" {_c(S, 'data')})"
        " SELECT t, s, p, d::jsonb FROM unnest(%b::bigint[], %b::text[], %b::text[], %b::text[])"
        " AS u(t, s, p, d) ON CONFLICT DO NOTHING",
        [list(pks), list(span_ids), list(parents), [orjson.dumps(d).decode() for d in data]],
    )


def _touch(
    touched: Sequence[int], roots: Sequence[int], *, last_span_at: datetime,
    not_before: datetime,
) -> None:
    """The traces that received spans wait another quiet period; their span counts are
    counted, not added (a retried request's spans are stored once); a root is noted once."""
    if not touched:
        return
    if connection.vendor == "postgresql":
        _bound(
            f"UPDATE {_t(T)} SET {_c(T, 'last_span_at')} = %s, {_c(T, 'not_before')} = %s,"
            f" {_c(T, 'span_count')} = (SELECT count(*) FROM {_t(S)}"
            f" WHERE {_t(S)}.{_c(S, 'trace')} = {_t(T)}.{_c(T, 'id')})"
            f" WHERE {_c(T, 'id')} = ANY(%b)",
            [last_span_at, not_before, list(touched)],
        )
        if roots:
            _bound(
                f"UPDATE {_t(T)} SET {_c(T, 'root_seen_at')} = %s"
                f" WHERE {_c(T, 'id')} = ANY(%b) AND {_c(T, 'root_seen_at')} IS NULL",
                [last_span_at, list(roots)],
            )
        return
    spans_of = (
        OtlpSpan.objects.filter(trace_id=OuterRef("pk")).order_by()
        .values("trace_id").annotate(n=Count("pk")).values("n")
    )
    OtlpTrace.objects.filter(pk__in=touched).update(
        last_span_at=last_span_at, not_before=not_before,
        span_count=Coalesce(Subquery(spans_of), 0),
    )
    OtlpTrace.objects.filter(pk__in=roots, root_seen_at__isnull=True).update(
        root_seen_at=last_span_at
    )


def _t(model: type[models.Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _c(model: type[models.Model], name: str) -> str:
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field) and field.column is not None, name
    return connection.ops.quote_name(field.column)


def _base_type(field: models.Field) -> str:
    """The column's type without its length: a cast to varchar(n) would cut a longer value
    without an error, where the insert into the column refuses it."""
    db_type = field.db_type(connection)
    assert db_type is not None
    return db_type.split("(")[0]


def _bound(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """PostgreSQL: run a statement with server-side binding on Django's connection (in its
    transaction); `%b` sends a list as a binary array. The rows it returns."""
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql.encode(), params)
        return cursor.fetchall() if cursor.description else []


def otlp_traces_due(*, now: datetime | None = None, limit: int = SWEEP_BATCH) -> list[int]:
    """The traces to assemble now: quiet since their last span and with their root, or quiet
    for the orphan period without one; and those whose assembler died (lease expired).

    Taking turns between senders, a sender being a (service, use case): first the oldest due
    trace of each, then the second oldest of each, and so on. One sender's backlog of
    thousands of traces waits behind itself; another sender's trace is in the next sweep
    (unless more than `limit` senders have traces due at once)."""
    now = now or timezone.now()
    orphan = now - timedelta(seconds=settings.TREUE_OTLP_ORPHAN_SECONDS)
    pending = Q(status=OtlpTrace.Status.PENDING, not_before__lte=now) & (
        Q(root_seen_at__isnull=False) | Q(last_span_at__lte=orphan)
    )
    lost = Q(status=OtlpTrace.Status.RUNNING, lease_expires_at__lt=now)
    return list(
        OtlpTrace.objects.filter(pending | lost)
        .annotate(turn=Window(
            RowNumber(), partition_by=[F("service_id"), F("use_case")],
            order_by=[F("not_before").asc(), F("pk").asc()],
        ))
        .order_by("turn", "not_before", "pk")
        .values_list("pk", flat=True)[:limit]
    )


def otlp_traces_assemble_due(*, limit: int = SWEEP_BATCH) -> int:
    """The periodic sweep (traces.tasks.assemble_due_traces): assemble every due trace, fail
    those whose assembly killed its worker too often, purge old finished rows. Returns how many
    traces it assembled."""
    now = timezone.now()
    framework.abandon_lost(KIND, now=now, on_abandoned=_drop_spans)
    done = sum(otlp_trace_assemble(pk=pk) is not None for pk in otlp_traces_due(now=now,
                                                                                limit=limit))
    old = OtlpTrace.objects.filter(
        status__in=[OtlpTrace.Status.DONE, OtlpTrace.Status.FAILED],
        finished_at__lt=now - KEEP_FINISHED,
    ).values_list("pk", flat=True)[:PURGE_BATCH]
    OtlpTrace.objects.filter(pk__in=list(old)).delete()
    return done


def _drop_spans(trace: OtlpTrace) -> None:
    OtlpSpan.objects.filter(trace_id=trace.pk).delete()


def otlp_trace_assemble(*, pk: int) -> Outcome | None:
    """Assemble one trace into an answer and ingest it, once: None when another assembler holds
    it (or took it over). The spans are deleted in the same transaction (they hold prompts and
    documents; the answer now has what Treue keeps)."""
    token = framework.claim(KIND, pk)
    if token is None:
        return None
    trace = OtlpTrace.objects.select_related("service").get(pk=pk)
    spans = [
        SpanRecord.from_data(
            trace_id=trace.trace_id, span_id=row.span_id, parent_span_id=row.parent_span_id,
            data=row.data,
        )
        for row in trace.spans.all()
    ]
    try:
        result = assembly.assemble(spans)
    except Exception as e:  # a bug in the mapping must cost this trace, not the sweep
        logger.exception("assembling trace %s failed", trace.trace_id)
        with transaction.atomic():
            if framework.fail(KIND, pk, token, reason=f"{type(e).__name__}: {e}"):
                _drop_spans(trace)
        return None
    with transaction.atomic():
        outcome, detail, answer_pk = _ingest(trace, result)
        finished = framework.finish(
            KIND, pk, token, status=OtlpTrace.Status.DONE, outcome=outcome.value,
            detail=detail[:MAX_DETAIL_CHARS], answer_pk=answer_pk,
        )
        if not finished:
            # Another assembler took the trace over after this one's lease ran out: its result
            # counts, this one's ingest is undone.
            transaction.set_rollback(True)
            return None
        _drop_spans(trace)
        _count(trace.service_id, outcome)
    return outcome


def _ingest(trace: OtlpTrace, result: Assembled | NotAnswer) -> tuple[Outcome, str, int | None]:
    if isinstance(result, NotAnswer):
        return result.outcome, result.detail, None
    payload = dict(result.payload)
    if result.use_case is None:
        slugs = list(
            trace.service.use_cases.filter(active=True).values_list("slug", flat=True)[:2]
        )
        if len(slugs) != 1:
            return Outcome.USE_CASE_MISSING, (
                "no span or resource names treue.use_case, and the key may send to "
                f"{'several' if slugs else 'no'} active use cases"
            ), None
        payload["use_case"] = slugs[0]
    try:
        validated = AnswerIn.model_validate(payload)
    except ValidationError as e:
        return Outcome.INVALID, _errors_text(field_errors(e)), None
    ingested = answer_ingest(service=trace.service, payload=validated)
    return (
        Outcome(ingested.outcome.value),
        _errors_text(ingested.errors),
        ingested.answer.pk if ingested.answer is not None else None,
    )


def _errors_text(errors: Sequence[Mapping[str, str]]) -> str:
    return "; ".join(f"{e['field']}: {e['message']}" if e["field"] else e["message"]
                     for e in errors)


def _count(service_id: int, outcome: Outcome, n: int = 1) -> None:
    counts = OtlpOutcomeCount.objects.filter(service_id=service_id, outcome=outcome.value)
    if counts.update(count=F("count") + n):
        return
    try:
        with transaction.atomic():
            OtlpOutcomeCount.objects.create(service_id=service_id, outcome=outcome.value, count=n)
    except IntegrityError:  # created by a concurrent request in between
        counts.update(count=F("count") + n)
