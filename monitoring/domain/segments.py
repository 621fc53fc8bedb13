"""Segments (issue 40): the dimensions a use case's answers are broken down by, and their
values: the generator model, the sending service, the prompt version, the best-ranked chunk's
source, and up to MAX_DECLARED_KEYS metadata keys a team lead declares. Shared by ingest (the
metadata's bounds) and the dashboard (filters and breakdowns, dashboard/domain/segments.py).
Plain Python."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The dimensions every use case has; `metadata.<key>` adds one per declared key.
BUILT_IN = ("model", "service", "prompt_version", "source")
METADATA = "metadata."
MAX_DECLARED_KEYS = 10
# A declared key: letters, digits, _ and -, as a metadata key a team can type into a URL.
KEY_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# The longest segment value kept: longer metadata values are refused at ingest.
MAX_VALUE_CHARS = 200
# Bounds on the metadata object of one answer (issue 40, point 6).
MAX_METADATA_KEYS = 50
MAX_METADATA_KEY_CHARS = 100
# A segment filter's text: DIMENSION:VALUE, at most this long.
MAX_FILTER_CHARS = 300


class SegmentError(ValueError):
    """A dimension or segment filter that the use case does not have; names the allowed."""

    def __init__(self, message: str, allowed: Sequence[str]) -> None:
        super().__init__(message)
        self.message = message
        self.allowed = tuple(allowed)


def dimensions(declared: Sequence[str]) -> list[str]:
    """The dimensions of a use case with these declared metadata keys, in their order."""
    return [*BUILT_IN, *(METADATA + key for key in declared)]


def parse_dimension(text: str, declared: Sequence[str]) -> str:
    """A dimension's name as given (`model`, `metadata.kanal`); SegmentError otherwise."""
    allowed = dimensions(declared)
    if text not in allowed:
        raise SegmentError(
            f"unknown dimension {text[:80]!r}; allowed: {', '.join(allowed)}", allowed
        )
    return text


@dataclass(frozen=True, slots=True)
class Segment:
    dimension: str
    value: str

    @property
    def text(self) -> str:
        return f"{self.dimension}:{self.value}"


def parse_segment(text: str, declared: Sequence[str]) -> Segment:
    """`DIMENSION:VALUE` (the value may hold colons; the first one ends the dimension)."""
    allowed = dimensions(declared)
    if len(text) > MAX_FILTER_CHARS:
        raise SegmentError(f"a segment is at most {MAX_FILTER_CHARS} characters", allowed)
    dimension, colon, value = text.partition(":")
    if not colon:
        raise SegmentError(
            f"a segment is DIMENSION:VALUE, not {text[:80]!r}; dimensions: {', '.join(allowed)}",
            allowed,
        )
    parse_dimension(dimension, declared)
    if len(value) > MAX_VALUE_CHARS:
        raise SegmentError(f"a segment's value is at most {MAX_VALUE_CHARS} characters", allowed)
    return Segment(dimension, value)


def parse_segments(texts: Sequence[str], declared: Sequence[str]) -> list[Segment]:
    """Several filters: each at most once; two values of one dimension select either."""
    out: list[Segment] = []
    for text in texts:
        segment = parse_segment(text, declared)
        if segment not in out:
            out.append(segment)
    return out


def check_declared(keys: Sequence[Any]) -> list[str]:
    """The declared metadata keys, checked: a list of at most MAX_DECLARED_KEYS distinct keys
    of KEY_PATTERN. ValueError with the reason otherwise."""
    if not isinstance(keys, list | tuple):
        raise ValueError("the declared keys are a list")
    out: list[str] = []
    for key in keys:
        if not isinstance(key, str) or not KEY_PATTERN.match(key):
            raise ValueError(
                f"{str(key)[:80]!r} is not a key: 1-64 letters, digits, _ or -"
            )
        if key in out:
            raise ValueError(f"{key!r} is declared twice")
        out.append(key)
    if len(out) > MAX_DECLARED_KEYS:
        raise ValueError(f"at most {MAX_DECLARED_KEYS} keys")
    return out


def segment_value(value: Any) -> str | None:
    """A metadata value as its segment names it: text as given, numbers and booleans as JSON
    writes them; None for a value that is no segment (missing, null, an object or a list)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return value
    return None


def metadata_problems(metadata: Mapping[str, Any], declared: Sequence[str]) -> list[
        tuple[str, str]]:
    """(field, message) for each bound an answer's metadata breaks: the number of keys, a
    key's length, and a declared key's value (text, a number or a boolean, at most
    MAX_VALUE_CHARS characters)."""
    out: list[tuple[str, str]] = []
    if len(metadata) > MAX_METADATA_KEYS:
        out.append(("metadata", f"at most {MAX_METADATA_KEYS} keys, not {len(metadata)}"))
    for key in metadata:
        if len(key) > MAX_METADATA_KEY_CHARS:
            out.append(("metadata", f"a key is at most {MAX_METADATA_KEY_CHARS} characters"))
            break
    for key in declared:
        if key not in metadata or metadata[key] is None:
            continue
        value = metadata[key]
        text = segment_value(value)
        if text is None:
            out.append((f"metadata.{key}", "a declared key's value is text, a number or "
                                           "a boolean, not an object or a list"))
        elif len(text) > MAX_VALUE_CHARS:
            out.append((f"metadata.{key}", f"a declared key's value is at most "
                                           f"{MAX_VALUE_CHARS} characters"))
    return out


# An answer's fields its segments come from (`segment_values`).
SEGMENT_FIELDS = ("model", "service_id", "prompt_version", "source", "metadata")


def segment_values(fields: Mapping[str, Any], declared: Sequence[str]) -> tuple[
        tuple[str, str], ...]:
    """An answer's (dimension, value) in every dimension of a use case with these declared
    keys, sorted by dimension (the order the rollups' writers lock rows in). The value as its
    segment names it, "" where the answer has none; the service by its id (a name can change:
    the readers name it). A declared key's value that is no segment (an object, a list: stored
    before the key was declared) counts as none."""
    metadata = fields.get("metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    out = [
        *((dimension, built_in_value(fields.get(field))) for dimension, field in FIELDS.items()),
        *((METADATA + key, segment_value(metadata.get(key)) or "") for key in declared),
    ]
    return tuple(sorted(out))


# The answer's field of each built-in dimension.
FIELDS = {"model": "model", "service": "service_id", "prompt_version": "prompt_version",
          "source": "source"}


def built_in_value(raw: Any) -> str:
    """A built-in dimension's value as the rollups keep it: the text, the service's id as
    text, "" for none."""
    return "" if raw is None else str(raw)
