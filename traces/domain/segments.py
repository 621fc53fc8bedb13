"""What a trace says of the answer's segments (issue 40): the prompt version and the metadata
keys a team may declare, from Treue's own attributes and OpenInference's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from traces.domain import conventions as c
from traces.domain.spans import SpanRecord


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def add_segments(
    payload: dict[str, Any], spans: Sequence[SpanRecord], completion: Mapping[str, Any] | None
) -> None:
    """Set the payload's `prompt_version` (the first span, root first, that names one; else the
    ChatCompletion's system_fingerprint) and its metadata from `treue.metadata.<key>`
    attributes (text, numbers, booleans; the root's value wins)."""
    version = next((v for s in spans for name in c.PROMPT_VERSIONS
                    if (v := _text(s.attributes.get(name)))), None)
    if version is None and completion is not None:
        version = _text(completion.get("system_fingerprint"))
    if version is not None and len(version) <= 100:
        payload["prompt_version"] = version
    for s in reversed(spans):  # the root's value wins
        for name, value in s.attributes.items():
            key = name[len(c.TREUE_METADATA):] if name.startswith(c.TREUE_METADATA) else ""
            if key and key != "otlp" and isinstance(value, str | int | float | bool):
                payload["metadata"][key] = value
