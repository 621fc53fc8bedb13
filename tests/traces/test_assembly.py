"""traces.domain: spans to an answer, as tables of cases (plain Python, no database)."""

import json
from typing import Any

import pytest

from traces.domain.assembly import Assembled, NotAnswer, Outcome, assemble, indexed
from traces.domain.spans import SpanRecord, flatten, is_relevant, skeleton

TRACE = "0af7651916cd43dd8448eb211c80319c"


def s(span_id: str, parent: str = "", *, start: int = 0, end: int = 1, remote: bool | None = None,
      resource: dict[str, Any] | None = None, **attributes: Any) -> SpanRecord:
    return SpanRecord(
        trace_id=TRACE, span_id=span_id, parent_span_id=parent, parent_is_remote=remote,
        name=span_id, start_ns=start, end_ns=end,
        attributes={k.replace("__", "."): v for k, v in attributes.items()},
        resource=resource or {},
    )


def oi(kind: str, **attributes: Any) -> dict[str, Any]:
    return {"openinference__span__kind": kind, **attributes}


def docs(prefix: str, *items: tuple[str | None, float | None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, (text, score) in enumerate(items):
        if text is not None:
            out[f"{prefix}.{i}.document.content"] = text
        if score is not None:
            out[f"{prefix}.{i}.document.score"] = score
        out[f"{prefix}.{i}.document.id"] = f"d{i}"
    return out


def retriever(span_id: str = "r", start: int = 1, end: int = 2, *items: tuple[str | None, float]
              ) -> SpanRecord:
    span = s(span_id, "root", start=start, end=end, **oi("RETRIEVER"))
    span.attributes.update(docs("retrieval.documents", *(items or (("Text A", 0.9),))))
    return span


def llm(span_id: str = "l", start: int = 3, end: int = 4, **attributes: Any) -> SpanRecord:
    base = {"llm__model_name": "m1", "llm__output_messages__0__message__content": "Die Antwort."}
    return s(span_id, "root", start=start, end=end, **oi("LLM", **{**base, **attributes}))


ROOT = s("root", start=0, end=10, **oi("CHAIN", input__value="Die Frage?"))


def payload(result: Assembled | NotAnswer) -> dict[str, Any]:
    assert isinstance(result, Assembled), result
    return result.payload


# --- what is an answer -------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("spans", "outcome", "detail"),
    [
        ([], Outcome.NOT_RAG, "no spans"),
        ([ROOT, llm()], Outcome.NOT_RAG, "no retrieval span"),
        ([ROOT, retriever()], Outcome.NOT_RAG, "no LLM span"),
        ([s("root", http__method="GET")], Outcome.NOT_RAG, "no retrieval span and no LLM span"),
        ([ROOT, retriever("r", 1, 2, (None, 0.9)), llm()], Outcome.NO_CHUNK_TEXT, "no text"),
        ([s("root", **oi("CHAIN")), retriever(), llm()], Outcome.NO_QUESTION, ""),
        ([ROOT, retriever(), llm(llm__output_messages__0__message__content="__REDACTED__")],
         Outcome.NO_ANSWER, ""),
    ],
)
def test_not_an_answer(spans: list[SpanRecord], outcome: Outcome, detail: str) -> None:
    result = assemble(spans)
    assert isinstance(result, NotAnswer)
    assert result.outcome == outcome
    assert detail in result.detail


def test_openinference_trace() -> None:
    p = payload(assemble([ROOT, retriever("r", 1, 2, ("A", 0.9), ("B", 0.5)), llm(
        llm__input_messages__0__message__role="user",
        llm__input_messages__0__message__content="Die Frage?",
        llm__token_count__prompt=5,
    )]))
    assert p["external_id"] == TRACE
    assert (p["question"], p["answer"], p["model"]) == ("Die Frage?", "Die Antwort.", "m1")
    assert p["chunks"] == [
        {"text": "A", "id": "d0", "score": 0.9, "source": None},
        {"text": "B", "id": "d1", "score": 0.5, "source": None},
    ]
    assert p["messages"] == [{"role": "user", "content": "Die Frage?"}]
    assert p["logprobs"] is None
    assert p["metadata"]["otlp"]["conventions"] == ["openinference"]
    assert p["metadata"]["otlp"]["usage"] == {"prompt": 5}
    assert "use_case" not in p


# --- which spans make the answer ---------------------------------------------------------------

def test_the_last_llm_call_answers_and_the_retrieval_before_it_gives_the_chunks() -> None:
    rewrite = llm("rewrite", 1, 2, llm__output_messages__0__message__content="Umformuliert")
    early = retriever("r1", 3, 4, ("früh", 0.1))
    late = retriever("r2", 5, 6, ("spät", 0.2))
    after = retriever("r3", 9, 10, ("danach", 0.3))
    answer = llm("answer", 7, 8)
    p = payload(assemble([ROOT, rewrite, early, late, answer, after]))
    assert p["answer"] == "Die Antwort."
    assert [c["text"] for c in p["chunks"]] == ["spät"]


def test_reranker_before_the_answer_wins_over_the_retriever() -> None:
    reranker = s("rr", "root", start=3, end=4, **oi("RERANKER"))
    reranker.attributes.update(docs("reranker.output_documents", ("neu sortiert", 0.99)))
    p = payload(assemble([ROOT, retriever("r", 1, 2, ("roh", 0.5)), reranker, llm("l", 5, 6)]))
    assert p["chunks"][0]["text"] == "neu sortiert"


def test_document_metadata_gives_score_id_and_source() -> None:
    r = s("r", "root", start=1, end=2, **oi("RETRIEVER"))
    r.attributes.update({
        "retrieval.documents.0.document.content": "LangChain-Dokument",
        "retrieval.documents.0.document.metadata": json.dumps(
            {"score": 0.7, "id": "lc-1", "source": "handbuch.pdf"}
        ),
    })
    p = payload(assemble([ROOT, r, llm()]))
    assert p["chunks"] == [
        {"text": "LangChain-Dokument", "id": "lc-1", "score": 0.7, "source": "handbuch.pdf"}
    ]


@pytest.mark.parametrize(
    ("root_attributes", "question"),
    [
        ({"input__value": "Text?"}, "Text?"),
        ({"input__value": json.dumps({"question": "JSON?"}),
          "input__mime_type": "application/json"}, "JSON?"),
        ({"input__value": json.dumps({"input": {"query": "Tief?"}}),
          "input__mime_type": "application/json"}, "Tief?"),
        ({"input__value": json.dumps({"q": "Einzig?", "n": 3}),
          "input__mime_type": "application/json"}, "Einzig?"),
        ({"input__value": "Text?", "treue__question": "Eigene?"}, "Eigene?"),
        ({}, "Aus dem Retriever?"),
        # Deeper than one nested object: not searched (the retriever's query instead).
        ({"input__value": json.dumps({"input": {"input": {"query": "Zu tief?"}}}),
          "input__mime_type": "application/json"}, "Aus dem Retriever?"),
        ({"input__value": "[" * 5000 + "]" * 5000,
          "input__mime_type": "application/json"}, "Aus dem Retriever?"),
    ],
)
def test_question(root_attributes: dict[str, Any], question: str) -> None:
    r = retriever()
    r.attributes["input.value"] = "Aus dem Retriever?"
    p = payload(assemble([s("root", **oi("CHAIN", **root_attributes)), r, llm()]))
    assert p["question"] == question


def test_question_from_the_last_user_message_when_nothing_else_has_it() -> None:
    p = payload(assemble([s("root"), retriever(), llm(
        llm__input_messages__0__message__role="user",
        llm__input_messages__0__message__content="Erste?",
        llm__input_messages__1__message__role="assistant",
        llm__input_messages__1__message__content="Zwischen.",
        llm__input_messages__2__message__role="user",
        llm__input_messages__2__message__contents__0__message_content__text="Letzte?",
    )]))
    assert p["question"] == "Letzte?"
    assert p["messages"][-1] == {"role": "user", "content": "Letzte?"}


@pytest.mark.parametrize(
    ("llm_attributes", "root_attributes", "answer"),
    [
        ({}, {}, "Die Antwort."),
        ({"llm__output_messages__0__message__content": None,
          "output__value": json.dumps({"model": "x", "choices": [
              {"message": {"content": "Aus der Completion."}}]}),
          "output__mime_type": "application/json"}, {}, "Aus der Completion."),
        ({"llm__output_messages__0__message__content": None}, {"output__value": "Wurzel."},
         "Wurzel."),
        ({"llm__output_messages__0__message__content": None},
         {"output__value": json.dumps({"answer": "JSON-Wurzel."}),
          "output__mime_type": "application/json"}, "JSON-Wurzel."),
    ],
)
def test_answer(llm_attributes: dict[str, Any], root_attributes: dict[str, Any], answer: str
                ) -> None:
    root = s("root", **oi("CHAIN", input__value="F?", **root_attributes))
    p = payload(assemble([root, retriever(), llm(**llm_attributes)]))
    assert p["answer"] == answer


@pytest.mark.parametrize(
    ("attributes", "model"),
    [
        ({}, "m1"),
        ({"llm__model_name": None, "gen_ai__response__model": "g-resp",
          "gen_ai__request__model": "g-req"}, "g-resp"),
        ({"llm__model_name": None}, "unknown"),
    ],
)
def test_model(attributes: dict[str, Any], model: str) -> None:
    p = payload(assemble([ROOT, retriever(), llm(**attributes)]))
    assert p["model"] == model
    assert ("model_unknown" in p["metadata"]["otlp"]) is (model == "unknown")


# --- log-probabilities -------------------------------------------------------------------------

LOGPROBS = {"content": [{"token": "Die", "logprob": -0.1}]}


@pytest.mark.parametrize(
    ("llm_attributes", "other_attributes", "found"),
    [
        ({}, {}, None),
        ({"treue__logprobs": json.dumps(LOGPROBS)}, {}, LOGPROBS),
        ({}, {"treue__logprobs": json.dumps(LOGPROBS)}, LOGPROBS),
        ({"treue__logprobs": "not json"}, {}, None),
        ({"output__value": json.dumps({"model": "m", "choices": [
            {"message": {"content": "Die Antwort."}, "logprobs": LOGPROBS}]}),
          "output__mime_type": "application/json"}, {}, LOGPROBS),
        ({"output__value": json.dumps({"generations": [[{
            "text": "Die Antwort.", "generation_info": {"logprobs": LOGPROBS}}]]}),
          "output__mime_type": "application/json"}, {}, LOGPROBS),
        ({"output__value": json.dumps({"generations": [[{
            "message": {"kwargs": {"response_metadata": {"logprobs": LOGPROBS}}}}]]}),
          "output__mime_type": "application/json"}, {}, LOGPROBS),
        ({"output__value": json.dumps({"generations": "odd"}),
          "output__mime_type": "application/json"}, {}, None),
    ],
)
def test_logprobs(llm_attributes: dict[str, Any], other_attributes: dict[str, Any],
                  found: Any) -> None:
    root = s("root", **oi("CHAIN", input__value="F?", **other_attributes))
    p = payload(assemble([root, retriever(), llm(**llm_attributes)]))
    assert p["logprobs"] == found


# --- GenAI conventions -------------------------------------------------------------------------

def genai_trace(documents: list[dict[str, Any]]) -> list[SpanRecord]:
    return [
        s("root", start=0, end=10, gen_ai__operation__name="invoke_workflow"),
        s("r", "root", start=1, end=2, gen_ai__operation__name="retrieval",
          gen_ai__retrieval__query__text="GenAI-Frage?",
          gen_ai__retrieval__documents=json.dumps(documents)),
        s("c", "root", start=3, end=4, gen_ai__operation__name="chat",
          gen_ai__request__model="gpt-x", gen_ai__response__model="gpt-x-2025",
          gen_ai__system_instructions=json.dumps([{"type": "text", "content": "Sei kurz."}]),
          gen_ai__input__messages=json.dumps([
              {"role": "user", "parts": [{"type": "text", "content": "GenAI-Frage?"}]}]),
          gen_ai__output__messages=json.dumps([
              {"role": "assistant", "parts": [{"type": "text", "content": "GenAI-"},
                                              {"type": "text", "content": "Antwort."}],
               "finish_reason": "stop"}]),
          gen_ai__usage__input_tokens=11, gen_ai__usage__output_tokens=3),
    ]


def test_genai_trace() -> None:
    p = payload(assemble(genai_trace([
        {"id": "d1", "score": 0.83, "content": "Dok eins", "metadata": {"source": "a.pdf"}},
        {"id": "d2", "score": 0.5, "text": "Dok zwei"},
    ])))
    assert (p["question"], p["answer"], p["model"]) == (
        "GenAI-Frage?", "GenAI-Antwort.", "gpt-x-2025"
    )
    assert p["chunks"] == [
        {"text": "Dok eins", "id": "d1", "score": 0.83, "source": "a.pdf"},
        {"text": "Dok zwei", "id": "d2", "score": 0.5, "source": None},
    ]
    assert p["messages"] == [
        {"role": "system", "content": "Sei kurz."},
        {"role": "user", "content": "GenAI-Frage?"},
    ]
    assert p["logprobs"] is None
    assert p["metadata"]["otlp"]["usage"] == {"prompt": 11, "completion": 3}
    assert p["metadata"]["otlp"]["conventions"] == ["genai"]


def test_genai_documents_without_content_cannot_be_judged() -> None:
    """opentelemetry-util-genai's RetrievalDocument has only id and score."""
    result = assemble(genai_trace([{"id": "d1", "score": 0.83}]))
    assert isinstance(result, NotAnswer) and result.outcome == Outcome.NO_CHUNK_TEXT


# --- use case, root, time ----------------------------------------------------------------------

@pytest.mark.parametrize(
    ("spans", "use_case"),
    [
        ([ROOT, retriever(), llm()], None),
        ([s("root", **oi("CHAIN", input__value="F?", treue__use_case="a")), retriever(),
          llm(treue__use_case="b")], "a"),
        ([ROOT, retriever(), llm(treue__use_case="b")], "b"),
        ([s("root", resource={"treue.use_case": "c"}, **oi("CHAIN", input__value="F?")),
          retriever(), llm()], "c"),
    ],
)
def test_use_case(spans: list[SpanRecord], use_case: str | None) -> None:
    result = assemble(spans)
    assert isinstance(result, Assembled)
    assert result.use_case == use_case
    assert result.payload.get("use_case") == use_case


def test_created_at_is_the_roots_start() -> None:
    root = s("root", start=1_764_900_000_500_000_000, end=1, **oi("CHAIN", input__value="F?"))
    p = payload(assemble([root, retriever(), llm()]))
    assert p["created_at"] == "2025-12-05T02:00:00.500000+00:00"


@pytest.mark.parametrize(
    ("span", "is_root"),
    [
        (s("a"), True),
        (s("a", "p"), False),
        (s("a", "p", remote=True), True),
        (s("a", "p", remote=False), False),
    ],
)
def test_root(span: SpanRecord, is_root: bool) -> None:
    assert span.is_root is is_root


# --- spans -------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("pairs", "flat"),
    [
        ([("a", 1)], {"a": 1}),
        ([("a", [1, 2])], {"a": [1, 2]}),
        ([("retrieval.documents", [{"document.content": "x"}, {"document.content": "y"}])],
         {"retrieval.documents.0.document.content": "x",
          "retrieval.documents.1.document.content": "y"}),
        ([("a", {"b": {"c": True}})], {"a.b.c": True}),
        ([("a", {})], {}),
    ],
)
def test_flatten(pairs: list[tuple[str, Any]], flat: dict[str, Any]) -> None:
    assert flatten(pairs) == flat


