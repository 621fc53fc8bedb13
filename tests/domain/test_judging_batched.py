"""Judging one answer in batched and one-call mode (judging.domain.judgement): the
claims go in calls of at most N under their ids, each verdict carries the judge's evidence, what a
batched reply leaves open is corrected once in the same conversation and only what is still
open is asked one by one; a schema goes with the call where the endpoint takes one."""

import json
import re

import pytest

from judging.domain.batched import (
    BATCHED_PROMPT_VERSION,
    VERIFY_BATCH_SYSTEM_DE,
    VERIFY_BATCH_SYSTEM_EN,
    StructuredOutputRefused,
    claim_ids,
)
from judging.domain.judge_parse import Label
from judging.domain.judge_prompt import DECOMPOSE_SYSTEM_DE, DECOMPOSE_SYSTEM_EN, PROMPT_VERSION
from judging.domain.judgement import (
    BATCHED,
    PER_CLAIM,
    SINGLE,
    CallResult,
    VerdictCache,
    mode_of_prompt_version,
)
from judging.domain.single import SINGLE_PROMPT_VERSION, SINGLE_SYSTEM_DE
from judging.domain.verification import judge_answer
from tests.domain.test_judging import ANSWER, CHUNKS, QUESTION, claims_json
from tests.support.text import found

G, T, U = Label.GEDECKT, Label.TEILWEISE, Label.UNGEDECKT
_CLAIM_LINE = re.compile(r"^([A-Z][0-9]): (.*)$", re.MULTILINE)
_ONE = re.compile(r"^(?:Aussage|Claim): (.*)$", re.MULTILINE)


class BatchJudge:
    """Decomposes into ``claims``; a batched call gets the lines ``lines(batch)`` returns (a
    batch is [(id, claim), …]), a correction ``correct(batch of the ids it names)``; a
    per-claim call gets ``single[claim]``; a one-call request ``one``. With ``schema``, a
    request with a response_format is answered as JSON (``schema="refuse"``: refused)."""

    def __init__(self, claims, lines, single=None, correct=None, one=None, schema=None):
        self.claims = claims
        self.lines = lines
        self.single = single or {}
        self.correct = correct
        self.one = one
        self.schema = schema
        self.requests = []
        self.formats = []

    def __call__(self, messages, response_format=None):
        self.requests.append(messages)
        self.formats.append(response_format)
        system = messages[0]["content"]
        if system in (DECOMPOSE_SYSTEM_DE, DECOMPOSE_SYSTEM_EN):
            return CallResult(claims_json(self.claims), 300, 40, 5, "judge-1")
        if response_format is not None and self.schema == "refuse":
            raise StructuredOutputRefused("400 response_format")
        if system.startswith(SINGLE_SYSTEM_DE):
            return CallResult(self.one(len(messages)), 700, 90, 9, "judge-1")
        if system.startswith((VERIFY_BATCH_SYSTEM_DE, VERIFY_BATCH_SYSTEM_EN)):
            batch = _CLAIM_LINE.findall(messages[1]["content"].split("):\n")[-1])
            if len(messages) > 2:
                named = set(re.findall(r"\b[A-Z][0-9]\b", messages[-1]["content"].split("\n")[0]))
                return CallResult(self.correct([b for b in batch if b[0] in named]),
                                  600, 10, 9, "judge-1")
            if response_format is not None:
                return CallResult(json.dumps({"verdicts": [
                    {"id": i, "verdict": "GEDECKT", "chunks": [1], "reason": "r"}
                    for i, _ in batch]}), 520, 40, 9, "judge-1")
            return CallResult(self.lines(batch), 500, 30, 9, "judge-1")
        claim = found(_ONE, messages[1]["content"]).group(1)
        return CallResult(self.single[claim], 200, 1, 4, "judge-1")

    def kinds(self):
        def kind(m):
            system = m[0]["content"]
            if system == DECOMPOSE_SYSTEM_DE:
                return "decompose"
            if system.startswith(VERIFY_BATCH_SYSTEM_DE):
                return "correct" if len(m) > 2 else "batch"
            if system.startswith(SINGLE_SYSTEM_DE):
                return "one"
            return "single"
        return [kind(m) for m in self.requests]


