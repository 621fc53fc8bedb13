"""Issue 23, point 2 with LangChain: a chain `{context: retriever, question} | prompt |
ChatOpenAI | StrOutputParser` instrumented by OpenInference's LangChain instrumentor, exported
by the real SDK to a live Treue, the model the local OpenAI-compatible test server.

LangChain's retriever documents carry no score of their own: the score travels in their
metadata, which the instrumentor writes as `document.metadata`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough
from langchain_openai import ChatOpenAI
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from monitoring.models import Answer
from tests.clients.conftest import Treue
from tests.support.openai_server import DEFAULT_ANSWER, FakeOpenAIServer
from tests.traces.otlp import CHUNKS, QUESTION
from traces.models import OtlpTrace
from traces.services import otlp_traces_assemble_due

MODEL = "gen-model"


class Handbook(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [
            Document(page_content=text, metadata={"id": doc_id, "score": score,
                                                  "source": "Prüfordnung.pdf"})
            for text, doc_id, score in CHUNKS
        ]


@pytest.fixture
def provider(treue: Treue, settings: Any, monkeypatch: pytest.MonkeyPatch
             ) -> Iterator[TracerProvider]:
    settings.TREUE_OTLP_QUIET_SECONDS = 0.0
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    provider = TracerProvider(resource=Resource.create(
        {"service.name": "langchain-bot", "treue.use_case": treue.use_case}
    ))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
        endpoint=f"{treue.url}/api/v1/otlp/v1/traces",
        headers={"Authorization": f"Bearer {treue.key}"},
    )))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield provider
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def run_chain(provider: TracerProvider, openai_server: FakeOpenAIServer, *, logprobs: bool
              ) -> str:
    prompt = ChatPromptTemplate.from_messages([
        ("system", "Antworte nur aus den Dokumenten:\n{context}"),
        ("human", "{question}"),
    ])
    llm = ChatOpenAI(base_url=openai_server.base_url, api_key="test",
                     model=MODEL, logprobs=logprobs or None)
    chain = (
        {"context": Handbook(), "question": RunnablePassthrough()} | prompt | llm
        | StrOutputParser()
    )
    # The test's span around the chain stands for a web framework's request span: the trace's
    # root, but no RAG span (stored as a skeleton); the question comes from the chain's span.
    with provider.get_tracer(__name__).start_as_current_span("POST /ask") as request:
        assert chain.invoke(QUESTION) == DEFAULT_ANSWER
        trace_id = format(request.get_span_context().trace_id, "032x")
    assert provider.force_flush(10_000)
    return trace_id


def test_langchain_chain_becomes_an_answer(
    treue: Treue, provider: TracerProvider, openai_server: FakeOpenAIServer
) -> None:
    trace_id = run_chain(provider, openai_server, logprobs=True)
    assert otlp_traces_assemble_due() == 1
    trace = OtlpTrace.objects.get(trace_id=trace_id)
    assert trace.outcome == "created", trace.detail
    answer = Answer.objects.get(external_id=trace_id)
    assert answer.question == QUESTION
    assert answer.text == DEFAULT_ANSWER
    assert answer.model == MODEL
    assert [(c.text, c.source_chunk_id, c.score, c.source) for c in answer.chunks.all()] == [
        (text, doc_id, score, "Prüfordnung.pdf") for text, doc_id, score in CHUNKS
    ]
    assert answer.messages is not None
    assert answer.messages[-1] == {"role": "user", "content": QUESTION}
    assert answer.messages[0]["role"] == "system"
    assert answer.logprobs_status == Answer.LogprobsStatus.OK


def test_langchain_without_logprobs(
    treue: Treue, provider: TracerProvider, openai_server: FakeOpenAIServer
) -> None:
    trace_id = run_chain(provider, openai_server, logprobs=False)
    otlp_traces_assemble_due()
    assert Answer.objects.get(external_id=trace_id).logprobs_status == "none"
