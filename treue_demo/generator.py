"""The demo generator: a stand-in RAG model that answers from its passages, with token
log-probabilities, and varies its answer a little per sample for the self-consistency check."""

import hashlib
import re
import threading
from collections.abc import Sequence
from typing import Any

from treue_demo.answers import (
    DemoAnswer,
    message_text,
    messages_key,
)
from treue_demo.data import (
    synthetic_logprobs,
)
from treue_demo.word_check import WORD

# What the demo generator says instead of a labelled span without numbers: the run that does
# not make the claim up. A whole sentence is left out in the first variation and replaced by
# HEDGE in the second; a part of a sentence is replaced, by one of the two fragments.
HEDGE = "The passages do not say more about this"


HEDGE_FRAGMENTS = ("something the passages do not mention", "what the passages leave open")


# The number of versions of a labelled answer the generator cycles through: the answer itself
# and two variations. An investigation asks three samples; the same one twice gets the same.
VERSIONS = 3


_DIGITS = re.compile(r"\d+")


_TRAIL = re.compile(r"[.!?]*[\"'”’)\]]*\s*\Z")


def _shifted(number: str, version: int) -> str:
    value = int(number)
    if 1900 <= value <= 2100 or value < 10:  # a year, a small count: a near miss
        step = 1
    else:
        step = max(1, round(value * 0.2))
    return str(value + version * step)


def vary(answer: DemoAnswer, version: int) -> tuple[str, list[tuple[int, int]]]:
    """The answer's ``version``-th variation (0: the answer itself) and the spans in it that
    stand for the labelled ones: numbers in them shifted; sentences left out (version 1) or
    replaced by ``HEDGE`` (version 2); parts of sentences replaced by a hedging fragment."""
    if version == 0 or not answer.spans:
        return answer.response, list(answer.spans)
    merged: list[list[int]] = []
    for s, e in sorted(answer.spans):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    text, spans, last = "", [], 0
    for s, e in merged:
        text += answer.response[last:s]
        original = answer.response[s:e]
        if _DIGITS.search(original):
            new = _DIGITS.sub(lambda m: _shifted(m.group(), version), original)
        else:
            found = _TRAIL.search(original)
            assert found is not None  # every part of _TRAIL may be empty: it always matches
            trail = found.group()
            before = text.rstrip(" \t")
            sentence = (not before or before[-1] in ".!?:\n") and trail.strip()[:1] in (
                ".", "!", "?")
            if sentence and version % 2 == 1:
                new = ""
            elif sentence:
                new = HEDGE + trail
            else:
                new = HEDGE_FRAGMENTS[(version - 1) % 2] + trail
        spans.append((len(text), len(text) + len(new)))
        text += new
        last = e
    text += answer.response[last:]
    return text, [(s, e) for s, e in spans if e > s]


class DemoGenerator:
    """Replays demo answers for their own models' names and messages, labelled ones varied."""

    def __init__(self, answers: Sequence[DemoAnswer]) -> None:
        self._by_prompt = {(a.model, a.prompt): a for a in answers if a.model}
        self.models = sorted({a.model for a in answers if a.model})
        self._asked: dict[str, int] = {}
        self._lock = threading.Lock()

    def find(self, model: str, messages: Sequence[Any]) -> DemoAnswer | None:
        return self._by_prompt.get((model, messages_key(messages)))

    def reply(
        self, answer: DemoAnswer, messages: Sequence[Any], temperature: float
    ) -> tuple[str, dict[str, Any], str]:
        """The text, its log-probabilities and a note for the log."""
        key = hashlib.sha256(
            f"{answer.model}\n{messages_key(messages)}\n{temperature!r}".encode()
        ).hexdigest()
        with self._lock:
            n = self._asked.get(key, 0)
            self._asked[key] = n + 1
        version = n % VERSIONS if temperature > 0 else 0
        text, spans = vary(answer, version)
        if version == 0 or not answer.spans:
            logprobs = answer.logprobs
        else:
            logprobs = synthetic_logprobs(text, spans, seed=f"{key}:{version}")
        note = f"generate {answer.id} ({answer.model}): version {version if answer.spans else 0}"
        return text, logprobs, note


# A stand-in for a RAG service's model in the README's Python loop against the demo: it
# answers from the sources in the prompt, never from knowledge of its own (it has none).
DEMO_RAG_MODEL = "treue-demo-rag"


_QUESTION = re.compile(r"(?:Question|Frage):")


# A sentence ends at ".", "!" or "?" before a blank or the end: a point inside a number
# ("1.250,00 €") or an abbreviation without a blank after it ("z.B.") goes on.
_SENTENCE = re.compile(r"(?:[^.!?\n]|[.!?](?=[^\s.!?]))+[.!?]*")


def rag_reply(messages: Sequence[Any]) -> tuple[str, dict[str, Any], str]:
    """The sentence of the last user message's sources that shares the most words with its
    question (the whole message stands for both when it names no question), with
    log-probabilities: the text, them, and a note for the log."""
    user = next((message_text(m.get("content")) for m in reversed(messages)
                 if isinstance(m, dict) and m.get("role") == "user"), "")
    # The last "Question:" (a linear scan; the prompt comes from whoever runs the example).
    found = max(_QUESTION.finditer(user), key=lambda m: m.start(), default=None)
    question = user[found.end():].strip() if found else user
    sources = user[: found.start()] if found else user
    words = {w.lower() for w in WORD.findall(question)}
    sentences = [m.group().strip() for m in _SENTENCE.finditer(sources) if m.group().strip()]
    best = max(sentences, key=lambda t: len(words & {w.lower() for w in WORD.findall(t)}),
               default="")
    text = best or "Dazu steht nichts in den Quellen."
    seed = hashlib.sha256(user.encode()).hexdigest()
    return text, synthetic_logprobs(text, [], seed=seed), f"rag: {len(sentences)} sentences"
