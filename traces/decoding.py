"""An OTLP/HTTP trace export's body to span records: gzip, protobuf or JSON, the per-span checks.

The JSON encoding is protobuf's JSON mapping with OTLP's deviations (opentelemetry-proto,
docs/specification.md): trace and span ids are hex, not base64; enum values may be integers
(names are accepted as well); unknown fields are ignored. The ids are rewritten to base64 and
the rest parsed by protobuf's own json_format, so that both encodings go through one mapping
from the message to records.

No Django here: bytes and a content type in, records or a named error out.
"""

import base64
import math
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2

from traces.domain.spans import MAX_DEPTH, SpanRecord, Value, flatten

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
MEDIA_TYPES = (PROTOBUF, JSON)

# W3C trace flags: bit 8 says whether the exporter knows if the parent is remote, bit 9 says it
# is (opentelemetry-proto trace.proto, SpanFlags).
CONTEXT_HAS_IS_REMOTE = 0x100
CONTEXT_IS_REMOTE = 0x200
ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")

# What one request may hold (413 above; docs/api.md, "OpenTelemetry", bench/otlp.py). An SDK's batch
# span processor exports at most 512 spans a request, the Collector's batch processor 8,192 by
# default: twice that passes. Decoding and holding a span costs about 0.1 ms of web CPU, so the
# largest request costs a few seconds, well inside gunicorn's timeout.
MAX_SPANS = 20_000
# Attribute values (of spans and resources, each nested value counted): 4 µs each to decode,
# 50 a span for 20,000 RAG spans. Bounds a body of many tiny attributes (a 64 MiB body holds ten
# million), which the span limit does not.
MAX_VALUES = 1_000_000
# Values (objects, arrays, strings, numbers) of an OTLP/JSON body, which protobuf's JSON parser
# reads at about 10 µs each: 5 s at most. A single-span trace holds 12, a RAG span with 50
# attributes 200 (an SDK's batch of 512 such spans 100,000).
MAX_JSON_VALUES = 500_000
# gzip members of one body: concatenated members are one stream (RFC 1952), so all are read; an
# exporter writes one, and each costs a decompressor.
MAX_GZIP_MEMBERS = 100


class BodyInvalid(Exception):
    """Not a decodable export request (400)."""


class BodyTooLarge(Exception):
    """Larger than the limit, compressed or not (413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is larger than {limit} bytes")


class TooMuch(Exception):
    """More spans, attribute values or JSON values than one request may hold (413): the exporter
    should send smaller batches."""


class UnsupportedMedia(Exception):
    """A content type or content encoding the receiver does not read (415)."""


@dataclass
class Decoded:
    """The request's spans, and the reasons of those refused one by one (a count per reason)."""

    spans: list[SpanRecord] = field(default_factory=list)
    rejected: dict[str, int] = field(default_factory=dict)

    def reject(self, reason: str, count: int = 1) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + count


