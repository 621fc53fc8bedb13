"""treue_client.langchain with the real langchain-core and langchain-openai: a RAG chain's
answer reaches a live Treue with its question, chunks and scores, model, messages and
log-probabilities (ChatOpenAI over HTTP to the local OpenAI-compatible server, through the real
openai SDK); a chain that raises and a run without a retriever record nothing; an error of the
handler never reaches the chain."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import openai
import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, RunnableLambda, RunnablePassthrough
from langchain_core.runnables import chain as chain_decorator
from langchain_openai import ChatOpenAI
from openai.types.chat import ChatCompletionMessageParam
from treue_client.langchain import TreueCallbackHandler, with_logprobs

from monitoring.models import Answer
from tests.clients.conftest import logprob_tokens
from tests.support.openai_server import FakeOpenAIServer

# Nothing here may reach the internet (a tokenizer download, LangSmith tracing).
pytestmark = pytest.mark.usefixtures("no_internet")

QUESTION = "Wie lange gilt die Widerrufsfrist?"
SYSTEM = "Antworte nur aus den Quellen:\n\n{context}"
DOCUMENTS = [
    Document(
        "Die Widerrufsfrist beträgt 14 Tage ab Erhalt der Ware.",
        id="agb-7",
        metadata={"score": 0.82, "source": "AGB.pdf"},
    ),
    Document(
        "Rücksendungen sind kostenlos.",
        metadata={"relevance_score": 0.41, "id": 12, "file_name": "FAQ.md"},
    ),
]


class FixedRetriever(BaseRetriever):
    """Stands in for a vector store's retriever: the same documents for every query."""

    documents: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self.documents


def chat_model(server: FakeOpenAIServer, **options: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="gen-model", base_url=server.base_url, api_key="sk-test", max_retries=0,
        **options,
    )


def rag_chain(llm: Any, documents: list[Document] = DOCUMENTS) -> Any:
    prompt = ChatPromptTemplate.from_messages([("system", SYSTEM), ("human", "{question}")])

    def join(documents: list[Document]) -> str:
        return "\n\n".join(d.page_content for d in documents)

    retriever = FixedRetriever(documents=documents)
    return (
        {"context": retriever | join, "question": RunnablePassthrough()}
        | prompt
        | llm
        | StrOutputParser()
    )


def only_answer() -> Answer:
    answers = list(Answer.objects.all())
    assert len(answers) == 1, answers
    return answers[0]


def test_a_rag_chain_is_recorded_with_chunks_scores_model_messages_and_logprobs(
    make_client: Any, openai_server: FakeOpenAIServer
) -> None:
    client = make_client()
    handler = TreueCallbackHandler(client)
    chain = rag_chain(with_logprobs(chat_model(openai_server)))

    answer = chain.invoke(QUESTION, config={"callbacks": [handler]})

    sent = openai_server.requests[-1]
    assert sent["logprobs"] is True
    context = "\n\n".join(d.page_content for d in DOCUMENTS)
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": SYSTEM.format(context=context)},
        {"role": "user", "content": QUESTION},
    ]
    assert sent["messages"] == messages
    # What the model says to the same request through the SDK: the tokens Treue must hold.
    direct = openai.OpenAI(
        api_key="sk-test", base_url=openai_server.base_url, max_retries=0
    ).chat.completions.create(model="gen-model", messages=messages, logprobs=True)
    assert client.flush(10)
    stored = only_answer()
    assert stored.question == QUESTION
    assert stored.text == answer == direct.choices[0].message.content
    assert stored.model == "gen-model"
    assert stored.messages == messages
    assert stored.logprobs_status == "ok"
    content = logprob_tokens(direct)
    assert len(content) > 20
    assert stored.token_data is not None
    assert stored.token_data["t"] == [t.token for t in content]
    assert stored.token_data["lp"] == [t.logprob for t in content]
    chunks = [
        (c.text, c.source_chunk_id, c.score, c.source) for c in stored.chunks.order_by("rank")
    ]
    assert chunks == [
        ("Die Widerrufsfrist beträgt 14 Tage ab Erhalt der Ware.", "agb-7", 0.82, "AGB.pdf"),
        ("Rücksendungen sind kostenlos.", "12", 0.41, "FAQ.md"),
    ]
    assert client.stats()["sent"] == 1 and client.stats()["rejected"] == 0
    assert not handler._tree.runs and not handler._tree.root_of


