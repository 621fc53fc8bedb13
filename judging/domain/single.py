"""One-call judging (issue 37, ``--judge-mode single``): the answer split into claims and each
claim judged against the context in one call, as JSON — each verdict inside its claim's object,
so nothing ties a verdict to a claim by position.

    {"claims": [{"claim": "…", "verdict": "GEDECKT", "chunks": [2], "reason": "…"}]}

Where the endpoint takes a JSON schema the call sends `single_schema` as its response_format;
elsewhere the same JSON is asked for in words and read from the reply (a code fence allowed).
A claim whose verdict cannot be read stays a claim: the caller verifies it on its own. A reply
that yields no claim list at all is corrected once in the same conversation; then the caller
falls back to decomposition and batched verification.

Plain Python: no django, no openai.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judging.domain import batched
from judging.domain.batch_reading import json_evidence, json_value
from judging.domain.batched import Evidence
from judging.domain.judge_parse import MAX_CLAIMS, storable_text
from judging.domain.judge_prompt import SUPPORTED_LANGUAGES, format_context

SINGLE_PROMPT_VERSION = "2026-12-s1"

SINGLE_SYSTEM_DE = """\
Du zerlegst die Antwort eines Assistenten in Aussagen und prüfst jede gegen den Kontext aus \
nummerierten Abschnitten [1], [2], …: nur, ob sie gedeckt ist, nicht, ob sie wahr ist.
Eine Aussage: genau eine Tatsache, ohne die anderen verständlich (Pronomen ersetzt), Zahlen mit \
Einheit und Einschränkung, nur was die Antwort behauptet, in ihrer Sprache. Keine Aussagen für \
Begrüßungen, Rückfragen oder Hinweise auf Unsicherheit; weiß die Antwort es nur nicht: keine.
Urteile je Aussage mit genau einem Wort:
GEDECKT   — die Aussage folgt direkt aus dem Kontext
TEILWEISE — Teile folgen, andere nicht
UNGEDECKT — die Aussage steht nicht im Kontext oder widerspricht ihm"""

SINGLE_SYSTEM_EN = """\
You split an assistant's answer into claims and check each against the context of numbered \
chunks [1], [2], …: only whether it is supported, not whether it is true.
A claim: exactly one fact, understandable without the others (pronouns replaced), numbers with \
unit and qualifier, only what the answer asserts, in its language. No claims for greetings, \
follow-up questions or remarks on uncertainty; if the answer only does not know: none.
Judge each claim with exactly one of these German words:
GEDECKT   — (supported) the claim follows directly from the context
TEILWEISE — (partly) some parts follow, others do not
UNGEDECKT — (not supported) the claim is not in the context or contradicts it"""

FORMAT_DE = """
Antworte nur mit JSON: {"claims": [{"claim": "…", "verdict": "GEDECKT", "chunks": [2], \
"reason": "ein Satz"}]}"""
FORMAT_EN = """
Answer only with JSON: {"claims": [{"claim": "…", "verdict": "GEDECKT", "chunks": [2], \
"reason": "one sentence"}]}"""
FORMAT_BARE_DE = '\nAntworte nur mit JSON: {"claims": [{"claim": "…", "verdict": "GEDECKT"}]}'
FORMAT_BARE_EN = '\nAnswer only with JSON: {"claims": [{"claim": "…", "verdict": "GEDECKT"}]}'

SINGLE_USER_DE = """\
Frage:
{question}

Antwort:
{answer}

Kontext:
{context}"""

SINGLE_USER_EN = """\
Question:
{question}

Answer:
{answer}