CLAIMS = ["Der Behälter wird alle 5 Jahre geprüft.", "Der Betriebsrat gibt frei.", "Drei."]
A, B, C = claim_ids(CLAIMS)


def run(fake, **kwargs):
    kwargs.setdefault("mode", BATCHED)
    return judge_answer(question=QUESTION, answer=ANSWER, chunks=CHUNKS, language="de",
                        call=fake, batch_call=fake, concurrency=4, **kwargs)


def test_one_call_for_all_claims_with_evidence():
    fake = BatchJudge(CLAIMS, lambda batch: (
        f"{A}: GEDECKT [1] Abschnitt 1 nennt 5 Jahre.\n"
        f"{B}: UNGEDECKT [2] Abschnitt 2 nennt die Sicherheitsfachkraft.\n"
        f"{C}: TEILWEISE"
    ))
    j = run(fake)
    assert fake.kinds() == ["decompose", "batch"]
    assert [(c.position, c.label, c.chunks, c.reason) for c in j.claims] == [
        (0, G, (1,), "Abschnitt 1 nennt 5 Jahre."),
        (1, U, (2,), "Abschnitt 2 nennt die Sicherheitsfachkraft."),
        (2, T, (), ""),
    ]
    assert j.result.score == 0.5
    assert j.path == "batched"
    assert (j.calls, j.prompt_tokens, j.completion_tokens) == (2, 300 + 500, 40 + 30)
    # The batch call's tokens are shared out over its claims, the first taking the remainder.
    assert [c.prompt_tokens for c in j.claims] == [168, 166, 166]
    assert sum(c.completion_tokens for c in j.claims) == 30
    assert [(r.purpose, r.position) for r in j.call_log] == [("decompose", None),
                                                            ("verify_batch", 0)]
    # The context the judge saw, numbered by rank, before the claims under their ids.
    body = fake.requests[1][1]["content"]
    assert body.index("[1] Druckbehälter") < body.index("[2] Änderungen") < body.index(f"{A}: Der")


def test_a_renumbered_reply_is_corrected_in_the_same_conversation():
    # The judge counts instead of copying ids: nothing is read by position. One correction
    # naming every claim; its reply ties each verdict to its id.
    fake = BatchJudge(
        CLAIMS, lambda batch: "1: GEDECKT\n2: UNGEDECKT\n3: TEILWEISE",
        correct=lambda batch: "\n".join(
            f"{i}: {w}" for (i, _), w in zip(batch, ["UNGEDECKT", "GEDECKT", "GEDECKT"],
                                             strict=True)),
    )
    j = run(fake)
    assert fake.kinds() == ["decompose", "batch", "correct"]
    correction = fake.requests[2]
    assert correction[:2] == fake.requests[1], "the same conversation"
    assert correction[2] == {"role": "assistant",
                             "content": "1: GEDECKT\n2: UNGEDECKT\n3: TEILWEISE"}
    assert f"{A}, {B}, {C}" in correction[3]["content"]
    assert [c.label for c in j.claims] == [U, G, G]
    assert j.path == "corrected"
    assert [(r.purpose, r.attempt) for r in j.call_log] == [
        ("decompose", 1), ("verify_batch", 1), ("correct_batch", 2)]


def test_only_what_the_correction_leaves_open_is_asked_one_by_one():
    # Claim 2 missing, claim 3 unreadable: the correction names both and answers claim 2 only;
    # claim 3 goes to the per-claim prompt, nothing else.
    fake = BatchJudge(CLAIMS, lambda batch: f"Urteile:\n{A}: GEDECKT [1] ok\n{C}: VIELLEICHT",
                      correct=lambda batch: f"{B}: UNGEDECKT [] nichts",
                      single={CLAIMS[2]: "GEDECKT"})
    j = run(fake)
    assert fake.kinds() == ["decompose", "batch", "correct", "single"]
    assert f"{B}, {C}" in fake.requests[2][3]["content"]
    assert found(_ONE, fake.requests[3][1]["content"]).group(1) == CLAIMS[2]
    assert [c.label for c in j.claims] == [G, U, G]
    assert [c.chunks for c in j.claims] == [(1,), (), ()], "a per-claim verdict has no evidence"
    assert j.calls == 4 and j.path == "fallback"


