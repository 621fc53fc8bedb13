"""treue_client.llama_index with the real llama-index-core: a query engine's answer reaches a
live Treue with its question, chunks and scores, model, messages and log-probabilities (a small
CustomLLM on the real openai SDK over HTTP to the local OpenAI-compatible server, standing in for
llama-index-llms-openai, which needs openai<3); a query that raises and a call without a
retriever record nothing; an error of the handlers never reaches the caller."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.base.response.schema import StreamingResponse
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from treue_client.llama_index import TreueInstrumentation, instrument_llama_index

from monitoring.models import Answer
from tests.clients.conftest import logprob_tokens
from tests.support.llama_index_llm import OpenAIChatLLM
from tests.support.openai_server import FakeOpenAIServer

# Nothing here may reach the internet (a tokenizer download, LangSmith tracing).
pytestmark = pytest.mark.usefixtures("no_internet")

QUESTION = "Wie lange gilt die Widerrufsfrist?"


def nodes() -> list[NodeWithScore]:
    return [
        NodeWithScore(
            node=TextNode(
                id_="agb-7", text="Die Widerrufsfrist beträgt 14 Tage ab Erhalt der Ware.",
                metadata={"file_name": "AGB.pdf"},
            ),
            score=0.82,
        ),
        NodeWithScore(
            node=TextNode(id_="faq-2", text="Rücksendungen sind kostenlos.",
                          metadata={"source": "FAQ.md"}),
            score=0.41,
        ),
    ]


class FixedRetriever(BaseRetriever):
    """Stands in for a vector index's retriever: the same nodes for every query."""

    def __init__(self, found: list[NodeWithScore] | None = None, error: Exception | None = None):
        self.found = nodes() if found is None else found
        self.error = error
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.error is not None:
            raise self.error
        return list(self.found)


def llm(server: FakeOpenAIServer, **options: Any) -> OpenAIChatLLM:
    return OpenAIChatLLM(
        model="gen-model", api_key="sk-test", api_base=server.base_url, **options
    )


def engine(server: FakeOpenAIServer, retriever: BaseRetriever | None = None,
           **options: Any) -> RetrieverQueryEngine:
    return RetrieverQueryEngine.from_args(
        retriever or FixedRetriever(), llm=llm(server, **{"logprobs": True, **options})
    )


@pytest.fixture
def treue_client(make_client: Any) -> Any:
    return make_client()


@pytest.fixture
def instrumented(treue_client: Any) -> Iterator[TreueInstrumentation]:
    # On LlamaIndex's root dispatcher, as a service would; removed again, since the
    # dispatcher is global to this test process.
    instrumentation = instrument_llama_index(treue_client)
    yield instrumentation
    instrumentation.remove()


def only_answer() -> Answer:
    answers = list(Answer.objects.all())
    assert len(answers) == 1, answers
    return answers[0]


def open_state(instrumentation: TreueInstrumentation) -> int:
    collector = instrumentation._collector
    return len(collector.tree.runs) + len(collector.tree.root_of)


def test_a_query_is_recorded_with_chunks_scores_model_messages_and_logprobs(
    treue_client: Any, instrumented: TreueInstrumentation, openai_server: FakeOpenAIServer
) -> None:
    response = engine(openai_server).query(QUESTION)

    sent = openai_server.requests[-1]
    assert sent["logprobs"] is True
    messages = sent["messages"]
    assert QUESTION in messages[-1]["content"] and "14 Tage" in messages[-1]["content"]
    direct = openai.OpenAI(
        api_key="sk-test", base_url=openai_server.base_url, max_retries=0
    ).chat.completions.create(model="gen-model", messages=messages, logprobs=True)
    assert treue_client.flush(10)
    stored = only_answer()
    assert stored.question == QUESTION
    assert stored.text == str(response) == direct.choices[0].message.content
    assert stored.model == "gen-model"
    assert stored.messages == messages
    assert stored.logprobs_status == "ok"
    content = logprob_tokens(direct)
    assert len(content) > 20
    assert stored.token_data is not None
    assert stored.token_data["t"] == [t.token for t in content]
    assert stored.token_data["lp"] == [t.logprob for t in content]
    chunks = [(c.text, c.source_chunk_id, c.score, c.source) for c in stored.chunks.all()]
    assert chunks == [
        ("Die Widerrufsfrist beträgt 14 Tage ab Erhalt der Ware.", "agb-7", 0.82, "AGB.pdf"),
        ("Rücksendungen sind kostenlos.", "faq-2", 0.41, "FAQ.md"),
    ]
    assert treue_client.stats()["sent"] == 1
    assert open_state(instrumented) == 0


def test_tags_give_the_id_question_and_metadata_and_a_resend_is_one_answer(
    treue_client: Any, instrumented: TreueInstrumentation, openai_server: FakeOpenAIServer
) -> None:
    query_engine = engine(openai_server)
    tags = {"treue_external_id": "chat-41/turn-3", "treue_metadata": {"turn": 3},
            "treue_question": "Widerrufsfrist?"}

    for _ in range(2):
        with instrument_tags(tags):
            query_engine.query(QUESTION)

    assert treue_client.flush(10)
    stored = only_answer()
    assert (stored.external_id, stored.metadata, stored.question) == (
        "chat-41/turn-3", {"turn": 3}, "Widerrufsfrist?"
    )
    assert treue_client.stats()["sent"] == 2