def test_config_metadata_gives_the_id_question_and_metadata_and_a_resend_is_one_answer(
    make_client: Any, openai_server: FakeOpenAIServer
) -> None:
    client = make_client()
    handler = TreueCallbackHandler(client)
    # A chain whose input is a dict: the question is read from its "question".
    prompt = ChatPromptTemplate.from_messages([("system", SYSTEM), ("human", "{question}")])
    retrieve = RunnableLambda(lambda x: x["question"]) | FixedRetriever(documents=DOCUMENTS)
    chain = (
        RunnablePassthrough.assign(context=retrieve)
        | prompt
        | with_logprobs(chat_model(openai_server))
        | StrOutputParser()
    )
    config: RunnableConfig = {
        "callbacks": [handler],
        "metadata": {"treue_external_id": "chat-41/turn-3", "treue_metadata": {"turn": 3}},
    }

    chain.invoke({"question": QUESTION, "tenant": "nord"}, config=config)
    chain.invoke({"question": QUESTION, "tenant": "nord"}, config=config)

    assert client.flush(10)
    stored = only_answer()
    assert (stored.external_id, stored.metadata, stored.question) == (
        "chat-41/turn-3", {"turn": 3}, QUESTION
    )
    # The second one was recognised as the same answer (200, nothing stored twice).
    assert client.stats()["sent"] == 2


def test_a_step_that_returns_documents_counts_as_the_retrieval(
    make_client: Any, openai_server: FakeOpenAIServer
) -> None:
    """A vector store's as_retriever() drops the scores; a function that searches with
    scores and returns documents is how a chain keeps them. The last step that returned
    documents (here a filter after the retriever) gives the chunks."""
    client = make_client()
    handler = TreueCallbackHandler(client)

    @chain_decorator
    def search(question: str) -> list[Document]:
        found = list(zip(DOCUMENTS, [0.9, 0.4], strict=True))  # as similarity_search_with_score
        return [Document(d.page_content, metadata={"score": s}) for d, s in found]

    def above_half(documents: list[Document]) -> list[Document]:
        return [d for d in documents if d.metadata["score"] > 0.5]

    prompt = ChatPromptTemplate.from_messages([("system", SYSTEM), ("human", "{question}")])
    steps = search | RunnableLambda(above_half) | (lambda ds: ds[0].page_content)
    rag = (
        {"context": steps, "question": RunnablePassthrough()}
        | prompt
        | with_logprobs(chat_model(openai_server))
        | StrOutputParser()
    )

    rag.invoke(QUESTION, config={"callbacks": [handler]})

    assert client.flush(10)
    stored = only_answer()
    assert [(c.text, c.score) for c in stored.chunks.all()] == [
        ("Die Widerrufsfrist beträgt 14 Tage ab Erhalt der Ware.", 0.9)
    ]
    assert stored.logprobs_status == "ok"


def test_batched_and_async_runs_are_kept_apart(
    make_client: Any, openai_server: FakeOpenAIServer
) -> None:
    client = make_client()
    handler = TreueCallbackHandler(client)
    chain = rag_chain(with_logprobs(chat_model(openai_server)))
    questions = [f"Frage {i}: Wie lange gilt die Frist?" for i in range(4)]

    chain.batch(questions[:3], config={"callbacks": [handler], "max_concurrency": 3})
    asyncio.run(chain.ainvoke(questions[3], config={"callbacks": [handler]}))

    assert client.flush(10)
    stored = list(Answer.objects.all())
    assert sorted(a.question for a in stored) == questions
    for answer in stored:
        assert answer.messages is not None
        assert answer.messages[-1] == {"role": "user", "content": answer.question}
        assert answer.chunks.count() == 2
        assert answer.logprobs_status == "ok"
    assert not handler._tree.runs


