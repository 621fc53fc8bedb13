"""Batched verification (issue 18): all claims of an answer checked against its context in one
call, with the judge's evidence per claim (issue 20: the chunk a verdict rests on and a reason).

Per-claim verification sends the retrieved context once per claim: half of a judged answer's
prompt tokens. Here one call carries the context once and the claims as a numbered list; the
judge answers one line per claim,

    <number>: <WORD> [<chunk rank>, …] <one sentence why>

with the same three words as the per-claim prompt. The layout serves a provider's prefix cache:
the fixed instructions first (the system message), then the context, then what varies (the
claim list), so that calls for the claims of one long answer, and answers that share chunks,
can reuse the cached prefix.

`parse_batch` takes the lines in any order and ignores text around them. A claim whose line is
missing, unreadable, out of range or contradicted by a second line is *missing*: the caller asks
only those again, one by one, with the per-claim prompt (`judge_prompt.verify_messages`), whose
wording stays the article's. Evidence is optional: a verdict without "[…]" or a reason is still
a verdict.

Like `judge_parse`, the parser does work linear in the reply's length whatever it holds.

Plain Python: no django, no openai.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from monitoring.judging.domain.judge_parse import Label, strip_wrapping
from monitoring.judging.domain.judge_prompt import SUPPORTED_LANGUAGES, format_context

# Scores of a batched run are not comparable with a per-claim run's without saying so: the
# version goes with every verdict, and changes with the wording (a test pins it by hash).
BATCHED_PROMPT_VERSION = "2026-12-b1"

# Claims per call: a long answer is split so that a reply stays short enough to be read whole
# (a model loses count in long lists) and one bad reply costs few re-asks.
DEFAULT_BATCH_SIZE = 10
_T = TypeVar("_T")

# A reason is one sentence; a longer one is cut here (it is shown beside the claim).
MAX_REASON = 300

VERIFY_BATCH_SYSTEM_DE = """\
Du bist ein sorgfältiger Prüfer. Du beurteilst nur, ob Aussagen durch den gegebenen Kontext \
gedeckt sind, nicht, ob sie wahr sind. Der Kontext besteht aus nummerierten Abschnitten [1], \
[2], …

Beurteile jede Aussage für sich mit genau einem dieser Wörter:
GEDECKT   — die Aussage folgt direkt aus dem Kontext
TEILWEISE — Teile folgen, andere nicht
UNGEDECKT — die Aussage steht nicht im Kontext oder widerspricht ihm

Antworte mit einer Zeile je Aussage, in dieser Form und ohne weiteren Text:
<Nummer der Aussage>: <WORT> [<Nummern der Abschnitte, auf die sich das Urteil stützt>] \
<ein Satz zur Begründung>

Beispiel:
1: GEDECKT [2] Abschnitt 2 nennt das Intervall von 5 Jahren.
2: UNGEDECKT [] Kein Abschnitt nennt eine Frist für Änderungen."""

VERIFY_BATCH_USER_DE = """\
Kontext:
{context}

Aussagen:
{claims}"""

VERIFY_BATCH_SYSTEM_EN = """\
You are a careful checker. You only judge whether claims are supported by the given context, \
not whether they are true. The context consists of numbered chunks [1], [2], …

Judge each claim on its own with exactly one of these three German words:
GEDECKT   — (supported) the claim follows directly from the context
TEILWEISE — (partly) some parts follow, others do not
UNGEDECKT — (not supported) the claim is not in the context or contradicts it

Answer with one line per claim, in this form and with no other text:
<claim number>: <WORD> [<numbers of the chunks the verdict rests on>] <one sentence why>

Example:
1: GEDECKT [2] Chunk 2 states the 5-year interval.
2: UNGEDECKT [] No chunk gives a deadline for changes."""

VERIFY_BATCH_USER_EN = """\
Context:
{context}

Claims:
{claims}"""

NO_CONTEXT = {"de": "(kein Kontext abgerufen)", "en": "(no context retrieved)"}

BATCHED_PROMPT_TEXTS: Mapping[str, str] = {
    "VERIFY_BATCH_SYSTEM_DE": VERIFY_BATCH_SYSTEM_DE,
    "VERIFY_BATCH_USER_DE": VERIFY_BATCH_USER_DE,
    "VERIFY_BATCH_SYSTEM_EN": VERIFY_BATCH_SYSTEM_EN,
    "VERIFY_BATCH_USER_EN": VERIFY_BATCH_USER_EN,
}

_TEXTS = {
    "de": (VERIFY_BATCH_SYSTEM_DE, VERIFY_BATCH_USER_DE),
    "en": (VERIFY_BATCH_SYSTEM_EN, VERIFY_BATCH_USER_EN),
}


def texts_hash() -> str:
    """A digest of every batched wording: a test pins it together with the version."""
    return hashlib.sha256(
        json.dumps(dict(BATCHED_PROMPT_TEXTS), sort_keys=True).encode()
    ).hexdigest()


@dataclass(frozen=True, slots=True)
class Evidence:
    """One claim's verdict as the batched reply gave it."""

    label: Label
    chunks: tuple[int, ...]  # the ranks of the chunks the verdict rests on ([1] = top-ranked)
    reason: str  # one sentence, "" when the judge gave none


