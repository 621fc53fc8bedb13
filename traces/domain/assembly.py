"""From one trace's spans to the ingest API's answer (ingest.schemas.AnswerIn as a dict), or
the reason it is none.

OpenInference is read first, the GenAI conventions second; `treue.*` attributes override both.
One answer per trace: the answering LLM call is the LLM span that ended last (query rewriting
and routing calls come before it); the chunks are the documents of the last reranking before
it, else of the last retrieval before it, else of the last retrieval. The answer comes from
that LLM span's own output first, so that its log-probabilities align with the text; the root
span's output is the fallback.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from traces.domain import conventions as c
from traces.domain.segments import add_segments
from traces.domain.spans import SpanRecord, use_case_of

MAX_CHUNKS = 200  # = ingest.schemas.MAX_CHUNKS
QUESTION_KEYS = ("question", "query", "input", "query_str")
ANSWER_KEYS = ("answer", "output", "result", "response")


class Outcome(StrEnum):
    """What a trace came to. The first five are monitoring's ingest outcomes."""

    CREATED = "created"
    EXISTING = "existing"
    CONFLICT = "conflict"
    NOT_ALLOWED = "not_allowed"
    INVALID = "invalid"
    NOT_RAG = "not_rag"
    NO_QUESTION = "no_question"
    NO_ANSWER = "no_answer"
    NO_CHUNK_TEXT = "no_chunk_text"
    USE_CASE_MISSING = "use_case_missing"


@dataclass(frozen=True)
class Assembled:
    """The answer, as the ingest API's body; `use_case` is None when no span names one (the
    caller takes the key's only use case)."""

    payload: dict[str, Any]
    use_case: str | None


@dataclass(frozen=True)
class NotAnswer:
    outcome: Outcome
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def assemble(spans: Sequence[SpanRecord]) -> Assembled | NotAnswer:
    """The trace's answer, or why there is none. `spans` are all spans received of one trace."""
    if not spans:
        return NotAnswer(Outcome.NOT_RAG, "no spans")
    llms = sorted((s for s in spans if is_llm(s)), key=lambda s: (s.end_ns, s.start_ns))
    retrievals = [s for s in spans if is_retrieval(s)]
    if not llms or not retrievals:
        missing = " and ".join(
            what for what, found in (("no retrieval span", retrievals), ("no LLM span", llms))
            if not found
        )
        return NotAnswer(Outcome.NOT_RAG, missing)
    root, orphan = find_root(spans)
    llm = llms[-1]

    documents = documents_of(retrieval_for(retrievals, llm))
    chunks = [d for d in documents if d.get("text")]
    if documents and not chunks:
        return NotAnswer(
            Outcome.NO_CHUNK_TEXT,
            f"the retrieval's {len(documents)} documents carry no text (document.content, or "
            "content in gen_ai.retrieval.documents)",
        )
    messages = messages_of(llm)
    question = question_of(spans, root, retrievals, messages)
    if question is None:
        return NotAnswer(Outcome.NO_QUESTION, "no span carries the question")
    completion = _completion(llm)
    answer = answer_of(llm, completion) or _root_answer(root)
    if answer is None:
        return NotAnswer(Outcome.NO_ANSWER, "no span carries the answer")

    model = _first_text(llm.attributes, c.MODEL_NAMES)
    if model is None and completion is not None:
        model = _text(completion.get("model"))
    conventions = sorted({
        name
        for s in spans
        for name, found in (
            ("openinference", c.OI_SPAN_KIND in s.attributes),
            ("genai", c.GENAI_OPERATION in s.attributes),
        )
        if found
    })
    otlp: dict[str, Any] = {
        "trace_id": root.trace_id,
        "service_name": _text(root.resource.get(c.RESOURCE_SERVICE_NAME)),
        "root_name": root.name,
        "conventions": conventions,
        "spans": len(spans),
        "usage": usage_of(llm),
    }
    if orphan:
        otlp["orphan"] = True
    if model is None:
        otlp["model_unknown"] = True
    if len(chunks) > MAX_CHUNKS:
        otlp["chunks_dropped"] = len(chunks) - MAX_CHUNKS
    if len(chunks) < len(documents):
        otlp["documents_without_text"] = len(documents) - len(chunks)
    payload: dict[str, Any] = {
        "external_id": root.trace_id,
        "question": question,
        "answer": answer,
        "model": model or "unknown",
        "chunks": chunks[:MAX_CHUNKS],
        "logprobs": logprobs_of(spans, llm, completion),
        "messages": messages or None,
        "metadata": {"otlp": otlp},
    }
    if root.start_ns > 0:
        payload["created_at"] = (
            datetime.fromtimestamp(root.start_ns / 1e9, tz=UTC).isoformat()
        )
    use_case = next(
        (u for u in map(use_case_of, [root, *spans]) if u is not None), None
    )
    if use_case is not None:
        payload["use_case"] = use_case
    add_segments(payload, [root, llm, *spans], completion)
    return Assembled(payload=payload, use_case=use_case)


