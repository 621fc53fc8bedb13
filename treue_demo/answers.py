"""The demo's answers: RAGTruth's QA answers with their human hallucination spans, split into
claims as the demo judge decomposes them, each claim's verdict by the spans over it, and the
experts' labels and scores the demo imports."""

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from judging.domain.judge_parse import Label, parse_claims
from judging.domain.scoring import score_labels
from treue_demo.data import (
    answer_logprobs,
    demo_messages,
    load_rows,
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
    prompt: str = ""  # its messages, as `messages_key` writes them
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
            prompt=messages_key(demo_messages(row["question"], row["passages"])),
            judged_spans=tuple(
                (label["start"], label["end"]) for label in spans
                if label["label_type"] not in LENIENT_TYPES
            ),
        ))
    return answers


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


def messages_key(messages: Sequence[Any]) -> str:
    """Messages as one string: roles and texts only, so that content parts equal a string."""
    return json.dumps(
        [[m.get("role"), message_text(m.get("content"))] for m in messages if isinstance(m, dict)],
        ensure_ascii=False,
    )


def message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(
            part.get("text", "") for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""
