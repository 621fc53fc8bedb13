"""traces.decoding: bodies to span records, and what it refuses (no database)."""

import gzip
import json
from typing import Any

import pytest

from tests.traces.otlp import T0, request, span, to_json, trace_id
from traces import decoding
from traces.decoding import JSON, PROTOBUF


@pytest.mark.parametrize(
    ("content_type", "media"),
    [
        ("application/x-protobuf", PROTOBUF),
        ("Application/JSON; charset=utf-8", JSON),
        ("application/json", JSON),
    ],
)
def test_media_type(content_type: str, media: str) -> None:
    assert decoding.media_type(content_type) == media


@pytest.mark.parametrize("content_type", ["", "text/plain", "application/protobuf",
                                          "application/grpc+proto"])
def test_media_type_refused(content_type: str) -> None:
    with pytest.raises(decoding.UnsupportedMedia):
        decoding.media_type(content_type)


@pytest.mark.parametrize(("encoding", "gzipped"), [("", False), ("identity", False),
                                                   ("GZIP", True), (" gzip ", True)])
def test_encoding(encoding: str, gzipped: bool) -> None:
    assert decoding.check_encoding(encoding) is gzipped


@pytest.mark.parametrize("encoding", ["br", "deflate", "zstd", "gzip, br"])
def test_encoding_refused(encoding: str) -> None:
    with pytest.raises(decoding.UnsupportedMedia):
        decoding.check_encoding(encoding)


@pytest.mark.parametrize(("size", "limit", "fits"), [(100, 100, True), (101, 100, False),
                                                     (10**7, 10**5, False), (0, 0, True)])
def test_gunzip_limit(size: int, limit: int, fits: bool) -> None:
    body = gzip.compress(b"x" * size)
    if fits:
        assert decoding.gunzip(body, limit) == b"x" * size
    else:
        with pytest.raises(decoding.BodyTooLarge):
            decoding.gunzip(body, limit)


@pytest.mark.parametrize(
    "body", [b"not gzip", gzip.compress(b"x" * 1000, mtime=0)[:-12]], ids=["not-gzip", "cut"]
)
def test_gunzip_corrupt_or_cut(body: bytes) -> None:
    with pytest.raises(decoding.BodyInvalid):
        decoding.gunzip(body, 10**6)


ATTRIBUTES: dict[str, Any] = {
    "s": "text", "b": True, "i": -(2**63), "d": 0.5, "raw": b"\x00\x01",
    "arr": ["a", "b"], "kv": {"x": {"y": 1}},
    "docs": [{"document.content": "c0"}, {"document.content": "c1"}],
}


@pytest.mark.parametrize("media", [PROTOBUF, JSON])
def test_both_encodings_give_the_same_records(media: str) -> None:
    trace = trace_id(0xFEED)
    message = request([
        span(trace, 1, name="root", attrs=ATTRIBUTES, start=0, end=5),
        span(trace, 2, parent=1, name="child", flags=0x100 | 0x200),
        span(trace, 3, parent=1, flags=0x100),
    ], resource={"treue.use_case": "kundenservice"})
    body = message.SerializeToString() if media == PROTOBUF else to_json(message)
    decoded = decoding.decode(body, media)
    assert decoded.rejected == {}
    root, child, local = decoded.spans
    assert (root.trace_id, root.span_id, root.parent_span_id) == (trace, f"{1:016x}", "")
    assert child.parent_span_id == f"{1:016x}"
    assert (root.parent_is_remote, child.parent_is_remote, local.parent_is_remote) == (
        None, True, False
    )
    assert (root.start_ns, root.end_ns, root.kind) == (T0, T0 + 5_000_000, 1)
    assert root.attributes == {
        "s": "text", "b": True, "i": -(2**63), "d": 0.5, "raw": b"\x00\x01",
        "arr": ["a", "b"], "kv.x.y": 1,
        "docs.0.document.content": "c0", "docs.1.document.content": "c1",
    }
    assert root.resource == {"service.name": "rag-bot", "treue.use_case": "kundenservice"}
    assert root.scope_name == "tests"


