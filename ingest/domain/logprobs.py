"""Tier 1: find the uncertain words of an answer from its token log-probabilities.

A RAG service sends the OpenAI ``choices[i].logprobs`` object with each answer. This module
lines the tokens up with the answer text, then reports every content-bearing word (one that
starts with a digit, an upper-case letter or ``§``) touched by a token whose probability is
below the use case's threshold. It reports whole words and numbers ("Behältergröße", "3,5",
"§ 4"), never BPE fragments, because a reviewer cannot act on "größe".

Plain Python on purpose (no django, no openai): it runs at ingest for every answer and is
tested with tables of cases. The answer and its tokens come from outside, so the work is linear
in them whatever they hold: the word pattern has one way to match any text, a token's trailing
blanks are found without backtracking, and the search for how U+FFFD tokens line up has a step
and a work budget, past which they count as unaligned.
"""

from __future__ import annotations

import functools
import math
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
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
# 1 for a byte that starts a UTF-8 character, 0 for a continuation byte (0x80-0xBF).
_STARTS_CHAR = bytes(0 if 0x80 <= b < 0xC0 else 1 for b in range(256))
# Every whitespace character as UTF-8, so token-side edge whitespace is skipped exactly like
# str.strip() skips it on the answer side (U+3000 is the highest whitespace code point).
_SPACE = b"(?:%b)+" % b"|".join(
    re.escape(chr(c).encode()) for c in range(0x3001) if chr(c).isspace()
)
_LEADING_SPACE = re.compile(rb"\A" + _SPACE)
# Trailing whitespace is found at the start of the reversed bytes: searched for at the end, the
# pattern would be tried from every byte of a long blank run (quadratic in the token). The
# reversed UTF-8 encodings are prefix-free, so the greedy match is the whole run.
_TRAILING_SPACE_REVERSED = re.compile(
    rb"\A(?:%b)+" % b"|".join(
        re.escape(chr(c).encode()[::-1]) for c in range(0x3001) if chr(c).isspace()
    )
)


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
    content = logprobs.get("content") if logprobs else None
    if not content:
        return None
    return [
        TokenLogprob(item["token"], float(item["logprob"]), _tuple_or_none(item.get("bytes")))
        for item in content
    ]


def _tuple_or_none(raw: Sequence[int] | None) -> tuple[int, ...] | None:
    return None if raw is None else tuple(raw)


