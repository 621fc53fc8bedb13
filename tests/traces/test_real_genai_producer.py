"""Issue 23, point 2's second test: GenAI-convention spans from the real producers. The GenAI
SIG's openai instrumentor (`opentelemetry-instrumentation-openai-v2`) records the model call,
`opentelemetry-util-genai`'s TelemetryHandler the workflow and the retrieval; the real SDK
exports them over OTLP/HTTP to a live Treue. No log-probabilities: no GenAI attribute carries
them, so tier 1 is off for these answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from openai import OpenAI
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.util.genai.handler import TelemetryHandler

from monitoring.models import Answer
from tests.clients.conftest import Treue
from tests.support.openai_server import DEFAULT_ANSWER, FakeOpenAIServer
from tests.traces.otlp import CHUNKS, QUESTION
from traces.models import OtlpTrace
from traces.services import otlp_traces_assemble_due

MODEL = "gen-model"


@pytest.fixture
def provider(treue: Treue, settings: Any, monkeypatch: pytest.MonkeyPatch
             ) -> Iterator[TracerProvider]:
    settings.TREUE_OTLP_QUIET_SECONDS = 0.0
    # Without these the instrumentor records no prompts and no completions.
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    provider = TracerProvider(resource=Resource.create(
        {"service.name": "genai-bot", "treue.use_case": treue.use_case}
    ))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
        endpoint=f"{treue.url}/api/v1/otlp/v1/traces",
        headers={"Authorization": f"Bearer {treue.key}"},
    )))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield provider
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def genai_loop(provider: TracerProvider, openai_server: FakeOpenAIServer,
               documents: list[dict[str, Any]]) -> str:
    handler = TelemetryHandler(tracer_provider=provider)
    client = OpenAI(base_url=openai_server.base_url, api_key="test")
    with handler.workflow("rag") as workflow:
        # Not `as`: the context manager hands back the base GenAIInvocation's type.
        retrieval = handler.retrieval(data_source_id="handbuch")
        with retrieval:
            retrieval.query_text = QUESTION
            retrieval.documents = documents
        client.chat.completions.create(model=MODEL, messages=[
            {"role": "system", "content": "Antworte aus den Dokumenten."},
            {"role": "user", "content": QUESTION},
        ])
        trace_id = format(workflow.span.get_span_context().trace_id, "032x")
    assert provider.force_flush(10_000)
    return trace_id


def test_genai_spans_become_an_answer(
    treue: Treue, provider: TracerProvider, openai_server: FakeOpenAIServer
) -> None:
    trace_id = genai_loop(provider, openai_server, [
        {"id": doc_id, "score": score, "content": text} for text, doc_id, score in CHUNKS
    ])
    assert otlp_traces_assemble_due() == 1
    answer = Answer.objects.get(external_id=trace_id)
    assert answer.question == QUESTION
    assert answer.text == DEFAULT_ANSWER
    assert answer.model == MODEL
    assert [(c.text, c.source_chunk_id, c.score) for c in answer.chunks.all()] == CHUNKS
    assert answer.messages == [
        {"role": "system", "content": "Antworte aus den Dokumenten."},
        {"role": "user", "content": QUESTION},
    ]
    assert answer.logprobs_status == Answer.LogprobsStatus.NONE
    otlp = answer.metadata["otlp"]
    assert otlp["conventions"] == ["genai"]
    assert otlp["usage"].get("prompt", 0) > 0 and otlp["usage"].get("completion", 0) > 0


def test_genai_documents_without_content_are_not_judgeable(
    treue: Treue, provider: TracerProvider, openai_server: FakeOpenAIServer
) -> None:
    """util-genai's own documents carry only id and score."""
    trace_id = genai_loop(provider, openai_server, [{"id": "d1", "score": 0.8}])
    otlp_traces_assemble_due()
    assert OtlpTrace.objects.get(trace_id=trace_id).outcome == "no_chunk_text"
    assert not Answer.objects.exists()