def test_json_enum_names_and_snake_case_keys() -> None:
    body = json.dumps({"resource_spans": [{"scope_spans": [{"spans": [{
        "trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331",
        "kind": "SPAN_KIND_CLIENT", "start_time_unix_nano": 5,
    }]}]}]}).encode()
    [record] = decoding.decode(body, JSON).spans
    assert (record.span_id, record.kind, record.start_ns) == ("b7ad6b7169203331", 3, 5)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"trace_id": b"\x00" * 16}, "trace id"),
        ({"trace_id": b"\x01" * 15}, "trace id"),
        ({"span_id": b""}, "span id"),
        ({"span_id": b"\x01" * 9}, "span id"),
        ({"parent_span_id": b"\x01" * 3}, "parent span id"),
    ],
)
def test_bad_ids_reject_the_span(change: dict[str, bytes], reason: str) -> None:
    good = span(trace_id(1), 1)
    bad = span(trace_id(1), 2)
    for name, value in change.items():
        setattr(bad, name, value)
    decoded = decoding.decode(request([good, bad]).SerializeToString(), PROTOBUF)
    assert [s.span_id for s in decoded.spans] == [f"{1:016x}"]
    [(message, count)] = decoded.rejected.items()
    assert reason in message and count == 1


@pytest.mark.parametrize(
    ("attrs", "resource", "reason"),
    [
        ({"x": "a\x00b"}, {}, "NUL"),
        ({"x\x00": "a"}, {}, "NUL"),
        ({"x": ["ok", "a\x00"]}, {}, "NUL"),
        ({"x": float("nan")}, {}, "NaN"),
        ({"x": [1.0, float("inf")]}, {}, "NaN"),
        ({}, {"host": "a\x00"}, "NUL"),
    ],
)
def test_unstorable_attributes_reject_the_span(
    attrs: dict[str, Any], resource: dict[str, Any], reason: str
) -> None:
    message = request([span(trace_id(1), 1, attrs=attrs)], resource=resource)
    decoded = decoding.decode(message.SerializeToString(), PROTOBUF)
    assert decoded.spans == []
    assert reason in next(iter(decoded.rejected))


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, written by hand."""
    size, varint = len(payload), b""
    while True:
        byte, size = size & 0x7F, size >> 7
        varint += bytes([byte | (0x80 if size else 0)])
        if not size:
            break
    return bytes([number << 3 | 2]) + varint + payload


def _nested_body(levels: int) -> bytes:
    value = _field(1, b"leaf")  # AnyValue.string_value
    for _ in range(levels):  # AnyValue.kvlist_value(6) -> KeyValueList.values(1) -> KeyValue
        value = _field(6, _field(1, _field(1, b"k") + _field(2, value)))
    attribute = _field(1, b"deep") + _field(2, value)
    s = span(trace_id(1), 1)
    span_bytes = s.SerializeToString() + _field(9, attribute)  # Span.attributes
    return _field(1, _field(2, _field(2, span_bytes)))  # resource_spans.scope_spans.spans


def test_nested_values_are_flattened() -> None:
    [record] = decoding.decode(_nested_body(20), PROTOBUF).spans
    assert record.attributes["deep" + ".k" * 20] == "leaf"


def test_nesting_beyond_the_parsers_limit_is_a_bad_body() -> None:
    with pytest.raises(decoding.BodyInvalid):
        decoding.decode(_nested_body(200), PROTOBUF)


# --- bounds: gzip members, spans, values ------------------------------------------------------

def test_gunzip_reads_every_member() -> None:
    # RFC 1952: a gzip stream is a series of members; `cat a.gz b.gz` is a.gz's and b.gz's data.
    assert decoding.gunzip(gzip.compress(b"first ") + gzip.compress(b"second"), 100) == (
        b"first second"
    )


def test_gunzip_members_count_together_toward_the_limit() -> None:
    with pytest.raises(decoding.BodyTooLarge):
        decoding.gunzip(gzip.compress(b"x" * 60) + gzip.compress(b"y" * 60), 100)


@pytest.mark.parametrize(
    "body",
    [
        gzip.compress(b"x") * (decoding.MAX_GZIP_MEMBERS + 1),
        gzip.compress(b"x") + b"trailing garbage",
        gzip.compress(b"x") + gzip.compress(b"x")[:-4],
    ],
    ids=["too-many-members", "garbage-after-a-member", "second-member-cut"],
)
def test_gunzip_refuses_what_follows_a_member_unless_it_is_one(body: bytes) -> None:
    with pytest.raises(decoding.BodyInvalid):
        decoding.gunzip(body, 10**6)


def test_gunzip_reads_as_many_members_as_allowed() -> None:
    body = gzip.compress(b"x") * decoding.MAX_GZIP_MEMBERS
    assert decoding.gunzip(body, 10**6) == b"x" * decoding.MAX_GZIP_MEMBERS


def _single_span_traces(n: int) -> list[Any]:
    return [span(trace_id(i + 1), 1) for i in range(n)]


@pytest.mark.parametrize("media", [PROTOBUF, JSON])
def test_spans_up_to_the_limit_are_read(media: str) -> None:
    message = request(_single_span_traces(decoding.MAX_SPANS))
    body = message.SerializeToString() if media == PROTOBUF else to_json(message)
    assert len(decoding.decode(body, media).spans) == decoding.MAX_SPANS


def test_more_spans_than_the_limit_are_too_much() -> None:
    body = request(_single_span_traces(decoding.MAX_SPANS + 1)).SerializeToString()
    with pytest.raises(decoding.TooMuch, match=f"{decoding.MAX_SPANS + 1} spans"):
        decoding.decode(body, PROTOBUF)


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        (b"\x0a\x00", "resource spans"),  # an empty ResourceSpans, 2 bytes
        (b"\x12\x00", "scope spans"),  # an empty ScopeSpans, inside one ResourceSpans below
    ],
    ids=["resource-spans", "scope-spans"],
)
def test_empty_groups_beyond_the_limit_are_too_much(entry: bytes, words: str) -> None:
    # Millions of empty groups fit in a body; each costs a step and carries nothing.
    entries = entry * (decoding.MAX_SPANS + 1)
    body = entries if words == "resource spans" else _field(1, entries)
    with pytest.raises(decoding.TooMuch, match=words):
        decoding.decode(body, PROTOBUF)


@pytest.mark.parametrize("nested", [False, True], ids=["attributes", "array-values"])
def test_more_attribute_values_than_the_limit_are_too_much(nested: bool) -> None:
    # One span, a single attribute of a million tiny values or a million tiny attributes:
    # the span limit does not bound them, the value limit does.
    n = decoding.MAX_VALUES + 1
    s = span(trace_id(1), 1)
    tiny = b"\x0a\x00"  # an empty AnyValue
    if nested:
        array = _field(5, tiny * n)  # AnyValue.array_value -> ArrayValue.values
        extra = _field(9, _field(1, b"a") + _field(2, array))
    else:
        extra = _field(9, _field(1, b"a")) * n  # Span.attributes: KeyValue{key: "a"}
    body = _field(1, _field(2, _field(2, s.SerializeToString() + extra)))
    with pytest.raises(decoding.TooMuch, match="attribute values"):
        decoding.decode(body, PROTOBUF)


def test_values_up_to_the_limit_are_read() -> None:
    n = decoding.MAX_VALUES - 1  # and the attribute holding them
    array = _field(5, b"\x0a\x00" * n)
    extra = _field(9, _field(1, b"a") + _field(2, array))
    body = _field(1, _field(2, _field(2, span(trace_id(1), 1).SerializeToString() + extra)))
    [record] = decoding.decode(body, PROTOBUF).spans
    assert len(record.attributes["a"]) == n


def test_json_with_more_values_than_the_limit_is_too_much() -> None:
    # A JSON array of tiny values in one attribute: protobuf's JSON parser would read each.
    values = b",".join([b"{}"] * decoding.MAX_JSON_VALUES)
    body = (
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "' + trace_id(1).encode()
        + b'", "spanId": "0000000000000001", "attributes": [{"key": "a", "value": '
        b'{"arrayValue": {"values": [' + values + b"]}}}]}]}]}]}"
    )
    with pytest.raises(decoding.TooMuch, match="JSON values"):
        decoding.decode(body, JSON)
