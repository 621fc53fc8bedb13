"""Judging one answer (judging.domain.judgement) with a scripted fake judge.

The fake reads each request like the real model would: the system message says whether it is a
decomposition or a verification, the user message holds the claim, a trailing reminder marks a
retry. It sleeps per call so concurrency shows in the wall time.
"""

import json
import re
import threading
import time

import pytest

from judging.domain.judge_parse import Label
from judging.domain.judge_prompt import (
    DECOMPOSE_RETRY_DE,
    DECOMPOSE_SYSTEM_DE,
    DECOMPOSE_SYSTEM_EN,
    VERIFY_RETRY_DE,
    VERIFY_RETRY_EN,
    VERIFY_SYSTEM_EN,
    format_context,
)
from judging.domain.judgement import (
    DECOMPOSITION_UNPARSEABLE,
    CachedVerdict,
    CallResult,
    ClaimVerdict,
    Judgement,
    VerdictCache,
)
from judging.domain.verification import judge_answer
from tests.support.text import found

G, T, U, X = Label.GEDECKT, Label.TEILWEISE, Label.UNGEDECKT, Label.UNPARSEABLE

CHUNKS = [
    "Druckbehälter über 1.000 Liter werden alle 5 Jahre geprüft.",
    "Änderungen gibt die Sicherheitsfachkraft frei.",
]
QUESTION = "Wie oft wird der Druckbehälter geprüft, und wer gibt Änderungen frei?"
ANSWER = "Er wird alle 5 Jahre geprüft. Änderungen gibt der Betriebsrat frei."
_CLAIM_RE = re.compile(r"^(?:Aussage|Claim): (.*)$", re.MULTILINE)
_DECOMPOSE_SYSTEMS = (DECOMPOSE_SYSTEM_DE, DECOMPOSE_SYSTEM_EN)


class FakeJudge:
    """A scripted judge. ``decompositions``: replies in order. ``verdicts``: claim -> replies
    in order of attempts (a str is the reply to every attempt). ``raise_for``: claim -> an
    exception to raise instead of replying."""

    def __init__(self, decompositions, verdicts, *, sleep=0.0, raise_for=None):
        self.decompositions = list(decompositions)
        self.verdicts = dict(verdicts)
        self.sleep = sleep
        self.raise_for = raise_for or {}
        self.requests = []
        self.attempts = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def verify_requests(self):
        return [m for m in self.requests if m[0]["content"] not in _DECOMPOSE_SYSTEMS]

    def __call__(self, messages):
        with self._lock:
            self.requests.append(messages)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.sleep)
            return self._reply(messages)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _reply(self, messages):
        latency = int(self.sleep * 1000)
        if messages[0]["content"] in _DECOMPOSE_SYSTEMS:
            return CallResult(self.decompositions.pop(0), 300, 40, latency, "judge-1")
        claim = found(_CLAIM_RE, messages[1]["content"]).group(1)
        if claim in self.raise_for:
            raise self.raise_for[claim]
        with self._lock:
            attempt = self.attempts.get(claim, 0)
            self.attempts[claim] = attempt + 1
        if attempt:
            assert messages[-1]["content"] in (VERIFY_RETRY_DE, VERIFY_RETRY_EN)
        script = self.verdicts[claim]
        text = script if isinstance(script, str) else script[attempt]
        return CallResult(text, 200 + attempt, 1, latency, "judge-1")


def claims_json(claims):
    return json.dumps(claims, ensure_ascii=False)


def judge(fake, *, chunks=CHUNKS, language="de", concurrency=4, cache=None, **kwargs):
    return judge_answer(
        question=QUESTION,
        answer=ANSWER,
        chunks=chunks,
        language=language,
        call=fake,
        concurrency=concurrency,
        cache=cache,
        **kwargs,
    )