def test_a_chain_that_raises_records_nothing(
    make_client: Any, openai_server: FakeOpenAIServer
) -> None:
    client = make_client()
    handler = TreueCallbackHandler(client)

    def refuse(answer: str) -> str:
        raise ValueError("the answer failed the service's own check")

    # After the model has answered: the caller never got this answer.
    failing = rag_chain(with_logprobs(chat_model(openai_server))) | RunnableLambda(refuse)
    with pytest.raises(ValueError, match="own check"):
        failing.invoke(QUESTION, config={"callbacks": [handler]})
    # The model itself failing.
    openai_server.fail_next(500)
    with pytest.raises(openai.InternalServerError):
        rag_chain(chat_model(openai_server)).invoke(QUESTION, config={"callbacks": [handler]})

    assert len(openai_server.requests) == 2
    assert client.flush(10)
    assert Answer.objects.count() == 0
    assert client.stats() == {
        "sent": 0, "retried": 0, "dropped": 0, "rejected": 0, "failed": 0, "queued": 0
    }
    assert not handler._tree.runs and not handler._tree.root_of


def test_a_run_without_a_retriever_is_skipped(
    make_client: Any, openai_server: FakeOpenAIServer
) -> None:
    client = make_client()
    handler = TreueCallbackHandler(client)
    llm = with_logprobs(chat_model(openai_server))
    prompt = ChatPromptTemplate.from_messages([("human", "{question}")])

    answer = (prompt | llm | StrOutputParser()).invoke(
        {"question": QUESTION}, config={"callbacks": [handler]})
    llm.invoke("Hallo", config={"callbacks": [handler]})

    assert answer and len(openai_server.requests) == 2
    assert client.flush(10)
    assert Answer.objects.count() == 0
    assert client.stats()["rejected"] == 0
    assert not handler._tree.runs and not handler._tree.root_of


def test_a_handler_error_never_reaches_the_chain(
    make_client: Any,
    openai_server: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = make_client()
    handler = TreueCallbackHandler(client)
    chain = rag_chain(with_logprobs(chat_model(openai_server)))

    def broken_record(**kwargs: Any) -> None:
        raise RuntimeError("record broke")

    # Recording itself fails.
    with monkeypatch.context() as patch:
        patch.setattr(client, "record", broken_record)
        with caplog.at_level(logging.ERROR, logger="treue_client"):
            first = chain.invoke(QUESTION, config={"callbacks": [handler]})

    # A document the handler cannot read (its source's str() raises) breaks a callback
    # in the middle of the run.
    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    unreadable = [Document("Die Frist beträgt 14 Tage.", metadata={"source": Unprintable()})]
    with caplog.at_level(logging.ERROR, logger="treue_client"):
        second = rag_chain(with_logprobs(chat_model(openai_server)), unreadable).invoke(
            QUESTION, config={"callbacks": [handler]}
        )

    assert first and second  # both chains answered their caller
    assert client.flush(10)
    assert Answer.objects.count() == 0
    # Each lost answer counted and logged, with its reason.
    assert client.stats()["rejected"] == 2
    logged = caplog.text
    assert "record broke" in logged and "no text" in logged
    assert not handler._tree.runs

    # The handler goes on recording afterwards.
    chain.invoke(QUESTION, config={"callbacks": [handler]})
    assert client.flush(10)
    assert only_answer().logprobs_status == "ok"


def test_without_logprobs_the_answer_is_recorded_and_the_log_says_how_to_ask(
    make_client: Any, openai_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client()
    handler = TreueCallbackHandler(client)

    with caplog.at_level(logging.WARNING, logger="treue_client"):
        rag_chain(chat_model(openai_server)).invoke(QUESTION, config={"callbacks": [handler]})

    assert "logprobs" not in openai_server.requests[-1]
    assert "with_logprobs" in caplog.text
    assert client.flush(10)
    assert only_answer().logprobs_status == "none"
