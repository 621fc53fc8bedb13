"""Building OTLP export requests for the tests: spans from plain values, a RAG trace as
OpenInference's instrumentors write it, and the two encodings (protobuf, and OTLP/JSON with hex
ids as the specification's JSON exporters write them)."""

import base64
import gzip
import json
from typing import Any

import orjson
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

URL = "/api/v1/otlp/v1/traces"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
T0 = 1_764_900_000_000_000_000  # 2025-12-05, in Unix nanoseconds
MS = 1_000_000

QUESTION = "Wie oft muss der Behälter geprüft werden?"
ANSWER = "Der Behälter muss alle 5 Jahre geprüft werden."
ANSWER_TOKENS = [
    "Der", " Beh", "älter", " muss", " alle", " 5", " Jahre", " geprüft", " werden", ".",
]
CHUNKS = [
    ("Prüfintervall: 5 Jahre für Behälter über 1.000 Liter.", "doc-7#3", 0.82),
    ("Kleine Behälter werden jährlich geprüft.", "doc-9#1", 0.61),
]


def trace_id(n: int) -> str:
    return f"{n:032x}"


def any_value(value: Any) -> common_pb2.AnyValue:
    if isinstance(value, bool):
        return common_pb2.AnyValue(bool_value=value)
    if isinstance(value, int):
        return common_pb2.AnyValue(int_value=value)
    if isinstance(value, float):
        return common_pb2.AnyValue(double_value=value)
    if isinstance(value, bytes):
        return common_pb2.AnyValue(bytes_value=value)
    if isinstance(value, list):
        return common_pb2.AnyValue(
            array_value=common_pb2.ArrayValue(values=[any_value(v) for v in value])
        )
    if isinstance(value, dict):
        return common_pb2.AnyValue(kvlist_value=common_pb2.KeyValueList(values=attributes(value)))
    return common_pb2.AnyValue(string_value=value)


def attributes(values: dict[str, Any]) -> list[common_pb2.KeyValue]:
    return [common_pb2.KeyValue(key=k, value=any_value(v)) for k, v in values.items()]


def span(
    trace: str, span_id: int, *, parent: int | None = None, name: str = "span",
    attrs: dict[str, Any] | None = None, start: int = 0, end: int = 1, flags: int = 0,
) -> trace_pb2.Span:
    return trace_pb2.Span(
        trace_id=bytes.fromhex(trace),
        span_id=span_id.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big") if parent else b"",
        name=name,
        kind=trace_pb2.Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=T0 + start * MS,
        end_time_unix_nano=T0 + end * MS,
        attributes=attributes(attrs or {}),
        flags=flags,
    )


def request(
    spans: list[trace_pb2.Span], resource: dict[str, Any] | None = None
) -> trace_service_pb2.ExportTraceServiceRequest:
    from opentelemetry.proto.resource.v1 import resource_pb2

    return trace_service_pb2.ExportTraceServiceRequest(resource_spans=[
        trace_pb2.ResourceSpans(
            resource=resource_pb2.Resource(
                attributes=attributes({"service.name": "rag-bot", **(resource or {})})
            ),
            scope_spans=[trace_pb2.ScopeSpans(
                scope=common_pb2.InstrumentationScope(name="tests"), spans=spans,
            )],
        )
    ])


def to_json(message: trace_service_pb2.ExportTraceServiceRequest) -> bytes:
    """OTLP/JSON: protobuf's JSON mapping with the ids in hex."""
    data = json_format.MessageToDict(message)
    for resource_spans in data.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for s in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in s:
                        s[key] = base64.b64decode(s[key]).hex()
    return orjson.dumps(data)


def logprobs(tokens: list[str] = ANSWER_TOKENS, value: float = -0.01) -> dict[str, Any]:
    return {"content": [{"token": t, "logprob": value, "bytes": list(t.encode()),
                         "top_logprobs": []} for t in tokens]}


def rag_spans(
    trace: str, *, root_attrs: dict[str, Any] | None = None,
    llm_attrs: dict[str, Any] | None = None, with_root: bool = True,
    with_retriever: bool = True, with_llm: bool = True,
) -> list[trace_pb2.Span]:
    """A RAG answer as OpenInference writes it: a CHAIN root, a RETRIEVER and an LLM span."""
    spans = []
    if with_root:
        spans.append(span(trace, 1, name="rag", start=0, end=100, attrs={
            "openinference.span.kind": "CHAIN",
            "input.value": QUESTION,
            "output.value": ANSWER,
            **(root_attrs or {}),
        }))
    if with_retriever:
        documents: dict[str, Any] = {"openinference.span.kind": "RETRIEVER",
                                     "input.value": QUESTION}
        for i, (text, doc_id, score) in enumerate(CHUNKS):
            documents[f"retrieval.documents.{i}.document.content"] = text
            documents[f"retrieval.documents.{i}.document.id"] = doc_id
            documents[f"retrieval.documents.{i}.document.score"] = score
            documents[f"retrieval.documents.{i}.document.metadata"] = json.dumps(
                {"source": "Prüfordnung.pdf"}
            )
        spans.append(span(trace, 2, parent=1, name="retrieve", start=1, end=10, attrs=documents))
    if with_llm:
        spans.append(span(trace, 3, parent=1, name="ChatCompletion", start=11, end=90, attrs={
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini-2024-07-18",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "Antworte aus den Dokumenten.",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": QUESTION,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": ANSWER,
            "llm.token_count.prompt": 120,
            "llm.token_count.completion": 12,
            "llm.token_count.total": 132,
            **(llm_attrs or {}),
        }))
    return spans


def gzipped(body: bytes) -> bytes:
    return gzip.compress(body)
