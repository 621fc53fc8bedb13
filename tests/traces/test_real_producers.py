"""Issue 23, point 2: the receiver against the real producers. A small RAG loop instrumented
with OpenInference's openai instrumentor and its OITracer, exported by the real OpenTelemetry
SDK (BatchSpanProcessor, OTLP/HTTP protobuf exporter) to a live Treue, its model the local
OpenAI-compatible test server; the answer is then read back through the ingest API.

Never `trace.set_tracer_provider` (once per process, and pytest-xdist workers run many tests
in one): the provider is handed to the instrumentor and the tracer, and shut down after.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai import OpenAI
from openinference.instrumentation import (
    Document,
    OITracer,
    TraceConfig,
    get_retriever_attributes,
)
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from monitoring.models import Answer
from tests.clients.conftest import Treue
from tests.support.openai_server import DEFAULT_ANSWER, FakeOpenAIServer
from tests.traces.otlp import CHUNKS, QUESTION, to_json
from traces.models import OtlpTrace
from traces.services import otlp_traces_assemble_due

SYSTEM = "Antworte nur aus den Dokumenten."
MODEL = "gen-model"


@pytest.fixture
def provider(treue: Treue, settings: Any, request: pytest.FixtureRequest
             ) -> Iterator[TracerProvider]:
    settings.TREUE_OTLP_QUIET_SECONDS = 0.0
    compression = getattr(request, "param", Compression.NoCompression)
    provider = TracerProvider(resource=Resource.create(
        {"service.name": "rag-bot", "treue.use_case": treue.use_case}
    ))
    exporter = OTLPSpanExporter(
        endpoint=f"{treue.url}/api/v1/otlp/v1/traces",
        headers={"Authorization": f"Bearer {treue.key}"},
        compression=compression,
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield provider
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def rag_loop(provider: TracerProvider, openai_server: FakeOpenAIServer, *, logprobs: bool
             ) -> str:
    """Retrieve, then ask the model; returns the trace id."""
    tracer = OITracer(provider.get_tracer(__name__), config=TraceConfig())
    client = OpenAI(base_url=openai_server.base_url, api_key="test")
    with tracer.start_as_current_span("rag", openinference_span_kind="chain") as root:
        root.set_input(QUESTION)
        with tracer.start_as_current_span("retrieve", openinference_span_kind="retriever") as r:
            r.set_input(QUESTION)
            r.set_attributes(get_retriever_attributes(documents=[
                Document(content=text, id=doc_id, score=score) for text, doc_id, score in CHUNKS
            ]))
        context = "\n".join(text for text, _, _ in CHUNKS)
        completion = client.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "system", "content": f"{SYSTEM}\n{context}"},
                {"role": "user", "content": QUESTION},
            ],
            logprobs=logprobs,
        )
        root.set_output(completion.choices[0].message.content)
        trace_id = format(root.get_span_context().trace_id, "032x")
    assert provider.force_flush(10_000)
    return trace_id


def read_back(treue: Treue, trace_id: str) -> dict[str, Any]:
    answer = Answer.objects.get(external_id=trace_id)
    response = httpx.get(f"{treue.url}/api/v1/answers/{answer.pk}",
                         headers={"Authorization": f"Bearer {treue.key}"})
    assert response.status_code == 200
    return response.json()


@pytest.mark.parametrize(
    "provider", [Compression.NoCompression, Compression.Gzip], indirect=True, ids=["plain", "gzip"]
)
def test_openinference_openai_loop_becomes_an_answer(
    treue: Treue, provider: TracerProvider, openai_server: FakeOpenAIServer
) -> None:
    trace_id = rag_loop(provider, openai_server, logprobs=True)
    assert OtlpTrace.objects.get(trace_id=trace_id).root_seen_at is not None
    assert otlp_traces_assemble_due() == 1

    detail = read_back(treue, trace_id)
    assert detail["use_case"] == treue.use_case
    assert detail["question"] == QUESTION
    assert detail["answer"] == DEFAULT_ANSWER
    assert detail["model"] == MODEL  # the test server reports the model asked for
    assert [(c["text"], c["id"], c["score"]) for c in detail["chunks"]] == CHUNKS
    # The ChatCompletion in the LLM span's output.value carries the tokens: tier 1 ran.
    assert detail["logprobs_status"] == "ok"
    assert detail["warnings"] == []
    answer = Answer.objects.get(external_id=trace_id)
    assert answer.messages is not None
    assert answer.messages[-1] == {"role": "user", "content": QUESTION}
    assert answer.messages[0]["role"] == "system"
    assert answer.messages[0]["content"].startswith(SYSTEM)
    assert answer.metadata["otlp"]["conventions"] == ["openinference"]
    assert answer.metadata["otlp"]["usage"].get("total", 0) > 0


def test_without_logprobs_tier_1_is_off(
    treue: Treue, provider: TracerProvider, openai_server: FakeOpenAIServer
) -> None:
    trace_id = rag_loop(provider, openai_server, logprobs=False)
    otlp_traces_assemble_due()
    detail = read_back(treue, trace_id)
    assert detail["answer"] == DEFAULT_ANSWER
    assert detail["logprobs_status"] == "none"
    assert detail["warnings"] == ["no logprobs: tier 1 could not check this answer"]


def test_spans_of_one_trace_in_two_exports_are_assembled_once(
    treue: Treue, provider: TracerProvider, openai_server: FakeOpenAIServer
) -> None:
    """The children flushed while the root is still open; the root in a second export."""
    tracer = OITracer(provider.get_tracer(__name__), config=TraceConfig())
    client = OpenAI(base_url=openai_server.base_url, api_key="test")
    with tracer.start_as_current_span("rag", openinference_span_kind="chain") as root:
        root.set_input(QUESTION)
        with tracer.start_as_current_span("retrieve", openinference_span_kind="retriever") as r:
            r.set_attributes(get_retriever_attributes(documents=[
                Document(content=text, id=doc_id, score=score) for text, doc_id, score in CHUNKS
            ]))
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": QUESTION}]
        )
        assert provider.force_flush(10_000)
        trace_id = format(root.get_span_context().trace_id, "032x")
        assert otlp_traces_assemble_due() == 0  # no root yet
        assert OtlpTrace.objects.get(trace_id=trace_id).span_count == 2
    assert provider.force_flush(10_000)
    assert otlp_traces_assemble_due() == 1
    assert otlp_traces_assemble_due() == 0
    assert Answer.objects.filter(external_id=trace_id).count() == 1
    assert read_back(treue, trace_id)["question"] == QUESTION


def test_wrong_key_stores_nothing(treue: Treue, openai_server: FakeOpenAIServer) -> None:
    exporter = OTLPSpanExporter(endpoint=f"{treue.url}/api/v1/otlp/v1/traces",
                                headers={"Authorization": "Bearer trk_wrong"})
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with OITracer(provider.get_tracer(__name__), config=TraceConfig()).start_as_current_span(
        "rag", openinference_span_kind="chain"
    ):
        pass
    assert exporter.export(memory.get_finished_spans()) == SpanExportResult.FAILURE
    exporter.shutdown()
    provider.shutdown()
    assert not OtlpTrace.objects.exists()


def test_sdk_spans_as_otlp_json(treue: Treue, settings: Any,
                                openai_server: FakeOpenAIServer) -> None:
    """The JSON encoding with spans the SDK made: its own protobuf encoder, then protobuf's JSON
    mapping with hex ids (what the OTLP/JSON exporters write; the json-http exporter for
    1.45.2 is not released)."""
    settings.TREUE_OTLP_QUIET_SECONDS = 0.0
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"treue.use_case": treue.use_case}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        trace_id = rag_loop(provider, openai_server, logprobs=True)
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    body = to_json(encode_spans(memory.get_finished_spans()))
    response = httpx.post(f"{treue.url}/api/v1/otlp/v1/traces", content=body, headers={
        "Authorization": f"Bearer {treue.key}", "Content-Type": "application/json",
    })
    assert (response.status_code, response.json()) == (200, {})
    assert otlp_traces_assemble_due() == 1
    detail = read_back(treue, trace_id)
    assert (detail["question"], detail["answer"], detail["logprobs_status"]) == (
        QUESTION, DEFAULT_ANSWER, "ok"
    )