def test_happy_path():
    claims = ["Der Behälter wird alle 5 Jahre geprüft.", "Der Betriebsrat gibt frei.", "Drei."]
    fake = FakeJudge(
        [claims_json(claims)],
        dict(zip(claims, ["GEDECKT", "ungedeckt.", "TEILWEISE"], strict=True)),
    )
    j = judge(fake)
    assert isinstance(j, Judgement)
    assert [(c.position, c.claim, c.label) for c in j.claims] == [
        (0, claims[0], G),
        (1, claims[1], U),
        (2, claims[2], T),
    ]
    assert j.claims[1] == ClaimVerdict(
        1, claims[1], U, "ungedeckt.", 1, 200, 1, 0, False, "judge-1"
    )
    assert j.result.score == 0.5 and not j.result.failed and not j.result.abstention
    assert j.failed_reason is None
    assert j.decomposition_raw == claims_json(claims)
    assert j.calls == 4 == len(fake.requests)
    assert (j.prompt_tokens, j.completion_tokens) == (300 + 3 * 200, 40 + 3)
    assert [(r.purpose, r.position, r.attempt) for r in j.call_log] == [
        ("decompose", None, 1),
        ("verify", 0, 1),
        ("verify", 1, 1),
        ("verify", 2, 1),
    ]


def test_the_context_is_the_chunks_in_rank_order_and_the_question_reaches_decomposition():
    chunks = ["zuerst", "  ", "dann"]
    fake = FakeJudge(['["A."]'], {"A.": "GEDECKT"})
    judge(fake, chunks=chunks)
    decompose, verify = fake.requests
    assert QUESTION in decompose[1]["content"] and ANSWER in decompose[1]["content"]
    assert format_context(chunks) == "[1] zuerst\n\n[3] dann"
    assert "Kontext:\n[1] zuerst\n\n[3] dann\n\nAussage: A." in verify[1]["content"]


def test_english_use_case_gets_english_prompts_and_the_same_labels():
    fake = FakeJudge(['["The fee is 20 euros."]'], {"The fee is 20 euros.": "TEILWEISE"})
    j = judge(fake, language="en")
    assert fake.requests[0][0]["content"] == DECOMPOSE_SYSTEM_EN
    assert fake.requests[1][0]["content"] == VERIFY_SYSTEM_EN
    assert j.claims[0].label is T


@pytest.mark.parametrize("language", ["fr", "", "EN"])
def test_unknown_language_raises_before_any_call(language):
    fake = FakeJudge(['["A."]'], {"A.": "GEDECKT"})
    with pytest.raises(ValueError, match="language"):
        judge(fake, language=language)
    assert fake.requests == []


@pytest.mark.parametrize("concurrency", [0, -1])
def test_concurrency_must_be_positive(concurrency):
    with pytest.raises(ValueError, match="concurrency"):
        judge(FakeJudge(['["A."]'], {"A.": "GEDECKT"}), concurrency=concurrency)


@pytest.mark.timing
def test_eight_claims_take_about_one_call_not_eight():
    claims = [f"Aussage {i}." for i in range(8)]
    fake = FakeJudge([claims_json(claims)], dict.fromkeys(claims, "GEDECKT"), sleep=0.2)
    started = time.monotonic()
    j = judge(fake, concurrency=8)
    elapsed = time.monotonic() - started
    # Serially: 0.2 s decomposition + 8 x 0.2 s = 1.8 s. Concurrently: about 0.4 s.
    assert elapsed < 0.9, elapsed
    assert fake.max_in_flight == 8
    assert j.result.score == 1.0 and j.calls == 9
    assert [c.claim for c in j.claims] == claims


@pytest.mark.parametrize("concurrency", [1, 3])
def test_concurrency_is_bounded(concurrency):
    claims = [f"Aussage {i}." for i in range(7)]
    labels = ["GEDECKT", "UNGEDECKT", "TEILWEISE"] * 3
    fake = FakeJudge([claims_json(claims)], dict(zip(claims, labels[:7], strict=True)), sleep=0.02)
    j = judge(fake, concurrency=concurrency)
    assert fake.max_in_flight == concurrency
    # Original order whatever order the calls finished in.
    assert [c.position for c in j.claims] == list(range(7))
    assert [c.label.value for c in j.claims] == labels[:7]