def test_flatten_cuts_deep_nesting() -> None:
    value: Any = "leaf"
    for _ in range(100):
        value = {"k": value}
    assert flatten([("a", value)]) == {}


@pytest.mark.parametrize(
    ("attributes", "relevant"),
    [
        ({"http.method": "GET"}, False),
        ({"openinference.span.kind": "CHAIN"}, True),
        ({"gen_ai.operation.name": "chat"}, True),
        ({"llm.model_name": "m"}, True),
        ({"treue.question": "F?"}, True),
    ],
)
def test_is_relevant(attributes: dict[str, Any], relevant: bool) -> None:
    assert is_relevant(SpanRecord(trace_id=TRACE, span_id="a", attributes=attributes)) is relevant


def test_skeleton_keeps_only_a_roots_input_and_output() -> None:
    attributes = {"input.value": "F?", "http.url": "https://x/?token=secret"}
    root = SpanRecord(trace_id=TRACE, span_id="a", attributes=attributes,
                      resource={"service.name": "s", "host.name": "h"})
    child = SpanRecord(trace_id=TRACE, span_id="b", parent_span_id="a", attributes=attributes)
    assert skeleton(root).attributes == {"input.value": "F?"}
    assert skeleton(root).resource == {"service.name": "s"}
    assert skeleton(child).attributes == {}


