"""Batched verification (issues 18, 20, 37): all claims of an answer checked against its context
in one call, each verdict tied to its claim by the claim's id, with the judge's evidence.

Per-claim verification sends the retrieved context once per claim. Here one call carries the
context once and the claims as a list, each under a short id that is no position ("K7", "M2"):

    Aussagen (3):
    K7: Der Druckbehälter wird alle 5 Jahre geprüft.
    …

The judge answers a line per claim, ``K7: GEDECKT [2] <one sentence why>``, or — where the
endpoint takes a JSON schema (`response_format`) — the same as JSON in `batch_schema`. A verdict
counts only under its claim's id: a judge that skips a claim and numbers the rest on ("1: …,
2: …"), or answers in a bare list, ties nothing to a claim, and what it left open is asked again
(`correction_messages`, in the same conversation; then one by one). Nothing is read by position.

`read_batch` takes JSON (an object keyed by id, a list of objects with an id, either inside
``{"verdicts": …}``, in a code fence or not) or lines (in any order, with reasoning, a
``<think>`` block or explanations around them, markdown bold, bullets, a table, "Aussage K7:",
the claim echoed before its verdict). A verdict is one of the three words — also "NICHT
GEDECKT", "TEILWEISE GEDECKT" and the English SUPPORTED, PARTIALLY SUPPORTED, NOT SUPPORTED —
standing alone: "Teilweise werden die Kosten erstattet" is a claim's text, not TEILWEISE. A claim
whose lines contradict each other is missing. A reply cut off by ``max_tokens`` loses its last
line. Like `judge_parse`, every reading is linear in the reply's length.

The layout serves a provider's prefix cache: fixed instructions first, then the context, then
what varies (the claims).

Plain Python: no django, no openai.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from judging.domain.judge_parse import MAX_CLAIMS, Label
from judging.domain.judge_prompt import SUPPORTED_LANGUAGES, format_context

# Scores of a batched run are not comparable with another wording's without saying so: the
# version goes with every verdict, and changes with the wording (a test pins it by hash).
BATCHED_PROMPT_VERSION = "2026-12-b2"

# Claims per call: all of an answer's, up to the decomposition's limit. Ids, not positions, tie
# a verdict to its claim, so a long list is no risk to the reading; a second call would repeat
# the instructions and the context.
DEFAULT_BATCH_SIZE = MAX_CLAIMS
_T = TypeVar("_T")

# A reason is one sentence; a longer one is cut here (it is shown beside the claim).
MAX_REASON = 300

# The article's three verdicts with their definitions, as in its PRUEF_PROMPT.
_DEFINITIONS_DE = """\
GEDECKT   — die Aussage folgt direkt aus dem Kontext
TEILWEISE — Teile folgen, andere nicht
UNGEDECKT — die Aussage steht nicht im Kontext oder widerspricht ihm"""
_DEFINITIONS_EN = """\
GEDECKT   — (supported) the claim follows directly from the context
TEILWEISE — (partly) some parts follow, others do not
UNGEDECKT — (not supported) the claim is not in the context or contradicts it"""

VERIFY_BATCH_SYSTEM_DE = f"""\
Du prüfst, ob Aussagen durch den Kontext gedeckt sind, nicht, ob sie wahr sind. Der Kontext \
besteht aus nummerierten Abschnitten [1], [2], … Urteile je Aussage mit genau einem Wort:
{_DEFINITIONS_DE}"""

VERIFY_BATCH_SYSTEM_EN = f"""\
You check whether claims are supported by the context, not whether they are true. The context \
consists of numbered chunks [1], [2], … Judge each claim with exactly one of these German words:
{_DEFINITIONS_EN}"""

# How the reply is written: appended to the system message, one of these by the call's kind.
FORMAT_LINES_DE = """
Schreibe je Aussage eine Zeile mit ihrer Kennung, sonst nichts:
K7: GEDECKT [2] Abschnitt 2 nennt die 5 Jahre."""
FORMAT_LINES_EN = """
Write one line per claim with its id, nothing else:
K7: GEDECKT [2] Chunk 2 gives the 5 years."""
FORMAT_BARE_DE = """
Schreibe je Aussage eine Zeile mit ihrer Kennung und dem Wort, sonst nichts:
K7: GEDECKT"""
FORMAT_BARE_EN = """
Write one line per claim with its id and the word, nothing else:
K7: GEDECKT"""
FORMAT_JSON_DE = "\nJe Aussage: Kennung, Wort, stützende Abschnitte, ein Satz Begründung."
FORMAT_JSON_EN = "\nPer claim: id, word, supporting chunks, one sentence why."
FORMAT_JSON_BARE_DE = "\nJe Aussage: Kennung und Wort."
FORMAT_JSON_BARE_EN = "\nPer claim: id and word."

VERIFY_BATCH_USER_DE = """\
Kontext:
{context}

