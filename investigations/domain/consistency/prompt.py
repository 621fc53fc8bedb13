"""The judge's wording for self-consistency: do these answers contradict each other in content?

Asked once per question, after the value comparison found no conflict (see ``compare``).
The text lives here, apart from the client, so it can be read, reviewed and tested on its own
(as ``judge_prompt``). ``PROMPT_VERSION`` changes with every wording change; a test pins the
texts by hash.

The judge answers one word on the first line (WIDERSPRUCH / KONSISTENT in German, CONTRADICTION
/ CONSISTENT in English), optionally a short reason on the second. Parsing is forgiving about
form and strict about content: anything but those words (in either language) is ``None``, which
the caller retries once and then records as undecided: an unreadable reply is never counted as
"consistent".
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from judging.domain.judge_parse import strip_wrapping

PROMPT_VERSION = "consistency-2026-12-v1"

SYSTEM_DE = (
    "Du bist ein sorgfältiger Prüfer. Du vergleichst mehrere Antworten auf dieselbe Frage und "
    "beurteilst nur, ob sie sich inhaltlich widersprechen, nicht, ob sie wahr sind."
)

USER_DE = """Dieselbe Frage wurde mehrmals gestellt. Prüfe, ob sich die Antworten inhaltlich \
widersprechen.

Frage:
{question}

{samples}

Ein Widerspruch liegt vor, wenn die Antworten Unvereinbares sagen: andere Zahlen, Fristen, \
Zuständigkeiten, Bedingungen oder Ergebnisse, oder wenn eine Antwort eine feste Angabe macht und \
eine andere sagt, es komme darauf an. Andere Formulierungen, eine andere Reihenfolge und mehr \
oder weniger Einzelheiten sind kein Widerspruch.

Antworte in der ersten Zeile mit genau einem Wort:
WIDERSPRUCH — die Antworten widersprechen sich inhaltlich
KONSISTENT  — die Antworten sagen inhaltlich dasselbe oder ergänzen sich
In der zweiten Zeile kannst du den Grund in einem kurzen Satz nennen."""

SAMPLE_DE = "Antwort {number}:\n{text}"
EMPTY_DE = "(leere Antwort)"

RETRY_DE = (
    "Das war nicht eines der beiden Wörter. Antworte in der ersten Zeile mit genau einem Wort: "
    "WIDERSPRUCH oder KONSISTENT; in der zweiten Zeile kannst du den Grund nennen."
)

SYSTEM_EN = (
    "You are a careful checker. You compare several answers to the same question and only "
    "judge whether they contradict each other in content, not whether they are true."
)

USER_EN = """The same question was asked several times. Check whether the answers contradict \
each other in content.

Question:
{question}

{samples}

The answers contradict each other if they say incompatible things: different numbers, \
deadlines, responsibilities, conditions or outcomes, or one answer gives a fixed figure while \
another says it depends. Different wording, a different order and more or fewer details are not \
a contradiction.

