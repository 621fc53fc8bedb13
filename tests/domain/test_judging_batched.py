"""Judging one answer in batched mode (monitoring.judging.domain.judging, mode=BATCHED): the
claims go in calls of at most N, each verdict carries the judge's evidence, and only the claims
a batched reply leaves open are asked again, one by one, with the per-claim prompt."""

import re

import pytest

from monitoring.judging.domain.batched import (
    BATCHED_PROMPT_VERSION,
    VERIFY_BATCH_SYSTEM_DE,
    VERIFY_BATCH_SYSTEM_EN,
)
from monitoring.judging.domain.judge_parse import Label
from monitoring.judging.domain.judge_prompt import (
    DECOMPOSE_SYSTEM_DE,
    DECOMPOSE_SYSTEM_EN,
    PROMPT_VERSION,
)
from monitoring.judging.domain.judging import (
    BATCHED,
    PER_CLAIM,
    CallResult,
    judge_answer,
    mode_of_prompt_version,
)
from tests.domain.test_judging import ANSWER, CHUNKS, QUESTION, claims_json

G, T, U = Label.GEDECKT, Label.TEILWEISE, Label.UNGEDECKT
_CLAIM_LINE = re.compile(r"^(\d+)\. (.*)$", re.MULTILINE)
_SINGLE = re.compile(r"^(?:Aussage|Claim): (.*)$", re.MULTILINE)


class BatchJudge:
    """Decomposes into ``claims``; a batched call gets the lines ``lines(batch)`` returns (a
    batch is [(number, claim), …]); a per-claim call gets ``single[claim]``."""

    def __init__(self, claims, lines, single=None):
        self.claims = claims
        self.lines = lines
        self.single = single or {}
        self.requests = []

    def __call__(self, messages):
        self.requests.append(messages)
        system = messages[0]["content"]
        if system in (DECOMPOSE_SYSTEM_DE, DECOMPOSE_SYSTEM_EN):
            return CallResult(claims_json(self.claims), 300, 40, 5, "judge-1")
        if system in (VERIFY_BATCH_SYSTEM_DE, VERIFY_BATCH_SYSTEM_EN):
            batch = [(int(n), c) for n, c in _CLAIM_LINE.findall(messages[1]["content"])]
            return CallResult(self.lines(batch), 500, 30, 9, "judge-1")
        claim = _SINGLE.search(messages[1]["content"]).group(1)
        return CallResult(self.single[claim], 200, 1, 4, "judge-1")

    def kinds(self):
        names = {DECOMPOSE_SYSTEM_DE: "decompose", VERIFY_BATCH_SYSTEM_DE: "batch"}
        return [names.get(m[0]["content"], "single") for m in self.requests]


CLAIMS = ["Der Behälter wird alle 5 Jahre geprüft.", "Der Betriebsrat gibt frei.", "Drei."]


def run(fake, **kwargs):
    return judge_answer(question=QUESTION, answer=ANSWER, chunks=CHUNKS, language="de",
                        call=fake, concurrency=4, mode=BATCHED, **kwargs)


def test_one_call_for_all_claims_with_evidence():
    fake = BatchJudge(CLAIMS, lambda batch: (
        "1: GEDECKT [1] Abschnitt 1 nennt 5 Jahre.\n"
        "2: UNGEDECKT [2] Abschnitt 2 nennt die Sicherheitsfachkraft.\n"
        "3: TEILWEISE"
    ))
    j = run(fake)
    assert fake.kinds() == ["decompose", "batch"]
    assert [(c.position, c.label, c.chunks, c.reason) for c in j.claims] == [
        (0, G, (1,), "Abschnitt 1 nennt 5 Jahre."),
        (1, U, (2,), "Abschnitt 2 nennt die Sicherheitsfachkraft."),
        (2, T, (), ""),
    ]
    assert j.result.score == 0.5
    assert (j.calls, j.prompt_tokens, j.completion_tokens) == (2, 300 + 500, 40 + 30)
    # The batch call's tokens are shared out over its claims, the first taking the remainder.
    assert [c.prompt_tokens for c in j.claims] == [168, 166, 166]
    assert sum(c.completion_tokens for c in j.claims) == 30
    assert [(r.purpose, r.position) for r in j.call_log] == [("decompose", None),
                                                            ("verify_batch", 0)]
    # The context the judge saw, numbered by rank, before the numbered claims.
    body = fake.requests[1][1]["content"]
    assert body.index("[1] Druckbehälter") < body.index("[2] Änderungen") < body.index("1. Der")


def test_only_the_claims_left_open_are_asked_again_one_by_one():
    # Claim 2 missing, claim 3 unreadable: both asked with the per-claim prompt, nothing else.
    fake = BatchJudge(CLAIMS, lambda batch: "Urteile:\n1: GEDECKT [1] ok\n3: VIELLEICHT",
                      single={CLAIMS[1]: "UNGEDECKT", CLAIMS[2]: "GEDECKT"})
    j = run(fake)
    assert fake.kinds() == ["decompose", "batch", "single", "single"]
    asked = [_SINGLE.search(m[1]["content"]).group(1) for m in fake.requests[2:]]
    assert sorted(asked) == sorted(CLAIMS[1:])
    assert [c.label for c in j.claims] == [G, U, G]
    assert [c.chunks for c in j.claims] == [(1,), (), ()], "a per-claim verdict has no evidence"
    assert j.calls == 4


def test_long_answers_go_in_calls_of_at_most_n_claims():
    claims = [f"Aussage Nummer {i}." for i in range(7)]
    fake = BatchJudge(claims, lambda batch: "\n".join(f"{n}: GEDECKT" for n, _ in batch))
    j = run(fake, batch_size=3)
    assert fake.kinds() == ["decompose", "batch", "batch", "batch"]
    sizes = [len(_CLAIM_LINE.findall(m[1]["content"])) for m in fake.requests[1:]]
    assert sizes == [3, 3, 1]
    # Each call numbers its claims from 1; the verdicts land on the right positions.
    assert [c.claim for c in j.claims] == claims and all(c.label is G for c in j.claims)


def test_a_batched_verdict_is_cached_with_its_evidence():
    cache = {}
    lines = lambda batch: "\n".join(f"{n}: GEDECKT [2] weil" for n, _ in batch)  # noqa: E731
    run(BatchJudge(CLAIMS, lines), cache=cache)
    again = BatchJudge(CLAIMS, lines)
    j = run(again, cache=cache)
    assert again.kinds() == ["decompose"], "every claim from the cache, no verification call"
    assert all(c.cached and c.chunks == (2,) and c.reason == "weil" for c in j.claims)


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="mode"):
        judge_answer(question=QUESTION, answer=ANSWER, chunks=CHUNKS, language="de",
                     call=BatchJudge(CLAIMS, str), concurrency=1, mode="bulk")


@pytest.mark.parametrize(
    ("version", "mode"),
    [
        (BATCHED_PROMPT_VERSION, BATCHED),
        ("2027-03-b2", BATCHED),
        (PROMPT_VERSION, PER_CLAIM),
        ("2026-11-v1", PER_CLAIM),  # before batched mode existed
        ("custom", PER_CLAIM),
        ("2026-12-beta", PER_CLAIM),
    ],
)
def test_a_prompt_version_tells_its_mode(version, mode):
    assert mode_of_prompt_version(version) == mode
