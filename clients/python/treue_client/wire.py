"""What the client sends and reads on the wire: an answer as JSON, a batch's body, the batch
reply's per-answer results and a Retry-After header."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

CHUNK_FIELDS = ("text", "id", "score", "source")

# An answer ready to send: its external id and its JSON.
Item = tuple[Any, bytes]


def chunk_fields(chunk: Any) -> dict[str, Any]:
    if isinstance(chunk, str):
        return {"text": chunk}
    if isinstance(chunk, Mapping):
        return {k: chunk[k] for k in CHUNK_FIELDS if chunk.get(k) is not None}
    return {k: getattr(chunk, k) for k in CHUNK_FIELDS if getattr(chunk, k, None) is not None}


def logprobs_dict(logprobs: Any) -> Any:
    """OpenAI's choice.logprobs as a plain dict (from an SDK object, a dict or a token list)."""
    if hasattr(logprobs, "model_dump"):
        logprobs = logprobs.model_dump()
    if isinstance(logprobs, list):
        return {"content": logprobs}
    return logprobs


def encode(body: dict[str, Any]) -> bytes:
    """One answer as JSON; raises when it cannot be encoded (ValueError for a circular
    reference or NaN, RecursionError for deep nesting, UnicodeEncodeError for a lone surrogate,
    RuntimeError for a dict the caller changes meanwhile, or whatever a value's ``__str__``
    raises)."""
    # default=str: a value JSON has no type for (a datetime, a Decimal, a set) inside metadata
    # or messages becomes text rather than costing the answer. allow_nan=False: NaN and
    # Infinity are not JSON, and Treue refuses them.
    return json.dumps(body, default=str, ensure_ascii=False, allow_nan=False).encode()


def batch_body(items: list[Item]) -> bytes:
    return b'{"answers":[' + b",".join(data for _, data in items) + b"]}"


def batch_results(response: httpx.Response, n: int) -> list[tuple[int, Any] | None] | None:
    """(status, errors) of each of the batch's n answers (None for one the reply does not
    name), or None when the reply is not what Treue sends: it is read, not trusted."""
    try:
        results = response.json()["results"]
    except Exception:
        return None
    if not isinstance(results, list):
        return None
    by_index: list[tuple[int, Any] | None] = [None] * n
    for result in results:
        if not isinstance(result, dict):
            return None
        index, status = result.get("index"), result.get("status")
        if type(index) is not int or not 0 <= index < n or type(status) is not int:
            return None
        by_index[index] = (status, result.get("errors"))
    return by_index


def retry_after_seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare from Treue, the backoff applies instead
