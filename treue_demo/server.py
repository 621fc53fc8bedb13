"""The demo judge: a local OpenAI-compatible endpoint whose verdicts are replayed human labels.

The demo (``scripts/demo.sh``) has no model to call, yet tier 2 should visibly work: answers
sampled at ingest get judge runs, a Celery worker scores them in the background, the pages show
claims and verdicts. This server stands in for the judge model. It speaks the OpenAI chat
completions protocol, so the worker calls it through the real ``openai`` client exactly as it
would call a real endpoint, and it answers both judge requests from RAGTruth's QA answers in
``demo/``:

- decomposition: the answer split into sentences (list markers, "Based on the given passages,"
  and pleasantries removed; "Unable to answer …" is an abstention, ``[]``);
- verification: the claim is found in the demo answers and judged by the human hallucination
  spans over it — most of it labelled: UNGEDECKT, some of it: TEILWEISE, none: GEDECKT;
- batched verification (system message starting with ``VERIFY_BATCH_SYSTEM_DE/EN``): the
  claims listed under their ids ("Aussagen (3):" / "Claims (3):", then "K7: claim"), each
  verdict as above under its id, a line each (``K7: GEDECKT [2] reason``, the chunk sharing
  most of the claim's words and where the verdict came from; ``K7: GEDECKT`` where the format
  asks for the word alone); a correction turn (the judge's reply and a user message naming
  the ids still open) is answered for those ids only;
- one-call judging (system message starting with ``SINGLE_SYSTEM_DE/EN``): the answer split as
  for the decomposition, each claim with its verdict, as ``{"claims": [{"claim", "verdict",
  "chunks", "reason"}]}``.

It supports structured output: a request with a ``response_format`` (a JSON schema) gets JSON
in that schema — for a batched request ``{"verdicts": [{"id", "verdict", "chunks",
"reason"}]}`` with the schema's fields — and its schema counted as prompt tokens, as OpenAI
bills it. A response_format of an unknown type is refused with a 400, as OpenAI refuses it.

The demo judge is deliberately a little lenient: it passes over the spans the annotators called
"Subtle Baseless Info" (plausible details the passages do not state), which the experts of the
demo count (``expert_labels``: all spans); and a sentence that two models said to the same
question, labelled in one answer and not in the other, gets the kinder verdict. So the judge
scores about 0.025 above the experts, never below them, as a real judge model is off by a few
hundredths, and the expert-scale estimate — the judge's figure corrected by the reviewed
answers — has something to correct.

No model is involved and nothing is random: the same request always gets the same reply. Text
that is not a demo answer (a real service's answer sent to the demo) gets its sentences as
claims and a word check (``word_check``): a number or a negation the passages do not have is
UNGEDECKT, otherwise the share of the claim's words found in the passages decides. That is no
model either (a paraphrase is missed), and the demo says so wherever its verdicts are shown.

The same server plays the demo's generator for self-consistency investigations: a request for
a demo answer's own model (``llama-2-70b-chat``, ...) with that answer's messages (see
``treue_demo.data.demo_messages``) gets that answer back, with its synthetic log-probabilities
when asked. It is not a model either: it replays the stored answer, and for answers with human
hallucination labels it varies the labelled spans on a script (numbers shifted, other spans left
out or replaced by a hedge), so that an investigation finds inconsistency where humans found
invented content. The n-th identical request (same model, messages and temperature) gets the
(n mod 3)-th version — the answer itself, then two variations — so the same investigation run
twice gets the same three samples. At temperature 0 the answer is always replayed unchanged.
For the investigation's contradiction check, the judge compares the samples' texts: identical
is KONSISTENT; samples of a demo answer that differ inside its labelled spans are WIDERSPRUCH;
anything else is KONSISTENT (a fallback).

It listens on loopback only. ``python -m treue_demo.server --port 8790`` prints its URL.
It needs neither Django nor the database.
"""

import argparse
import difflib
import hashlib
import json
import logging
import math
import re
import signal
import string
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from investigations.domain.consistency import prompt as consistency_prompts
from judging.domain import batched, single
from judging.domain import judge_prompt as prompts
from judging.domain.judge_parse import LABEL_POINTS, Label, parse_claims
from judging.domain.scoring import score_labels
from treue_demo.data import (
    DEMO_JUDGE_MODEL,
    answer_logprobs,
    demo_messages,
    load_rows,
    synthetic_logprobs,
)

logger = logging.getLogger("treue.demo_judge")

DEFAULT_PORT = 8790
NOTICE = (
    "Demo-Prüfer: Urteile sind wiedergegebene menschliche Labels (RAGTruth), für andere "
    "Antworten ein Wortvergleich, kein Modell; "
    "Demo-Generator: gibt die Demo-Antworten wieder, mit geskripteter Variation der gelabelten "
    "Stellen, kein Modell / "
    "demo judge: verdicts are replayed human labels (RAGTruth), for other answers a word "
    "check, not a model; demo generator: "
    "replays the demo answers with scripted variation of the labelled spans, not a model"
)

# RAGTruth's span types; all of them mark text the passages do not support.
HALLUCINATION_TYPES = frozenset({
    "Evident Baseless Info", "Subtle Baseless Info", "Evident Conflict", "Subtle Conflict",
})
# The span type the demo judge passes over (see the module docstring): details that "fit the
# topic" but are not in the passages, the annotators' mildest finding and a judge's likeliest
# miss. 845 of RAGTruth QA's 2,787 spans; 385 of its 1,607 labelled answers carry no other.
LENIENT_TYPES = frozenset({"Subtle Baseless Info"})
# Share of a claim's letters and digits inside labelled spans from which it counts as made up
# as a whole ("most of the claim"); anything less but at least MIN_COVERED characters is
# partly supported. The floor keeps a span that ends a character into the next sentence (the
# annotators' boundaries are not exact) from marking that sentence; a short span that lies
# wholly inside the claim ("°F", "5") marks it all the same.
UNSUPPORTED_SHARE = 0.5
MIN_COVERED = 3

