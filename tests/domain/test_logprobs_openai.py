"""Tier 1 on logprobs as the real openai client returns them from an OpenAI-shaped server."""

import openai
import pytest

from ingest.domain.logprobs import analyse_answer
from tests.support.openai_server import BYTE_STYLES, DEFAULT_ANSWER, fake_tokenise

# Tokens of DEFAULT_ANSWER given a low probability, and the words that must be reported.
LOW_CHUNKS = {
    b"\x9f": "Behältergrößen",  # second half of the "ß", inside a lowercase continuation
    b" 202": "2026",
    b"\xa7": "§ 4",  # second half of the "§"
    b"ung": "Prüfung",  # lowercase continuation of a noun
    b" sind": None,  # lowercase word: never reported
    b"\xac": None,  # last byte of "€": not part of a word
}


def _client(server, max_retries=0):
    return openai.OpenAI(
        base_url=server.base_url, api_key="test-key", max_retries=max_retries, timeout=10
    )


def _ask(client, **extra):
    return client.chat.completions.create(
        model="generator-test",
        messages=[{"role": "user", "content": "Wie lange gilt die Frist?"}],
        **extra,
    )


@pytest.fixture
def low_token_server(openai_server):
    chunks = fake_tokenise(DEFAULT_ANSWER)
    assert set(LOW_CHUNKS) <= set(chunks)  # the fake tokeniser still splits where we expect
    low = {i for i, chunk in enumerate(chunks) if chunk in LOW_CHUNKS}
    openai_server.logprob_for = lambda index, token: -3.0 if index in low else -0.01
    return openai_server


@pytest.mark.parametrize("style", BYTE_STYLES)
@pytest.mark.parametrize("dump", ["choice_logprobs", "whole_completion"])
def test_real_client_logprobs_align_in_every_byte_style(low_token_server, style, dump):
    low_token_server.byte_style = style

    completion = _ask(_client(low_token_server), logprobs=True, top_logprobs=2)

    answer = completion.choices[0].message.content
    if dump == "choice_logprobs":
        logprobs = completion.choices[0].logprobs.model_dump()
    else:
        logprobs = completion.model_dump()["choices"][0]["logprobs"]
    result = analyse_answer(answer, logprobs, 0.5)

    assert answer == DEFAULT_ANSWER
    assert result.logprobs_status == "ok", result.warning
    assert result.flagged is True
    expected = [word for word in LOW_CHUNKS.values() if word]
    assert sorted(w.word for w in result.uncertain) == sorted(expected)
    for word in result.uncertain:
        assert answer[word.start : word.end] == word.word
        assert word.probability == 0.0498  # exp(-3)


@pytest.mark.parametrize("style", BYTE_STYLES)
def test_split_characters_are_written_in_the_chosen_style(openai_server, style):
    openai_server.byte_style = style

    content = (
        _ask(_client(openai_server), logprobs=True, top_logprobs=2).choices[0].logprobs.content
    )

    split = [item for item in content if item.token in ("bytes:\\xc3", "\\xc3", "\ufffd")]
    assert split, [item.token for item in content]
    assert all((item.bytes == [0xC3]) is (style == "openai") for item in split)
    assert all(len(item.top_logprobs) == 2 for item in content)
    assert all(-3.0 <= item.logprob <= 0.0 for item in content)
    assert openai_server.requests[-1]["logprobs"] is True
    assert openai_server.requests[-1]["top_logprobs"] == 2


def test_responder_sets_the_answer_and_no_logprobs_means_none(openai_server):
    openai_server.responder = lambda request: f"Antwort auf: {request['messages'][0]['content']}"

    completion = _ask(_client(openai_server))

    answer = completion.choices[0].message.content
    assert answer == "Antwort auf: Wie lange gilt die Frist?"
    assert completion.choices[0].logprobs is None
    assert completion.usage.completion_tokens > 0
    assert analyse_answer(answer, None, 0.5).logprobs_status == "none"


def test_fail_next_then_the_client_retries(openai_server):
    openai_server.fail_next(429, headers={"retry-after-ms": "10"})

    completion = _ask(_client(openai_server, max_retries=1))

    assert completion.choices[0].message.content == DEFAULT_ANSWER
    assert len(openai_server.requests) == 2


def test_fail_next_several_times(openai_server):
    openai_server.fail_next(503, times=2)
    client = _client(openai_server)

    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            _ask(client)
    assert _ask(client).choices[0].message.content == DEFAULT_ANSWER
    assert len(openai_server.requests) == 3