@pytest.mark.parametrize(("claims", "concurrency", "side_by_side"), [
    (["A."], 4, False), (["A.", "B.", "C."], 1, False), (["A.", "B.", "C."], 3, True),
])
def test_threads_only_where_claims_run_side_by_side(claims, concurrency, side_by_side):
    # A lone claim, or a concurrency of 1, is verified on the caller's thread: starting a pool
    # would cost a few milliseconds per answer and run nothing in parallel.
    threads = []

    class Recording(FakeJudge):
        def __call__(self, messages):
            threads.append(threading.current_thread().name)
            return super().__call__(messages)

    fake = Recording([claims_json(claims)], dict.fromkeys(claims, "GEDECKT"))
    j = judge(fake, concurrency=concurrency)
    assert j.result.score == 1.0 and [c.claim for c in j.claims] == claims
    verify_threads = threads[1:]
    assert len(verify_threads) == len(claims)
    on_pool = [name.startswith("treue-judge") for name in verify_threads]
    assert on_pool == [side_by_side] * len(claims)


def test_an_unparseable_verdict_is_retried_once_and_its_second_reply_counts():
    fake = FakeJudge(
        ['["A.", "B."]'],
        {"A.": ["GEDECKT, weil es im Kontext steht", "GEDECKT"], "B.": "UNGEDECKT"},
    )
    j = judge(fake)
    a, b = j.claims
    assert (a.label, a.attempts, a.raw) == (G, 2, "GEDECKT")
    assert (a.prompt_tokens, a.completion_tokens) == (200 + 201, 2)
    assert (b.label, b.attempts) == (U, 1)
    assert j.result.score == 0.5
    assert j.calls == 4  # decomposition + A twice + B
    retry = [m for m in fake.verify_requests() if len(m) > 2]
    assert len(retry) == 1
    assert retry[0][2] == {"role": "assistant", "content": "GEDECKT, weil es im Kontext steht"}
    assert retry[0][3]["content"] == VERIFY_RETRY_DE
    assert [(r.position, r.attempt, r.text) for r in j.call_log if r.purpose == "verify"] == [
        (0, 1, "GEDECKT, weil es im Kontext steht"),
        (0, 2, "GEDECKT"),
        (1, 1, "UNGEDECKT"),
    ]


def test_still_unparseable_after_the_retry_stays_unparseable_and_is_not_scored_as_zero():
    fake = FakeJudge(
        ['["A.", "B.", "C."]'],
        {"A.": ["SUPPORTED", "Yes", "GEDECKT"], "B.": "GEDECKT", "C.": "TEILWEISE"},
    )
    j = judge(fake)
    a = j.claims[0]
    assert (a.label, a.attempts, a.raw) == (X, 2, "Yes")  # never a third call
    assert fake.attempts["A."] == 2
    assert j.result.score == 0.75  # (1 + 0.5) / 2, not (0 + 1 + 0.5) / 3
    assert (j.result.parseable, j.result.unparseable) == (2, 1)
    assert j.failed_reason is None


def test_mostly_unparseable_verdicts_fail_the_judgement_visibly():
    fake = FakeJudge(['["A.", "B.", "C."]'], {"A.": "?", "B.": "hmm", "C.": "GEDECKT"})
    j = judge(fake)
    assert j.result.score is None and j.result.failed
    assert j.failed_reason == "2 of 3 verdicts unparseable" == j.result.reason
    assert [c.label for c in j.claims] == [X, X, G]
    assert j.calls == 1 + 2 + 2 + 1


def test_an_unparseable_decomposition_is_retried_once_with_a_reminder():
    fake = FakeJudge(["Gern! Hier sind die Aussagen", '["A."]'], {"A.": "GEDECKT"})
    j = judge(fake)
    assert j.decomposition_raw == '["A."]'
    assert j.result.score == 1.0
    assert j.calls == 3
    retry = fake.requests[1]
    assert retry[2] == {"role": "assistant", "content": "Gern! Hier sind die Aussagen"}
    assert retry[3]["content"] == DECOMPOSE_RETRY_DE
    assert [(r.purpose, r.attempt) for r in j.call_log][:2] == [("decompose", 1), ("decompose", 2)]