Aussagen ({count}):
{claims}"""

VERIFY_BATCH_USER_EN = """\
Context:
{context}

Claims ({count}):
{claims}"""

# After a reply that left claims without a readable verdict, in the same conversation.
CORRECTION_DE = "Für {ids} fehlt ein lesbares Urteil. Nur diese, je eine Zeile so:\n{example}"
CORRECTION_EN = "No readable verdict for {ids}. Only these, one line each, like this:\n{example}"
CORRECTION_JSON_DE = "Für {ids} fehlt ein lesbares Urteil. Gib nur diese an."
CORRECTION_JSON_EN = "No readable verdict for {ids}. Give only these."

# The three verdicts, as the judge is asked to write them.
ARTICLE_WORDS = (Label.GEDECKT, Label.TEILWEISE, Label.UNGEDECKT)
NO_CONTEXT = {"de": "(kein Kontext abgerufen)", "en": "(no context retrieved)"}

BATCHED_PROMPT_TEXTS: Mapping[str, str] = {
    "VERIFY_BATCH_SYSTEM_DE": VERIFY_BATCH_SYSTEM_DE,
    "VERIFY_BATCH_SYSTEM_EN": VERIFY_BATCH_SYSTEM_EN,
    "FORMAT_LINES_DE": FORMAT_LINES_DE,
    "FORMAT_LINES_EN": FORMAT_LINES_EN,
    "FORMAT_BARE_DE": FORMAT_BARE_DE,
    "FORMAT_BARE_EN": FORMAT_BARE_EN,
    "FORMAT_JSON_DE": FORMAT_JSON_DE,
    "FORMAT_JSON_EN": FORMAT_JSON_EN,
    "FORMAT_JSON_BARE_DE": FORMAT_JSON_BARE_DE,
    "FORMAT_JSON_BARE_EN": FORMAT_JSON_BARE_EN,
    "VERIFY_BATCH_USER_DE": VERIFY_BATCH_USER_DE,
    "VERIFY_BATCH_USER_EN": VERIFY_BATCH_USER_EN,
    "CORRECTION_DE": CORRECTION_DE,
    "CORRECTION_EN": CORRECTION_EN,
    "CORRECTION_JSON_DE": CORRECTION_JSON_DE,
    "CORRECTION_JSON_EN": CORRECTION_JSON_EN,
}

_TEXTS = {
    "de": {
        "system": VERIFY_BATCH_SYSTEM_DE, "user": VERIFY_BATCH_USER_DE,
        "lines": FORMAT_LINES_DE, "bare": FORMAT_BARE_DE,
        "json": FORMAT_JSON_DE, "json_bare": FORMAT_JSON_BARE_DE,
        "correction": CORRECTION_DE, "correction_json": CORRECTION_JSON_DE,
        "example": "GEDECKT [2] Abschnitt 2 nennt die 5 Jahre.",
    },
    "en": {
        "system": VERIFY_BATCH_SYSTEM_EN, "user": VERIFY_BATCH_USER_EN,
        "lines": FORMAT_LINES_EN, "bare": FORMAT_BARE_EN,
        "json": FORMAT_JSON_EN, "json_bare": FORMAT_JSON_BARE_EN,
        "correction": CORRECTION_EN, "correction_json": CORRECTION_JSON_EN,
        "example": "GEDECKT [2] Chunk 2 gives the 5 years.",
    },
}


def texts_hash() -> str:
    """A digest of every batched wording: a test pins it together with the version."""
    return hashlib.sha256(
        json.dumps(dict(BATCHED_PROMPT_TEXTS), sort_keys=True).encode()
    ).hexdigest()


class StructuredOutputRefused(Exception):
    """Raised by a batch call when the endpoint refuses a request with a JSON schema: the
    caller asks again without one, and remembers that the endpoint cannot."""


@dataclass(frozen=True, slots=True)
class Evidence:
    """One claim's verdict as the batched reply gave it."""

    label: Label
    chunks: tuple[int, ...]  # the ranks of the chunks the verdict rests on ([1] = top-ranked)
    reason: str  # one sentence, "" when the judge gave none


@dataclass(frozen=True, slots=True)
class BatchReading:
    """What a batched reply says: the verdicts it ties to claims and the claims it leaves open."""

    verdicts: dict[int, Evidence]  # claim number (1-based, within the call) → its verdict
    missing: tuple[int, ...]  # claim numbers to ask again, ascending
    # "json" when the reply was one JSON value, "lines" otherwise, "" when nothing was read.
    form: str = ""