def test_long_answers_go_in_calls_of_at_most_n_claims():
    claims = [f"Aussage Nummer {i}." for i in range(7)]
    fake = BatchJudge(claims, lambda batch: "\n".join(f"{i}: GEDECKT" for i, _ in batch))
    j = run(fake, batch_size=3)
    assert fake.kinds() == ["decompose", "batch", "batch", "batch"]
    sizes = [len(_CLAIM_LINE.findall(m[1]["content"].split("):\n")[-1]))
             for m in fake.requests[1:]]
    assert sizes == [3, 3, 1]
    assert [c.claim for c in j.claims] == claims and all(c.label is G for c in j.claims)


def test_a_batched_verdict_is_cached_with_its_evidence():
    cache: VerdictCache = {}
    lines = lambda batch: "\n".join(f"{i}: GEDECKT [2] weil" for i, _ in batch)  # noqa: E731
    run(BatchJudge(CLAIMS, lines), cache=cache)
    again = BatchJudge(CLAIMS, lines)
    j = run(again, cache=cache)
    assert again.kinds() == ["decompose"], "every claim from the cache, no verification call"
    assert all(c.cached and c.chunks == (2,) and c.reason == "weil" for c in j.claims)


def test_structured_output_is_tried_once_and_what_was_found_reported():
    learned = []
    fake = BatchJudge(CLAIMS, str, schema="json")
    j = run(fake, structured=None, on_structured=lambda ok, detail: learned.append(ok))
    assert fake.kinds() == ["decompose", "batch"]
    assert fake.formats[1]["json_schema"]["schema"]["properties"]["verdicts"]["items"][
        "required"] == ["id", "verdict", "chunks", "reason"]
    assert [c.label for c in j.claims] == [G, G, G] and j.path == "batched"
    assert learned == [True]
    # Known to work: sent, nothing reported again.
    fake = BatchJudge(CLAIMS, str, schema="json")
    run(fake, structured=True, on_structured=lambda ok, detail: learned.append(ok))
    assert fake.formats[1] is not None and learned == [True]


def test_a_refused_schema_is_learned_and_the_lines_asked_for():
    learned = []
    fake = BatchJudge(CLAIMS, lambda batch: "\n".join(f"{i}: UNGEDECKT" for i, _ in batch),
                      schema="refuse")
    j = run(fake, structured=None, on_structured=lambda ok, detail: learned.append((ok, detail)))
    assert learned == [(False, "400 response_format")]
    assert fake.formats == [None, fake.formats[1], None]
    assert fake.kinds() == ["decompose", "batch", "batch"]
    assert "ein Satz Begründung." in fake.requests[1][0]["content"], "the refused request: JSON"
    assert "K7: GEDECKT [2]" in fake.requests[2][0]["content"], "the second asks for lines"
    assert [c.label for c in j.claims] == [U, U, U]
    # Known not to work: no schema sent at all.
    fake = BatchJudge(CLAIMS, lambda batch: "\n".join(f"{i}: UNGEDECKT" for i, _ in batch),
                      schema="refuse")
    run(fake, structured=False)
    assert fake.formats == [None, None]


def test_without_evidence_the_bare_format_is_asked_for():
    fake = BatchJudge(CLAIMS, lambda batch: "\n".join(f"{i}: GEDECKT" for i, _ in batch))
    j = run(fake, evidence=False)
    assert fake.requests[1][0]["content"].endswith("K7: GEDECKT")
    assert all(c.label is G for c in j.claims)


def _one(items):
    return lambda n_messages: json.dumps({"claims": items}, ensure_ascii=False)


def test_one_call_gives_claims_and_verdicts():
    decomposed: list[str] = []
    fake = BatchJudge(CLAIMS, str, one=_one([
        {"claim": CLAIMS[0], "verdict": "GEDECKT", "chunks": [1], "reason": "r"},
        {"claim": CLAIMS[1], "verdict": "UNGEDECKT", "chunks": [], "reason": ""},
    ]))
    j = run(fake, mode=SINGLE, on_decomposed=decomposed.append)
    assert fake.kinds() == ["one"]
    assert [(c.claim, c.label, c.chunks) for c in j.claims] == [
        (CLAIMS[0], G, (1,)), (CLAIMS[1], U, ())]
    assert j.path == "single" and j.calls == 1 and j.prompt_tokens == 700
    # Stored as a claim list, so that a resumed run reads it as its decomposition.
    assert json.loads(decomposed[0]) == CLAIMS[:2]