def test_an_unparseable_decomposition_twice_fails_without_a_score_or_verifications():
    fake = FakeJudge(["Keine Ahnung", "Immer noch keine Liste"], {})
    j = judge(fake)
    assert j.failed_reason == DECOMPOSITION_UNPARSEABLE == "decomposition unparseable"
    assert j.result.score is None and j.result.failed and not j.result.abstention
    assert j.claims == ()
    assert j.decomposition_raw == "Immer noch keine Liste"
    assert j.calls == 2 and (j.prompt_tokens, j.completion_tokens) == (600, 80)
    assert fake.verify_requests() == []


@pytest.mark.parametrize("reply", ["[]", "```json\n[]\n```"])
def test_no_claims_is_an_abstention_without_verification_calls(reply):
    fake = FakeJudge([reply], {})
    j = judge(fake)
    assert j.result.score == 1.0 and j.result.abstention and not j.result.failed
    assert j.claims == () and j.calls == 1 and j.failed_reason is None


def test_identical_claim_and_context_reuse_the_verdict_across_answers_of_a_run():
    cache: VerdictCache = {}
    first = FakeJudge(['["A.", "B."]'], {"A.": "GEDECKT", "B.": "TEILWEISE"})
    judge(first, cache=cache)
    second = FakeJudge(['["B.", "C."]'], {"B.": "UNGEDECKT", "C.": "UNGEDECKT"})
    j = judge(second, cache=cache)
    b, c = j.claims
    assert b == ClaimVerdict(0, "B.", T, "TEILWEISE", 0, 0, 0, 0, True, "judge-1")
    assert (c.cached, c.attempts) == (False, 1)
    assert j.calls == 2  # decomposition + C only
    assert [r.position for r in j.call_log if r.purpose == "verify"] == [1]
    assert j.result.score == 0.25
    assert isinstance(cache[next(iter(cache))], CachedVerdict)


def test_the_cache_is_per_context_and_language():
    cache: VerdictCache = {}
    judge(FakeJudge(['["A."]'], {"A.": "GEDECKT"}), cache=cache)
    other_context = FakeJudge(['["A."]'], {"A.": "UNGEDECKT"})
    assert judge(other_context, chunks=["anders"], cache=cache).claims[0].label is U
    other_language = FakeJudge(['["A."]'], {"A.": "TEILWEISE"})
    assert judge(other_language, language="en", cache=cache).claims[0].label is T
    assert len(cache) == 3


def test_without_a_cache_nothing_is_shared():
    judge(FakeJudge(['["A."]'], {"A.": "GEDECKT"}))
    fake = FakeJudge(['["A."]'], {"A.": "UNGEDECKT"})
    j = judge(fake)
    assert j.claims[0].label is U and not j.claims[0].cached and j.calls == 2


def test_unparseable_verdicts_are_not_cached():
    cache: VerdictCache = {}
    judge(FakeJudge(['["A.", "B."]'], {"A.": "??", "B.": "GEDECKT"}), cache=cache)
    assert [key[1] for key in cache] == ["B."]
    fake = FakeJudge(['["A."]'], {"A.": "GEDECKT"})
    j = judge(fake, cache=cache)
    assert j.claims[0].label is G and not j.claims[0].cached


def test_totals_count_every_call_including_retries():
    fake = FakeJudge(
        ["nope", '["A.", "B.", "C."]'],
        {"A.": ["x", "GEDECKT"], "B.": ["y", "z"], "C.": "TEILWEISE"},
    )
    j = judge(fake)
    assert j.calls == len(fake.requests) == 2 + 2 + 2 + 1
    assert j.calls == 2 + sum(c.attempts for c in j.claims)
    assert j.prompt_tokens == 2 * 300 + (200 + 201) * 2 + 200
    assert j.completion_tokens == 2 * 40 + 5
    assert j.prompt_tokens == sum(r.prompt_tokens for r in j.call_log)


def test_verify_call_takes_the_verifications_when_given():
    decompose = FakeJudge(['["A.", "B."]'], {})
    verify = FakeJudge([], {"A.": "GEDECKT", "B.": "GEDECKT"})
    j = judge(decompose, verify_call=verify)
    assert len(decompose.requests) == 1 and len(verify.requests) == 2
    assert j.calls == 3 and j.result.score == 1.0


class Boom(Exception):
    pass