def batches(claims: Sequence[_T], size: int = DEFAULT_BATCH_SIZE) -> list[list[_T]]:
    """The claims (or their positions) in calls of at most ``size``, in order (no empty
    call)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"batch size must be a positive integer, not {size!r}")
    return [list(claims[i:i + size]) for i in range(0, len(claims), size)]


# Ids: a letter and a digit, no I or O (read as 1 and 0) and no 0 or 1: 24 x 8 = 192 of them.
_ID_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"
_ID_DIGITS = "23456789"
_ID_COUNT = len(_ID_LETTERS) * len(_ID_DIGITS)


def claim_ids(claims: Sequence[str]) -> list[str]:
    """An id per claim, unique within the call and the same for the same claim text: chosen by
    the claim's digest, so neighbours in the list have unrelated ids and counting along the
    list never yields one."""
    if len(claims) > _ID_COUNT:
        raise ValueError(f"at most {_ID_COUNT} claims per call")
    taken: set[int] = set()
    ids = []
    for claim in claims:
        slot = int.from_bytes(hashlib.sha256(claim.encode("utf-8", "surrogatepass")).digest()[:4])
        slot %= _ID_COUNT
        while slot in taken:
            slot = (slot + 37) % _ID_COUNT  # 37 is prime to 192: every slot is reached
        taken.add(slot)
        ids.append(_ID_LETTERS[slot // len(_ID_DIGITS)] + _ID_DIGITS[slot % len(_ID_DIGITS)])
    return ids


def _texts(language: str) -> dict[str, str]:
    if language not in _TEXTS:
        raise ValueError(
            f"no judge prompt for language {language!r}; supported: "
            + ", ".join(SUPPORTED_LANGUAGES)
        )
    return _TEXTS[language]


def _format_key(*, evidence: bool, structured: bool) -> str:
    if structured:
        return "json" if evidence else "json_bare"
    return "lines" if evidence else "bare"


def verify_batch_messages(
    *,
    chunks: Sequence[str],
    claims: Sequence[str],
    language: str,
    evidence: bool = True,
    structured: bool = False,
) -> list[dict[str, str]]:
    """Chat messages asking the judge to verify ``claims`` (each under its `claim_ids` id)
    against the ``chunks`` (numbered by rank, as `judge_prompt.format_context` numbers them).
    ``evidence``: ask for the chunks and a reason per verdict; ``structured``: the reply comes
    in `batch_schema` (sent with the call as its response_format)."""
    texts = _texts(language)
    if not claims:
        raise ValueError("a batch needs at least one claim")
    context = format_context(chunks) or NO_CONTEXT[language]
    # One line per claim: a claim's own line breaks would read as further lines.
    listed = "\n".join(
        f"{id_}: {' '.join(claim.split())}" for id_, claim in zip(claim_ids(claims), claims,
                                                                    strict=True)
    )
    system = texts["system"] + texts[_format_key(evidence=evidence, structured=structured)]
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": texts["user"].format(
            context=context, count=len(claims), claims=listed)},
    ]


def batch_schema(*, evidence: bool = True) -> dict[str, Any]:
    """The response_format of a structured batch call: an object ``{"verdicts": [{"id", "verdict",
    "chunks", "reason"}, …]}`` (a strict JSON schema). The ids are not listed in it: they
    stand in the prompt, each beside its claim, and an id not in the call is ignored."""
    return list_schema("verdicts", {"id": {"type": "string"}}, evidence=evidence)


def list_schema(name: str, key: dict[str, Any], *, evidence: bool) -> dict[str, Any]:
    """A strict JSON schema for ``{name: [{**key, "verdict", "chunks", "reason"}, …]}``, the
    evidence fields only with ``evidence``; every field required, as strict mode wants."""
    item: dict[str, Any] = {
        **key,
        "verdict": {"type": "string", "enum": [w.value for w in ARTICLE_WORDS]},
    }
    if evidence:
        item["chunks"] = {"type": "array", "items": {"type": "integer"}}
        item["reason"] = {"type": "string"}
    return {
        "type": "json_schema",
        "json_schema": {
            "name": name,
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {name: {"type": "array", "items": {
                    "type": "object", "properties": item, "required": list(item),
                    "additionalProperties": False,
                }}},
                "required": [name],
                "additionalProperties": False,
            },
        },
    }


def correction_messages(
    messages: Sequence[dict[str, str]],
    reply: str,
    missing_ids: Sequence[str],
    *,
    language: str,
    structured: bool = False,
) -> list[dict[str, str]]:
    """The conversation again with the judge's reply and a short correction that names the
    claims still open and shows the expected line (the ids are the call's; the claims stay
    where the judge read them)."""
    texts = _texts(language)
    ids = ", ".join(missing_ids)
    if structured:
        correction = texts["correction_json"].format(ids=ids)
    else:
        correction = texts["correction"].format(
            ids=ids, example=f"{missing_ids[0]}: {texts['example']}"
        )
    previous = [{"role": "assistant", "content": reply}] if reply.strip() else []
    return [*messages, *previous, {"role": "user", "content": correction}]