# --- roles ------------------------------------------------------------------------------------

def _oi_kind(span: SpanRecord) -> str:
    kind = span.attributes.get(c.OI_SPAN_KIND)
    return kind.upper() if isinstance(kind, str) else ""


def _genai_operation(span: SpanRecord) -> str:
    operation = span.attributes.get(c.GENAI_OPERATION)
    return operation if isinstance(operation, str) else ""


def is_llm(span: SpanRecord) -> bool:
    kind = _oi_kind(span)
    return kind == c.OI_LLM or (not kind and _genai_operation(span) in c.GENAI_LLM_OPERATIONS)


def is_retrieval(span: SpanRecord) -> bool:
    kind = _oi_kind(span)
    return kind in (c.OI_RETRIEVER, c.OI_RERANKER) or (
        not kind and _genai_operation(span) == c.GENAI_RETRIEVAL_OPERATION
    )


def is_chain(span: SpanRecord) -> bool:
    return _oi_kind(span) in c.OI_CHAIN_KINDS or (
        _genai_operation(span) in c.GENAI_CHAIN_OPERATIONS
    )


def find_root(spans: Sequence[SpanRecord]) -> tuple[SpanRecord, bool]:
    """The trace's root span, and whether the trace is an orphan (its root never arrived: then
    the topmost received span, the one whose parent is not among them, earliest first)."""
    roots = [s for s in spans if s.is_root]
    if roots:
        return min(roots, key=lambda s: s.start_ns), False
    ids = {s.span_id for s in spans}
    tops = [s for s in spans if s.parent_span_id not in ids] or list(spans)
    return min(tops, key=lambda s: s.start_ns), True


def retrieval_for(retrievals: Sequence[SpanRecord], llm: SpanRecord) -> SpanRecord:
    before = sorted(
        (s for s in retrievals if s.end_ns <= llm.start_ns), key=lambda s: s.end_ns
    )
    rerankers = [s for s in before if _oi_kind(s) == c.OI_RERANKER]
    if rerankers:
        return rerankers[-1]
    retrievers = [s for s in before if _oi_kind(s) != c.OI_RERANKER]
    if retrievers:
        return retrievers[-1]
    return max(retrievals, key=lambda s: s.end_ns)


# --- fields -----------------------------------------------------------------------------------

def documents_of(span: SpanRecord) -> list[dict[str, Any]]:
    """The span's documents in rank order as AnswerIn chunks ({text, id, score, source}); text
    None where a document has none."""
    prefix = (
        c.RERANKER_OUTPUT_DOCUMENTS if _oi_kind(span) == c.OI_RERANKER else c.RETRIEVAL_DOCUMENTS
    )
    documents = [_oi_document(d) for d in indexed(span.attributes, prefix)]
    if documents:
        return documents
    raw = span.attributes.get(c.GENAI_RETRIEVAL_DOCUMENTS)
    items = _json(raw) if isinstance(raw, str) else raw
    if not isinstance(items, list):
        items = indexed(span.attributes, c.GENAI_RETRIEVAL_DOCUMENTS + ".")
    return [_genai_document(d) for d in items if isinstance(d, dict)]


def _oi_document(d: Mapping[str, Any]) -> dict[str, Any]:
    metadata = _metadata(d, c.DOCUMENT_METADATA)
    source = _first_text(d, c.DOCUMENT_SOURCES) or _first_text(
        metadata, ("source", "file_name", "url")
    )
    return _chunk(
        text=d.get(c.DOCUMENT_CONTENT),
        id=d.get(c.DOCUMENT_ID, metadata.get("id")),
        score=_score(d.get(c.DOCUMENT_SCORE), metadata),
        source=source,
    )


def _genai_document(d: Mapping[str, Any]) -> dict[str, Any]:
    metadata = _metadata(d, "metadata")
    return _chunk(
        text=d.get("content", d.get("text")),
        id=d.get("id", metadata.get("id")),
        score=_score(d.get("score"), metadata),
        source=_first_text(d, ("source", "url", "name"))
        or _first_text(metadata, ("source", "file_name", "url")),
    )


