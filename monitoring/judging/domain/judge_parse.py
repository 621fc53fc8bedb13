"""Reading the judge's replies (tier 2): a verdict label per claim, a claim list per answer.

Both parsers are forgiving about form (markdown, quotes, case, code fences) and strict about
content: a verdict is one of the three words or it is ``UNPARSEABLE``, never a guessed label and
never a silent 0; a claim list that cannot be read is ``None`` (a failed decomposition), never an
empty list, because an empty list means an honest abstention and scores 1.0.

A reply is text from outside (a judge, or a proxy in front of it), so both parsers do work
linear in its length, whatever it holds: no stripping loop that removes one character a round,
no regular expression that can backtrack over a line more than once, and no JSON decoding that
nests (``"[" * 5000`` is an unreadable claim list, not a RecursionError).
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
# What str.strip() removes, spelled out so it can be stripped together with the rest (U+3000 is
# the highest whitespace code point).
_WHITESPACE = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())


def parse_verdict(reply: str) -> Label:
    """The label in a verification reply, or UNPARSEABLE.

    After removing whitespace, wrapping and trailing ".", "!" or ":", the reply must be exactly
    one of the three words, in any case. "GEDECKT, weil …", "NICHT GEDECKT" and "SUPPORTED" are
    UNPARSEABLE: reading a label out of a longer reply would guess at the judge's meaning.
    """
    return _VERDICTS.get(strip_wrapping(reply, _TRAILING).upper(), Label.UNPARSEABLE)


def strip_wrapping(text: str, trailing: str, wrapping: str = _WRAPPING) -> str:
    """``text`` without whitespace and ``wrapping`` at either end, nor ``trailing`` at its end.

    The same as stripping whitespace, wrapping and trailing marks in turn until nothing changes
    (each removes only characters of its own set from its own end), in one pass: the loop took
    one round a character for a reply like "*. *. *. …".
    """
    return text.lstrip(_WHITESPACE + wrapping).rstrip(_WHITESPACE + wrapping + trailing)


# A lone surrogate cannot be encoded (UTF-8, the database, JSON) and PostgreSQL refuses NUL in
# text and JSON: both came back from a judge inside a claim or a reason and failed the run on
# every retry. They come as characters, or as JSON escapes ("\\u0000") that decoding turns
# into them, so the client cleans a reply and parse_claims the claims it decodes. One pass,
# linear in the text.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """``text`` with NUL dropped and each lone surrogate replaced by U+FFFD: what a model wrote,
    kept as far as it can be stored and read."""
    return _UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", text)


# "1. claim", "12) claim", "- claim", "* claim", "• claim". The space after the marker keeps
# "1.5 Jahre …" from counting as item 1. The runs of blanks are possessive: giving blanks back
# never helps (a marker is no blank, and a claim given blanks still ends where it ended), and
# trying every shorter run took quadratic time on "- " + " " * 100_000 + "x\r".
_LIST_LINE = re.compile(r"^[ \t]*+(?:\d{1,3}[.)]|[-*•–])[ \t]++(.*\S)[ \t]*$", re.MULTILINE)
_QUOTES = "\"„“”'‚‘’"


def parse_claims(reply: str) -> list[str] | None:
    """The claims in a decomposition reply; [] for an explicit "[]"; None if unreadable.

    Accepts the first JSON array of strings in the reply that stands on its own (so also inside
    a ```json fence, after a sentence of preamble or in an object), else numbered or bulleted
    lines. An array that is an item of a bigger array is never taken: ``["…", "…", []]`` is a
    garbled list, not an abstention. An empty array is an abstention only where it ends the reply
    and no list line stands beside it: a preamble that mentions "[]" says nothing about the
    answer. Claims are stripped, blanks and exact repeats dropped (order kept), and the list is
    cut at MAX_CLAIMS.
    """
    lines = [_unquote(m.group(1)) for m in _LIST_LINE.finditer(reply)]
    items = _first_string_array(reply, abstention_allowed=not lines)
    if items is None:
        items = lines
        if not items:
            return None
    claims = list(dict.fromkeys(c for c in (storable_text(i).strip() for i in items) if c))
    if items and not claims:
        # ["", " "] is not the explicit "[]" of an abstention: treat it as unreadable.
        return None
    return claims[:MAX_CLAIMS]


# A JSON array of strings, exactly as the json module reads one (whitespace is " \t\n\r", a
# string holds no unescaped control character). Matching it instead of decoding from every "["
# keeps the search linear: a decoder nests into "[[[[…" (RecursionError) and reads from each
# "[" to the end of whatever array follows, again for the next "[" inside it.
_JSON_SPACE = r"[ \t\n\r]*+"
_JSON_STRING = r'"(?:[^"\\\x00-\x1f]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+"'
_STRING_ARRAY = re.compile(
    rf"\[{_JSON_SPACE}(?:{_JSON_STRING}{_JSON_SPACE}"
    rf"(?:,{_JSON_SPACE}{_JSON_STRING}{_JSON_SPACE})*+)?+\]"
)


def _first_string_array(text: str, *, abstention_allowed: bool) -> list[str] | None:
    """The first JSON array of strings in ``text`` that is no item of another array, decoded.

    An empty one counts only if ``abstention_allowed`` and nothing but wrapping and a full stop
    follows it. None if there is no such array. Each match is looked at once, with only the
    blanks around it read again, so the search stays linear.
    """
    # Where the reply's last word ends: an empty array that ends there ends the reply.
    end = len(text.rstrip(_WHITESPACE + _WRAPPING + _TRAILING))
    for match in _STRING_ARRAY.finditer(text):
        if _neighbour(text, match.start() - 1, -1) in "[," or _neighbour(
            text, match.end(), 1
        ) in ",]":
            continue
        items: list[str] = json.loads(match.group())
        if items:
            return items
        if abstention_allowed and match.end() == end:
            return items
    return None


def _neighbour(text: str, index: int, step: int) -> str:
    """The first character from ``index`` on (in ``step``'s direction) that is no blank; NUL
    past either end.

    Only the blanks between a match and the next character are read, so the blanks read for
    all matches together are at most the text.
    """
    while 0 <= index < len(text) and text[index] in _JSON_BLANKS:
        index += step
    return text[index] if 0 <= index < len(text) else "\x00"


_JSON_BLANKS = frozenset(" \t\n\r")


def _unquote(item: str) -> str:
    # A list line often keeps the JSON habits: - "Der Behälter …",
    item = item.strip().removesuffix(",").strip()
    if len(item) >= 2 and item[0] in _QUOTES and item[-1] in _QUOTES:
        item = item[1:-1]
    return item