@dataclass(frozen=True, slots=True)
class BatchReading:
    """What a batched reply says: the verdicts it gives and the claims it leaves open."""

    verdicts: dict[int, Evidence]  # claim number (1-based, within the call) → its verdict
    missing: tuple[int, ...]  # claim numbers to ask again one by one, ascending


def batches(claims: Sequence[_T], size: int = DEFAULT_BATCH_SIZE) -> list[list[_T]]:
    """The claims (or their positions) in calls of at most ``size``, in order (no empty
    call)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"batch size must be a positive integer, not {size!r}")
    return [list(claims[i:i + size]) for i in range(0, len(claims), size)]


def verify_batch_messages(
    *, chunks: Sequence[str], claims: Sequence[str], language: str
) -> list[dict[str, str]]:
    """Chat messages asking the judge to verify ``claims`` (numbered from 1) against the
    ``chunks`` (numbered by rank, as `judge_prompt.format_context` numbers them)."""
    if language not in _TEXTS:
        raise ValueError(
            f"no judge prompt for language {language!r}; supported: "
            + ", ".join(SUPPORTED_LANGUAGES)
        )
    if not claims:
        raise ValueError("a batch needs at least one claim")
    system, user = _TEXTS[language]
    context = format_context(chunks) or NO_CONTEXT[language]
    # One line per claim: a claim's own line breaks would read as further lines.
    listed = "\n".join(
        f"{number}. {' '.join(claim.split())}" for number, claim in enumerate(claims, 1)
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": user.format(context=context, claims=listed)},
    ]


# "<number>: <WORD> [<ranks>] <reason>", after the line's wrapping (markdown, quotes) is
# stripped. The separator after the number may be ":", "." or ")"; the word in any case.
# Possessive runs and no nested repetition: each line is matched in time linear in its length.
# Markdown and quotes around the word ("1: **GEDECKT**", '1: "GEDECKT."') and a list bullet
# before the number ("- 1: GEDECKT") are allowed too.
_LINE = re.compile(
    r"(?:[-•–][ \t]++)?+(\d{1,3})[ \t]*+[:.)][ \t*_\"'„“”]*+([A-Za-zÄÖÜäöü]++)[*_.:\"'„“”]*+[ \t]*+"
    r"(?:\[([0-9 ,;]{0,200}+)\])?+[ \t]*+(.*+)"
)
_WORDS = {label.value: label for label in (Label.GEDECKT, Label.TEILWEISE, Label.UNGEDECKT)}


def parse_batch(reply: str, count: int) -> BatchReading:
    """The verdicts of a batched reply for claims 1..``count``; the rest are missing.

    A line counts when, stripped of wrapping, it starts with a claim number in range, a
    separator and one of the three words. A number given twice with different words is
    missing (the judge contradicted itself); twice with the same word, the first line counts.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer, not {count!r}")
    found: dict[int, Evidence] = {}
    contradicted: set[int] = set()
    for line in reply.splitlines():
        match = _LINE.fullmatch(strip_wrapping(line, ""))
        if match is None:
            continue
        number = int(match[1])
        label = _WORDS.get(match[2].upper())
        if label is None or not 1 <= number <= count:
            continue
        evidence = Evidence(label, _ranks(match[3]), _reason(match[4]))
        if number in found and found[number].label != label:
            contradicted.add(number)
        found.setdefault(number, evidence)
    verdicts = {n: e for n, e in found.items() if n not in contradicted}
    missing = tuple(n for n in range(1, count + 1) if n not in verdicts)
    return BatchReading(dict(sorted(verdicts.items())), missing)


def _ranks(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    ranks = [int(part) for part in re.split(r"[ ,;]++", text) if part.isdigit()]
    return tuple(dict.fromkeys(r for r in ranks if r >= 1))


def _reason(text: str) -> str:
    reason = strip_wrapping(text, "").lstrip("-–—:.,; \t").strip()
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 1].rstrip() + "…"
