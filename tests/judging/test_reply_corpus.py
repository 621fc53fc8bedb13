"""A corpus of batched judge replies (issue 37, point 2): the shapes judges answer in, in German
and English, each served by the local OpenAI-compatible server (tests/support/openai_server.py)
and read through the real openai client, `JudgeClient` and `judge_answer`, called the
way `services.runs.judge_with` calls them.

A case is a set of claims (one of them starting with "Teilweise …" or "Partly …": a claim's text
written where its verdict belongs must not read as TEILWEISE), the verdict the judge means for
each, the first batched reply (written with the ids `batched.claim_ids` gives the claims) and,
where that leaves claims open, the reply to the correction. Each case asserts

- that no claim ends with a verdict the judge did not mean (a per-claim call answers with it);
- the verdicts read from the first reply and from the correction's, label by label, each with
  the reply it was read from;
- the claims the correction asked again, and those then asked one by one (per-claim prompt);
- the path, the number of calls, and what the requests carried (a schema, the first reply).

The cases under "once findings" read a verdict that was not certain before the reader learned
to leave such a line open (a claim's shortened echo starting "Teilweise,", a second verdict on
the line).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from string import Template
from typing import Any

import pytest
from django.conf import settings

from judging.client import JudgeClient, JudgeConfig
from judging.domain import judgement as judging
from judging.domain.batched import VERIFY_BATCH_SYSTEM_DE, VERIFY_BATCH_SYSTEM_EN, claim_ids
from judging.domain.judge_parse import Label
from judging.domain.judgement import (
    BATCHED,
    PATH_BATCHED,
    PATH_CORRECTED,
    PATH_FALLBACK,
    PATH_SINGLE,
    SINGLE,
)
from judging.domain.verification import judge_answer
from judging.services.execution import BATCH_LINE_TOKENS
from tests.support.openai_server import FakeOpenAIServer, ScriptedJudge

G, T, U = Label.GEDECKT, Label.TEILWEISE, Label.UNGEDECKT
MAX_TOKENS_DECOMPOSE = 1500
MAX_TOKENS_VERIFY = 16
REFUSAL = "I'm sorry, but I can't help with that."


@dataclass(frozen=True)
class ClaimSet:
    language: str
    claims: tuple[str, ...]
    meant: tuple[Label, ...]  # the verdict the judge means for each claim
    chunks: tuple[str, ...]


CHUNKS_DE = (
    "Druckbehälter werden alle 5 Jahre geprüft; die Unterlagen werden 3,5 Jahre aufbewahrt.",
    "Die Prüfung kostet 1.250 € zuzüglich Anfahrt; sie übernimmt die Müller Prüftechnik GmbH.",
    "Anträge gehen an Frau Dr. Meier. Straßenfahrzeuge sind ausgenommen.",
)
CHUNKS_EN = (
    "Pressure vessels are inspected every 5 years; records are kept for 3.5 years.",
    "The inspection costs 1,250 euros plus travel; students pay part of the fee only.",
    "Applications go to Dr. Meier. The deadline is 14 days.",
)

PRESSURE_DE = ClaimSet("de", (
    "Der Druckbehälter wird alle 5 Jahre geprüft.",
    "Teilweise werden die Kosten von der Kasse erstattet.",
    "Die Prüfung kostet 1.250 €.",
    "Anträge gehen an Frau Dr. Meier.",
), (G, U, T, G), CHUNKS_DE)
PRESSURE_EN = ClaimSet("en", (
    "The pressure vessel is inspected every 5 years.",
    "Partly supported projects receive the full grant.",
    "The inspection costs 1,250 euros.",
    "Applications go to Dr. Meier.",
), (G, U, T, G), CHUNKS_EN)
RETENTION_DE = ClaimSet("de", (
    "Die Aufbewahrungsfrist beträgt 3,5 Jahre nach Abschluss.",
    "Teilweise übernimmt die Müller Prüftechnik GmbH die Prüfung.",
    "Die Frist beträgt 14 Werktage.",
    "Straßenfahrzeuge sind ausgenommen.",
    "Zuständig ist die Sicherheitsfachkraft.",
), (T, G, U, G, U), CHUNKS_DE)
FEE_EN = ClaimSet("en", (
    "Partly the fee is waived for students.",
    "The fee is USD 40.",
    "The deadline is 14 working days.",
), (G, U, T), CHUNKS_EN)
# A claim that starts with a verdict word and a comma: only its exact echo is skipped.
REFUND_DE = ClaimSet("de", (
    "Teilweise, nämlich bis 500 €, werden die Kosten erstattet.",
    "Die Erstattung dauert 3 Wochen.",
    "Der Antrag wird online gestellt.",
), (G, U, G), CHUNKS_DE)
CLAIM_SETS = (PRESSURE_DE, PRESSURE_EN, RETENTION_DE, FEE_EN, REFUND_DE)


def fill(template: str, on: ClaimSet) -> str:
    """A reply template with the call's ids ($K1 …, lower case $k1 …) and the claims' texts
    ($T1 …) filled in."""
    values: dict[str, str] = {}
    for n, (id_, text) in enumerate(zip(claim_ids(on.claims), on.claims, strict=True), 1):
        values |= {f"K{n}": id_, f"k{n}": id_.lower(), f"T{n}": text}
    return Template(template).substitute(values)


@dataclass(frozen=True)
class Case:
    name: str
    on: ClaimSet
    first: str  # the first batched reply (a template, see `fill`)
    read: dict[int, Label]  # claim number (1-based) → the verdict read from the first reply
    correction: str | None = None  # the reply to the correction, where one is asked
    corrected: dict[int, Label] = field(default_factory=dict)  # read from that reply
    path: str = PATH_BATCHED
    structured: bool | None = False  # judge_answer's `structured`
    endpoint_schema: bool = False  # the endpoint answers a request that carries a JSON schema
    cut: bool = False  # the first reply stops at max_tokens (finish_reason "length")
    refused: bool = False  # every batched reply comes as an OpenAI refusal (no content)
    learned: tuple[bool, ...] = ()  # what on_structured was told
    chunks: dict[int, tuple[int, ...]] = field(default_factory=dict)  # evidence, where asserted


LINES_PRESSURE_DE = (
    "$K1: GEDECKT [1] Abschnitt 1 nennt die 5 Jahre.\n"
    "$K2: UNGEDECKT [] Kein Abschnitt nennt eine Erstattung.\n"
    "$K3: TEILWEISE [2] Der Betrag steht dort, die Anfahrt nicht.\n"
    "$K4: GEDECKT [3] Abschnitt 3 nennt Frau Dr. Meier."
)
LINES_PRESSURE_EN = (
    "$K1: SUPPORTED [1] Chunk 1 gives the 5 years.\n"
    "$K2: NOT SUPPORTED [] No chunk mentions a grant.\n"
    "$K3: PARTIALLY SUPPORTED [2] The amount is there, the travel is not.\n"
    "$K4: SUPPORTED [3] Chunk 3 names Dr. Meier."
)
LINES_RETENTION_DE = (
    "$K1: TEILWEISE [1] Die 3,5 Jahre stehen dort, ihr Beginn nicht.\n"
    "$K2: GEDECKT [2] Abschnitt 2 nennt die Müller Prüftechnik GmbH.\n"
    "$K3: UNGEDECKT [] Kein Abschnitt nennt eine Frist in Werktagen.\n"
    "$K4: GEDECKT [3] Abschnitt 3 nennt die Ausnahme.\n"
    "$K5: UNGEDECKT [] Kein Abschnitt nennt eine Zuständigkeit."
)
LINES_FEE_EN = (
    "$K1: GEDECKT [2] Chunk 2 says students pay part of the fee only.\n"
    "$K2: UNGEDECKT [] No chunk gives USD 40.\n"
    "$K3: TEILWEISE [3] The 14 days are there, working days are not."
)
ALL_PRESSURE = {1: G, 2: U, 3: T, 4: G}
ALL_RETENTION = {1: T, 2: G, 3: U, 4: G, 5: U}
ALL_FEE = {1: G, 2: U, 3: T}

CASES: list[Any] = [
    # (a) Renumbered: claim 2 skipped, claims 1, 3 and 4 answered as 1, 2, 3. Read by position,
    # claim 2 would be TEILWEISE and claim 3 GEDECKT: nothing is read, all four are asked again.
    Case(
        "renumbered, claim 2 skipped (de)", PRESSURE_DE,
        "1: GEDECKT [1] Abschnitt 1 nennt die 5 Jahre.\n"
        "2: TEILWEISE [2] Der Betrag steht dort, die Anfahrt nicht.\n"
        "3: GEDECKT [3] Abschnitt 3 nennt Frau Dr. Meier.",
        {}, LINES_PRESSURE_DE, ALL_PRESSURE, PATH_CORRECTED,
        chunks={1: (1,), 2: (), 3: (2,), 4: (3,)},
    ),
    # The correction is half renumbered too: what it ties to ids counts, the rest goes one by one.
    Case(
        "renumbered, claim 2 skipped (en)", PRESSURE_EN,
        "1: SUPPORTED [1] Chunk 1 gives the 5 years.\n"
        "2: PARTIALLY SUPPORTED [2] The amount is there, the travel is not.\n"
        "3: SUPPORTED [3] Chunk 3 names Dr. Meier.",
        {},
        "$K1: SUPPORTED [1] Chunk 1 gives the 5 years.\n"
        "2: NOT SUPPORTED [] No chunk mentions a grant.\n"
        "$K3: PARTIALLY SUPPORTED [2] The amount is there, the travel is not.\n"
        "4: SUPPORTED [3]",
        {1: G, 3: T}, PATH_FALLBACK,
    ),
    # (b) The claim's text where its verdict belongs: "Teilweise werden …" is no TEILWEISE.
    Case(
        "claim text as the verdict, Teilweise (de)", PRESSURE_DE,
        "$K1: GEDECKT [1] Abschnitt 1 nennt die 5 Jahre.\n"
        "$K2: Teilweise werden die Kosten von der Kasse erstattet.\n"
        "$K3: TEILWEISE [2] Der Betrag steht dort, die Anfahrt nicht.\n"
        "$K4: GEDECKT [3] Abschnitt 3 nennt Frau Dr. Meier.",
        {1: G, 3: T, 4: G},
        "$K2: UNGEDECKT [] Kein Abschnitt nennt eine Erstattung.", {2: U}, PATH_CORRECTED,
    ),
    Case(
        "claim text as the verdict, Partly supported (en)", PRESSURE_EN,
        "$K1: SUPPORTED [1]\n"
        "$K2: Partly supported projects receive the full grant.\n"
        "$K3: PARTIALLY SUPPORTED [2]\n"
        "$K4: SUPPORTED [3]",
        {1: G, 3: T, 4: G},
        "$K2: NOT SUPPORTED [] No chunk mentions a grant.", {2: U}, PATH_CORRECTED,
    ),
    Case(
        "claim text in the table's verdict column (de)", RETENTION_DE,
        "| Kennung | Urteil | Abschnitte |\n"
        "|---|---|---|\n"
        "| $K1 | TEILWEISE | 1 |\n"
        "| $K2 | $T2 |\n"
        "| $K3 | UNGEDECKT | |\n"
        "| $K4 | GEDECKT | 3 |\n"
        "| $K5 | UNGEDECKT | |",
        {1: T, 3: U, 4: G, 5: U},
        "$K2: GEDECKT [2] Abschnitt 2 nennt die Firma.", {2: G}, PATH_CORRECTED,
        chunks={1: (1,), 2: (2,), 3: (), 4: (3,)},
    ),
    # "Aussage K7:" / "Claim K7:" before the id.
    Case(
        "Aussage K7: prefix (de)", RETENTION_DE,
        "Aussage $K1: TEILWEISE [1] Die 3,5 Jahre stehen dort, ihr Beginn nicht.\n"
        "Aussage $K2: GEDECKT [2] Abschnitt 2 nennt die Firma.\n"
        "Aussage $K3: UNGEDECKT [] Keine Frist genannt.\n"
        "Aussage $K4: GEDECKT [3]\n"
        "Aussage $K5: UNGEDECKT []",
        ALL_RETENTION, chunks={1: (1,), 2: (2,), 3: (), 4: (3,)},
    ),
    Case(
        "Claim K7: prefix (en)", PRESSURE_EN,
        "Claim $K1: SUPPORTED [1] Chunk 1 gives the 5 years.\n"
        "Claim $K2: NOT SUPPORTED [] No chunk mentions a grant.\n"
        "Claim $K3: PARTIALLY SUPPORTED [2] The travel is missing.\n"
        "Claim $K4: SUPPORTED [3]",
        ALL_PRESSURE,
    ),
    # "Aussage 1:" numbers instead of ids: tied to nothing, asked again, then one by one.
    Case(
        "Aussage 1: numeric prefixes, also in the correction (de)", PRESSURE_DE,
        "Aussage 1: GEDECKT [1]\nAussage 2: UNGEDECKT []\nAussage 3: TEILWEISE [2]\n"
        "Aussage 4: GEDECKT [3]",
        {},
        "Aussage 1: GEDECKT\nAussage 2: UNGEDECKT\nAussage 3: TEILWEISE\nAussage 4: GEDECKT",
        {}, PATH_FALLBACK,
    ),
    Case(
        "Claim 1: numeric prefixes (en)", FEE_EN,
        "Claim 1: SUPPORTED\nClaim 2: NOT SUPPORTED\nClaim 3: PARTIALLY SUPPORTED",
        {}, LINES_FEE_EN, ALL_FEE, PATH_CORRECTED,
    ),
    # The claim echoed before the word (quoted, with a dash, a colon or an arrow).
    Case(
        "claim echoed before the word (de)", PRESSURE_DE,
        "$K1: Der Druckbehälter wird alle 5 Jahre geprüft. – GEDECKT [1] Abschnitt 1.\n"
        "$K2: „Teilweise werden die Kosten von der Kasse erstattet.“ → UNGEDECKT []\n"
        "$K3: Die Prüfung kostet 1.250 €: TEILWEISE [2] Die Anfahrt fehlt.\n"
        "$K4: Anträge gehen an Frau Dr. Meier. GEDECKT [3]",
        ALL_PRESSURE, chunks={1: (1,), 2: (), 3: (2,), 4: (3,)},
    ),
    Case(
        "claim echoed before the word (en)", PRESSURE_EN,
        "$K1: The pressure vessel is inspected every 5 years. - SUPPORTED [1]\n"
        '$K2: "Partly supported projects receive the full grant." NOT SUPPORTED []\n'
        "$K3: The inspection costs 1,250 euros: PARTIALLY SUPPORTED [2]\n"
        "$K4: Applications go to Dr. Meier. -> SUPPORTED [3]",
        ALL_PRESSURE,
    ),
    # The English words, in an English and in a German conversation.
    Case(
        "SUPPORTED / PARTIALLY SUPPORTED / NOT SUPPORTED (en)", FEE_EN,
        "$K1: SUPPORTED [2] Chunk 2 says students pay part of the fee only.\n"
        "$K2: NOT SUPPORTED [] No chunk gives USD 40.\n"
        "$K3: PARTIALLY SUPPORTED [3] The 14 days are there, working days are not.",
        ALL_FEE, chunks={1: (2,), 2: (), 3: (3,)},
    ),
    Case(
        "English words in a German conversation (de)", RETENTION_DE,
        "$K1: PARTLY SUPPORTED [1]\n$K2: SUPPORTED [2]\n$K3: UNSUPPORTED\n$K4: SUPPORTED [3]\n"
        "$K5: NOT  SUPPORTED",
        ALL_RETENTION,
    ),
    # A markdown table, with the claim's text in a column of its own.
    Case(
        "markdown table with the claims (de)", RETENTION_DE,
        "| Kennung | Aussage | Urteil | Abschnitte | Begründung |\n"
        "|---|---|---|---|---|\n"
        "| $K1 | $T1 | TEILWEISE | 1 | Die 3,5 Jahre stehen dort, ihr Beginn nicht. |\n"
        "| $K2 | $T2 | GEDECKT | 2 | Abschnitt 2 nennt die Firma. |\n"
        "| $K3 | $T3 | UNGEDECKT | – | Keine Frist genannt. |\n"
        "| $K4 | $T4 | **GEDECKT** | 3 | Abschnitt 3 nennt die Ausnahme. |\n"
        "| $K5 | $T5 | UNGEDECKT | | Niemand wird genannt. |",
        ALL_RETENTION, chunks={1: (1,), 2: (2,), 3: (), 4: (3,), 5: ()},
    ),
    Case(
        "markdown table (en)", PRESSURE_EN,
        "| Claim | Verdict | Chunks | Reason |\n"
        "| --- | --- | --- | --- |\n"
        "| $K1 | SUPPORTED | 1 | Chunk 1 gives the 5 years. |\n"
        "| $K2 | NOT SUPPORTED | | No chunk mentions a grant. |\n"
        "| $K3 | PARTIALLY SUPPORTED | 2, 3 | The travel is missing. |\n"
        "| $K4 | SUPPORTED | 3 | Chunk 3 names Dr. Meier. |",
        ALL_PRESSURE, chunks={1: (1,), 2: (), 3: (2, 3), 4: (3,)},
    ),
    # JSON: an object keyed by id (verdict objects or words, German keys), chunk 7 of 3 dropped.
    Case(
        "JSON object keyed by id (de)", PRESSURE_DE,
        '{"$K1": {"verdict": "GEDECKT", "chunks": [1], "reason": "Abschnitt 1 nennt 5 Jahre."},'
        ' "$K2": "UNGEDECKT",'
        ' "$K3": {"urteil": "TEILWEISE", "abschnitte": [2, 7]},'
        ' "$K4": {"Verdict": "GEDECKT", "chunks": [3]}}',
        ALL_PRESSURE, chunks={1: (1,), 2: (), 3: (2,), 4: (3,)},
    ),
    # A list of objects with ids (one tied by the claim's exact text), claim 4 left out.
    Case(
        "JSON list of objects with ids, one claim missing (en)", PRESSURE_EN,
        '{"verdicts": ['
        '{"id": "$K1", "verdict": "SUPPORTED", "chunks": [1], "reason": "Chunk 1."}, '
        '{"claim": "$T2", "verdict": "NOT SUPPORTED"}, '
        '{"id": "$k3", "verdict": "PARTIALLY SUPPORTED", "chunks": [2]}]}',
        {1: G, 2: U, 3: T},
        '[{"id": "$K4", "verdict": "SUPPORTED", "chunks": [3]}]', {4: G}, PATH_CORRECTED,
        chunks={1: (1,), 2: (), 3: (2,), 4: (3,)},
    ),
    # A bare list of words (claim 2 skipped: by position, claims 2 and 3 would be wrong).
    Case(
        "bare JSON list of words (de)", RETENTION_DE,
        '["TEILWEISE", "UNGEDECKT", "GEDECKT", "UNGEDECKT"]',
        {}, LINES_RETENTION_DE, ALL_RETENTION, PATH_CORRECTED,
    ),
    # Words under "verdicts", then an object keyed by position: neither is tied to a claim.
    Case(
        "JSON words under verdicts, then keyed by position (en)", FEE_EN,
        '{"verdicts": ["SUPPORTED", "NOT SUPPORTED", "PARTIALLY SUPPORTED"]}',
        {},
        '{"1": "SUPPORTED", "2": "NOT SUPPORTED", "3": "PARTIALLY SUPPORTED"}',
        {}, PATH_FALLBACK,
    ),
    Case(
        "JSON in a ```json fence with text around (en)", FEE_EN,
        "Here are my verdicts:\n\n```json\n"
        '{"verdicts": [\n'
        '  {"id": "$K1", "verdict": "GEDECKT", "chunks": [2], "reason": "Chunk 2."},\n'
        '  {"id": "$K2", "verdict": "UNGEDECKT", "chunks": [], "reason": "Not there."},\n'
        '  {"id": "$K3", "verdict": "TEILWEISE", "chunks": [3], "reason": "Days only."}\n'
        "]}\n```\n\nLet me know if you need more detail.",
        ALL_FEE, chunks={1: (2,), 2: (), 3: (3,)},
    ),
    # Keyed by the claims' exact texts ("Teilweise werden …" is a key, not a verdict).
    Case(
        "JSON keyed by the claims' texts in a fence (de)", PRESSURE_DE,
        '```json\n{"$T1": "GEDECKT", "$T2": "UNGEDECKT", "$T3": "TEILWEISE", "$T4": "GEDECKT"}\n'
        "```",
        ALL_PRESSURE,
    ),
    # Reasoning in the lines: the word at the end of a sentence is not read.
    Case(
        "reasoning in the lines (de)", PRESSURE_DE,
        "$K1: Abschnitt 1 nennt die 5 Jahre, also GEDECKT\n"
        "$K2: UNGEDECKT [] Kein Abschnitt nennt eine Erstattung.\n"
        "$K3: Der Betrag steht in Abschnitt 2, die Anfahrt nicht – TEILWEISE\n"
        "$K4: GEDECKT [3] Abschnitt 3 nennt Frau Dr. Meier.",
        {2: U, 4: G},
        "$K1: GEDECKT [1] Abschnitt 1 nennt die 5 Jahre.\n$K3: TEILWEISE [2] Die Anfahrt fehlt.",
        {1: G, 3: T}, PATH_CORRECTED,
    ),
    # … and again in the correction: what stays open goes one by one.
    Case(
        "reasoning in the lines, also in the correction (en)", PRESSURE_EN,
        "$K1: Chunk 1 gives the 5 years, so SUPPORTED\n"
        "$K2: The grant is mentioned nowhere, hence NOT SUPPORTED\n"
        "$K3: PARTIALLY SUPPORTED [2]\n"
        "$K4: SUPPORTED [3]",
        {3: T, 4: G},
        "$K1: Chunk 1 gives the 5 years, so SUPPORTED\n$K2: NOT SUPPORTED []",
        {2: U}, PATH_FALLBACK,
    ),
    # A <think> block whose drafts disagree with the verdicts after it: only those count.
    Case(
        "<think> block before the verdicts (de)", RETENTION_DE,
        "<think>\nAbschnitt 1 nennt 3,5 Jahre. Also:\n$K1: GEDECKT\n$K3: GEDECKT\n"
        "Nein, eine Frist in Werktagen steht nirgends.\n</think>\n" + LINES_RETENTION_DE,
        ALL_RETENTION,
    ),
    # A <think> block never closed (the reasoning ran out of tokens): nothing is read.
    Case(
        "<think> block never closed (en)", PRESSURE_EN,
        "<think>\nLet me check. Chunk 1 gives 5 years.\n$K1: SUPPORTED\n$K2: NOT SUPPORTED\n"
        "Now $K3, the amount",
        {}, LINES_PRESSURE_EN, ALL_PRESSURE, PATH_CORRECTED, cut=True,
    ),
    Case(
        "reasoning paragraphs before the lines (en)", PRESSURE_EN,
        "Let me check each claim against the context.\n\n"
        "Chunk 1 says that pressure vessels are inspected every 5 years, which is what $K1 "
        "says. $K2 is about a grant; no chunk mentions one.\n"
        "$K3 - partially: the amount is there, the travel costs are not.\n\n"
        + LINES_PRESSURE_EN,
        ALL_PRESSURE,
    ),
    Case(
        "reasoning paragraphs before the lines (de)", RETENTION_DE,
        "Ich gehe die Aussagen der Reihe nach durch.\n\n"
        "Zu $K1: Abschnitt 1 nennt 3,5 Jahre, aber nicht, ab wann sie laufen.\n"
        "$K2 wird von Abschnitt 2 gestützt, $K3 von keinem.\n\n"
        "Ergebnis:\n" + LINES_RETENTION_DE,
        ALL_RETENTION,
    ),
    Case(
        "trailing explanations after the lines (de)", PRESSURE_DE,
        LINES_PRESSURE_DE + "\n\n"
        "Erläuterung: $K2 nennt eine Erstattung, die in keinem Abschnitt steht; bei $K3 fehlt "
        "die Anfahrt, daher TEILWEISE.\n"
        "$K1 wäre ohne Abschnitt 1 UNGEDECKT.\nIch hoffe, das hilft!",
        # An explanation that names a claim beside another verdict than its line gave leaves
        # that claim in doubt (here the second claim beside TEILWEISE, the first beside
        # UNGEDECKT): asked again, the rest read.
        {3: T, 4: G}, "$K1: GEDECKT [1]\n$K2: UNGEDECKT []", {1: G, 2: U}, PATH_CORRECTED,
    ),
    Case(
        "trailing explanations after the lines (en)", FEE_EN,
        "$K1: SUPPORTED [2]\n$K2: NOT SUPPORTED []\n$K3: PARTIALLY SUPPORTED [3]\n\n"
        "Note: $K3 is only PARTIALLY SUPPORTED because chunk 3 gives days, not working days.\n"
        "Summary: 1 SUPPORTED, 1 NOT SUPPORTED, 1 PARTIALLY SUPPORTED.",
        ALL_FEE,
    ),
    Case(
        "lower case (en)", FEE_EN,
        "$k1: supported [2]\n$k2: not supported\n$k3: partially supported [3]",
        ALL_FEE,
    ),
    Case(
        "lower case (de)", RETENTION_DE,
        "$k1: teilweise [1]\n$k2: gedeckt [2]\n$k3: nicht gedeckt\n$k4: Gedeckt [3]\n"
        "$k5: ungedeckt",
        # Claim 2 starts with "Teilweise": there a verdict counts in capitals only, since a
        # line in lower case may be the claim's text begun.
        {1: T, 3: U, 4: G, 5: U}, "$K2: GEDECKT [2]", {2: G}, PATH_CORRECTED,
    ),
    Case(
        "**bold** (de)", PRESSURE_DE,
        "**$K1:** **GEDECKT** [1] Abschnitt 1 nennt die 5 Jahre.\n"
        "- **$K2**: **UNGEDECKT** – kein Abschnitt nennt eine Erstattung.\n"
        "* $K3: **TEILWEISE** [2]\n"
        "**$K4: GEDECKT** [3]",
        ALL_PRESSURE, chunks={1: (1,), 2: (), 3: (2,), 4: (3,)},
    ),
    Case(
        "**bold** with Claim prefixes (en)", PRESSURE_EN,
        "- **Claim $K1:** SUPPORTED [1]\n"
        "- **Claim $K2:** NOT SUPPORTED\n"
        "- **Claim $K3:** **PARTIALLY SUPPORTED** [2]\n"
        "- **Claim $K4:** SUPPORTED [3]",
        ALL_PRESSURE,
    ),
    Case(
        "NICHT GEDECKT and TEILWEISE GEDECKT (de)", PRESSURE_DE,
        "$K1: GEDECKT [1]\n"
        "$K2: NICHT GEDECKT [] Kein Abschnitt nennt eine Erstattung.\n"
        "$K3: TEILWEISE GEDECKT [2] Die Anfahrt fehlt.\n"
        "$K4: GEDECKT [3]",
        ALL_PRESSURE,
    ),
    # Unknown ids are ignored, a claim without a line is asked again.
    Case(
        "extra claims and a missing one (en)", PRESSURE_EN,
        "$K1: SUPPORTED [1]\nZ9: NOT SUPPORTED []\n$K3: PARTIALLY SUPPORTED [2]\n"
        "Q2: SUPPORTED [3]\n$K2: NOT SUPPORTED []",
        {1: G, 2: U, 3: T},
        "$K4: SUPPORTED [3]", {4: G}, PATH_CORRECTED,
    ),
    Case(
        "extra claims and two missing, one still open after the correction (de)", RETENTION_DE,
        "$K1: TEILWEISE [1]\n$K3: UNGEDECKT []\n6: GEDECKT\nW7: GEDECKT\n$K5: UNGEDECKT []",
        {1: T, 3: U, 5: U},
        "$K2: GEDECKT [2]\n4: GEDECKT", {2: G}, PATH_FALLBACK,
    ),
    # Two lines for one id: alike, one verdict; contradicting, none.
    Case(
        "contradicting lines for one id (de)", RETENTION_DE,
        "$K1: TEILWEISE [1]\n$K2: GEDECKT [2]\n$K3: GEDECKT [1]\n$K4: GEDECKT\n"
        "$K5: UNGEDECKT []\n$K3: UNGEDECKT [] Korrektur: keine Frist genannt.\n$K4: GEDECKT [3]",
        {1: T, 2: G, 4: G, 5: U},
        "$K3: UNGEDECKT []", {3: U}, PATH_CORRECTED, chunks={4: ()},
    ),
    Case(
        "contradicting JSON items for one id (en)", FEE_EN,
        '[{"id": "$K1", "verdict": "SUPPORTED"}, {"id": "$K2", "verdict": "NOT SUPPORTED"}, '
        '{"id": "$K1", "verdict": "NOT SUPPORTED"}, '
        '{"id": "$K3", "verdict": "PARTIALLY SUPPORTED"}]',
        {2: U, 3: T},
        "$K1: SUPPORTED [2]", {1: G}, PATH_CORRECTED,
    ),
    Case(
        "all verdicts on one line (de)", PRESSURE_DE,
        "$K1: GEDECKT, $K2: UNGEDECKT, $K3: TEILWEISE, $K4: GEDECKT",
        {},  # the line names other verdicts after the first: none is certain
        LINES_PRESSURE_DE, ALL_PRESSURE, PATH_CORRECTED,
    ),
    # An ordered list before the ids: the ids tie the verdicts, the list numbers are dropped.
    Case(
        "numbered list before the ids (de)", PRESSURE_DE,
        "1. $K1: GEDECKT [1]\n2. $K2: UNGEDECKT []\n3. $K3: TEILWEISE [2]\n4. $K4: GEDECKT [3]",
        ALL_PRESSURE,
    ),
    # An empty reply: the correction carries no empty assistant message.
    Case(
        "empty reply (en)", FEE_EN, "",
        {}, LINES_FEE_EN, ALL_FEE, PATH_CORRECTED,
    ),
    # OpenAI's refusal field (no content; the replies scripted here never arrive), the
    # correction refused too: one by one.
    Case(
        "refusal in the refusal field (de)", PRESSURE_DE, LINES_PRESSURE_DE,
        {}, LINES_PRESSURE_DE, {}, PATH_FALLBACK, refused=True,
    ),
    Case(
        "refusal in words (en)", PRESSURE_EN,
        "I'm sorry, but I can't help with judging these claims.",
        {}, LINES_PRESSURE_EN, ALL_PRESSURE, PATH_CORRECTED,
    ),
    # Cut off by max_tokens: the last line, a stump, is not read, nor the claim after it.
    Case(
        "cut off by max_tokens, a stump at the end (de)", RETENTION_DE,
        "$K1: TEILWEISE [1] Die 3,5 Jahre stehen dort, ihr Beginn nicht.\n"
        "$K2: GEDECKT [2] Abschnitt 2 nennt die Firma.\n"
        "$K3: UNGEDECKT [] Keine Frist genannt.\n"
        "$K4: GEDECKT [3] Abschn",
        {1: T, 2: G, 3: U},
        "$K4: GEDECKT [3]\n$K5: UNGEDECKT []", {4: G, 5: U}, PATH_CORRECTED, cut=True,
    ),
    # A cut that ends on a line break: the last line may still be cut, it is not read.
    Case(
        "cut off by max_tokens after a line break (de)", PRESSURE_DE,
        "$K1: GEDECKT [1]\n$K2: UNGEDECKT []\n$K3: TEILWEISE [2]\n",
        {1: G, 2: U},
        "$K3: TEILWEISE [2]\n$K4: GEDECKT [3]", {3: T, 4: G}, PATH_CORRECTED, cut=True,
    ),
    # Structured output cut off mid-object: JSON that does not parse is not read as lines.
    Case(
        "cut off by max_tokens in structured JSON (en)", PRESSURE_EN,
        '{"verdicts": [{"id": "$K1", "verdict": "GEDECKT", "chunks": [1], "reason": "Chunk 1."}, '
        '{"id": "$K2", "verdict": "UNGEDECKT", "chunks": [], "reason": "No chunk names a gr',
        {},
        '{"verdicts": [{"id": "$K1", "verdict": "GEDECKT", "chunks": [1], "reason": "x"}, '
        '{"id": "$K2", "verdict": "UNGEDECKT", "chunks": [], "reason": "x"}, '
        '{"id": "$K3", "verdict": "TEILWEISE", "chunks": [2], "reason": "x"}, '
        '{"id": "$K4", "verdict": "GEDECKT", "chunks": [3], "reason": "x"}]}',
        ALL_PRESSURE, PATH_CORRECTED, structured=True, endpoint_schema=True, cut=True,
    ),
    # Structured output: taken (a JSON reply in the schema), refused (400: lines), taken but
    # answered in lines (learned as not kept to; the correction still carries the schema).
    Case(
        "structured output taken (en)", PRESSURE_EN,
        '{"verdicts": ['
        '{"id": "$K1", "verdict": "GEDECKT", "chunks": [1], "reason": "Chunk 1 gives 5 years."}, '
        '{"id": "$K2", "verdict": "UNGEDECKT", "chunks": [], "reason": "No grant anywhere."}, '
        '{"id": "$K3", "verdict": "TEILWEISE", "chunks": [2], "reason": "Travel missing."}, '
        '{"id": "$K4", "verdict": "GEDECKT", "chunks": [3], "reason": "Chunk 3 names him."}]}',
        ALL_PRESSURE, structured=None, endpoint_schema=True, learned=(True,),
        chunks={1: (1,), 2: (), 3: (2,), 4: (3,)},
    ),
    Case(
        "structured output refused with 400, lines instead (de)", PRESSURE_DE,
        "$K1: GEDECKT [1]\n$K2: UNGEDECKT []\n$K3: TEILWEISE [2]",
        {1: G, 2: U, 3: T},
        "$K4: GEDECKT [3]", {4: G}, PATH_CORRECTED, structured=None, learned=(False,),
    ),
    Case(
        "structured output taken but answered in lines (de)", RETENTION_DE,
        "$K1: TEILWEISE [1]\n$K3: UNGEDECKT []\n$K4: GEDECKT [3]\n$K5: UNGEDECKT []",
        {1: T, 3: U, 4: G, 5: U},
        '{"verdicts": [{"id": "$K2", "verdict": "GEDECKT", "chunks": [2], "reason": "Firma."}]}',
        {2: G}, PATH_CORRECTED, structured=None, endpoint_schema=True, learned=(False,),
        chunks={2: (2,)},
    ),
    # --- once findings (the reader read a verdict that was not certain); now left open ------
    Case(
        "echo shortened, the claim starts with Teilweise and a comma (de)", REFUND_DE,
        "$K1: Teilweise, nämlich bis 500 € … – GEDECKT [1]\n"
        "$K2: UNGEDECKT [] Keine Dauer genannt.\n"
        "$K3: GEDECKT [2]",
        {2: U, 3: G},
        "$K1: GEDECKT [1]", {1: G}, PATH_CORRECTED,
    ),
    # In a table the verdict is the cell that holds one alone: the claim cell is no verdict.
    Case(
        "table with a shortened claim starting with Teilweise and a comma (de)", REFUND_DE,
        "| Kennung | Aussage | Urteil |\n|---|---|---|\n"
        "| $K1 | Teilweise, nämlich bis 500 € … | GEDECKT |\n"
        "| $K2 | $T2 | UNGEDECKT |\n"
        "| $K3 | $T3 | GEDECKT |",
        {1: G, 2: U, 3: G},
    ),
    Case(
        "a second verdict in parentheses (en)", PRESSURE_EN,
        "$K1: SUPPORTED [1]\n$K2: NOT SUPPORTED []\n"
        "$K3: SUPPORTED (partially) [2] The amount is there, the travel is not.\n"
        "$K4: SUPPORTED [3]",
        {1: G, 2: U, 4: G},
        "$K3: PARTIALLY SUPPORTED [2]", {3: T}, PATH_CORRECTED,
    ),
    Case(
        "a second verdict in parentheses (de)", PRESSURE_DE,
        "$K1: GEDECKT [1]\n$K2: UNGEDECKT []\n$K3: GEDECKT (teilweise) [2]\n$K4: GEDECKT [3]",
        {1: G, 2: U, 4: G},
        "$K3: TEILWEISE [2]", {3: T}, PATH_CORRECTED,
    ),
    Case(
        "the judge corrects itself on the line (de)", PRESSURE_DE,
        "$K1: GEDECKT [1]\n$K2: UNGEDECKT []\n$K3: GEDECKT – nein, eher TEILWEISE [2]\n"
        "$K4: GEDECKT [3]",
        {1: G, 2: U, 4: G},
        "$K3: TEILWEISE [2]", {3: T}, PATH_CORRECTED,
    ),
    Case(
        "two verdicts with a slash (en)", FEE_EN,
        "$K1: SUPPORTED [2]\n$K2: NOT SUPPORTED []\n$K3: SUPPORTED / PARTIALLY SUPPORTED [3]",
        {1: G, 2: U},
        "$K3: PARTIALLY SUPPORTED [3]", {3: T}, PATH_CORRECTED,
    ),
]


def case_of(param: Any) -> Case:
    return param if isinstance(param, Case) else param.values[0]


def judge_client(server: FakeOpenAIServer) -> JudgeClient:
    return JudgeClient(JudgeConfig(
        base_url=server.base_url, api_key="test-key", model="judge-x", timeout=10.0,
        max_tokens_decompose=MAX_TOKENS_DECOMPOSE, max_tokens_verify=MAX_TOKENS_VERIFY,
    ))


def judge(
    server: FakeOpenAIServer, on: ClaimSet, *, mode: str, structured: bool | None = False,
    on_structured: Callable[[bool, str], None] | None = None,
) -> judging.Judgement:
    """The answer made of ``on``'s claims judged as `services.runs.judge_with` judges it: each
    kind of call through the client with its output-token cap."""
    client = judge_client(server)
    size = settings.TREUE_JUDGE_BATCH_SIZE

    def batch_call(
        messages: list[dict[str, str]], response_format: dict[str, Any] | None = None
    ) -> judging.CallResult:
        cap = BATCH_LINE_TOKENS * size + (MAX_TOKENS_DECOMPOSE if mode == SINGLE else 0)
        return client.call(messages, max_tokens=cap, response_format=response_format)

    return judge_answer(
        question="Was gilt für die Prüfung?" if on.language == "de" else "What applies?",
        answer=" ".join(on.claims),
        chunks=list(on.chunks),
        language=on.language,
        call=lambda messages: client.call(messages, max_tokens=MAX_TOKENS_DECOMPOSE),
        verify_call=lambda messages: client.call(messages, max_tokens=MAX_TOKENS_VERIFY),
        batch_call=batch_call,
        concurrency=4,
        mode=mode,
        batch_size=size,
        evidence=True,
        structured=structured,
        on_structured=on_structured,
    )


def is_batch(request: dict[str, Any]) -> bool:
    system = request["messages"][0]["content"]
    return system.startswith((VERIFY_BATCH_SYSTEM_DE, VERIFY_BATCH_SYSTEM_EN))


def asked_ids(request: dict[str, Any]) -> list[str]:
    """The ids a batched request (its last user message: the claim list, or a correction)
    asks for."""
    last = request["messages"][-1]["content"]
    if len(request["messages"]) > 2:
        return re.findall(r"\b[A-Z][0-9]\b", last.split("\n")[0])
    return re.findall(r"^([A-Z][0-9]): ", last.rsplit("):\n", 1)[-1], re.MULTILINE)


def scripted(on: ClaimSet, **kwargs: Any) -> ScriptedJudge:
    """The judge: it decomposes the answer into ``on``'s claims, and a per-claim call gets the
    verdict it means."""
    return ScriptedJudge(
        claims=list(on.claims),
        verdicts={claim: meant.value for claim, meant in zip(on.claims, on.meant, strict=True)},
        **kwargs,
    )


def wrong_verdicts(
    judgement: judging.Judgement, on: ClaimSet, source: Callable[[int], str], reply: str
) -> str:
    lines = [
        f"claim {n} ({on.claims[n - 1]!r}): {v.label.value} from {source(n)}, the judge meant "
        f"{on.meant[n - 1].value}"
        for n, v in ((on.claims.index(v.claim) + 1, v) for v in judgement.claims)
        if v.label is not on.meant[n - 1]
    ]
    return "\n".join(lines + [f"first reply: {reply!r}"]) if lines else ""


@pytest.mark.parametrize("case", [
    c if not isinstance(c, Case) else pytest.param(c, id=c.name) for c in CASES
])
def test_a_reply_shape(openai_server: FakeOpenAIServer, case: Case) -> None:
    on = case.on
    ids = claim_ids(on.claims)
    numbers = range(1, len(on.claims) + 1)
    first = fill(case.first, on)
    correction = None if case.correction is None else fill(case.correction, on)
    script = scripted(on, batch_reply=[first, first if correction is None else correction],
                      structured=case.endpoint_schema)
    openai_server.responder = script
    if case.cut:
        openai_server.finish_reason_for = (
            lambda request, content: "length" if content == first else "stop")
    if case.refused:
        openai_server.refusal_for = (
            lambda request, content: REFUSAL if is_batch(request) else None)
    learned: list[tuple[bool, str]] = []

    judgement = judge(openai_server, on, mode=BATCHED, structured=case.structured,
                      on_structured=lambda supported, detail: learned.append((supported, detail)))

    number = {claim: n for n, claim in zip(numbers, on.claims, strict=True)}
    again = [number[c] for kind, c, _ in script.seen if kind == "correct_batch" and c]
    alone = sorted(number[c] for kind, c, _ in script.seen if kind == "verify" and c)
    got = {number[v.claim]: v for v in judgement.claims}
    assert sorted(got) == list(numbers), "every claim of the decomposition has a verdict"

    def source(n: int) -> str:
        return ("its own call" if n in alone else "the correction" if n in again
                else "the first reply")

    # No claim ends with a verdict the judge did not mean.
    wrong = wrong_verdicts(judgement, on, source, first)
    assert not wrong, f"{case.name}: a verdict the judge did not mean\n{wrong}"

    # What each reply gave, label by label, and tied to the reply it came from.
    read = {n: got[n].label for n in numbers if n not in again}
    assert read == case.read, f"{case.name}: read from the first reply {first!r}"
    opened = [n for n in numbers if n not in case.read]
    assert again == opened, f"{case.name}: the correction asks for exactly the open claims"
    assert (correction is not None) == bool(opened), "the case gives a correction iff one is due"
    from_correction = {n: got[n].label for n in again if n not in alone}
    assert from_correction == case.corrected, (
        f"{case.name}: read from the correction's reply {correction!r}")
    assert alone == [n for n in opened if n not in case.corrected], (
        f"{case.name}: asked one by one")
    for n in numbers:
        expected_raw = (on.meant[n - 1].value if n in alone
                        else correction if n in again else first)
        if case.refused and n not in alone:
            expected_raw = ""  # a refusal has no content
        assert (got[n].raw, got[n].attempts) == (expected_raw, 1), f"claim {n}'s reply"
    for n, chunks in case.chunks.items():
        assert got[n].chunks == chunks, f"claim {n}'s evidence"

    assert judgement.path == case.path
    assert judgement.calls == 2 + bool(opened) + len(alone), "decomposition, batch, correction"
    assert judgement.result.score is not None and judgement.failed_reason is None

    # The requests: the batch lists every claim, the correction continues its conversation.
    batch = [r for r in openai_server.requests if is_batch(r)]
    refused_schema = case.structured is not False and not case.endpoint_schema
    assert len(batch) == 1 + refused_schema + bool(opened)
    assert [c for kind, c, _ in script.seen if kind == "verify_batch"] == list(on.claims)
    with_schema = ["response_format" in r for r in batch]
    if case.structured is False:
        assert not any(with_schema)
    elif case.endpoint_schema and case.learned == (False,):
        # The endpoint took the schema but did not keep to it: the correction goes without.
        assert with_schema == [True] + [False] * bool(opened)
    elif case.endpoint_schema:
        assert all(with_schema)
        assert asked_ids(batch[0]) == ids
        if opened:
            assert asked_ids(batch[-1]) == [ids[n - 1] for n in opened]
    else:
        assert with_schema == [True, False] + [False] * bool(opened)
    assert [supported for supported, _ in learned] == list(case.learned)
    if case.learned == (False,):
        detail = learned[0][1]
        assert ("(400)" in detail) if refused_schema else detail == "reply not in the schema"
    if opened:
        messages = batch[-1]["messages"]
        assert messages[:2] == batch[-2]["messages"][:2], "the same conversation"
        answered = "" if case.refused else first
        assert messages[2:-1] == ([{"role": "assistant", "content": answered}]
                                  if answered.strip() else [])
        named = re.findall(r"\b[A-Z][2-9]\b", messages[-1]["content"].split("\n")[0])
        assert named == [ids[n - 1] for n in opened]


# --- one-call mode ------------------------------------------------------------------------


@dataclass(frozen=True)
class SingleCase:
    name: str
    on: ClaimSet
    replies: tuple[str, ...]  # the one-call reply, and the correction's where asked
    read: dict[int, Label]  # read from the one-call reply
    decomposed: bool  # no readable claim list: the decomposition's claims were judged
    path: str
    calls: int


SINGLE_CASES = [
    SingleCase(
        "one call, every verdict read (de)", PRESSURE_DE,
        ('{"claims": ['
         '{"claim": "$T1", "verdict": "GEDECKT", "chunks": [1], "reason": "Abschnitt 1."}, '
         '{"claim": "$T2", "verdict": "UNGEDECKT", "chunks": [], "reason": "Nirgends."}, '
         '{"claim": "$T3", "verdict": "TEILWEISE", "chunks": [2], "reason": "Ohne Anfahrt."}, '
         '{"claim": "$T4", "verdict": "GEDECKT", "chunks": [3], "reason": "Abschnitt 3."}]}',),
        ALL_PRESSURE, False, PATH_SINGLE, 1,
    ),
    # The claim's text as a verdict and a verdict with evidence in the word: both asked in a
    # batch afterwards.
    SingleCase(
        "one call, two verdicts unreadable (en)", PRESSURE_EN,
        ('{"claims": ['
         '{"claim": "$T1", "verdict": "SUPPORTED", "chunks": [1], "reason": "Chunk 1."}, '
         '{"claim": "$T2", "verdict": "$T2", "chunks": [], "reason": ""}, '
         '{"claim": "$T3", "verdict": "PARTIALLY SUPPORTED [2]", "chunks": [2], "reason": ""}, '
         '{"claim": "$T4", "verdict": "SUPPORTED", "chunks": [3], "reason": "Chunk 3."}]}',),
        {1: G, 4: G}, False, PATH_FALLBACK, 2,
    ),
    # A claim listed twice with different verdicts (in a code fence): asked in a batch.
    SingleCase(
        "one call in a fence, a claim twice with different verdicts (en)", FEE_EN,
        ('```json\n{"claims": [{"claim": "$T1", "verdict": "SUPPORTED"}, '
         '{"claim": "$T2", "verdict": "NOT SUPPORTED"}, '
         '{"claim": "$T1", "verdict": "NOT SUPPORTED"}, '
         '{"claim": "$T3", "verdict": "PARTIALLY SUPPORTED"}]}\n```',),
        {2: U, 3: T}, False, PATH_FALLBACK, 2,
    ),
    # Lines instead of JSON, twice: the decomposition's claims are judged in a batch.
    SingleCase(
        "one call answered in lines, also after the correction (de)", RETENTION_DE,
        (LINES_RETENTION_DE, "Hier die Urteile:\n" + LINES_RETENTION_DE),
        {}, True, PATH_FALLBACK, 4,
    ),
]


@pytest.mark.parametrize("case", SINGLE_CASES, ids=[c.name for c in SINGLE_CASES])
def test_a_one_call_reply_shape(openai_server: FakeOpenAIServer, case: SingleCase) -> None:
    on = case.on
    replies = [fill(reply, on) for reply in case.replies]
    script = scripted(on, single_reply=replies)
    openai_server.responder = script

    judgement = judge(openai_server, on, mode=SINGLE)

    got = {on.claims.index(v.claim) + 1: v for v in judgement.claims}
    assert [v.claim for v in judgement.claims] == list(on.claims)
    wrong = wrong_verdicts(judgement, on, lambda n: "a reply", replies[0])
    assert not wrong, f"{case.name}: a verdict the judge did not mean\n{wrong}"
    batched_claims = [on.claims.index(c) + 1 for kind, c, _ in script.seen
                      if kind == "verify_batch" and c]
    read = {n: got[n].label for n in got if n not in batched_claims}
    assert read == case.read
    assert batched_claims == [n for n in got if n not in case.read]
    assert all(got[n].raw == replies[0] for n in case.read)
    kinds = [kind for kind, _, _ in script.seen]
    assert kinds.count("single") == len(replies)
    assert kinds.count("decompose") == case.decomposed
    assert "verify" not in kinds and "correct_batch" not in kinds
    assert judgement.path == case.path
    assert judgement.calls == case.calls


# --- the corpus itself --------------------------------------------------------------------


def test_the_corpus_covers_both_languages_and_its_ids_are_the_calls() -> None:
    cases = [case_of(c) for c in CASES]
    assert len(cases) >= 25
    assert {c.on.language for c in cases} == {"de", "en"}
    assert {c.on for c in cases} <= set(CLAIM_SETS)
    for on in CLAIM_SETS:
        assert 3 <= len(on.claims) <= 5 and len(on.meant) == len(on.claims)
        assert any(claim.startswith(("Teilweise ", "Teilweise,", "Partly ")) for claim in on.claims)
        # The ids the extra-claims cases use are none of the call's.
        assert not {"Z9", "Q2", "W7"} & set(claim_ids(on.claims))
    assert len({c.name for c in cases}) == len(cases)