def test_async_and_threaded_queries_are_kept_apart(
    treue_client: Any, instrumented: TreueInstrumentation, openai_server: FakeOpenAIServer
) -> None:
    query_engine = engine(openai_server)
    questions = [f"Frage {i}: Wie lange gilt die Frist?" for i in range(4)]

    async def main() -> None:
        await asyncio.gather(*(query_engine.aquery(q) for q in questions[:2]))
        await asyncio.gather(*(asyncio.to_thread(query_engine.query, q) for q in questions[2:]))

    asyncio.run(main())

    assert treue_client.flush(10)
    stored = list(Answer.objects.all())
    assert sorted(a.question for a in stored) == questions
    for answer in stored:
        assert answer.messages is not None
        assert answer.question in answer.messages[-1]["content"]
        assert answer.chunks.count() == 2
        assert answer.logprobs_status == "ok"
    assert open_state(instrumented) == 0


def test_a_query_that_raises_records_nothing(
    treue_client: Any, instrumented: TreueInstrumentation, openai_server: FakeOpenAIServer
) -> None:
    openai_server.fail_next(500)
    with pytest.raises(openai.InternalServerError):
        engine(openai_server).query(QUESTION)
    failing = FixedRetriever(error=RuntimeError("index unavailable"))
    with pytest.raises(RuntimeError, match="index unavailable"):
        engine(openai_server, failing).query(QUESTION)

    assert len(openai_server.requests) == 1
    assert treue_client.flush(10)
    assert Answer.objects.count() == 0
    assert treue_client.stats() == {
        "sent": 0, "retried": 0, "dropped": 0, "rejected": 0, "failed": 0, "queued": 0
    }
    assert open_state(instrumented) == 0


def test_a_call_without_a_retriever_is_skipped(
    treue_client: Any, instrumented: TreueInstrumentation, openai_server: FakeOpenAIServer
) -> None:
    model = llm(openai_server, logprobs=True)

    reply = model.chat([ChatMessage(role="user", content=QUESTION)])
    completion = model.complete(QUESTION)

    assert reply.message.content and completion.text
    assert len(openai_server.requests) == 2
    assert treue_client.flush(10)
    assert Answer.objects.count() == 0
    assert treue_client.stats()["rejected"] == 0
    assert open_state(instrumented) == 0


def test_a_handler_error_never_reaches_the_caller(
    treue_client: Any,
    instrumented: TreueInstrumentation,
    openai_server: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken_record(**kwargs: Any) -> None:
        raise RuntimeError("record broke")

    with monkeypatch.context() as patch:
        patch.setattr(treue_client, "record", broken_record)
        with caplog.at_level(logging.ERROR, logger="treue_client"):
            first = engine(openai_server).query(QUESTION)

    # A node the handler cannot read (its source's str() raises; kept out of the prompt, so
    # LlamaIndex itself never reads it) breaks the event handler.
    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    unreadable = [NodeWithScore(
        node=TextNode(text="Die Frist beträgt 14 Tage.", metadata={"source": Unprintable()},
                      excluded_llm_metadata_keys=["source"]),
        score=0.5,
    )]
    with caplog.at_level(logging.ERROR, logger="treue_client"):
        second = engine(openai_server, FixedRetriever(unreadable)).query(QUESTION)

    assert str(first) and str(second)
    assert treue_client.flush(10)
    assert Answer.objects.count() == 0
    assert treue_client.stats()["rejected"] == 2
    assert "record broke" in caplog.text and "no text" in caplog.text
    assert open_state(instrumented) == 0

    engine(openai_server).query(QUESTION)
    assert treue_client.flush(10)
    assert only_answer().logprobs_status == "ok"


def test_a_streaming_query_is_left_to_the_caller_and_not_recorded(
    treue_client: Any, instrumented: TreueInstrumentation, openai_server: FakeOpenAIServer
) -> None:
    streaming = RetrieverQueryEngine.from_args(
        FixedRetriever(), llm=llm(openai_server, logprobs=True), streaming=True
    )

    response = streaming.query(QUESTION)
    # Nothing of the stream was taken before the caller reads it.
    assert isinstance(response, StreamingResponse)
    assert response.response_txt is None
    text = "".join(response.response_gen)

    plain = openai.OpenAI(
        api_key="sk-test", base_url=openai_server.base_url, max_retries=0
    ).chat.completions.create(model="gen-model", messages=openai_server.requests[-1]["messages"])
    assert text == plain.choices[0].message.content
    assert treue_client.flush(10)
    assert Answer.objects.count() == 0
    assert treue_client.stats()["rejected"] == 0
    assert open_state(instrumented) == 0


def test_removed_instrumentation_records_nothing(
    treue_client: Any, openai_server: FakeOpenAIServer
) -> None:
    instrumentation = instrument_llama_index(treue_client)
    instrumentation.remove()

    engine(openai_server).query(QUESTION)

    assert treue_client.flush(10)
    assert Answer.objects.count() == 0


def test_without_logprobs_the_answer_is_recorded_and_the_log_says_how_to_ask(
    treue_client: Any,
    instrumented: TreueInstrumentation,
    openai_server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="treue_client"):
        engine(openai_server, logprobs=None).query(QUESTION)

    assert "logprobs" not in openai_server.requests[-1]
    assert "logprobs=True" in caplog.text
    assert treue_client.flush(10)
    assert only_answer().logprobs_status == "none"
