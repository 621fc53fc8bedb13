"""Splits an answer's text into plain and highlighted pieces for the pages."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    probability: float | None = None  # set for an uncertain word


def segments(text: str, uncertain: Iterable[Mapping[str, Any]]) -> list[Segment]:
    """Pieces of `text` in order; uncertain words (`position`..`end`) carry their probability.

    Spans that overlap, run backwards or fall outside the text are skipped rather than trusted:
    the text is always shown whole.
    """
    # Offsets are checked before sorting, so that one span with an offset that is not an
    # integer cannot make the sort (and with it the whole page) fail.
    spans: list[tuple[int, int, float]] = []
    for span in uncertain:
        start, end = span.get("position"), span.get("end")
        probability = span.get("probability", 0.0)
        if _is_int(start) and _is_int(end) and _is_number(probability):
            spans.append((start, end, float(probability)))
    out: list[Segment] = []
    cursor = 0
    for start, end, probability in sorted(spans, key=lambda s: s[0]):
        if start < cursor or end <= start or end > len(text):
            continue
        if start > cursor:
            out.append(Segment(text[cursor:start]))
        out.append(Segment(text[start:end], probability))
        cursor = end
    if cursor < len(text):
        out.append(Segment(text[cursor:]))
    return out


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
