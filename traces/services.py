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

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.db.models.functions import Now
from django.utils import timezone
from pydantic import ValidationError

from jobs import framework
from jobs.framework import JobKind
from monitoring.models import Service, UseCase
from monitoring.schemas import AnswerIn
from monitoring.services import answer_ingest, field_errors
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

REASON_NOT_ALLOWED = "treue.use_case names a use case this key may not send to"
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


@dataclass
class Received:
    """What became of a request's spans: accepted (held, or dropped as noise of a trace that is
    no RAG answer) and rejected, with a count per reason."""

    accepted: int = 0
    rejected: dict[str, int] = field(default_factory=dict)

    def reject(self, reason: str, count: int = 1) -> None:
        if count:
            self.rejected[reason] = self.rejected.get(reason, 0) + count


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
    trace was assembled already (then it is late)."""
    now = now or timezone.now()
    received = Received()
    by_trace: dict[str, list[SpanRecord]] = {}
    for span in spans:
        slug = use_case_of(span)
        if slug is not None and slug not in allowed:
            received.reject(REASON_NOT_ALLOWED)
            continue
        by_trace.setdefault(span.trace_id, []).append(span)
    if not by_trace:
        return received

    limit = settings.TREUE_OTLP_MAX_SPANS_PER_TRACE
    quiet = timedelta(seconds=settings.TREUE_OTLP_QUIET_SECONDS)
    with transaction.atomic():
        rows = _lock(service, by_trace)
        # In trace id order: two requests creating the same traces wait for each other
        # instead of deadlocking.
        new = [
            OtlpTrace(service=service, trace_id=trace_id, last_span_at=now, not_before=now)
            for trace_id, group in sorted(by_trace.items())
            if trace_id not in rows and any(is_relevant(s) for s in group)
        ]
        if new:
            # A concurrent request may create the same trace: the unique constraint decides,
            # and the row is locked below either way.
            OtlpTrace.objects.bulk_create(new, ignore_conflicts=True)
            rows = _lock(service, by_trace)
        not_rag = 0
        stored: list[OtlpSpan] = []
        touched: list[tuple[OtlpTrace, bool]] = []
        for trace_id, group in by_trace.items():
            trace = rows.get(trace_id)
            if trace is None:
                # No RAG span in it so far: noise, accepted and dropped; counted once, when the
                # trace's root arrives.
                received.accepted += len(group)
                not_rag += any(s.is_root for s in group)
                continue
            if trace.status != OtlpTrace.Status.PENDING:
                received.reject(REASON_LATE, len(group))
                continue
            room = max(limit - trace.span_count, 0)
            received.reject(REASON_TOO_MANY.format(limit=limit), max(len(group) - room, 0))
            group = group[:room]
            received.accepted += len(group)
            stored += [
                OtlpSpan(
                    trace=trace,
                    span_id=s.span_id,
                    parent_span_id=s.parent_span_id,
                    data=(s if is_relevant(s) else skeleton(s)).to_data(),
                )
                for s in group
            ]
            touched.append((trace, any(s.is_root for s in group)))
        OtlpSpan.objects.bulk_create(stored, ignore_conflicts=True)
        for trace, root in touched:
            fields = {
                "last_span_at": now,
                "not_before": now + quiet,
                # Counted, not added: a retried request's spans are stored once.
                "span_count": OtlpSpan.objects.filter(trace=trace).count(),
            }
            if root and trace.root_seen_at is None:
                fields["root_seen_at"] = now
            OtlpTrace.objects.filter(pk=trace.pk).update(**fields)
        if not_rag:
            _count(service.pk, Outcome.NOT_RAG, not_rag)
    return received


def _lock(service: Service, by_trace: Mapping[str, object]) -> dict[str, OtlpTrace]:
    """The trace rows of these ids, locked until the transaction ends: an assembly's claim
    waits for this request's spans, or this request sees the trace claimed."""
    return {
        t.trace_id: t
        for t in OtlpTrace.objects.select_for_update()
        .filter(service=service, trace_id__in=list(by_trace))
        .order_by("pk")
    }


def otlp_traces_due(*, now: datetime | None = None, limit: int = SWEEP_BATCH) -> list[int]:
    """The traces to assemble now: quiet since their last span and with their root, or quiet
    for the orphan period without one; and those whose assembler died (lease expired)."""
    now = now or timezone.now()
    orphan = now - timedelta(seconds=settings.TREUE_OTLP_ORPHAN_SECONDS)
    pending = Q(status=OtlpTrace.Status.PENDING, not_before__lte=now) & (
        Q(root_seen_at__isnull=False) | Q(last_span_at__lte=orphan)
    )
    lost = Q(status=OtlpTrace.Status.RUNNING, lease_expires_at__lt=now)
    return list(
        OtlpTrace.objects.filter(pending | lost)
        .order_by("not_before")
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