def _metadata(d: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = d.get(name)
    if isinstance(value, str):
        value = _json(value)
    if isinstance(value, dict):
        return value
    prefix = name + "."
    return {k[len(prefix):]: v for k, v in d.items() if k.startswith(prefix)}


def _score(value: Any, metadata: Mapping[str, Any]) -> float | None:
    for candidate in (value, metadata.get("score"), metadata.get("relevance_score"),
                      metadata.get("similarity")):
        if isinstance(candidate, int | float) and not isinstance(candidate, bool):
            number = float(candidate)
            if number == number and abs(number) != float("inf"):
                return number
    return None


def _chunk(*, text: Any, id: Any, score: float | None, source: str | None) -> dict[str, Any]:
    if isinstance(id, int) and not isinstance(id, bool):
        id = str(id)
    return {
        "text": _text(text),
        "id": id if isinstance(id, str) and id else None,
        "score": score,
        "source": source,
    }


def messages_of(llm: SpanRecord) -> list[dict[str, Any]]:
    """The LLM call's input messages as OpenAI's [{role, content}]."""
    messages = []
    for m in indexed(llm.attributes, c.LLM_INPUT_MESSAGES):
        content = _text(m.get(c.MESSAGE_CONTENT))
        if content is None:
            parts = [
                _text(p.get(c.MESSAGE_CONTENT_TEXT))
                for p in indexed(m, c.MESSAGE_CONTENTS)
            ]
            content = "".join(p for p in parts if p) or None
        role = _text(m.get(c.MESSAGE_ROLE)) or "user"
        if content is not None:
            messages.append({"role": role, "content": content})
    if messages:
        return messages
    system = _json_attribute(llm, c.GENAI_SYSTEM_INSTRUCTIONS)
    if isinstance(system, list):
        text = _parts_text(system)
        if text:
            messages.append({"role": "system", "content": text})
    elif isinstance(system, str) and _text(system):
        messages.append({"role": "system", "content": system})
    for m in _json_list(llm, c.GENAI_INPUT_MESSAGES):
        text = _parts_text(m.get("parts")) if isinstance(m.get("parts"), list) else _text(
            m.get("content")
        )
        if text:
            messages.append({"role": _text(m.get("role")) or "user", "content": text})
    return messages


def question_of(
    spans: Sequence[SpanRecord],
    root: SpanRecord,
    retrievals: Sequence[SpanRecord],
    messages: Sequence[Mapping[str, Any]],
) -> str | None:
    for span in [root, *spans]:
        question = _text(span.attributes.get(c.TREUE_QUESTION))
        if question:
            return question
    chains = sorted((s for s in spans if is_chain(s) and s is not root), key=lambda s: s.start_ns)
    for span in [root, *chains]:
        question = _input_text(span)
        if question:
            return question
    for span in retrievals:
        question = _input_text(span) or _text(span.attributes.get(c.GENAI_RETRIEVAL_QUERY))
        if question:
            return question
    for m in reversed(messages):
        if m.get("role") == "user":
            return _text(m.get("content"))
    return None


def _input_text(span: SpanRecord) -> str | None:
    value = _text(span.attributes.get(c.INPUT_VALUE))
    if value is None or span.attributes.get(c.INPUT_MIME_TYPE) != c.JSON_MIME:
        return value
    return _pick(_json(value), QUESTION_KEYS)


def answer_of(llm: SpanRecord, completion: Mapping[str, Any] | None) -> str | None:
    text = _text(llm.attributes.get(f"{c.LLM_OUTPUT_MESSAGES}0.{c.MESSAGE_CONTENT}"))
    if text:
        return text
    for m in _json_list(llm, c.GENAI_OUTPUT_MESSAGES):
        if isinstance(m.get("parts"), list):
            text = _parts_text(m["parts"])
            if text:
                return text
    if completion is not None:
        choices = completion.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
            if isinstance(message, dict):
                return _text(message.get("content"))
    return None


def _root_answer(root: SpanRecord) -> str | None:
    value = _text(root.attributes.get(c.OUTPUT_VALUE))
    if value is None or root.attributes.get(c.OUTPUT_MIME_TYPE) != c.JSON_MIME:
        return value
    return _pick(_json(value), ANSWER_KEYS)


def _completion(llm: SpanRecord) -> dict[str, Any] | None:
    """The LLM span's output as a ChatCompletion (OpenInference's openai instrumentor writes it
    whole as output.value), or a LangChain LLM run's output; None if it is neither."""
    if llm.attributes.get(c.OUTPUT_MIME_TYPE) != c.JSON_MIME:
        return None
    value = _json(llm.attributes.get(c.OUTPUT_VALUE))
    return value if isinstance(value, dict) else None


def logprobs_of(
    spans: Sequence[SpanRecord], llm: SpanRecord, completion: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """OpenAI's logprobs object of the answering call, if any attribute carries it:
    `treue.logprobs` (on the LLM span, else any span), the ChatCompletion in the LLM span's
    output.value, or a LangChain generation's logprobs."""
    for span in [llm, *spans]:
        value = span.attributes.get(c.TREUE_LOGPROBS)
        found = _json(value) if isinstance(value, str) else value
        if isinstance(found, dict):
            return found
    if completion is None:
        return None
    choices = completion.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        found = choices[0].get("logprobs")
        return found if isinstance(found, dict) else None
    generations = completion.get("generations")
    # openinference-instrumentation-langchain 0.1.80 with langchain-openai 1.8.1 writes them
    # under the message's response_metadata (tests/traces/test_real_langchain_producer.py);
    # generation_info is where other LangChain chat models put them.
    for path in (
        ("generation_info", "logprobs"),
        ("message", "kwargs", "response_metadata", "logprobs"),
    ):
        found = _dig(generations, (0, 0, *path))
        if isinstance(found, dict):
            return found
    return None


def _dig(value: Any, path: Sequence[str | int]) -> Any:
    """value[path[0]][path[1]]..., or None where the shape differs."""
    for step in path:
        if isinstance(step, int) and isinstance(value, list) and len(value) > step:
            value = value[step]
        elif isinstance(step, str) and isinstance(value, dict):
            value = value.get(step)
        else:
            return None
    return value


def usage_of(llm: SpanRecord) -> dict[str, int]:
    usage = {}
    for names in (c.OI_TOKENS, c.GENAI_TOKENS):
        for key, name in names.items():
            value = llm.attributes.get(name)
            if key not in usage and isinstance(value, int) and not isinstance(value, bool):
                usage[key] = value
    return usage


# --- helpers ----------------------------------------------------------------------------------

def indexed(attributes: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Flattened list items in index order: `prefix` "0.x" = 1 becomes [{"x": 1}]."""
    items: dict[int, dict[str, Any]] = {}
    for name, value in attributes.items():
        if not name.startswith(prefix):
            continue
        index, _, rest = name[len(prefix):].partition(".")
        if index.isdigit() and rest:
            items.setdefault(int(index), {})[rest] = value
    return [items[i] for i in sorted(items)]


def _text(value: Any) -> str | None:
    """A non-empty string that is not a producer's placeholder for hidden content."""
    if isinstance(value, str) and value.strip() and value != c.REDACTED:
        return value
    return None


def _first_text(attributes: Mapping[str, Any], names: Sequence[str]) -> str | None:
    for name in names:
        text = _text(attributes.get(name))
        if text:
            return text
    return None


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None


def _json_attribute(span: SpanRecord, name: str) -> Any:
    value = span.attributes.get(name)
    if isinstance(value, str):
        parsed = _json(value)
        return parsed if parsed is not None else value
    if value is None:
        items = indexed(span.attributes, name + ".")
        return items or None
    return value


def _json_list(span: SpanRecord, name: str) -> list[dict[str, Any]]:
    value = _json_attribute(span, name)
    return [m for m in value if isinstance(m, dict)] if isinstance(value, list) else []


def _parts_text(parts: Any) -> str | None:
    """The text parts of a GenAI message ([{type: "text", content}]) joined."""
    if not isinstance(parts, list):
        return None
    texts = [
        p["content"] for p in parts
        if isinstance(p, dict) and p.get("type", "text") == "text"
        and isinstance(p.get("content"), str)
    ]
    return _text("".join(texts))


def _pick(value: Any, keys: Sequence[str], nested: bool = True) -> str | None:
    """The text of a JSON input or output: the value itself, one of `keys`, or an object's only
    string value (one level into a nested object, no deeper)."""
    if isinstance(value, str):
        return _text(value)
    if not isinstance(value, dict):
        return None
    for key in keys:
        found = value.get(key)
        if isinstance(found, dict):
            found = _pick(found, keys, nested=False) if nested else None
        if _text(found):
            return str(found)
    strings = [v for v in value.values() if _text(v)]
    return strings[0] if len(strings) == 1 else None
