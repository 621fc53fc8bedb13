"""Tier 1: find the uncertain words of an answer from its token log-probabilities.

A RAG service sends the OpenAI ``choices[i].logprobs`` object with each answer. This module
lines the tokens up with the answer text, then reports every content-bearing word (one that
starts with a digit, an upper-case letter or ``§``) touched by a token whose probability is
below the use case's threshold. It reports whole words and numbers ("Behältergröße", "3,5",
"§ 4"), never BPE fragments, because a reviewer cannot act on "größe".

Plain Python on purpose (no django, no openai): it runs at ingest for every answer and is
tested with tables of cases.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

COMPACT_VERSION = 1

UNALIGNED_WARNING = (
    "The token log-probabilities do not spell the answer text, so tier 1 (uncertain words) "
    "was skipped for this answer; the answer was stored."
)

# Letters/digits (and combining accents, which \w misses for decomposed umlauts) joined by
# hyphens, apostrophes, or - between digits - a decimal/thousands separator: "E-Mail",
# "COVID-19", "3,5", "12,000.50". A separator needs a digit on both sides, so the full stop
# after "2026." stays outside the word.
_PART = r"[\w\u0300-\u036f]"
_WORD = rf"[^\W_]{_PART}*(?:(?:[-\u2011'’]|(?<=\d)[.,](?=\d)){_PART}+)*"
# A section sign belongs to its number: "§ 4", "§4", "§§ 4a" are one unit.
_WORD_RE = re.compile(rf"§{{1,2}}[ \u00a0\u202f]?(?=\d){_WORD}|{_WORD}")

_ESCAPE_RE = re.compile(r"\\x([0-9a-fA-F]{2})")
_FFFD = "\ufffd".encode()
# Every whitespace character as UTF-8, so token-side edge whitespace is skipped exactly like
# str.strip() skips it on the answer side (U+3000 is the highest whitespace code point).
_SPACE = b"(?:%b)+" % b"|".join(
    re.escape(chr(c).encode()) for c in range(0x3001) if chr(c).isspace()
)
_LEADING_SPACE = re.compile(rb"\A" + _SPACE)
_TRAILING_SPACE = re.compile(_SPACE + rb"\Z")


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    token: str
    logprob: float
    bytes: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class UncertainWord:
    word: str
    probability: float
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Tier1Result:
    logprobs_status: str
    flagged: bool
    uncertain: tuple[UncertainWord, ...]
    warning: str | None
    compact: dict[str, Any] | None


def tokens_from_openai(logprobs: Mapping[str, Any] | None) -> list[TokenLogprob] | None:
    """The content tokens of an OpenAI logprobs object; None when there are none."""
    if not logprobs:
        return None
    content = logprobs.get("content")
    if not content:
        return None
    tokens = []
    for item in content:
        raw = item.get("bytes")
        tokens.append(
            TokenLogprob(
                token=item["token"],
                logprob=float(item["logprob"]),
                bytes=None if raw is None else tuple(raw),
            )
        )
    return tokens


def analyse_answer(
    answer: str, logprobs: Mapping[str, Any] | None, threshold: float
) -> Tier1Result:
    """Tier 1 for one answer: status, flag, uncertain words and a compact copy to store."""
    tokens = tokens_from_openai(logprobs)
    if tokens is None:
        return Tier1Result("none", False, (), None, None)
    values = [t.logprob for t in tokens]
    spans = align_tokens(answer, tokens)
    compact: dict[str, Any] = {
        "v": COMPACT_VERSION,
        "t": [t.token for t in tokens],
        "lp": values,
        "s": spans[0] if spans else None,
        "e": spans[1] if spans else None,
    }
    if spans is None:
        return Tier1Result("unaligned", False, (), UNALIGNED_WARNING, compact)
    words = find_uncertain_words(answer, spans[0], spans[1], values, threshold)
    return Tier1Result("ok", bool(words), tuple(words), None, compact)


def reanalyse(answer: str, compact: Mapping[str, Any], threshold: float) -> list[UncertainWord]:
    """Apply a (changed) threshold to a stored compact copy; [] when it was unaligned."""
    starts, ends, values = compact.get("s"), compact.get("e"), compact.get("lp")
    if starts is None or ends is None or values is None:
        return []
    if not len(starts) == len(ends) == len(values):
        return []
    return find_uncertain_words(answer, starts, ends, values, threshold)


def find_uncertain_words(
    answer: str,
    starts: Sequence[int],
    ends: Sequence[int],
    logprobs: Sequence[float],
    threshold: float,
) -> list[UncertainWord]:
    """Content-bearing words touched by a token with exp(logprob) < threshold.

    ``starts``/``ends`` are the tokens' character spans in ``answer`` in text order, as
    ``align_tokens`` returns them; the two-pointer walk relies on that order.
    """
    n = min(len(starts), len(ends), len(logprobs))
    found: list[UncertainWord] = []
    j = 0
    for match in _WORD_RE.finditer(answer):
        word = match.group()
        first = word[0]
        if not (first == "§" or first.isdigit() or first.isupper() or first.istitle()):
            continue
        ws, we = match.span()
        while j < n and ends[j] <= ws:
            j += 1
        lowest = None
        k = j
        while k < n and starts[k] < we:
            # Empty tokens carry no text, so their probability says nothing about a word.
            if ends[k] > starts[k] and ends[k] > ws and (lowest is None or logprobs[k] < lowest):
                lowest = logprobs[k]
            k += 1
        if lowest is None:
            continue
        # Log-probabilities are <= 0; the clamp only keeps exp() from overflowing on bad data.
        probability = math.exp(min(lowest, 0.0))
        if probability < threshold:
            found.append(UncertainWord(word, round(probability, 4), ws, we))
    return found


def align_tokens(answer: str, tokens: Sequence[TokenLogprob]) -> tuple[list[int], list[int]] | None:
    """Each token's (start, end) character offsets in ``answer``, or None if they don't fit.

    The joined token bytes must equal the answer's UTF-8 bytes, apart from whitespace at
    either end (services often strip the text). A token without ``bytes`` whose text holds
    U+FFFD stands for a split multi-byte character: each U+FFFD matches 1-3 non-ASCII bytes.
    """
    try:
        core = answer.strip()
        lead = len(answer) - len(answer.lstrip())
        target = core.encode("utf-8", "surrogatepass")
        options = [_token_options(t) for t in tokens]
        bounds = _match(target, options)
    except (ValueError, TypeError, OverflowError):
        # Byte values outside 0..255 or similar garbage: unaligned, never an error.
        return None
    if bounds is None:
        return None
    char_at = _byte_to_char(core, len(target))
    starts, ends = [], []
    for b, e in bounds:
        s = char_at[b]
        starts.append(s + lead)
        # A token that ends inside a character still covers that character.
        ends.append((char_at[e - 1] + 1 if e > b else s) + lead)
    return starts, ends


def _token_options(token: TokenLogprob) -> list[list[bytes | None]]:
    """Byte readings of a token, most likely first; each is a list of segments where None is
    a U+FFFD that may stand for 1-3 unknown bytes."""
    if token.bytes is not None:
        readings = [bytes(token.bytes)]
    else:
        text = token.token
        readings = []
        if text.startswith("bytes:") and _ESCAPE_RE.search(text, 6):
            readings.append(_unescape(text[6:]))
        elif _ESCAPE_RE.search(text):
            readings.append(_unescape(text))
        # The literal reading comes last: an answer may really contain "\xc3" or "bytes:".
        readings.append(text.encode("utf-8", "surrogatepass"))
    options = []
    for raw in readings:
        parts = raw.split(_FFFD)
        segments: list[bytes | None] = [parts[0]]
        for part in parts[1:]:
            segments += [None, part]
        options.append([s for s in segments if s != b""])
    return options


def _unescape(text: str) -> bytes:
    out = bytearray()
    pos = 0
    for m in _ESCAPE_RE.finditer(text):
        out += text[pos : m.start()].encode("utf-8", "surrogatepass")
        out.append(int(m.group(1), 16))
        pos = m.end()
    out += text[pos:].encode("utf-8", "surrogatepass")
    return bytes(out)


def _literal(target: bytes, seg: bytes, pos: int) -> int | None:
    """End position after matching ``seg`` at ``pos``, skipping edge whitespace."""
    if pos == 0:
        # target starts with non-whitespace, so leading whitespace cannot belong to it.
        seg = _LEADING_SPACE.sub(b"", seg, count=1)
    if target.startswith(seg, pos):
        return pos + len(seg)
    # The token may run past the stripped end of the answer with whitespace only.
    head = _TRAILING_SPACE.sub(b"", seg, count=1)
    if len(head) < len(seg) and pos + len(head) == len(target) and target.startswith(head, pos):
        return len(target)
    return None


def _ends(target: bytes, option: list[bytes | None], pos: int) -> list[int]:
    """All end positions of one token reading starting at ``pos``, literal matches first."""
    positions = [pos]
    for seg in option:
        following: list[int] = []
        for p in positions:
            if seg is not None:
                end = _literal(target, seg, p)
                if end is not None:
                    following.append(end)
                continue
            if target.startswith(_FFFD, p):
                following.append(p + 3)
            for k in range(1, 4):
                if p + k > len(target) or target[p + k - 1] < 0x80:
                    break
                following.append(p + k)
        positions = list(dict.fromkeys(following))
        if not positions:
            break
    return positions


def _match(target: bytes, options: list[list[list[bytes | None]]]) -> list[tuple[int, int]] | None:
    """Depth-first search for token byte spans covering ``target``.

    Almost always every token has one reading and the search runs straight through; the
    memo of dead (token, position) states keeps ambiguous U+FFFD runs from going exponential.
    An explicit stack instead of recursion: answers can have thousands of tokens.
    """
    total = len(options)
    dead: set[tuple[int, int]] = set()
    stack: list[tuple[int, int, list[int]]] = []
    index, pos = 0, 0
    while True:
        if index == total:
            if pos == len(target):
                starts = [frame[1] for frame in stack]
                return list(zip(starts, [*starts[1:], pos], strict=True))
        elif (index, pos) not in dead:
            candidates = []
            for option in options[index]:
                candidates += _ends(target, option, pos)
            stack.append((index, pos, list(dict.fromkeys(candidates))[::-1]))
        # Take the next untried candidate, backing up past exhausted tokens.
        while stack and not stack[-1][2]:
            done_index, done_pos, _ = stack.pop()
            dead.add((done_index, done_pos))
        if not stack:
            return None
        index, pos = stack[-1][0] + 1, stack[-1][2].pop()


def _byte_to_char(text: str, size: int) -> list[int]:
    """For each byte offset of ``text``'s UTF-8 (plus the end), the index of its character."""
    if size == len(text):
        return list(range(size + 1))
    table: list[int] = []
    for index, char in enumerate(text):
        code = ord(char)
        table += [index] * (1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4)
    table.append(len(text))
    return table
