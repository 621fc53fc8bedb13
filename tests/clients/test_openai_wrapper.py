"""instrument() with the real openai SDK against the local OpenAI-compatible server, recording
into a live Treue server: log-probabilities arrive intact, the caller's choices stand, async
clients work, and a provider that rejects logprobs still answers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from treue_client import instrument

from monitoring.models import Answer
from tests.clients.conftest import Treue, free_port, logprob_tokens
from tests.support.openai_server import FakeOpenAIServer

MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "Antworte nur aus den Quellen."},
    {"role": "user", "content": "Quellen: Prüfintervall: 5 Jahre.\n\nFrage: Wie oft prüfen?"},
]
CHUNKS = [{"text": "Prüfintervall: 5 Jahre.", "id": "c-7", "score": 0.82, "source": "PO.pdf"}]


def llm(server: FakeOpenAIServer) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", base_url=server.base_url, max_retries=0)


def only_answer() -> Answer:
    answers = list(Answer.objects.all())
    assert len(answers) == 1
    return answers[0]


def test_the_completion_is_returned_unchanged_and_recorded_with_its_logprobs(
    make_client: Any, openai_server: FakeOpenAIServer, treue: Treue
) -> None:
    client = make_client()
    plain = llm(openai_server).chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, logprobs=True
    )
    wrapped = instrument(llm(openai_server), client)

    completion = wrapped.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, treue_chunks=CHUNKS
    )

    assert type(completion) is type(plain)
    assert completion.choices[0].message.content == plain.choices[0].message.content
    sent = openai_server.requests[-1]
    assert sent["logprobs"] is True and "top_logprobs" not in sent and "treue_chunks" not in sent
    assert client.flush(10)
    stored = only_answer()
    content = logprob_tokens(completion)
    assert stored.token_data is not None
    assert stored.token_data["t"] == [t.token for t in content]
    assert stored.token_data["lp"] == [t.logprob for t in content]
    assert len(content) > 20
    assert stored.text == completion.choices[0].message.content
    assert stored.model == completion.model
    assert stored.question == MESSAGES[-1]["content"]
    assert stored.messages == MESSAGES
    assert stored.logprobs_status == "ok"
    chunk = stored.chunks.get()
    assert (chunk.text, chunk.source_chunk_id, chunk.score, chunk.source) == (
        "Prüfintervall: 5 Jahre.", "c-7", 0.82, "PO.pdf"
    )

    # The same through the API: the answer Treue serves back is the one the model gave.
    detail = httpx.get(
        f"{treue.url}/api/v1/answers/{stored.pk}",
        headers={"Authorization": f"Bearer {treue.key}"},
    ).json()
    assert detail["answer"] == completion.choices[0].message.content


def test_the_callers_top_logprobs_and_logprobs_false_stand(
    make_client: Any, openai_server: FakeOpenAIServer
) -> None:
    client = make_client()
    wrapped = instrument(llm(openai_server), client)

    with_top = wrapped.chat.completions.create(
        model="m", messages=MESSAGES, top_logprobs=3, treue_chunks=["Prüfintervall: 5 Jahre."]
    )
    assert openai_server.requests[-1]["top_logprobs"] == 3
    assert openai_server.requests[-1]["logprobs"] is True
    assert len(with_top.choices[0].logprobs.content[0].top_logprobs) == 3

    without = wrapped.chat.completions.create(model="m", messages=MESSAGES, logprobs=False)
    assert openai_server.requests[-1]["logprobs"] is False
    assert without.choices[0].logprobs is None

    assert client.flush(10)
    statuses = sorted(Answer.objects.values_list("logprobs_status", flat=True))
    assert statuses == ["none", "ok"]


def test_the_question_external_id_and_metadata_can_be_given_per_call(
    make_client: Any, openai_server: FakeOpenAIServer
) -> None:
    client = make_client()
    wrapped = instrument(llm(openai_server), client)

    wrapped.chat.completions.create(
        model="m", messages=MESSAGES, treue_chunks=CHUNKS, treue_question="Wie oft prüfen?",
        treue_external_id="chat-41/turn-3", treue_metadata={"tenant": "nord", "turn": 3},
    )

    sent = openai_server.requests[-1]
    assert not [name for name in sent if name.startswith("treue_")]
    assert client.flush(10)
    stored = only_answer()
    # The question as the user asked it, not the prompt with the passages in it.
    assert stored.question == "Wie oft prüfen?"
    assert stored.external_id == "chat-41/turn-3"
    assert stored.metadata == {"tenant": "nord", "turn": 3}
    assert stored.messages == MESSAGES

    # Sent again under the same id: recognised as the same answer, not stored twice.
    wrapped.chat.completions.create(
        model="m", messages=MESSAGES, treue_chunks=CHUNKS, treue_question="Wie oft prüfen?",
        treue_external_id="chat-41/turn-3", treue_metadata={"tenant": "nord", "turn": 3},
    )
    assert client.flush(10)
    assert Answer.objects.count() == 1


def test_async_client(make_client: Any, openai_server: FakeOpenAIServer) -> None:
    client = make_client()
    seen: list[dict[str, Any]] = []

    def chunks_from(*, messages: list[Any], kwargs: dict[str, Any]) -> list[Any]:
        seen.append({"messages": messages, "model": kwargs["model"]})
        return ["Prüfintervall: 5 Jahre."]

    async def main() -> Any:
        async_llm = openai.AsyncOpenAI(
            api_key="sk-test", base_url=openai_server.base_url, max_retries=0
        )
        instrument(async_llm, client, chunks_from=chunks_from)
        return await asyncio.gather(
            *(
                async_llm.chat.completions.create(  # type: ignore[call-overload]  # treue_* keywords
                    model="m", messages=MESSAGES, treue_question="Wie oft?",
                    treue_metadata={"call": i},
                )
                for i in range(3)
            )
        )

    completions = asyncio.run(main())

    assert all(isinstance(c, openai.types.chat.ChatCompletion) for c in completions)
    assert seen == [{"messages": MESSAGES, "model": "m"}] * 3
    assert client.flush(10)
    assert Answer.objects.count() == 3
    stored = Answer.objects.first()
    assert stored is not None and stored.token_data is not None
    content = logprob_tokens(completions[0])
    assert stored.token_data["lp"] == [t.logprob for t in content]
    assert stored.chunks.get().text == "Prüfintervall: 5 Jahre."
    assert set(Answer.objects.values_list("question", flat=True)) == {"Wie oft?"}
    assert sorted(a.metadata["call"] for a in Answer.objects.all()) == [0, 1, 2]


def test_a_provider_that_rejects_logprobs_is_asked_again_without(
    make_client: Any, openai_server: FakeOpenAIServer
) -> None:
    client = make_client()
    wrapped = instrument(llm(openai_server), client)
    rejection = {
        "error": {
            "message": "logprobs is not supported with this model",
            "type": "invalid_request_error",
            "param": "logprobs",
            "code": None,
        }
    }
    openai_server.fail_next(400, rejection)

    completion = wrapped.chat.completions.create(model="m", messages=MESSAGES)

    assert completion.choices[0].message.content
    assert [r.get("logprobs") for r in openai_server.requests] == [True, None]
    assert client.flush(10)
    assert only_answer().logprobs_status == "none"


def test_the_callers_own_errors_reach_the_caller(
    make_client: Any, openai_server: FakeOpenAIServer
) -> None:
    client = make_client()
    wrapped = instrument(llm(openai_server), client)

    # The caller asked for logprobs: the rejection is theirs to see, not retried.
    openai_server.fail_next(400, {"error": {"message": "logprobs is not supported"}})
    with pytest.raises(openai.BadRequestError):
        wrapped.chat.completions.create(model="m", messages=MESSAGES, logprobs=True)
    # Another 400 is not about logprobs: not retried either.
    openai_server.fail_next(400, {"error": {"message": "model not found"}})
    with pytest.raises(openai.BadRequestError):
        wrapped.chat.completions.create(model="m", messages=MESSAGES)

    assert len(openai_server.requests) == 2
    assert client.flush(10)
    assert Answer.objects.count() == 0


def test_streaming_calls_pass_through_unrecorded(
    make_client: Any, openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make_client()
    calls: list[dict[str, Any]] = []
    fake = llm(openai_server)

    def create(**kwargs: Any) -> str:
        calls.append(kwargs)
        return "a stream"

    monkeypatch.setattr(fake.chat.completions, "create", create)
    wrapped = instrument(fake, client)

    assert wrapped.chat.completions.create(model="m", messages=MESSAGES, stream=True) == (
        "a stream"
    )
    assert calls == [{"model": "m", "messages": MESSAGES, "stream": True}]
    assert client.stats()["queued"] == 0


@pytest.mark.timing
def test_treue_down_costs_the_caller_nothing(
    make_client: Any, openai_server: FakeOpenAIServer
) -> None:
    client = make_client(url=f"http://127.0.0.1:{free_port()}")
    wrapped = instrument(llm(openai_server), client)
    plain = llm(openai_server)
    plain.chat.completions.create(model="m", messages=MESSAGES, logprobs=True)  # warm up

    def timed(target: openai.OpenAI, **extra: Any) -> float:
        started = time.perf_counter()
        for _ in range(10):
            target.chat.completions.create(model="m", messages=MESSAGES, logprobs=True, **extra)
        return time.perf_counter() - started

    # Best of three, taken in turns: a busy machine slows a round of either, not the wrapper.
    rounds = [(timed(plain), timed(wrapped)) for _ in range(3)]
    baseline = min(plain_time for plain_time, _ in rounds)
    down = min(down_time for _, down_time in rounds)

    assert down < baseline * 3 + 0.05
    # The sender thread meanwhile tries Treue and fails; with a fast model the ten calls may be
    # over before its first try, so it is given a few seconds.
    deadline = time.monotonic() + 10
    while client.stats()["retried"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.stats()["retried"] >= 1 and client.stats()["sent"] == 0


def test_a_broken_treue_client_never_breaks_the_call(
    make_client: Any, openai_server: FakeOpenAIServer
) -> None:
    client = make_client()

    def broken_chunks(**_: Any) -> list[Any]:
        raise RuntimeError("retriever log is gone")

    wrapped = instrument(llm(openai_server), client, chunks_from=broken_chunks)
    completion = wrapped.chat.completions.create(model="m", messages=MESSAGES)
    assert completion.choices[0].message.content
    assert json.loads(completion.model_dump_json())["model"] == "m"
    assert client.stats()["queued"] == 0
    # The answer is lost, but not silently: it is counted.
    assert client.stats()["rejected"] == 1


def test_the_example_runs_and_its_answer_arrives(
    treue: Treue, openai_server: FakeOpenAIServer
) -> None:
    example = Path(__file__).resolve().parents[2] / "clients/python/examples/rag_example.py"
    env = {
        **os.environ,
        "OPENAI_BASE_URL": openai_server.base_url,
        "OPENAI_API_KEY": "sk-test",
        "TREUE_URL": treue.url,
        "TREUE_KEY": treue.key,
        "TREUE_USE_CASE": treue.use_case,
    }
    done = subprocess.run(
        [sys.executable, str(example), "Wie oft wird der Behälter geprüft?"],
        env=env, capture_output=True, text=True, timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == only_answer().text
    assert "'sent': 1" in done.stderr
    assert only_answer().chunks.count() == 2
    assert only_answer().question == "Wie oft wird der Behälter geprüft?"
    assert not [name for name in openai_server.requests[0] if name.startswith("treue_")]