def test_to_data_and_back_drops_bytes() -> None:
    span = SpanRecord(trace_id=TRACE, span_id="a", parent_span_id="b", parent_is_remote=True,
                      name="n", kind=2, start_ns=1, end_ns=2, status_code=1,
                      attributes={"x": b"\x00", "y": [b"1", "z"], "w": 1}, scope_name="s")
    back = SpanRecord.from_data(trace_id=TRACE, span_id="a", parent_span_id="b",
                                data=json.loads(json.dumps(span.to_data())))
    assert back.attributes == {"y": ["z"], "w": 1}
    assert (back.name, back.kind, back.parent_is_remote, back.scope_name) == ("n", 2, True, "s")


def test_indexed() -> None:
    assert indexed({"p.1.a": 2, "p.0.a": 1, "p.x.a": 3, "p.10.b": 4, "q.0.a": 5}, "p.") == [
        {"a": 1}, {"a": 2}, {"b": 4}
    ]


# --- segments (issue 40) ----------------------------------------------------------------------

def test_the_prompt_version_and_metadata_from_the_spans() -> None:
    root = s("root", start=0, end=10, **oi("CHAIN", input__value="Die Frage?"),
             treue__prompt_version="rag-7", treue__metadata__kanal="chat")
    spans = [root, retriever(), llm(llm__prompt_template__version="tpl-2",
                                    treue__metadata__kanal="mail", treue__metadata__stufe=2)]
    body = payload(assemble(spans))
    assert body["prompt_version"] == "rag-7"  # the root's first
    assert body["metadata"]["kanal"] == "chat" and body["metadata"]["stufe"] == 2
    assert "otlp" in body["metadata"]
    # OpenInference's template version where Treue's is missing; none: no prompt version.
    assert payload(assemble([ROOT, retriever(), llm(llm__prompt_template__version="tpl-2")]))[
        "prompt_version"] == "tpl-2"
    assert "prompt_version" not in payload(assemble([ROOT, retriever(), llm()]))
