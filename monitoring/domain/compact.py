"""The compact copy of an answer's tokens as stored bytes: what tier 1 keeps of the
log-probabilities, so that the threshold tuner and a changed threshold can read them again."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

# The compact copy is stored as MessagePack: PostgreSQL stores the bytes as they are, where
# a JSON document of some thousand numbers cost it more to parse than the rest of the answer's
# row (jsonb turns each float into a numeric), and floats keep every bit.
_PACK = msgspec.msgpack.Encoder()


_UNPACK = msgspec.msgpack.Decoder()


def pack_compact(compact: Mapping[str, Any]) -> bytes:
    """The compact copy as stored bytes (MessagePack, a map: never starts with "{")."""
    try:
        return _PACK.encode(compact)
    except (TypeError, OverflowError, UnicodeEncodeError):
        # What MessagePack cannot hold (a lone surrogate in a token, an integer beyond 64
        # bits) is kept as JSON text, which unpack_compact reads as well.
        return json.dumps(compact).encode()


def unpack_compact(data: bytes | bytearray | memoryview | str) -> dict[str, Any]:
    """The compact copy from its stored bytes: MessagePack, or JSON text (what rows stored
    before December 2026 hold, and what pack_compact falls back to)."""
    compact: dict[str, Any]  # what pack_compact wrote: a map with string keys
    if isinstance(data, str):
        compact = json.loads(data)
    elif (raw := bytes(data))[:1] == b"{":
        compact = json.loads(raw)
    else:
        compact = _UNPACK.decode(raw)
    return compact
