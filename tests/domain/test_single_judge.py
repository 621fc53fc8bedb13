"""One-call judging (judging.domain.single): the wording pinned to its version, the
request's layout and schema, and the reading of a reply — claims with their verdicts, a claim
without a readable verdict, an abstention, and what is no claim list at all."""

import json

import pytest

from judging.domain.batched import Evidence
from judging.domain.judge_parse import MAX_CLAIMS, Label
from judging.domain.single import (
    SINGLE_PROMPT_VERSION,
    correction_messages,
    read_single,
    single_messages,
    single_schema,
    texts_hash,
)

G, T, U = Label.GEDECKT, Label.TEILWEISE, Label.UNGEDECKT
RELEASED = {"2026-12-s1": "64b8024abdac133b49895fcb5cf3358fe5d6267bccd0d954e66b0435360c30c5"}


def test_the_wording_is_pinned_to_its_version() -> None:
    assert RELEASED[SINGLE_PROMPT_VERSION] == texts_hash()


@pytest.mark.parametrize("language", ["de", "en"])
def test_the_request(language: str) -> None:
    system, user = single_messages(question=" Wie oft? ", answer="Alle 5 Jahre.",
                                   chunks=["Prüfintervall: 5 Jahre."], language=language)
    assert "GEDECKT" in system["content"] and "TEILWEISE" in system["content"]
    assert system["content"].endswith('"reason": "ein Satz"}]}' if language == "de"
                                      else '"reason": "one sentence"}]}')
    assert "[1] Prüfintervall: 5 Jahre." in user["content"]
    assert "Wie oft?\n" in user["content"]
    bare = single_messages(question="q", answer="a", chunks=[], language=language,
                           evidence=False)[0]["content"]
    assert "reason" not in bare
    with pytest.raises(ValueError, match="language"):
        single_messages(question="q", answer="a", chunks=[], language="fr")


def test_the_schema() -> None:
    item = single_schema()["json_schema"]["schema"]["properties"]["claims"]["items"]
    assert item["required"] == ["claim", "verdict", "chunks", "reason"]
    assert single_schema(evidence=False)["json_schema"]["schema"]["properties"]["claims"][
        "items"]["required"] == ["claim", "verdict"]


def test_claims_with_their_verdicts() -> None:
    reply = "```json\n" + json.dumps({"claims": [
        {"claim": " Der Behälter wird alle 5 Jahre geprüft. ", "verdict": "GEDECKT",
         "chunks": [1, 4], "reason": "Abschnitt 1."},
        {"claim": "Teilweise werden Kosten erstattet.", "verdict": "Teilweise werden"},
        {"claim": "Die Frist ist 3 Monate.", "verdict": "NICHT GEDECKT"},
        {"claim": "Die Frist ist 3 Monate.", "verdict": "UNGEDECKT"},
        {"claim": "Zwei Urteile.", "verdict": "GEDECKT"},
        {"claim": "Zwei Urteile.", "verdict": "UNGEDECKT"},
        {"claim": "  ", "verdict": "GEDECKT"},
    ]}, ensure_ascii=False) + "\n```"
    reading = read_single(reply, chunk_count=2)
    assert reading.claims == ["Der Behälter wird alle 5 Jahre geprüft.",
                              "Teilweise werden Kosten erstattet.", "Die Frist ist 3 Monate.",
                              "Zwei Urteile."]
    # The second claim's "verdict" is its text, the fourth's contradict: no verdict, asked again.
    assert reading.verdicts == {0: Evidence(G, (1,), "Abschnitt 1."), 2: Evidence(U, (), "")}


def test_an_abstention_and_the_limit() -> None:
    assert read_single('{"claims": []}').claims == []
    many = [{"claim": f"Aussage {i}.", "verdict": "GEDECKT"} for i in range(MAX_CLAIMS + 5)]
    reading = read_single(json.dumps({"claims": many}))
    assert reading.claims is not None and len(reading.claims) == MAX_CLAIMS
    assert set(reading.verdicts) == set(range(MAX_CLAIMS))


@pytest.mark.parametrize("reply", [
    "", "Ich zerlege die Antwort …", '["a", "b"]', '{"claims": ["a"]}',
    '{"claims": [{"verdict": "GEDECKT"}]}', '{"claims": [{"claim": 5, "verdict": "GEDECKT"}]}',
    '{"claims": [{"claim": " ", "verdict": "GEDECKT"}]}', '{"claims": [', "[" * 100_000,
])
def test_what_is_no_claim_list(reply: str) -> None:
    assert read_single(reply).claims is None


def test_the_correction_continues_the_conversation() -> None:
    messages = single_messages(question="q", answer="a", chunks=[], language="de")
    again = correction_messages(messages, "kaputt", language="de")
    assert again[:2] == messages and again[2]["content"] == "kaputt"
    assert "JSON" in again[3]["content"]
