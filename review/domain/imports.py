"""Expert scores from elsewhere, one JSON object a line: the parsing and checking of each line.

`python manage.py import_expert_labels FILE --use-case SLUG --reviewer USER` reads a JSONL file
of `{"external_id": …, "score": 0..1}` (a score for the whole answer, e.g. from an annotation
tool) or `{"external_id": …, "labels": ["GEDECKT", …]}` (one label per claim of the judge's
decomposition, in its order). This module only reads the lines: it says, for each, either what
it asks to import or why it cannot be read, with the line number. What the line refers to (the
answer, its claims) is checked against the database by `review.imports`.

Plain Python on purpose: no django.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

LABELS = ("GEDECKT", "TEILWEISE", "UNGEDECKT")
MAX_EXTERNAL_ID = 200  # as the ingest API
# A line holds one id and a few labels; anything much longer is not such a line, and parsing it
# would only cost time (json.loads is linear, but a megabyte of labels is no expert's work).
MAX_LINE_CHARS = 100_000
MAX_LABELS = 1_000
# What a line of MAX_LINE_CHARS can take in UTF-8 (up to 4 bytes a character), and the most of
# any line that is ever held in memory: a 150 MB line took 506 MB before it was refused.
MAX_LINE_BYTES = 4 * MAX_LINE_CHARS + 2  # and "\r\n"


@dataclass(frozen=True, slots=True)
class OverlongLine:
    """A line longer than MAX_LINE_BYTES, of which nothing was kept."""


def read_lines(stream: BinaryIO, max_bytes: int = MAX_LINE_BYTES) -> Iterator[bytes | OverlongLine]:
    """The lines of ``stream``, each read with a limit: a line over ``max_bytes`` is an
    OverlongLine, its rest read past in pieces of ``max_bytes``, so memory stays bounded by
    the limit whatever the file holds."""
    while True:
        line = stream.readline(max_bytes + 1)
        if not line:
            return
        if len(line) <= max_bytes or line.endswith(b"\n"):
            yield line  # whole: at most max_bytes, or max_bytes and its newline
            continue
        while line and not line.endswith(b"\n"):
            line = stream.readline(max_bytes)
        yield OverlongLine()


@dataclass(frozen=True, slots=True)
class LabelLine:
    """A readable line: a score for the whole answer, or one label per judge claim."""

    line: int
    external_id: str
    score: float | None = None
    labels: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class LineError:
    line: int
    message: str
    external_id: str | None = None


def parse_lines(lines: Iterable[str | bytes | OverlongLine]) -> Iterator[LabelLine | LineError]:
    """Each non-blank line as a LabelLine or a LineError, numbered from 1 as an editor shows.

    Lines as read from a file (bytes) are decoded one by one as UTF-8: a line that is not
    (a Latin-1 export) is reported as such, and the rest of the file is read. A byte order mark
    before the first line, as some editors on Windows write, is not part of it.
    """
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, OverlongLine):
            yield LineError(number, f"line longer than {MAX_LINE_CHARS} characters")
            continue
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield LineError(number, f"not UTF-8: byte 0x{raw[e.start]:02x} at position "
                                        f"{e.start + 1} (save the file as UTF-8)")
                continue
        if number == 1:
            raw = raw.removeprefix("\ufeff")
        text = raw.strip()
        if not text:
            continue
        yield parse_line(text, number)


def parse_line(text: str, number: int) -> LabelLine | LineError:
    if len(text) > MAX_LINE_CHARS:
        return LineError(number, f"line longer than {MAX_LINE_CHARS} characters")
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        return LineError(number, f"not valid JSON: {_reason(e)}")
    if not isinstance(data, dict):
        return LineError(number, "expected a JSON object")
    external_id = data.get("external_id")
    if not isinstance(external_id, str) or not external_id.strip():
        return LineError(number, "external_id: a non-empty string is required")
    if len(external_id) > MAX_EXTERNAL_ID:
        return LineError(number, f"external_id: longer than {MAX_EXTERNAL_ID} characters")
    if "\x00" in external_id or any("\ud800" <= c <= "\udfff" for c in external_id):
        # As the ingest API: no stored id has one, and the database refuses to compare them.
        return LineError(number, "external_id: contains a NUL character or an unpaired "
                                 "surrogate")
    unknown = sorted(set(data) - {"external_id", "score", "labels"})
    if unknown:
        return LineError(number, f"unknown field {unknown[0]!r}", external_id)
    has_score, has_labels = "score" in data, "labels" in data
    if has_score == has_labels:
        return LineError(number, "give either score or labels, not both or neither", external_id)
    if has_score:
        score = data["score"]
        if isinstance(score, bool) or not isinstance(score, int | float):
            return LineError(number, "score: a number from 0 to 1 is required", external_id)
        if not math.isfinite(score) or not 0 <= score <= 1:
            return LineError(number, f"score: {score} is not between 0 and 1", external_id)
        return LabelLine(number, external_id, score=float(score))
    labels = data["labels"]
    if not isinstance(labels, list) or len(labels) > MAX_LABELS:
        return LineError(number, "labels: a list of GEDECKT, TEILWEISE, UNGEDECKT is required",
                         external_id)
    words = []
    for position, label in enumerate(labels, start=1):
        word = label.strip().upper() if isinstance(label, str) else None
        if word not in LABELS:
            shown = label if isinstance(label, str) else json.dumps(label)
            return LineError(
                number, f"labels[{position}]: {shown[:40]!r} is not one of {', '.join(LABELS)}",
                external_id,
            )
        words.append(word)
    return LabelLine(number, external_id, labels=tuple(words))


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _reason(error: Exception) -> str:
    if isinstance(error, RecursionError):
        return "nested too deeply"
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at column {error.colno}"
    return str(error)