# RAGTruth's generators open most answers this way; it is framing, not a claim.
_FRAMING = re.compile(
    r"^(?:based on|according to|from) (?:the )?(?:given|provided|above)? ?"
    r"(?:passages?|information|context|sources?)(?: provided| given| above)?,\s*",
    re.IGNORECASE,
)
# Sentences that assert nothing about the world (rule 5 of the decomposition prompt).
_NO_CLAIM = re.compile(
    r"^(?:i hope (?:this|that) (?:helps|answers your question)|hope (?:this|that) helps"
    r"|ich hoffe,? (?:das|dies) hilft"
    r"|let me know\b.*|sure|certainly|great question|thank you|thanks)\W*\Z",
    re.IGNORECASE,
)
# Introductions that only announce what follows ("here are the steps:", "Passage 1:").
_INTRODUCES = re.compile(
    r"^(?:here(?: is|['’]s| are)|passage \d+\W*\Z)|\bfollow(?:ing)? these steps|\bthe following\b",
    re.IGNORECASE,
)
# "I don't know" answers: no claims at all, an abstention.
_ABSTAINS = re.compile(
    r"^(?:unable to answer|i (?:am unable|cannot|can ?not|can't) (?:to )?answer)\b",
    re.IGNORECASE,
)
_LIST_MARKER = re.compile(r"^\s*(?:\d{1,3}[.)]|[-*•–])\s+")
# A sentence ends at . ! or ? (and closing quotes or brackets) before whitespace and a capital
# or a digit (perhaps after an opening quote); `_sentences` checks the capital, umlauts included.
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*\s+(?=[\"'“„‘(\[]?(?P<next>\w))")
_ABBREVIATIONS = frozenset({
    "e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "st", "no", "approx", "u.s", "inc",
    "jr", "sr", "co", "ltd", "mt", "ft", "prof", "fig",
})
_WORD_BEFORE = re.compile(r"([\w.]+)$")


def split_claims(answer: str) -> list[tuple[int, int]]:
    """The claims of ``answer`` as (start, end) spans: its sentences, each an exact substring.

    Keeping claims verbatim is what lets verification find them again among the demo answers.
    Framing ("Based on the given passages,"), introductions ("here are the steps:"),
    pleasantries and list markers are left out; an answer that says it cannot answer has no
    claims.
    """
    if _ABSTAINS.match(answer.strip()):
        return []
    spans: list[tuple[int, int]] = []
    offset = 0
    for line in answer.splitlines(keepends=True):
        start = offset
        offset += len(line)
        marker = _LIST_MARKER.match(line)
        if marker:
            start += marker.end()
        for s, e in _sentences(answer, start, offset):
            framing = _FRAMING.match(answer, s, e)
            if framing:
                s = framing.end()
            text = answer[s:e]
            if (
                _NO_CLAIM.match(text)
                or _ABSTAINS.match(text)
                or (text.endswith(":") and _INTRODUCES.search(text))
                or not any(c.isalnum() for c in text)
            ):
                continue
            spans.append((s, e))
    return spans


def _sentences(text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    begin = start
    for match in _SENTENCE_END.finditer(text, start, end):
        if not (match["next"].isupper() or match["next"].isdigit()):
            continue
        word = _WORD_BEFORE.search(text, begin, match.start())
        before = word.group(1).lower().rstrip(".") if word else ""
        if before in _ABBREVIATIONS or (len(before) == 1 and before.isalpha()):
            continue  # "e.g. Mars", "J. K. Rowling"
        yield from _trimmed(text, begin, match.end())
        begin = match.end()
    yield from _trimmed(text, begin, end)


def _trimmed(text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start < end:
        yield start, end


@dataclass(frozen=True)
class DemoAnswer:
    id: str
    response: str
    passages: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]  # labelled hallucinations in `response`
    question: str = ""
    model: str = ""  # the generator that wrote it (RAGTruth's model name)
    prompt: str = ""  # its messages, as `_messages_key` writes them
    # The spans the (lenient) judge counts: `spans` but those of LENIENT_TYPES; None: all.
    judged_spans: tuple[tuple[int, int], ...] | None = None

    @property
    def judge_spans(self) -> tuple[tuple[int, int], ...]:
        return self.spans if self.judged_spans is None else self.judged_spans

    @property
    def logprobs(self) -> dict[str, Any]:
        """As the demo ingested them (`treue_demo.data.answer_logprobs`): made when asked, as
        4,000 answers' token lists would take the judge's memory for nothing."""
        labels = [{"start": s, "end": e} for s, e in self.spans]
        return answer_logprobs({"id": self.id, "response": self.response, "labels": labels})


def load_answers(rows: Sequence[dict[str, Any]] | None = None) -> list[DemoAnswer]:
    """The demo answers (default: all of RAGTruth QA, `treue_demo.data.load_rows`)."""
    answers = []
    for row in load_rows() if rows is None else rows:
        spans = [label for label in row["labels"] if label["label_type"] in HALLUCINATION_TYPES]
        answers.append(DemoAnswer(
            id=str(row["id"]),
            response=row["response"],
            passages=tuple(p.strip() for p in row["passages"] if p.strip()),
            spans=tuple((label["start"], label["end"]) for label in spans),
            question=row["question"],
            model=row["model"],
            prompt=_messages_key(demo_messages(row["question"], row["passages"])),
            judged_spans=tuple(
                (label["start"], label["end"]) for label in spans
                if label["label_type"] not in LENIENT_TYPES
            ),
        ))
    return answers


def _messages_key(messages: Sequence[Any]) -> str:
    """Messages as one string: roles and texts only, so that content parts equal a string."""
    return json.dumps(
        [[m.get("role"), _text(m.get("content"))] for m in messages if isinstance(m, dict)],
        ensure_ascii=False,
    )


def label_for(answer: DemoAnswer, claim: str, *, strict: bool = False) -> Label:
    """The verdict the human labels give ``claim``, a substring of ``answer.response``: by the
    spans the demo judge counts, or with ``strict`` by all of them (the demo's experts)."""
    spans = answer.spans if strict else answer.judge_spans
    best = Label.GEDECKT
    start = answer.response.find(claim)
    while start != -1:
        positions = [i for i in range(start, start + len(claim)) if answer.response[i].isalnum()]
        covered = sum(any(s <= i < e for s, e in spans) for i in positions)
        if positions and covered / len(positions) > UNSUPPORTED_SHARE:
            return Label.UNGEDECKT
        inside = any(start <= s and e <= start + len(claim) for s, e in spans)
        if covered >= MIN_COVERED or (covered and inside):
            best = Label.TEILWEISE
        start = answer.response.find(claim, start + 1)
    return best


def claims_of(answer: DemoAnswer) -> list[str]:
    """The claims the demo judge decomposes ``answer`` into, in its order."""
    text = answer.response
    return list(dict.fromkeys(text[s:e] for s, e in split_claims(text)))


def expert_labels(answer: DemoAnswer, claims: Sequence[str]) -> list[Label]:
    """The demo's experts' verdict on each of the judge's ``claims`` of ``answer``: the human
    labels with every span counted, Subtle Baseless Info too (the judge passes over those)."""
    return [label_for(answer, claim, strict=True) for claim in claims]


def expert_score(answer: DemoAnswer) -> float:
    """The answer's faithfulness on the experts' scale: its claims as the product reads the demo
    judge's decomposition (at most MAX_CLAIMS), labelled as the experts label them, scored as
    the product scores verdicts."""
    claims = parse_claims(json.dumps(claims_of(answer))) or []
    score = score_labels(expert_labels(answer, claims)).score
    assert score is not None  # every label is a verdict, none unparseable
    return score


def _pattern(
    template: str, lazy: str | tuple[str, ...] = "", shapes: dict[str, str] | None = None
) -> re.Pattern[str]:
    """A regex that reads the placeholders back out of a prompt template; the fields ``lazy``
    take as little as they can (a question before samples that hold blank lines), those in
    ``shapes`` only what their regex matches (a count: digits)."""
    names = {"kontext": "context", "aussage": "claim"}  # the article's German names
    lazy = (lazy,) if isinstance(lazy, str) else lazy
    parts = []
    for literal, field, _spec, _conversion in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if field is not None:
            shape = (shapes or {}).get(field, f".*{'?' if field in lazy else ''}")
            parts.append(f"(?P<{names.get(field, field)}>{shape})")
    return re.compile("".join(parts) + r"\Z", re.DOTALL)


_CONSISTENCY_USER = [
    _pattern(consistency_prompts.USER_DE, lazy="question"),
    _pattern(consistency_prompts.USER_EN, lazy="question"),
]
_SAMPLE_HEADER = re.compile(r"(?:\A|\n\n)(?:Antwort|Answer) \d+:\n")
_EMPTY_SAMPLES = {consistency_prompts.EMPTY_DE, consistency_prompts.EMPTY_EN}
_DECOMPOSE_SYSTEMS = {prompts.DECOMPOSE_SYSTEM_DE, prompts.DECOMPOSE_SYSTEM_EN}
_VERIFY_SYSTEMS = {prompts.VERIFY_SYSTEM_DE, prompts.VERIFY_SYSTEM_EN}
# Batched and one-call requests: the system message is the instructions and then one of the
# reply formats (judging/domain/batched.py, single.py), recognised by its start.
_BATCH_SYSTEMS = {batched.VERIFY_BATCH_SYSTEM_DE: "de", batched.VERIFY_BATCH_SYSTEM_EN: "en"}
_SINGLE_SYSTEMS = {single.SINGLE_SYSTEM_DE: "de", single.SINGLE_SYSTEM_EN: "en"}
# The formats that ask for the word alone (no chunks, no reason), and those that ask for JSON.
_BARE_FORMATS = frozenset({
    batched.FORMAT_BARE_DE, batched.FORMAT_BARE_EN, batched.FORMAT_JSON_BARE_DE,
    batched.FORMAT_JSON_BARE_EN, single.FORMAT_BARE_DE, single.FORMAT_BARE_EN,
})
_JSON_FORMATS = frozenset({
    batched.FORMAT_JSON_DE, batched.FORMAT_JSON_EN, batched.FORMAT_JSON_BARE_DE,
    batched.FORMAT_JSON_BARE_EN,
})
# A batched request: the context, then "Aussagen (3):" and a line per claim, "K7: <claim>".
# The context is greedy: the claims follow the last such header (a passage may hold one too).
_BATCH_USER = [
    _pattern(batched.VERIFY_BATCH_USER_DE, shapes={"count": r"\d{1,4}"}),
    _pattern(batched.VERIFY_BATCH_USER_EN, shapes={"count": r"\d{1,4}"}),
]
_LISTED = re.compile(r"^(?P<id>[A-Za-z][0-9]): (?P<claim>.*)$", re.MULTILINE)
# The ids a correction names, on its first line ("Für K7, M2 fehlt ein lesbares Urteil.").
_NAMED_ID = re.compile(r"\b([A-Za-z][0-9])\b")
# A one-call request: question, answer, context (the answer ends at the first context header).
_SINGLE_USER = [
    _pattern(single.SINGLE_USER_DE, lazy=("question", "answer")),
    _pattern(single.SINGLE_USER_EN, lazy=("question", "answer")),
]
_RANKED = re.compile(r"^\[(?P<rank>\d+)\] ", re.MULTILINE)
_DECOMPOSE_USER = [_pattern(prompts.DECOMPOSE_USER_DE), _pattern(prompts.DECOMPOSE_USER_EN)]
_VERIFY_USER = [_pattern(prompts.VERIFY_USER_DE), _pattern(prompts.VERIFY_USER_EN)]
# For wording this module does not know (a later prompt version): the last labelled field.
_LOOSE_ANSWER = re.compile(r"(?:Antwort|Answer):\s*\n(?P<answer>.*?)(?:\n\n[^\n]*:\s*)?\Z",
                           re.DOTALL)
_LOOSE_CLAIM = re.compile(r"^(?:Aussage|Claim):[ \t]*(?P<claim>.+)$", re.MULTILINE)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(
            part.get("text", "") for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _match(patterns: Sequence[re.Pattern[str]], text: str) -> re.Match[str] | None:
    return next((m for p in patterns if (m := p.match(text))), None)


# Candidates for the judge comparison (review's "Prüfmodelle vergleichen") in the demo: the
# demo judge with a bias, so that comparing one against the experts' labels shows something.
# The strict one calls partly supported claims unsupported, the lenient one the reverse.
JUDGE_VARIANTS: dict[str, dict[str, str]] = {
    f"{DEMO_JUDGE_MODEL}-strict": {"TEILWEISE": "UNGEDECKT"},
    f"{DEMO_JUDGE_MODEL}-lenient": {"UNGEDECKT": "TEILWEISE"},
}
_VERDICT_WORD = re.compile(r"\b(?:GEDECKT|TEILWEISE|UNGEDECKT)\b")
_VERDICT_FIELD = re.compile(r'(?<="verdict":")(?:GEDECKT|TEILWEISE|UNGEDECKT)(?=")')

# The demo judge's one-sentence reasons, in the prompt's language: where its verdict came from.
REASONS: dict[str, dict[str, dict[Label, str]]] = {
    "en": {
        "human label": {
            Label.GEDECKT: "The human annotators found nothing unsupported in this claim.",
            Label.TEILWEISE: "The human annotators marked part of this claim as unsupported.",
            Label.UNGEDECKT: "The human annotators marked this claim as unsupported.",
        },
        "word check": {
            Label.GEDECKT: "Its numbers and negations all appear in the passages.",
            Label.TEILWEISE: "Some of its words do not appear in the passages.",
            Label.UNGEDECKT: "A number or negation in it does not appear in the passages.",
        },
    },
    "de": {
        "human label": {
            Label.GEDECKT: "Die menschlichen Annotatoren fanden hier nichts Ungedecktes.",
            Label.TEILWEISE: "Die menschlichen Annotatoren markierten einen Teil als ungedeckt.",
            Label.UNGEDECKT: "Die menschlichen Annotatoren markierten die Aussage als ungedeckt.",
        },
        "word check": {
            Label.GEDECKT: "Ihre Zahlen und Verneinungen stehen alle in den Abschnitten.",
            Label.TEILWEISE: "Einige ihrer Wörter stehen nicht in den Abschnitten.",
            Label.UNGEDECKT: "Eine Zahl oder Verneinung steht nicht in den Abschnitten.",
        },
    },
}

class DemoJudge:
    """Answers judge requests (lists of chat messages) from the demo answers' human labels."""

    def __init__(self, answers: Sequence[DemoAnswer]) -> None:
        self.answers = list(answers)
        self._by_text = {a.response.strip(): a for a in self.answers}
        # Claims as this judge decomposes them, to the answers holding them: verification
        # looks a claim up here instead of searching 4,000 answers for it.
        self._by_claim: dict[str, list[DemoAnswer]] = {}
        for answer in self.answers:
            for claim in claims_of(answer):
                self._by_claim.setdefault(claim, []).append(answer)

    def reply(
        self, messages: Sequence[Any], response_format: Any = None
    ) -> tuple[str, str]:
        """The reply text and a short note for the log ("decompose 12794: 7 claims").
        ``response_format``: the request's, a JSON schema that a batched or one-call reply
        keeps to."""
        system = next((_text(m.get("content")) for m in messages
                       if isinstance(m, dict) and m.get("role") == "system"), "")
        # The first user turn holds the task; a retry adds the previous reply and a reminder.
        turns = [_text(m.get("content")) for m in messages
                 if isinstance(m, dict) and m.get("role") == "user"]
        user = turns[0] if turns else ""
        if system in _VERIFY_SYSTEMS:
            return self._verify(user)
        batch = next((prefix for prefix in _BATCH_SYSTEMS if system.startswith(prefix)), None)
        if batch is not None:
            # A correction (a later user turn, after the judge's reply) names the ids still open.
            correction = turns[-1] if len(turns) > 1 else None
            return self._verify_batch(
                user, _BATCH_SYSTEMS[batch], _Shape.of(system[len(batch):], response_format),
                correction,
            )
        one = next((prefix for prefix in _SINGLE_SYSTEMS if system.startswith(prefix)), None)
        if one is not None:
            return self._single(user, _SINGLE_SYSTEMS[one],
                                _Shape.of(system[len(one):], response_format))
        if system in _DECOMPOSE_SYSTEMS:
            return self._decompose(user)
        if system in (consistency_prompts.SYSTEM_DE, consistency_prompts.SYSTEM_EN) or _match(
            _CONSISTENCY_USER, user
        ):
            return self._contradiction(user)
        if _match(_VERIFY_USER, user) or "UNGEDECKT" in user:
            return self._verify(user)
        return self._decompose(user)

    def _decompose(self, user: str) -> tuple[str, str]:
        match = _match(_DECOMPOSE_USER, user) or _LOOSE_ANSWER.search(user)
        text = (match.group("answer") if match else user).strip()
        claims, known = self._claims(text, user)
        note = f"decompose {known.id if known else 'unknown answer'}: {len(claims)} claims"
        return json.dumps(claims, ensure_ascii=False), note

    def _claims(self, text: str, around: str) -> tuple[list[str], "DemoAnswer | None"]:
        """The claims of the answer ``text`` (the demo answer it is, or the longest one found
        in ``around``, taken whole) and that demo answer, if any."""
        known = self._by_text.get(text) or self._contained_in(around)
        if known is not None:
            text = known.response
        return list(dict.fromkeys(text[s:e] for s, e in split_claims(text))), known

    def _contained_in(self, user: str) -> DemoAnswer | None:
        found = [a for a in self.answers if a.response.strip() and a.response.strip() in user]
        return max(found, key=lambda a: len(a.response), default=None)

    def _contradiction(self, user: str) -> tuple[str, str]:
        """WIDERSPRUCH when the samples of a demo answer differ inside its labelled spans."""
        match = _match(_CONSISTENCY_USER, user)
        german = match is None or match.re is _CONSISTENCY_USER[0]
        question = match.group("question").strip() if match else ""
        shown = match.group("samples") if match else user
        samples = [
            "" if text.strip() in _EMPTY_SAMPLES else text.strip()
            for text in _SAMPLE_HEADER.split(shown)[1:]
        ]

        def reply(contradiction: bool, de: str, en: str) -> str:
            word = ("WIDERSPRUCH" if german else "CONTRADICTION") if contradiction else (
                "KONSISTENT" if german else "CONSISTENT")
            return f"{word}\n{de if german else en}"

        if len({" ".join(t.split()) for t in samples}) <= 1:
            return (reply(False, "Die Antworten sind wortgleich.", "The answers are identical."),
                    "contradiction: identical samples")
        candidates = [a for a in self.answers if a.question.strip() == question]
        if not candidates:
            return (reply(False, "Demo-Prüfer: unbekannte Antworten, nicht verglichen.",
                          "Demo judge: unknown answers, not compared."),
                    "contradiction unknown question: KONSISTENT (fallback)")
        # Several models answered some questions: the one whose answer the samples resemble.
        answer = max(candidates, key=lambda a: difflib.SequenceMatcher(
            None, a.response, samples[0], autojunk=False).ratio())
        for number, sample in enumerate(samples, 1):
            fragment = _labelled_difference(answer, sample)
            if fragment is not None:
                return (reply(True, f"Antwort {number} weicht an einer gelabelten Stelle ab: "
                                    f"„{fragment}“.",
                              f"Answer {number} differs in a labelled span: “{fragment}”."),
                        f"contradiction {answer.id}: WIDERSPRUCH")
        return (reply(False, "Die Antworten unterscheiden sich nur außerhalb gelabelter Stellen.",
                      "The answers differ only outside labelled spans."),
                f"contradiction {answer.id}: KONSISTENT")

    def _verify_batch(
        self, user: str, language: str, shape: "_Shape", correction: str | None = None
    ) -> tuple[str, str]:
        """A verdict per listed claim under its id: its label as `_verify` gives it, the chunk
        that shares the most of its words and where the label came from — a line each
        (``K7: GEDECKT [2] reason``, or ``K7: GEDECKT`` where the format asks for the word
        alone), or JSON in the batch schema. A correction is answered for the ids it names."""
        match = _match(_BATCH_USER, user)
        if match is None:
            return "", "verify batch: unreadable request"
        context = match.group("context")
        listed = [(m.group("id"), m.group("claim").strip())
                  for m in _LISTED.finditer(match.group("claims"))]
        if correction is not None:
            named = {i.upper() for i in _NAMED_ID.findall(correction.split("\n", 1)[0])}
            listed = [(id_, claim) for id_, claim in listed if id_.upper() in named] or listed
        chunks = _ranked_chunks(context)
        verdicts = []
        for id_, claim in listed:
            label, rank, reason = self._evidence(claim, context, chunks, language)
            verdicts.append({"id": id_, "verdict": label.value,
                             "chunks": [rank] if rank else [], "reason": reason})
        kind = "correction" if correction is not None else "verify batch"
        note = f"{kind}: {len(verdicts)} claims{' (json)' if shape.json else ''}"
        if shape.json:
            return _json_reply("verdicts", verdicts, shape), note
        if not shape.evidence:
            return "\n".join(f"{v['id']}: {v['verdict']}" for v in verdicts), note
        return "\n".join(
            f"{v['id']}: {v['verdict']} [{''.join(map(str, v['chunks']))}] {v['reason']}"
            for v in verdicts
        ), note

    def _single(self, user: str, language: str, shape: "_Shape") -> tuple[str, str]:
        """The one-call reply: the answer's claims as `_decompose` splits them, each with its
        verdict as `_verify_batch` gives it, as JSON (always: the format asks for it). A
        correction gets the same reply."""
        match = _match(_SINGLE_USER, user)
        text = (match.group("answer") if match else user).strip()
        context = match.group("context") if match else user
        claims, known = self._claims(text, text if match else user)
        chunks = _ranked_chunks(context)
        items = []
        for claim in claims:
            label, rank, reason = self._evidence(claim, context, chunks, language)
            items.append({"claim": claim, "verdict": label.value,
                          "chunks": [rank] if rank else [], "reason": reason})
        note = f"single {known.id if known else 'unknown answer'}: {len(items)} claims"
        return _json_reply("claims", items, shape), note

    def _evidence(
        self, claim: str, context: str, chunks: dict[int, str], language: str
    ) -> tuple[Label, int | None, str]:
        """A claim's label, the rank of the chunk sharing most of its words (None for an
        unsupported claim, or without chunks) and a sentence on where the label came from."""
        label, note = self._label(claim, context)
        words = set(_WORD.findall(claim.lower()))
        best = max(chunks, key=lambda r: len(words & set(_WORD.findall(chunks[r].lower()))),
                   default=None)
        rank = None if label is Label.UNGEDECKT else best
        kind = "word check" if "word check" in note else "human label"
        return label, rank, REASONS[language][kind][label]

    def _verify(self, user: str) -> tuple[str, str]:
        match = _match(_VERIFY_USER, user)
        if match:
            claim, context = match.group("claim").strip(), match.group("context")
        else:
            loose = _LOOSE_CLAIM.search(user)
            claim, context = (loose.group("claim").strip() if loose else ""), user
        label, note = self._label(claim, context)
        return label.value, note

    def _label(self, claim: str, context: str) -> tuple[Label, str]:
        """The label of ``claim`` against ``context``, and a note for the log."""
        # The same sentence can occur in several answers; their passages tell them apart.
        candidates = self._by_claim.get(claim, [])
        in_context = [a for a in candidates if all(p in context for p in a.passages)]
        if not in_context:  # not a sentence as split here: any answer holding it
            candidates = [a for a in self.answers if claim and claim in a.response]
            in_context = [a for a in candidates if all(p in context for p in a.passages)]
        if not candidates:
            label = word_check(claim, context)
            return label, f"verify unknown claim: {label.value} (word check)"
        # Several models may say the same sentence to the same question, and annotators
        # labelled it in one answer but not in another: the lenient judge takes the kinder
        # verdict (so an answer without labels is never marked down).
        label, answer = max(((label_for(a, claim), a) for a in in_context or candidates),
                            key=lambda pair: LABEL_POINTS[pair[0]])
        return label, f"verify {answer.id}: {label.value}"


@dataclass(frozen=True)
class _Shape:
    """How a batched or one-call reply is to look: JSON or lines, with evidence (chunk ranks
    and a reason) or the word alone; and, for JSON, the fields each item has."""

    json: bool
    evidence: bool
    fields: tuple[str, ...] | None = None  # the schema's item properties, where one was sent

    @classmethod
    def of(cls, form: str, response_format: Any) -> "_Shape":
        """From the format appended to the system message and the request's response_format
        (a JSON schema decides both where it names its items' fields)."""
        evidence = form not in _BARE_FORMATS
        as_json = form in _JSON_FORMATS or form in (single.FORMAT_DE, single.FORMAT_EN) or (
            isinstance(response_format, dict)
            and response_format.get("type") in ("json_schema", "json_object")
        )
        fields = _item_fields(response_format)
        if fields is not None:
            evidence = "chunks" in fields or "reason" in fields
        return cls(as_json, evidence, fields)


def _item_fields(response_format: Any) -> tuple[str, ...] | None:
    """The properties of the items of a JSON schema's one list ({"verdicts": [{…}]}), if it
    has that shape."""
    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return None
    schema = (response_format.get("json_schema") or {}).get("schema") or {}
    lists = [v for v in (schema.get("properties") or {}).values()
             if isinstance(v, dict) and v.get("type") == "array"]
    items = lists[0].get("items") if len(lists) == 1 else None
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        return None
    return tuple(items["properties"])


def _json_reply(key: str, items: list[dict[str, Any]], shape: _Shape) -> str:
    """``{key: items}`` as a model writes it in structured output (no blanks), each item with
    the schema's fields, or without chunks and reason where the format asks for the word."""
    keep = shape.fields if shape.fields is not None else (
        None if shape.evidence else ("id", "claim", "verdict"))
    if keep is not None:
        items = [{k: v for k, v in item.items() if k in keep} for item in items]
    return json.dumps({key: items}, ensure_ascii=False, separators=(",", ":"))


def _ranked_chunks(context: str) -> dict[int, str]:
    """Each chunk of a context by its rank: "[2] text" up to the next "[n] " at a line start."""
    starts = list(_RANKED.finditer(context))
    return {
        int(m.group("rank")): context[m.end():(starts[i + 1].start() if i + 1 < len(starts)
                                              else len(context))]
        for i, m in enumerate(starts)
    }


# Words (letters, at least 4) and numbers; the numbers keep their decimal separator.
_WORD = re.compile(r"[^\W\d_]{4,}")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NEGATIONS = frozenset({"nicht", "kein", "keine", "keinen", "keiner", "keines", "nie", "niemals",
                        "not", "never", "no", "none", "neither", "nor"})
# Share of a claim's words found in the context from which it counts as supported / partly.
WORDS_SUPPORTED, WORDS_PARTLY = 0.8, 0.5


def word_check(claim: str, context: str) -> Label:
    """A claim the demo has no human label for (an answer sent to the demo by hand), checked by
    its words: a number or a negation the context does not have makes it UNGEDECKT; else the
    share of its words found in the context decides (0.8: GEDECKT, 0.5: TEILWEISE). No model:
    a paraphrase is missed and a reordering passes, but a changed number or an added "nicht"
    is found, so a contradiction in a hand-sent answer does not score 1.0."""
    lowered = context.lower()
    context_words = set(_WORD.findall(lowered)) | set(re.findall(r"\b\w+\b", lowered))
    numbers = set(_NUMBER.findall(context))
    tokens = set(re.findall(r"\b\w+\b", claim.lower()))
    if any(n not in numbers for n in _NUMBER.findall(claim)):
        return Label.UNGEDECKT
    if (tokens & _NEGATIONS) - context_words:
        return Label.UNGEDECKT
    words = _WORD.findall(claim.lower())
    if not words:
        return Label.GEDECKT
    share = sum(w in context_words for w in words) / len(words)
    if share >= WORDS_SUPPORTED:
        return Label.GEDECKT
    return Label.TEILWEISE if share >= WORDS_PARTLY else Label.UNGEDECKT


def _labelled_difference(answer: DemoAnswer, sample: str) -> str | None:
    """What ``sample`` says differently from ``answer`` inside a labelled span, or None."""
    matcher = difflib.SequenceMatcher(None, answer.response, sample, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if any(i1 < e and s < i2 if i1 < i2 else s <= i1 <= e for s, e in answer.spans):
            changed = " ".join((sample[j1:j2] or answer.response[i1:i2]).split())
            return changed if len(changed) <= 80 else changed[:79] + "…"
    return None


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
        return self._by_prompt.get((model, _messages_key(messages)))

    def reply(
        self, answer: DemoAnswer, messages: Sequence[Any], temperature: float
    ) -> tuple[str, dict[str, Any], str]:
        """The text, its log-probabilities and a note for the log."""
        key = hashlib.sha256(
            f"{answer.model}\n{_messages_key(messages)}\n{temperature!r}".encode()
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
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")


def rag_reply(messages: Sequence[Any]) -> tuple[str, dict[str, Any], str]:
    """The sentence of the last user message's sources that shares the most words with its
    question (the whole message stands for both when it names no question), with
    log-probabilities: the text, them, and a note for the log."""
    user = next((_text(m.get("content")) for m in reversed(messages)
                 if isinstance(m, dict) and m.get("role") == "user"), "")
    # The last "Question:" (a linear scan; the prompt comes from whoever runs the example).
    found = max(_QUESTION.finditer(user), key=lambda m: m.start(), default=None)
    question = user[found.end():].strip() if found else user
    sources = user[: found.start()] if found else user
    words = {w.lower() for w in _WORD.findall(question)}
    sentences = [m.group().strip() for m in _SENTENCE.finditer(sources) if m.group().strip()]
    best = max(sentences, key=lambda t: len(words & {w.lower() for w in _WORD.findall(t)}),
               default="")
    text = best or "Dazu steht nichts in den Quellen."
    seed = hashlib.sha256(user.encode()).hexdigest()
    return text, synthetic_logprobs(text, [], seed=seed), f"rag: {len(sentences)} sentences"


def _tokens(text: str) -> int:
    """About four characters a token, as OpenAI's tokenisers average on English text."""
    return max(1, math.ceil(len(text) / 4))


def _within(tokens: list[dict[str, Any]], length: int) -> list[dict[str, Any]]:
    """The tokens that spell the first ``length`` characters (a reply cut at max_tokens)."""
    kept, used = [], 0
    for token in tokens:
        used += len(token["token"])
        if used > length:
            break
        kept.append(token)
    return kept


def _refused_format(response_format: Any) -> str | None:
    """Why a request's response_format is refused (as OpenAI words it), None if it is taken:
    none, text, json_object, or a json_schema with its schema. The demo judge supports
    structured output: batched and one-call replies keep to the schema."""
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind not in ("text", "json_object", "json_schema"):
        return ("Invalid value for 'response_format.type': expected one of 'text', "
                "'json_object' or 'json_schema'.")
    spec = response_format.get("json_schema")
    if kind == "json_schema" and not (isinstance(spec, dict) and isinstance(spec.get("name"), str)
                                      and isinstance(spec.get("schema"), dict)):
        return "Missing required parameter: 'response_format.json_schema' (a name and a schema)."
    return None


def _error(status: int, message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class DemoJudgeServer:
    """The demo judge behind an OpenAI-compatible HTTP API on 127.0.0.1."""

    def __init__(
        self, port: int = DEFAULT_PORT, judge: DemoJudge | None = None, any_port: bool = False
    ) -> None:
        self.judge = judge or DemoJudge(load_answers())
        self.generator = DemoGenerator(self.judge.answers)
        self._counter = 0
        self._lock = threading.Lock()
        try:
            self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _make_handler(self))
        except OSError:
            if not any_port:
                raise
            self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "DemoJudgeServer":
        """Serve in a background thread (tests); `serve_forever` serves in this one."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def models(self) -> dict[str, Any]:
        names = [DEMO_JUDGE_MODEL, *JUDGE_VARIANTS, DEMO_RAG_MODEL, *self.generator.models]
        return {"object": "list", "data": [self._model(name) for name in names]}

    def _model(self, name: str = DEMO_JUDGE_MODEL) -> dict[str, Any] | None:
        if name == DEMO_JUDGE_MODEL or name in JUDGE_VARIANTS or name == DEMO_RAG_MODEL:
            return {"id": name, "object": "model", "created": 0, "owned_by": "treue-demo"}
        if name in self.generator.models:  # replayed answers, not that model
            return {"id": name, "object": "model", "created": 0,
                    "owned_by": "treue-demo-replay"}
        return None

    def completion(self, request: Any) -> tuple[int, dict[str, Any]]:
        """Status and body for a chat completions request."""
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            return 400, _error(400, "'messages' must be a list", "invalid_request_error")
        model = request.get("model")
        judges = (DEMO_JUDGE_MODEL, *JUDGE_VARIANTS)
        if model not in (*judges, DEMO_RAG_MODEL) and model not in self.generator.models:
            # Answering as another model would put that model's name on replayed labels.
            return 404, _error(
                404,
                f"The model {model!r} does not exist here: this demo judge serves only "
                f"{DEMO_JUDGE_MODEL!r} (replayed human labels, not a model) and its variants "
                f"{', '.join(JUDGE_VARIANTS)}, answers RAG prompts from their sources as "
                f"{DEMO_RAG_MODEL!r}, and replays the "
                f"demo answers of {', '.join(self.generator.models)}.",
                "invalid_request_error",
                "model_not_found",
            )
        if request.get("stream"):
            return 400, _error(400, "the demo judge does not stream", "invalid_request_error")
        response_format = request.get("response_format")
        refused = _refused_format(response_format)
        if refused is not None:
            return 400, _error(400, refused, "invalid_request_error")
        logprobs = None
        if model == DEMO_RAG_MODEL:
            content, logprobs, note = rag_reply(request["messages"])
        elif model in judges:
            # temperature is irrelevant: the replies are deterministic anyway.
            content, note = self.judge.reply(request["messages"], response_format)
            if model in JUDGE_VARIANTS and not note.startswith("decompose"):
                # A one-call reply holds the claims' own text: only its verdicts are changed.
                words = _VERDICT_FIELD if note.startswith("single") else _VERDICT_WORD
                content = words.sub(
                    lambda m: JUDGE_VARIANTS[model].get(m.group(0), m.group(0)), content
                )
        else:
            answer = self.generator.find(model, request["messages"])
            if answer is None:
                return 400, _error(
                    400,
                    f"The demo generator replays only the demo answers: these messages are not "
                    f"those of a demo answer by {model!r} (it is not a model).",
                    "invalid_request_error",
                )
            temperature = request.get("temperature")
            temperature = 1.0 if not isinstance(temperature, int | float) else temperature
            content, logprobs, note = self.generator.reply(
                answer, request["messages"], float(temperature)
            )
        finish = "stop"
        limit = request.get("max_completion_tokens") or request.get("max_tokens")
        if isinstance(limit, int) and limit > 0 and _tokens(content) > limit:
            content, finish = content[: limit * 4], "length"
        if logprobs is not None and request.get("logprobs"):
            logprobs = {"content": _within(logprobs["content"], len(content)), "refusal": None}
        else:
            logprobs = None
        prompt_tokens = sum(
            _tokens(_text(m.get("content"))) + 4  # OpenAI counts a few tokens of framing
            for m in request["messages"] if isinstance(m, dict)
        )
        if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
            # OpenAI bills a JSON schema as prompt tokens.
            prompt_tokens += _tokens(json.dumps(response_format, ensure_ascii=False,
                                                separators=(",", ":")))
        completion_tokens = _tokens(content)
        with self._lock:
            self._counter += 1
            number = self._counter
        logger.info("%s", note)
        return 200, {
            "id": f"chatcmpl-demo-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": None,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": finish,
                "logprobs": logprobs,
            }],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _make_handler(server: DemoJudgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes; with Nagle on, the client's delayed ACK adds
        # ~40 ms to every reply on a kept-alive connection.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return  # one line per completion comes from DemoJudgeServer.completion

        def do_GET(self) -> None:
            path = self.path.split("?")[0].rstrip("/")
            if path == "/v1/models":
                self._send(200, server.models())
            elif path.startswith("/v1/models/") and (
                model := server._model(path.removeprefix("/v1/models/"))
            ):
                self._send(200, model)
            else:
                self._send(404, _error(404, "Not found", "invalid_request_error"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.split("?")[0].rstrip("/") != "/v1/chat/completions":
                self._send(404, _error(404, "Not found", "invalid_request_error"))
                return
            try:
                request = json.loads(raw or b"{}")
            except ValueError:
                self._send(400, _error(400, "Invalid JSON body", "invalid_request_error"))
                return
            try:
                self._send(*server.completion(request))
            except Exception as e:  # a bug here must show as the 500 a real server sends
                logger.exception("demo judge failed")
                self._send(500, _error(500, f"demo judge error: {e!r}", "server_error"))

        def _send(self, status: int, body: dict[str, Any]) -> None:
            payload = json.dumps(body, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m treue_demo.server",
        description="The demo's judge: an OpenAI-compatible endpoint on 127.0.0.1 that replays "
        "RAGTruth's human labels.",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0 = any free port)")
    parser.add_argument("--any-port", action="store_true",
                        help="take any free port if --port is busy")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    try:
        server = DemoJudgeServer(port=args.port, any_port=args.any_port)
    except OSError as e:
        print(f"demo judge: cannot listen on 127.0.0.1:{args.port}: {e}", file=sys.stderr)
        return 1
    # demo.sh stops it with SIGTERM; leave through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(NOTICE, flush=True)
    print(f"URL: {server.base_url}  model: {DEMO_JUDGE_MODEL}  "
          f"({len(server.judge.answers)} demo answers; replayed as "
          f"{', '.join(server.generator.models)})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