def media_type(content_type: str) -> str:
    """The request's encoding from its Content-Type (parameters dropped)."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media not in MEDIA_TYPES:
        raise UnsupportedMedia(
            f"Content-Type {media or '(none)'!r} is not read here; send {PROTOBUF} or {JSON}"
        )
    return media


def check_encoding(content_encoding: str) -> bool:
    """Whether the body is gzip-compressed; any encoding but gzip and identity is refused."""
    encoding = content_encoding.strip().lower()
    if encoding in ("", "identity"):
        return False
    if encoding == "gzip":
        return True
    raise UnsupportedMedia(f"Content-Encoding {encoding!r} is not read here; send gzip or none")


def gunzip(body: bytes, limit: int) -> bytes:
    """The decompressed body, every member of it (RFC 1952: a gzip stream is a series of
    members), never more than `limit` bytes (a small body can unpack to gigabytes)."""
    out = bytearray()
    rest = body
    for _ in range(MAX_GZIP_MEMBERS):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            part = inflater.decompress(rest, limit - len(out) + 1)
            if len(out) + len(part) > limit or inflater.unconsumed_tail:
                raise BodyTooLarge(limit)
            part += inflater.flush()
        except zlib.error as e:
            raise BodyInvalid(f"the body is not valid gzip: {e}") from e
        out += part
        if len(out) > limit:
            raise BodyTooLarge(limit)
        if not inflater.eof:
            raise BodyInvalid("the gzip body ends early")
        rest = inflater.unused_data
        if not rest:
            return bytes(out)
    raise BodyInvalid(f"the gzip body has more than {MAX_GZIP_MEMBERS} members")


def decode(body: bytes, media: str) -> Decoded:
    """The spans of an ExportTraceServiceRequest in either encoding."""
    message = trace_service_pb2.ExportTraceServiceRequest()
    if media == PROTOBUF:
        try:
            message.ParseFromString(body)
        except (DecodeError, RecursionError) as e:
            raise BodyInvalid(f"the body is not an OTLP ExportTraceServiceRequest: {e}") from e
    else:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise BodyInvalid(f"the body is not JSON: {e}") from e
        if not isinstance(data, dict):
            raise BodyInvalid("the body must be a JSON object (an ExportTraceServiceRequest)")
        _count_json_values(data)
        _hex_ids_to_base64(data)
        try:
            json_format.ParseDict(data, message, ignore_unknown_fields=True)
        except (json_format.ParseError, ValueError, TypeError, RecursionError) as e:
            raise BodyInvalid(f"the body is not an OTLP ExportTraceServiceRequest: {e}") from e
    return records(message)


def records(message: trace_service_pb2.ExportTraceServiceRequest) -> Decoded:
    """The message's spans as records; TooMuch before the work when it holds more spans (or
    groups of them) than MAX_SPANS, or more attribute values than MAX_VALUES."""
    _count_spans(message)
    budget = _Budget()
    decoded = Decoded()
    for resource_spans in message.resource_spans:
        resource: dict[str, Any] | None = None
        resource_problem: str | None = None
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if resource is None:  # once a resource, and only one that has spans
                    resource = flatten(_attributes(resource_spans.resource.attributes, budget))
                    resource_problem = _unstorable(resource)
                reason = _id_problem(span.trace_id, span.span_id, span.parent_span_id)
                attributes = flatten(_attributes(span.attributes, budget))
                if reason is None:
                    reason = _unstorable(attributes) or resource_problem
                if reason is not None:
                    decoded.reject(reason)
                    continue
                remote = None
                if span.flags & CONTEXT_HAS_IS_REMOTE:
                    remote = bool(span.flags & CONTEXT_IS_REMOTE)
                decoded.spans.append(SpanRecord(
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(),
                    parent_is_remote=remote,
                    name=span.name,
                    kind=span.kind,
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    status_code=span.status.code,
                    attributes=attributes,
                    resource=resource,
                    scope_name=scope_spans.scope.name,
                ))
    return decoded


def _count_spans(message: trace_service_pb2.ExportTraceServiceRequest) -> None:
    """TooMuch when the request holds more than MAX_SPANS spans, or groups of them (an empty
    group costs a step and carries nothing); counted by lengths, not by looking at each."""
    groups = message.resource_spans
    if len(groups) > MAX_SPANS:
        raise TooMuch(f"the request has more than {MAX_SPANS} resource spans")
    if sum(len(r.scope_spans) for r in groups) > MAX_SPANS:
        raise TooMuch(f"the request has more than {MAX_SPANS} scope spans")
    spans = sum(len(s.spans) for r in groups for s in r.scope_spans)
    if spans > MAX_SPANS:
        raise TooMuch(f"the request has {spans} spans, at most {MAX_SPANS} are read a request: "
                      "export smaller batches")


class _Budget:
    """The attribute values a request may still hold."""

    def __init__(self) -> None:
        self.left = MAX_VALUES

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise TooMuch(f"the request has more than {MAX_VALUES} attribute values: export "
                          "smaller batches")


def _id_problem(trace_id: bytes, span_id: bytes, parent_span_id: bytes) -> str | None:
    if len(trace_id) != 16 or not any(trace_id):
        return "trace id is not 16 bytes or is all zero"
    if len(span_id) != 8 or not any(span_id):
        return "span id is not 8 bytes or is all zero"
    if parent_span_id and len(parent_span_id) != 8:
        return "parent span id is not 8 bytes"
    return None


def _unstorable(attributes: dict[str, Any]) -> str | None:
    """Why the attributes cannot be stored as they are (PostgreSQL's jsonb takes no NUL and no
    NaN), or None. The span is refused rather than changed."""
    for name, value in attributes.items():
        for text in (name, *_strings(value)):
            if "\x00" in text:
                return "an attribute contains NUL characters"
        if isinstance(value, float) and not math.isfinite(value):
            return "an attribute is NaN or infinite"
        if isinstance(value, list) and any(
            isinstance(v, float) and not math.isfinite(v) for v in value
        ):
            return "an attribute is NaN or infinite"
    return None


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        yield from (v for v in value if isinstance(v, str))


def _attributes(pairs: Sequence[common_pb2.KeyValue], budget: _Budget) -> list[tuple[str, Value]]:
    budget.take(len(pairs))
    return [(kv.key, _value(kv.value, 0, budget)) for kv in pairs]


def _value(value: common_pb2.AnyValue, depth: int, budget: _Budget) -> Value:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bytes_value":
        return value.bytes_value
    if depth >= MAX_DEPTH:
        return None
    if kind == "array_value":
        budget.take(len(value.array_value.values))
        return [_value(v, depth + 1, budget) for v in value.array_value.values]
    if kind == "kvlist_value":
        budget.take(len(value.kvlist_value.values))
        return {kv.key: _value(kv.value, depth + 1, budget) for kv in value.kvlist_value.values}
    return None


def _count_json_values(data: dict[str, Any]) -> None:
    """TooMuch when the document holds more than MAX_JSON_VALUES values (before protobuf's
    JSON parser reads them); stops counting there."""
    left = MAX_JSON_VALUES
    stack: list[Any] = [data]
    while stack:
        node = stack.pop()
        children = list(node.values()) if isinstance(node, dict) else node
        left -= len(children)
        if left < 0:
            raise TooMuch(f"the request has more than {MAX_JSON_VALUES} JSON values: export "
                          "smaller batches")
        stack.extend(c for c in children if isinstance(c, dict | list))


def _hex_ids_to_base64(data: dict[str, Any]) -> None:
    """OTLP/JSON writes ids as hex; protobuf's JSON mapping reads bytes as base64."""
    for resource_spans in _list(data, "resourceSpans", "resource_spans"):
        for scope_spans in _list(resource_spans, "scopeSpans", "scope_spans"):
            for span in _list(scope_spans, "spans"):
                _rewrite(span)
                for link in _list(span, "links"):
                    _rewrite(link)


def _list(parent: Any, *names: str) -> list[Any]:
    if not isinstance(parent, dict):
        return []
    for name in names:
        value = parent.get(name)
        if isinstance(value, list):
            return value
    return []


def _rewrite(item: Any) -> None:
    if not isinstance(item, dict):
        return
    for name in ID_FIELDS:
        value = item.get(name)
        if isinstance(value, str):
            try:
                item[name] = base64.b64encode(bytes.fromhex(value)).decode()
            except ValueError as e:
                raise BodyInvalid(f"{name} {value[:40]!r} is not hex") from e