Answer on the first line with exactly one word:
CONTRADICTION — the answers contradict each other in content
CONSISTENT    — the answers say the same in content or complement each other
On the second line you may give the reason in one short sentence."""

SAMPLE_EN = "Answer {number}:\n{text}"
EMPTY_EN = "(empty answer)"

RETRY_EN = (
    "That was not one of the two words. Answer on the first line with exactly one word: "
    "CONTRADICTION or CONSISTENT; on the second line you may give the reason."
)

# Every piece of wording, by name: the version pin hashes this mapping.
PROMPT_TEXTS: Mapping[str, str] = {
    "SYSTEM_DE": SYSTEM_DE,
    "USER_DE": USER_DE,
    "SAMPLE_DE": SAMPLE_DE,
    "EMPTY_DE": EMPTY_DE,
    "RETRY_DE": RETRY_DE,
    "SYSTEM_EN": SYSTEM_EN,
    "USER_EN": USER_EN,
    "SAMPLE_EN": SAMPLE_EN,
    "EMPTY_EN": EMPTY_EN,
    "RETRY_EN": RETRY_EN,
}

_TEXTS = {
    "de": (SYSTEM_DE, USER_DE, SAMPLE_DE, EMPTY_DE, RETRY_DE),
    "en": (SYSTEM_EN, USER_EN, SAMPLE_EN, EMPTY_EN, RETRY_EN),
}


def _texts(language: str) -> tuple[str, str, str, str, str]:
    try:
        return _TEXTS[language]
    except (KeyError, TypeError):
        raise ValueError(
            f"no consistency prompt for language {language!r}; supported: de, en"
        ) from None


def contradiction_messages(
    *, question: str, samples: Sequence[str], language: str
) -> list[dict[str, str]]:
    """Chat messages asking the judge whether ``samples`` contradict each other."""
    system, user, sample, empty, _ = _texts(language)
    shown = "\n\n".join(
        sample.format(number=number, text=text.strip() or empty)
        for number, text in enumerate(samples, 1)
    )
    # str.format does not look inside the substituted values, so braces in them are safe.
    content = user.format(question=question.strip(), samples=shown)
    return [{"role": "system", "content": system}, {"role": "user", "content": content}]


def contradiction_retry_messages(
    *, question: str, samples: Sequence[str], language: str, reply: str
) -> list[dict[str, str]]:
    """The ask again, with the unparseable reply as the assistant's turn and a reminder.

    At temperature 0 the same request would most likely get the same reply again.
    """
    retry = _texts(language)[4]
    # Some OpenAI-compatible servers reject an empty assistant turn.
    previous = [{"role": "assistant", "content": reply}] if reply.strip() else []
    return [
        *contradiction_messages(question=question, samples=samples, language=language),
        *previous,
        {"role": "user", "content": retry},
    ]


@dataclass(frozen=True)
class ContradictionReply:
    contradiction: bool | None  # None: unparseable
    reason: str


# Both languages' words count whatever the prompt's language: a judge answering a German prompt
# in English has still answered. "KEIN WIDERSPRUCH" / "NO CONTRADICTION" say the same as
# KONSISTENT; "INKONSISTENT" is unambiguous too.
_WORDS = {
    "WIDERSPRUCH": True, "CONTRADICTION": True, "INKONSISTENT": True, "INCONSISTENT": True,
    "KONSISTENT": False, "CONSISTENT": False, "KEIN WIDERSPRUCH": False,
    "NO CONTRADICTION": False,
}
_WRAPPING = "\"'`*_#>„“”‚‘’«»‹›\u200b\ufeff"
_TRAILING = ".!"
# "WIDERSPRUCH: Antwort 1 nennt …" and "KONSISTENT — …" carry the word, then the reason: the
# word ends at the first ":", "–" or "—", or "-" after a blank.
_SEPARATOR = re.compile(r"[:–—]|(?<=\s)-")
_REASON_LABEL = re.compile(r"^(?:grund|begründung|reason|because|weil)\s*:\s*", re.IGNORECASE)
MAX_REASON_CHARS = 500


def _clean(text: str) -> str:
    return strip_wrapping(text, _TRAILING + ":", _WRAPPING)


def _word_then_reason(line: str) -> tuple[str, str] | None:
    r"""(word, reason) of a stripped line "WORD: reason", "WORD - reason" or "WORD — reason".

    What ``^(?P<word>[^:–—]+?)\s*(?::|\s[-–—]|[–—])\s*(?P<reason>.+)$`` matches, found by one
    search: that pattern's lazy word read the blanks after each of its characters again, which
    took quadratic time on "W" + " " * 100_000 + ":x". Both need a word and a reason.
    """
    separator = _SEPARATOR.search(line)
    if separator is None:
        return None
    word, reason = line[: separator.start()].rstrip(), line[separator.end() :].lstrip()
    return (word, reason) if word and reason else None


def parse_contradiction(reply: str) -> ContradictionReply:
    """The judge's answer: the word on the first non-blank line, the rest as the reason.

    Case, whitespace, markdown, quotes and trailing ".", "!" or ":" do not matter; the word may
    be followed on its line by ":" or a dash and the reason. "WIDERSPRUCH, aber …", "Ja",
    "Die Antworten widersprechen sich" are ``None``: reading a verdict out of prose would guess.
    """
    lines = [line for line in reply.splitlines() if line.strip().strip("`")]
    if not lines:
        return ContradictionReply(None, "")
    first = _clean(lines[0])
    rest = lines[1:]
    verdict = _WORDS.get(" ".join(first.upper().split()))
    if verdict is None and (parts := _word_then_reason(lines[0].strip())):
        verdict = _WORDS.get(_clean(parts[0]).upper())
        rest = [parts[1], *rest]
    if verdict is None:
        return ContradictionReply(None, "")
    reason = " ".join(line.strip().strip(_WRAPPING).strip() for line in rest).strip()
    reason = _REASON_LABEL.sub("", reason).strip()
    return ContradictionReply(verdict, reason[:MAX_REASON_CHARS])