def analyse_answer(
    answer: str, logprobs: Mapping[str, Any] | None, threshold: float
) -> Tier1Result:
    """Tier 1 for one answer: status, flag, uncertain words and a compact copy to store."""
    content = logprobs.get("content") if logprobs else None
    if not content:
        return Tier1Result("none", False, (), None, None)
    # Plain lists rather than TokenLogprob objects: this runs for every ingested answer.
    texts = [item["token"] for item in content]
    values = [float(item["logprob"]) for item in content]
    spans = _align(answer, texts, [item.get("bytes") for item in content])
    compact: dict[str, Any] = {
        "v": COMPACT_VERSION,
        "t": texts,
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
    if starts is None or ends is None or values is None or not len(starts) == len(ends):
        return []
    return find_uncertain_words(answer, starts, ends, values, threshold)


def _is_content(first: str) -> bool:
    """Whether a word starting with `first` bears content: a number, a capitalised word (every
    German noun), or a paragraph sign."""
    return first == "§" or first.isdigit() or first.isupper() or first.istitle()


@functools.lru_cache(maxsize=1)
def content_word_spans(answer: str) -> tuple[tuple[int, int], ...]:
    """The character spans of the answer's content-bearing words, in text order.

    Kept for the last answer: ingest asks twice (uncertain words, then the tuner's lowest
    probability), and the word pattern is a good part of tier 1's cost."""
    return tuple(m.span() for m in _WORD_RE.finditer(answer) if _is_content(answer[m.start()]))


def find_uncertain_words(
    answer: str,
    starts: Sequence[int],
    ends: Sequence[int],
    logprobs: Sequence[float],
    threshold: float,
) -> list[UncertainWord]:
    """Content-bearing words touched by a token with exp(logprob) < threshold.

    ``starts``/``ends`` are the tokens' character spans in ``answer`` in text order, as
    ``align_tokens`` returns them; the binary search over token ends relies on that order.
    """
    if threshold <= 0:
        return []  # no probability is below 0
    n = min(len(starts), len(ends), len(logprobs))
    # Only a token below the threshold can make a word uncertain, and there are usually few,
    # so words are looked up against those alone. The cheap log comparison (with a margin for
    # rounding) goes first; exp() then decides exactly. Empty tokens carry no text.
    cut = math.log(threshold) + 1e-9
    low = [
        k
        for k in range(n)
        if logprobs[k] < cut and ends[k] > starts[k] and math.exp(min(logprobs[k], 0.0)) < threshold
    ]
    if not low:
        return []
    low_starts = [starts[k] for k in low]
    low_ends = [ends[k] for k in low]
    found: list[UncertainWord] = []
    for ws, we in content_word_spans(answer):
        if ws >= low_ends[-1]:
            break
        i = bisect_right(low_ends, ws)
        lowest = math.inf
        while i < len(low) and low_starts[i] < we:
            lowest = min(lowest, logprobs[low[i]])
            i += 1
        if lowest < math.inf:
            # The clamp only keeps exp() from overflowing on bad data (logprobs are <= 0).
            probability = round(math.exp(min(lowest, 0.0)), 4)
            found.append(UncertainWord(answer[ws:we], probability, ws, we))
    return found


def align_tokens(answer: str, tokens: Sequence[TokenLogprob]) -> tuple[list[int], list[int]] | None:
    """Each token's (start, end) character offsets in ``answer``, or None if they don't fit.

    The joined token bytes must equal the answer's UTF-8 bytes, apart from whitespace at
    either end (services often strip the text). A token without ``bytes`` whose text holds
    U+FFFD stands for a split multi-byte character: each U+FFFD matches non-ASCII bytes.
    """
    return _align(answer, [t.token for t in tokens], [t.bytes for t in tokens])


def _align(
    answer: str, texts: list[str], raws: list[Sequence[int] | None]
) -> tuple[list[int], list[int]] | None:
    if "".join(texts) == answer and answer == answer.strip():
        # Usually the token texts spell the answer exactly (no token split a character, no
        # edge whitespace): their character spans are their lengths, no bytes needed. This
        # is what _align_bytes finds for them (a property test holds the two together), at a
        # tenth of its cost.
        ends = list(accumulate(map(len, texts)))
        return [0, *ends[:-1]] if ends else [], ends
    return _align_bytes(answer, texts, raws)


def _align_bytes(
    answer: str, texts: list[str], raws: list[Sequence[int] | None]
) -> tuple[list[int], list[int]] | None:
    core = answer.strip()
    lead = len(answer) - len(answer.lstrip())
    target = core.encode("utf-8", "surrogatepass")
    try:
        pieces = [
            text.encode("utf-8", "surrogatepass") if raw is None else bytes(raw)
            for text, raw in zip(texts, raws, strict=True)
        ]
        # Usually every token's bytes (or plain text) simply spell the answer: no search.
        bounds = _join(target, pieces)
        if bounds is None:
            options = [_readings(text, raw) for text, raw in zip(texts, raws, strict=True)]
            # First read each U+FFFD the way UTF-8 decoders write it; only if that fails,
            # let it stand for any 1-3 non-ASCII bytes.
            bounds = _match(target, options, strict=True)
            if bounds is None:
                bounds = _match(target, options, strict=False)
    except (ValueError, TypeError):
        # Byte values outside 0..255, a token that is not a string and similar garbage:
        # unaligned, never an error.
        return None
    if bounds is None:
        return None
    if len(target) == len(core):
        char_at: Sequence[int] = range(len(target) + 1)
    else:
        # Character index of every byte: count the bytes that start a character.
        char_at = [c - 1 for c in accumulate(target.translate(_STARTS_CHAR))] + [len(core)]
    starts = [char_at[b] + lead for b, _ in bounds]
    # A token that ends inside a character still covers that character.
    ends = [char_at[e - 1] + 1 + lead if e > b else char_at[b] + lead for b, e in bounds]
    return starts, ends


def _readings(text: str, raw: Sequence[int] | None) -> bytes | list[list[bytes | None]]:
    """A token's bytes when they are certain; else its possible readings, most likely first,
    each a list of segments where None is a U+FFFD standing for unknown bytes."""
    if raw is not None:
        candidates = [bytes(raw)]
    elif "\\x" not in text and "\ufffd" not in text:
        return text.encode("utf-8", "surrogatepass")
    else:
        candidates = []
        if text.startswith("bytes:") and _ESCAPE_RE.search(text, 6):
            candidates.append(_unescape(text[6:]))
        elif _ESCAPE_RE.search(text):
            candidates.append(_unescape(text))
        # The literal reading comes last: an answer may really contain "\xc3" or "bytes:".
        candidates.append(text.encode("utf-8", "surrogatepass"))
    if len(candidates) == 1 and _FFFD not in candidates[0]:
        return candidates[0]
    options = []
    for data in candidates:
        parts = data.split(_FFFD)
        segments: list[bytes | None] = [parts[0]]
        for part in parts[1:]:
            segments += [None, part]
        options.append([seg for seg in segments if seg != b""])
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


def _join(target: bytes, pieces: list[bytes]) -> list[tuple[int, int]] | None:
    """Byte spans of the tokens if their joined bytes are the answer's, edge whitespace aside."""
    joined = b"".join(pieces)
    skip = 0
    if joined != target:
        try:
            text = joined.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return None
        body = text.lstrip()
        skip = len(joined) - len(body.encode("utf-8", "surrogatepass"))
        if body.rstrip().encode("utf-8", "surrogatepass") != target:
            return None
    offsets = list(accumulate(map(len, pieces), initial=0))
    if skip or offsets[-1] != len(target):
        # Tokens of edge whitespace get empty spans at the start or end of the answer.
        offsets = [min(max(p - skip, 0), len(target)) for p in offsets]
    return list(zip(offsets, offsets[1:], strict=False))


def _literal(target: bytes, seg: bytes, pos: int) -> int | None:
    """End position after matching ``seg`` at ``pos``, skipping edge whitespace."""
    if pos == 0:
        # target starts with non-whitespace, so leading whitespace cannot belong to it.
        seg = _LEADING_SPACE.sub(b"", seg, count=1)
    if target.startswith(seg, pos):
        return pos + len(seg)
    # The token may run past the stripped end of the answer with whitespace only.
    blanks = _TRAILING_SPACE_REVERSED.match(seg[::-1])
    head = seg[: len(seg) - blanks.end()] if blanks else seg
    if len(head) < len(seg) and pos + len(head) == len(target) and target.startswith(head, pos):
        return len(target)
    return None


def _unknown(target: bytes, p: int, last: bool) -> list[int]:
    """End positions of a U+FFFD at ``p`` read strictly (``_ends`` reads it loosely itself):
    it only ever stands for non-ASCII bytes."""
    if p >= len(target) or target[p] < 0x80:
        return []
    # Decoders write one U+FFFD per stray continuation byte, and one for a sequence cut
    # short by the end of the token (its lead byte and some of its continuation bytes).
    first = target[p]
    if first < 0xC0:
        return [p + 1]
    if not last:
        return []
    size = 2 if first < 0xE0 else 3 if first < 0xF0 else 4
    return [p + k for k in range(1, size) if p + k <= len(target)]


def _ends(
    target: bytes, option: list[bytes | None], pos: int, strict: bool, work: list[int]
) -> list[int] | None:
    """All end positions of one token reading starting at ``pos``, likeliest first; None once
    ``work`` (one unit a position a segment is tried at, spent from ``work[0]``) runs out."""
    positions = [pos]
    for index, seg in enumerate(option):
        work[0] -= len(positions)
        if work[0] < 0:
            return None
        following: list[int] = []
        for p in positions:
            if seg is not None:
                end = _literal(target, seg, p)
                if end is not None:
                    following.append(end)
                continue
            if target.startswith(_FFFD, p):
                following.append(p + 3)
            if strict:
                following += _unknown(target, p, index == len(option) - 1)
                continue
            # Read loosely, it stands for any 1-3 non-ASCII bytes (written out here, as this is
            # the inner loop of the fallback search).
            for q in range(p, min(p + 3, len(target))):
                if target[q] < 0x80:
                    break
                following.append(q + 1)
        positions = list(dict.fromkeys(following))
        if not positions:
            break
    return positions


def _edge_space(seg: bytes, leading: bool, trailing: bool) -> int:
    """Bytes of edge whitespace ``_literal`` may leave out of ``seg``: leading where it starts
    the answer, trailing where it ends it."""
    lead = _LEADING_SPACE.match(seg) if leading else None
    trail = _TRAILING_SPACE_REVERSED.match(seg[::-1]) if trailing else None
    return (lead.end() if lead else 0) + (trail.end() if trail else 0)


def _span_bounds(reading: bytes | list[list[bytes | None]]) -> tuple[int, int]:
    """The fewest and most bytes of the answer one token covers, over all its readings.

    A U+FFFD covers 1-3 bytes, strictly or loosely read; a literal all of its bytes, but the
    first may leave out leading and the last trailing whitespace (a reading's literals and
    U+FFFD alternate, and a U+FFFD never matches at the answer's end, so only these two can)."""
    if isinstance(reading, bytes):
        return max(len(reading) - _edge_space(reading, True, True), 0), len(reading)
    lows, highs = [], []
    for option in reading:
        literal = sum(len(seg) for seg in option if seg is not None)
        unknown = len(option) - sum(1 for seg in option if seg is not None)
        spare = 0
        if option and option[0] is not None:
            spare += _edge_space(option[0], True, len(option) == 1)
        if len(option) > 1 and option[-1] is not None:
            spare += _edge_space(option[-1], False, True)
        lows.append(max(literal - spare, 0) + unknown)
        highs.append(literal + 3 * unknown)
    return min(lows, default=0), max(highs, default=0)


def _match(
    target: bytes, options: list[bytes | list[list[bytes | None]]], strict: bool
) -> list[tuple[int, int]] | None:
    """Depth-first search for token byte spans covering ``target``.

    Usually the search runs straight through. The memo of dead (token, position) states and
    a step budget keep long ambiguous U+FFFD runs from costing more than milliseconds; past
    the budget the tokens count as unaligned. An explicit stack, as answers can have
    thousands of tokens.

    Within one step, a token's run of k U+FFFD can end at up to 2k + 1 places, each tried for
    the next one: k² work, a second per step for tokens of 1,000 U+FFFD. So the work is
    budgeted too, at 16 position checks a step on average (a token of four U+FFFD in a row,
    what a split character gives, takes 16): the search stays linear in the number of tokens,
    and results where it ran straight through do not change.

    A state whose remaining tokens cannot cover the rest of the answer, however each reads, is
    not searched (tokens that can each take 1-3 bytes too few would otherwise spend the whole
    budget before failing, or finding the reading where each takes more).
    """
    total = len(options)
    budget = 3 * total + 1000
    work = [16 * budget]
    # The fewest and most bytes tokens index.. can cover.
    spans = [_span_bounds(option) for option in reversed(options)]
    least = list(accumulate((low for low, _ in spans), initial=0))[::-1]
    most = list(accumulate((high for _, high in spans), initial=0))[::-1]
    dead: set[tuple[int, int]] = set()
    stack: list[tuple[int, int, list[int]]] = []
    index, pos = 0, 0
    while True:
        if index == total:
            if pos == len(target):
                starts = [frame[1] for frame in stack]
                return list(zip(starts, [*starts[1:], pos], strict=False))
        elif not least[index] <= len(target) - pos <= most[index]:
            stack.append((index, pos, []))
        elif (index, pos) not in dead:
            budget -= 1
            if budget < 0:
                return None
            reading = options[index]
            if isinstance(reading, bytes):
                end = _literal(target, reading, pos)
                candidates = [] if end is None else [end]
            else:
                candidates = []
                for option in reading:
                    ends = _ends(target, option, pos, strict, work)
                    if ends is None:
                        return None
                    candidates += ends
                candidates = list(dict.fromkeys(candidates))[::-1]
            stack.append((index, pos, candidates))
        # Take the next untried candidate, backing up past exhausted tokens.
        while stack and not stack[-1][2]:
            done_index, done_pos, _ = stack.pop()
            dead.add((done_index, done_pos))
        if not stack:
            return None
        index, pos = stack[-1][0] + 1, stack[-1][2].pop()


