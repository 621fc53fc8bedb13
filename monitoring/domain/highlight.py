"""Splits an answer's text into plain and highlighted pieces for the pages."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    probability: float | None = None  # set for an uncertain word


def segments(text: str, uncertain: Iterable[Mapping[str, Any]]) -> list[Segment]:
    """Pieces of `text` in order; uncertain words (`position`..`end`) carry their probability.

    Spans that overlap, run backwards or fall outside the text are skipped rather than trusted:
    the text is always shown whole.
    """
    out: list[Segment] = []
    cursor = 0
    for span in sorted(uncertain, key=lambda s: s.get("position", 0)):
        start, end = span.get("position"), span.get("end")
        if not isinstance(start, int) or not isinstance(end, int):
            continue
        if start < cursor or end <= start or end > len(text):
            continue
        if start > cursor:
            out.append(Segment(text[cursor:start]))
        out.append(Segment(text[start:end], float(span.get("probability", 0.0))))
        cursor = end
    if cursor < len(text):
        out.append(Segment(text[cursor:]))
    return out