def test_one_call_claims_without_a_verdict_are_verified_in_a_batch():
    fake = BatchJudge(CLAIMS, lambda batch: "\n".join(f"{i}: TEILWEISE" for i, _ in batch),
                      one=_one([{"claim": CLAIMS[0], "verdict": "GEDECKT"},
                                {"claim": CLAIMS[1], "verdict": "VIELLEICHT"}]))
    j = run(fake, mode=SINGLE)
    assert fake.kinds() == ["one", "batch"]
    assert [c.label for c in j.claims] == [G, T]
    assert j.path == "fallback"


def test_one_call_unreadable_twice_falls_back_to_the_decomposition():
    fake = BatchJudge(CLAIMS, lambda batch: "\n".join(f"{i}: GEDECKT" for i, _ in batch),
                      one=lambda n: "Ich zerlege die Antwort: erstens …")
    j = run(fake, mode=SINGLE)
    assert fake.kinds() == ["one", "one", "decompose", "batch"]
    assert len(fake.requests[1]) == 4, "the correction continues the conversation"
    assert [c.label for c in j.claims] == [G, G, G] and j.path == "fallback"


def test_one_call_abstention():
    j = run(BatchJudge(CLAIMS, str, one=_one([])), mode=SINGLE)
    assert j.claims == () and j.result.abstention and j.path == ""


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="mode"):
        judge_answer(question=QUESTION, answer=ANSWER, chunks=CHUNKS, language="de",
                     call=BatchJudge(CLAIMS, str), concurrency=1, mode="bulk")


@pytest.mark.parametrize(
    ("version", "mode"),
    [
        (BATCHED_PROMPT_VERSION, BATCHED),
        (SINGLE_PROMPT_VERSION, SINGLE),
        ("2027-03-b2", BATCHED),
        (PROMPT_VERSION, PER_CLAIM),
        ("2026-11-v1", PER_CLAIM),  # before batched mode existed
        ("custom", PER_CLAIM),
        ("2026-12-beta", PER_CLAIM),
    ],
)
def test_a_prompt_version_tells_its_mode(version, mode):
    assert mode_of_prompt_version(version) == mode


def test_an_empty_reply_teaches_nothing_about_the_schema():
    # A refusal or a content filter answers with nothing: that says nothing about the schema.
    learned = []
    fake = BatchJudge(CLAIMS, str, correct=lambda batch: "\n".join(
        f"{i}: GEDECKT" for i, _ in batch))
    fake.schema = "empty"
    original = fake.__call__

    def call(messages, response_format=None):
        if response_format is not None and len(messages) == 2:
            fake.requests.append(messages)
            fake.formats.append(response_format)
            return CallResult("", 500, 0, 9, "judge-1")
        return original(messages, response_format)

    j = run(call, structured=None, on_structured=lambda ok, detail: learned.append(ok))
    assert learned == []
    assert [c.label for c in j.claims] == [G, G, G] and j.path == "corrected"


def test_a_change_of_what_the_endpoint_takes_is_reported():
    learned = []
    fake = BatchJudge(CLAIMS, lambda batch: "\n".join(f"{i}: GEDECKT" for i, _ in batch),
                      schema="refuse")
    run(fake, structured=True, on_structured=lambda ok, detail: learned.append(ok))
    assert learned == [False], "known to take it, now refused: told"


def test_a_correction_that_answers_a_decided_claim_otherwise_leaves_it_in_doubt():
    fake = BatchJudge(
        CLAIMS, lambda batch: f"{A}: GEDECKT\n{B}: GEDECKT",
        correct=lambda batch: f"{C}: UNGEDECKT\n{A}: UNGEDECKT",
        single={CLAIMS[0]: "TEILWEISE"},
    )
    j = run(fake)
    assert fake.kinds() == ["decompose", "batch", "correct", "single"]
    assert [c.label for c in j.claims] == [T, G, U] and j.path == "fallback"