Context:
{context}"""

CORRECTION_DE = "Das war kein lesbares JSON. Antworte nur mit dem JSON-Objekt, ohne weiteren Text."
CORRECTION_EN = "That was no readable JSON. Answer only with the JSON object, with no other text."

SINGLE_PROMPT_TEXTS: Mapping[str, str] = {
    "SINGLE_SYSTEM_DE": SINGLE_SYSTEM_DE,
    "SINGLE_SYSTEM_EN": SINGLE_SYSTEM_EN,
    "FORMAT_DE": FORMAT_DE,
    "FORMAT_EN": FORMAT_EN,
    "FORMAT_BARE_DE": FORMAT_BARE_DE,
    "FORMAT_BARE_EN": FORMAT_BARE_EN,
    "SINGLE_USER_DE": SINGLE_USER_DE,
    "SINGLE_USER_EN": SINGLE_USER_EN,
    "CORRECTION_DE": CORRECTION_DE,
    "CORRECTION_EN": CORRECTION_EN,
}

_TEXTS = {
    "de": (SINGLE_SYSTEM_DE, FORMAT_DE, FORMAT_BARE_DE, SINGLE_USER_DE, CORRECTION_DE),
    "en": (SINGLE_SYSTEM_EN, FORMAT_EN, FORMAT_BARE_EN, SINGLE_USER_EN, CORRECTION_EN),
}


def texts_hash() -> str:
    """A digest of every one-call wording: a test pins it together with the version."""
    return hashlib.sha256(
        json.dumps(dict(SINGLE_PROMPT_TEXTS), sort_keys=True).encode()
    ).hexdigest()


def _texts(language: str) -> tuple[str, str, str, str, str]:
    if language not in _TEXTS:
        raise ValueError(
            f"no judge prompt for language {language!r}; supported: "
            + ", ".join(SUPPORTED_LANGUAGES)
        )
    return _TEXTS[language]


def single_messages(
    *, question: str, answer: str, chunks: Sequence[str], language: str, evidence: bool = True
) -> list[dict[str, str]]:
    """Chat messages asking the judge for the answer's claims, each with its verdict."""
    system, form, bare, user, _ = _texts(language)
    context = format_context(chunks) or batched.NO_CONTEXT[language]
    return [
        {"role": "system", "content": system + (form if evidence else bare)},
        {"role": "user", "content": user.format(
            question=question.strip(), answer=answer.strip(), context=context)},
    ]


def correction_messages(
    messages: Sequence[dict[str, str]], reply: str, *, language: str
) -> list[dict[str, str]]:
    """The conversation again with the unreadable reply and a reminder of the format."""
    previous = [{"role": "assistant", "content": reply}] if reply.strip() else []
    return [*messages, *previous, {"role": "user", "content": _texts(language)[4]}]


def single_schema(*, evidence: bool = True) -> dict[str, Any]:
    """The response_format of a structured one-call judgement."""
    return batched.list_schema("claims", {"claim": {"type": "string"}}, evidence=evidence)


@dataclass(frozen=True, slots=True)
class SingleReading:
    """A one-call reply: its claims (None if it gave no readable claim list; [] for an
    abstention) and the verdicts it gave, by the claim's index in ``claims``."""

    claims: list[str] | None
    verdicts: dict[int, Evidence]


def read_single(reply: str, *, chunk_count: int | None = None) -> SingleReading:
    """The claims and verdicts of a one-call reply. Claims are stripped, blanks and repeats
    dropped (a repeat's verdicts must agree, else the claim has none) and cut at MAX_CLAIMS."""
    value = json_value(reply)
    items: object = None
    if isinstance(value, dict):
        lists = [v for k, v in value.items()
                 if isinstance(k, str) and k.lower() in ("claims", "aussagen")]
        items = lists[0] if len(lists) == 1 else None
    elif isinstance(value, list):
        items = value
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        return SingleReading(None, {})
    claims: list[str] = []
    given: dict[str, list[Evidence | None]] = {}
    for item in items:
        fields = {k.lower(): v for k, v in item.items() if isinstance(k, str)}
        text = next((fields[k] for k in ("claim", "aussage", "text") if k in fields), None)
        if not isinstance(text, str):
            return SingleReading(None, {})  # an item without its claim: a garbled list
        claim = storable_text(text).strip()
        if not claim:
            continue
        if claim not in given:
            claims.append(claim)
        given.setdefault(claim, []).append(json_evidence(item, chunk_count))
    if items and not claims:
        return SingleReading(None, {})
    claims = claims[:MAX_CLAIMS]
    verdicts = {}
    for index, claim in enumerate(claims):
        readings = [r for r in given[claim] if r is not None]
        if len(readings) == len(given[claim]) and len({r.label for r in readings}) == 1:
            verdicts[index] = readings[0]
    return SingleReading(claims, verdicts)