def test_a_decomposition_error_propagates_unchanged():
    error = Boom("connection reset")

    def call(messages):
        raise error

    with pytest.raises(Boom) as info:
        judge(call)
    assert info.value is error


def test_a_verification_error_propagates_unchanged_and_cancels_the_rest():
    claims = [f"Aussage {i}." for i in range(6)]
    error = Boom("429")
    fake = FakeJudge(
        [claims_json(claims)],
        dict.fromkeys(claims, "GEDECKT"),
        sleep=0.05,
        raise_for={"Aussage 0.": error},
    )
    with pytest.raises(Boom) as info:
        judge(fake, concurrency=1)
    assert info.value is error
    time.sleep(0.2)  # let a call that was already taken up finish
    # Claim 0 failed; at most the next one had started; the queued rest never ran.
    assert len(fake.verify_requests()) <= 2


def test_an_error_keeps_the_verdicts_of_the_calls_in_flight_and_drops_the_queued():
    """The first failure is raised once the calls in flight have returned: their verdicts were
    paid for, and go to the cache, so a retry does not ask for them again. Calls not yet
    started are not made."""
    claims = [f"Aussage {i}." for i in range(4)]

    class Slow(FakeJudge):
        def _reply(self, messages):
            verify = messages[0]["content"] not in _DECOMPOSE_SYSTEMS
            if verify and "Aussage 0." not in messages[1]["content"]:
                time.sleep(0.5)
            return super()._reply(messages)

    fake = Slow(
        [claims_json(claims)], dict.fromkeys(claims, "GEDECKT"),
        raise_for={"Aussage 0.": Boom("500")},
    )
    cache: dict = {}
    with pytest.raises(Boom):
        judge(fake, concurrency=2, cache=cache)
    # Claim 0 failed at once, claim 1 was in flight: kept. Of the queued claims, one may have
    # started on the thread claim 0 freed before the queue was dropped (a busy machine): then
    # it was paid for and is kept as well. No call is made whose verdict is not kept.
    asked = {found(_CLAIM_RE, m[1]["content"]).group(1) for m in fake.verify_requests()}
    kept = {claim for _, claim, _ in cache}
    assert "Aussage 1." in kept and kept == asked - {"Aussage 0."}
    assert "Aussage 3." not in asked  # two threads: the last claim never got one


def test_a_retry_asks_only_for_what_is_missing():
    """An attempt stored its decomposition (on_decomposed) and the verdicts it received (the
    cache) before a call failed; the next attempt asks for the missing verdict only."""
    claims = ["A.", "B.", "C."]
    first = FakeJudge(
        [claims_json(claims)], {"A.": "GEDECKT", "C.": "GEDECKT"},
        raise_for={"B.": Boom("429")},
    )
    cache: dict = {}
    stored: list[str] = []
    with pytest.raises(Boom):
        judge(first, concurrency=1, cache=cache, on_decomposed=stored.append)
    assert stored == [claims_json(claims)]
    assert [claim for _, claim, _ in cache] == ["A."]  # one by one: C. was never asked

    second = FakeJudge([], {"B.": "UNGEDECKT", "C.": "TEILWEISE"})
    j = judge(second, concurrency=1, cache=cache, decomposition=stored[0])

    assert len(second.requests) == 2  # B. and C.: no decomposition, no second A.
    assert [(c.claim, c.label, c.cached) for c in j.claims] == [
        ("A.", G, True), ("B.", U, False), ("C.", T, False),
    ]
    assert j.decomposition_raw == stored[0] and j.calls == 2


def test_a_stored_decomposition_that_does_not_read_is_asked_again():
    fake = FakeJudge([claims_json(["A."])], {"A.": "GEDECKT"})
    j = judge(fake, decomposition="kaputt")
    assert [c.claim for c in j.claims] == ["A."] and j.calls == 2


def test_an_error_after_some_verdicts_returns_no_partial_judgement():
    fake = FakeJudge(
        ['["A.", "B.", "C."]'],
        {"A.": "GEDECKT", "C.": "GEDECKT"},
        raise_for={"B.": Boom("timeout")},
    )
    result = None
    with pytest.raises(Boom):
        result = judge(fake, concurrency=3)
    assert result is None
