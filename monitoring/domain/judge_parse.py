"""Reading the judge's replies (tier 2): a verdict label per claim, a claim list per answer.

Both parsers are forgiving about form (markdown, quotes, case, code fences) and strict about
content: a verdict is one of the three words or it is ``UNPARSEABLE``, never a guessed label and
never a silent 0; a claim list that cannot be read is ``None`` (a failed decomposition), never an
empty list, because an empty list means an honest abstention and scores 1.0.
"""

import json
import re
from enum import StrEnum


class Label(StrEnum):
    GEDECKT = "GEDECKT"
    TEILWEISE = "TEILWEISE"
    UNGEDECKT = "UNGEDECKT"
    UNPARSEABLE = "UNPARSEABLE"


LABEL_POINTS: dict[Label, float] = {
    Label.GEDECKT: 1.0,
    Label.TEILWEISE: 0.5,
    Label.UNGEDECKT: 0.0,
}

# Every claim costs a judge call. Answers hold 3-8 claims; a list of more than 30 is a runaway
# decomposition (or a table read out line by line), and capping it bounds one answer at 31 calls.
MAX_CLAIMS = 30

_VERDICTS = {label.value: label for label in LABEL_POINTS}
# Wrapping a model adds around a word: quotes (also German and French ones), markdown code,
# bold and italics, and invisible characters that str.strip() keeps.
_WRAPPING = "\"'`*_„“”‚‘’«»‹›\u200b\ufeff"
_TRAILING = ".!:"


def parse_verdict(reply: str) -> Label:
    """The label in a verification reply, or UNPARSEABLE.

    After removing whitespace, wrapping and trailing ".", "!" or ":", the reply must be exactly
    one of the three words, in any case. "GEDECKT, weil …", "NICHT GEDECKT" and "SUPPORTED" are
    UNPARSEABLE: reading a label out of a longer reply would guess at the judge's meaning.
    """
    text = reply
    while True:
        stripped = text.strip().strip(_WRAPPING).rstrip(_TRAILING)
        if stripped == text:
            break
        text = stripped
    return _VERDICTS.get(text.upper(), Label.UNPARSEABLE)


# "1. claim", "12) claim", "- claim", "* claim", "• claim". The space after the marker keeps
# "1.5 Jahre …" from counting as item 1.
_LIST_LINE = re.compile(r"^[ \t]*(?:\d{1,3}[.)]|[-*•–])[ \t]+(.*\S)[ \t]*$", re.MULTILINE)
_QUOTES = "\"„“”'‚‘’"


def parse_claims(reply: str) -> list[str] | None:
    """The claims in a decomposition reply; [] for an explicit "[]"; None if unreadable.

    Accepts the first JSON array of strings anywhere in the reply (so also inside a ```json
    fence or after a sentence of preamble), else numbered or bulleted lines. Claims are
    stripped, blanks and exact repeats dropped (order kept), and the list is cut at MAX_CLAIMS.
    """
    items = _first_string_array(reply)
    if items is None:
        items = [_unquote(m.group(1)) for m in _LIST_LINE.finditer(reply)]
        if not items:
            return None
    claims = list(dict.fromkeys(c for c in (item.strip() for item in items) if c))
    if items and not claims:
        # ["", " "] is not the explicit "[]" of an abstention: treat it as unreadable.
        return None
    return claims[:MAX_CLAIMS]


def _first_string_array(text: str) -> list[str] | None:
    decoder = json.JSONDecoder()
    start = text.find("[")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return value
        start = text.find("[", start + 1)
    return None


def _unquote(item: str) -> str:
    # A list line often keeps the JSON habits: - "Der Behälter …",
    item = item.strip().removesuffix(",").strip()
    if len(item) >= 2 and item[0] in _QUOTES and item[-1] in _QUOTES:
        item = item[1:-1]
    return item
