"""A span as a plain record, the flattening of nested attribute values into the dotted names the
conventions use, and the rules of which spans matter: the root, the relevant, the skeleton."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from traces.domain import conventions as c

# Nested attribute values (kvlists in arrays in kvlists ...) deeper than this are cut off.
MAX_DEPTH = 32

Value = str | bool | int | float | bytes | list[Any] | dict[str, Any] | None


@dataclass(frozen=True)
class SpanRecord:
    """One span as received: ids in lowercase hex, times in Unix nanoseconds, attributes
    flattened (see `flatten`), the resource's attributes apart."""

    trace_id: str
    span_id: str
    parent_span_id: str = ""
    # From the span's flags: None when the exporter does not say whether the parent is remote.
    parent_is_remote: bool | None = None
    name: str = ""
    kind: int = 0
    start_ns: int = 0
    end_ns: int = 0
    status_code: int = 0
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    scope_name: str = ""

    @property
    def is_root(self) -> bool:
        """No parent, or a parent in another process (the RAG service's top span under an
        upstream caller's span, which never reaches Treue)."""
        return not self.parent_span_id or self.parent_is_remote is True

    def to_data(self) -> dict[str, Any]:
        """What is stored of the span besides its ids: JSON values only (bytes dropped)."""
        return {
            "parent_is_remote": self.parent_is_remote,
            "name": self.name,
            "kind": self.kind,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "status_code": self.status_code,
            "attributes": _without_bytes(self.attributes),
            "resource": _without_bytes(self.resource),
            "scope_name": self.scope_name,
        }

    @classmethod
    def from_data(
        cls, *, trace_id: str, span_id: str, parent_span_id: str, data: Mapping[str, Any]
    ) -> "SpanRecord":
        return cls(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent_span_id,
            parent_is_remote=data.get("parent_is_remote"),
            name=data.get("name", ""),
            kind=data.get("kind", 0),
            start_ns=data.get("start_ns", 0),
            end_ns=data.get("end_ns", 0),
            status_code=data.get("status_code", 0),
            attributes=dict(data.get("attributes") or {}),
            resource=dict(data.get("resource") or {}),
            scope_name=data.get("scope_name", ""),
        )


def flatten(attributes: Iterable[tuple[str, Value]]) -> dict[str, Any]:
    """Attributes with nested values written out as the dotted names the conventions use:
    {"retrieval.documents": [{"document.content": "x"}]} becomes
    {"retrieval.documents.0.document.content": "x"}. Arrays of plain values stay arrays (OTLP's
    own array attributes). The later of two equal names wins."""
    out: dict[str, Any] = {}
    stack: list[tuple[str, Any, int]] = [(k, v, 0) for k, v in reversed(list(attributes))]
    while stack:
        name, value, depth = stack.pop()
        if depth > MAX_DEPTH:
            continue
        if isinstance(value, dict):
            stack.extend((f"{name}.{k}", v, depth + 1) for k, v in reversed(value.items()))
        elif isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
            stack.extend((f"{name}.{i}", v, depth + 1) for i, v in reversed(list(enumerate(value))))
        else:
            out[name] = value
    return out


def is_relevant(span: SpanRecord) -> bool:
    """Whether the span belongs to a RAG pipeline's instrumentation (OpenInference, GenAI,
    Treue's own attributes) rather than to a web framework or a database client."""
    return any(
        name in c.RELEVANT_NAMES or name.startswith(c.RELEVANT_PREFIXES)
        for name in span.attributes
    ) or any(name.startswith("treue.") for name in span.resource)


def skeleton(span: SpanRecord) -> SpanRecord:
    """What is kept of an irrelevant span: its place in the tree, and for a root its input and
    output (the question and answer of a pipeline whose top is a plain web request span)."""
    keep = c.SKELETON_ATTRIBUTES if span.is_root else frozenset()
    return replace(
        span, attributes={k: v for k, v in span.attributes.items() if k in keep}, resource={
            k: v for k, v in span.resource.items() if k == c.RESOURCE_SERVICE_NAME
        },
    )


def use_case_of(span: SpanRecord) -> str | None:
    """The use case a span names (`treue.use_case` on the span, else on its resource)."""
    for attributes in (span.attributes, span.resource):
        value = attributes.get(c.TREUE_USE_CASE)
        if isinstance(value, str) and value:
            return value
    return None


def _without_bytes(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_bytes(v) for k, v in value.items() if not isinstance(v, bytes)}
    if isinstance(value, list):
        return [_without_bytes(v) for v in value if not isinstance(v, bytes)]
    return value
