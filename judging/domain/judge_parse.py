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

from monitoring.domain.points import CLAIM_POINTS


class Label(StrEnum):
    GEDECKT = "GEDECKT"
    TEILWEISE = "TEILWEISE"
    UNGEDECKT = "UNGEDECKT"
    UNPARSEABLE = "UNPARSEABLE"


LABEL_POINTS: dict[Label, float] = {Label(label): p for label, p in CLAIM_POINTS.items()}

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

    A reply that is one JSON value (inside a ```json fence or not) is read as JSON: an array of
    strings is the claims, any other array is unreadable (``["…", "…", []]`` is a garbled list,
    not an abstention), and an object gives the array of strings it holds. Otherwise the first
    JSON array of strings in the text that is no item of another array (after a sentence of
    preamble, say) is the claims, else the numbered or bulleted lines. An empty array in text is
    an abstention only where it opens or ends the reply, with no other bracket and no list line
    beside it: a preamble that mentions "[]" says nothing about the answer. Claims are stripped,
    blanks and exact repeats dropped (order kept), and the list is cut at MAX_CLAIMS.
    """
    items = _json_claims(reply)
    if items is _NOT_JSON:
        lines = [_unquote(m.group(1)) for m in _LIST_LINE.finditer(reply)]
        items = _array_in_text(reply, abstention_allowed=not lines)
        if items is None:
            items = lines
    if not isinstance(items, list) or (not items and items is not _ABSTENTION):
        return None
    claims = list(dict.fromkeys(c for c in (storable_text(i).strip() for i in items) if c))
    if items and not claims:
        # ["", " "] is not the explicit "[]" of an abstention: treat it as unreadable.
        return None
    return claims[:MAX_CLAIMS]


# What _json_claims gives for a reply that is no JSON value; the empty list that stands for an
# explicit abstention (any other empty list is "nothing found").
_NOT_JSON = object()
_ABSTENTION: list[str] = []
_FENCE = re.compile(r"\A```[A-Za-z]*+[ \t]*+\n?(.*?)\n?```\Z", re.DOTALL)


def _json_claims(reply: str) -> object:
    """The claims of a reply that is one JSON value: a list of strings (_ABSTENTION for "[]"),
    None for JSON of another shape, _NOT_JSON for a reply that is no JSON value (or an object
    without a direct array of strings, searched as text)."""
    text = reply.strip(_WHITESPACE)
    fenced = _FENCE.match(text)
    if fenced is not None:
        text = fenced.group(1).strip(_WHITESPACE)
    if text[:1] not in ("[", "{"):
        return _NOT_JSON
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON
    if isinstance(value, dict):
        arrays = [v for v in value.values() if isinstance(v, list)]
        if len(arrays) != 1:
            return _NOT_JSON
        value = arrays[0]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value if value else _ABSTENTION


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


def _array_in_text(text: str, *, abstention_allowed: bool) -> list[str] | None:
    """The first JSON array of strings in ``text`` that is no item of another array, decoded.

    An empty one counts (as _ABSTENTION) only if ``abstention_allowed``, it is the text's only
    "[" and nothing but wrapping stands before it or after it. None if there is no such array.
    Each match is looked at once, with only the blanks around it read again: linear.
    """
    # Where the reply's first word starts and its last word ends, and whether an empty array
    # could be the reply's only bracket.
    first = len(text) - len(text.lstrip(_WHITESPACE + _WRAPPING))
    last = len(text.rstrip(_WHITESPACE + _WRAPPING + _TRAILING))
    lone = abstention_allowed and text.count("[") == 1
    for match in _STRING_ARRAY.finditer(text):
        items: list[str] = json.loads(match.group())
        if not items:
            if lone and (match.start() == first or match.end() == last):
                return _ABSTENTION
        elif not _an_item(text, match.start(), match.end()):
            return items
    return None


def _an_item(text: str, start: int, end: int) -> bool:
    """Whether the array at text[start:end] reads as an item of a bigger array: "[" before it,
    "]" after it, or a comma before it that follows a string, an array or an object."""
    before, at = _neighbour(text, start - 1, -1)
    if before == "[" or _neighbour(text, end, 1)[0] == "]":
        return True
    return before == "," and _neighbour(text, at - 1, -1)[0] in "\"]}"


def _neighbour(text: str, index: int, step: int) -> tuple[str, int]:
    """The first character from ``index`` on (in ``step``'s direction) that is no blank, and
    where it is; NUL past either end.

    Only the blanks between a match and the next character are read, so the blanks read for
    all matches together are at most the text (twice).
    """
    while 0 <= index < len(text) and text[index] in _JSON_BLANKS:
        index += step
    return (text[index] if 0 <= index < len(text) else "\x00"), index


_JSON_BLANKS = frozenset(" \t\n\r")


def _unquote(item: str) -> str:
    # A list line often keeps the JSON habits: - "Der Behälter …",
    item = item.strip().removesuffix(",").strip()
    if len(item) >= 2 and item[0] in _QUOTES and item[-1] in _QUOTES:
        item = item[1:-1]
    return item
