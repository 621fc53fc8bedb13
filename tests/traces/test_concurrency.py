"""Receipt and assembly under real concurrency, on PostgreSQL (SQLite serialises writers).

Exports of spans of the same new traces at once create each trace once and store every span;
sweeps running at once assemble each trace once; spans that arrive while a sweep assembles
their trace are either in its answer or refused as late, never silently lost."""

from typing import Any

import pytest
from django.test import Client

from monitoring.models import Answer
from monitoring.services.use_cases import service_create, use_case_create
from tests.monitoring.test_ingest_concurrency import run_together
from tests.traces.conftest import OtlpClient
from tests.traces.otlp import rag_spans, request, span, trace_id
from traces.models import OtlpSpan, OtlpTrace
from traces.services import otlp_traces_assemble_due

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 8


@pytest.fixture
def key(settings: Any) -> str:
    settings.TREUE_OTLP_QUIET_SECONDS = 0.0
    settings.TREUE_API_RATE_LIMIT = 0
    use_case = use_case_create(slug="kundenservice", name="K", language="de")
    return service_create(name="rag-bot", use_cases=[use_case])[1]


def test_concurrent_exports_of_the_same_traces(key: str) -> None:
    traces = [trace_id(100 + n) for n in range(4)]

    def export(i: int) -> int:
        # Each thread sends one LLM span of its own for every trace, in its own order.
        spans = [
            span(t, 10 + i, parent=1, attrs={"openinference.span.kind": "LLM"})
            for t in (traces if i % 2 else traces[::-1])
        ]
        return OtlpClient(Client(), key).post(request(spans)).status_code

    assert run_together(THREADS, export) == [200] * THREADS
    assert OtlpTrace.objects.count() == 4
    assert OtlpSpan.objects.count() == 4 * THREADS
    assert {t.span_count for t in OtlpTrace.objects.all()} == {THREADS}


def test_concurrent_sweeps_assemble_each_trace_once(key: str) -> None:
    for n in range(6):
        OtlpClient(Client(), key).post(request(rag_spans(trace_id(200 + n))))
    assembled = run_together(4, lambda i: otlp_traces_assemble_due())
    assert sum(assembled) == 6
    assert Answer.objects.count() == 6
    assert set(OtlpTrace.objects.values_list("outcome", flat=True)) == {"created"}


def test_spans_racing_the_sweep_are_assembled_or_refused(key: str) -> None:
    for round in range(5):
        trace = trace_id(300 + round)
        OtlpClient(Client(), key).post(request(rag_spans(trace)))
        late = span(trace, 50, parent=1, attrs={"llm.extra": "x"})

        def work(i: int, trace: str = trace, late: Any = late) -> Any:
            if i == 0:
                return otlp_traces_assemble_due()
            response = OtlpClient(Client(), key).post(request([late]))
            return response.status_code, response.content

        _, (status, body) = run_together(2, work)
        assert status == 200
        row = OtlpTrace.objects.get(trace_id=trace)
        refused = body != b""
        assert row.status == "done" or not refused
        if row.status == "done":
            answer = Answer.objects.get(external_id=trace)
            # In the answer (its 3 spans and the late one) or refused as late: one or the other.
            assert answer.metadata["otlp"]["spans"] == (3 if refused else 4)
        else:  # the span came first and moved the trace's quiet period on: assembled next
            assert otlp_traces_assemble_due() == 1
            assert Answer.objects.get(external_id=trace).metadata["otlp"]["spans"] == 4
