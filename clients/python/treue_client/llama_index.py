"""Record each RAG answer of LlamaIndex with Treue, through LlamaIndex's instrumentation.

``instrument_llama_index(treue)`` attaches an event handler and a span handler to LlamaIndex's
root dispatcher (or the one given). Each top-level span (a query engine's ``query``, a chat
engine's ``chat``, or a function of yours decorated with ``dispatcher.span``) collects what
happens inside it: the question (``QueryStartEvent``), the retrieved nodes with their scores
(``RetrievalEndEvent``, ``ReRankEndEvent``, or the response's ``source_nodes``), and from the
last LLM call its answer, model, messages and token log-probabilities. When the top-level span
exits, the answer goes on the client's background queue; a span that raised records nothing,
and one in which no retriever ran is not a RAG answer and is skipped. A streaming response is
not recorded (its answer exists only once the caller has consumed it, after the span ended),
and never consumed here.

Log-probabilities are read from the provider's own response (``ChatResponse.raw``, OpenAI's
``choices[0].logprobs``), not from ``ChatResponse.logprobs``: llama-index-llms-openai builds
that from each position's ``top_logprobs`` and so loses the chosen token. Ask the model for
them: ``OpenAI(model=..., logprobs=True)``.

Needs ``llama-index-core`` (the ``llama-index`` extra); never imported by ``treue_client``
itself.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.llms.types import ChatResponse
from llama_index.core.instrumentation import Dispatcher, get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)
from llama_index.core.instrumentation.events.query import QueryEndEvent, QueryStartEvent
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent
from llama_index.core.instrumentation.events.retrieval import (
    RetrievalEndEvent,
    RetrievalStartEvent,
)
from llama_index.core.instrumentation.span import BaseSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from pydantic import PrivateAttr

from treue_client import _frameworks as fw
from treue_client.client import TreueClient

__all__ = ["TreueInstrumentation", "instrument_llama_index"]

# Tags (``llama_index.core.instrumentation.dispatcher.instrument_tags({...})`` around the
# call) that describe the answer for Treue.
EXTERNAL_ID_TAG = "treue_external_id"
QUESTION_TAG = "treue_question"
METADATA_TAG = "treue_metadata"


@dataclass
class _Run:
    """What one top-level span has shown so far."""

    external_id: str | None = None
    metadata: dict[str, Any] | None = None
    question: str | None = None
    query: str | None = None
    retrieved: bool = False
    chunks: list[dict[str, Any]] = field(default_factory=list)
    source_chunks: list[dict[str, Any]] | None = None
    response_text: str | None = None
    answer: str | None = None
    model: str | None = None
    logprobs: dict[str, Any] | None = None
    messages: list[dict[str, Any]] | None = None
    members: list[str] = field(default_factory=list)
    llm_inputs: dict[str, tuple[list[dict[str, Any]] | None, str | None]] = field(
        default_factory=dict
    )
    broken: bool = False


class _Collector:
    """The state of every open top-level span, under one lock (spans run in threads and
    async tasks)."""

    def __init__(self, treue: TreueClient, use_case: str | None) -> None:
        self.treue = treue
        self.use_case = use_case
        self.tree: fw.RunTree[str, _Run] = fw.RunTree(lambda _: _Run())
        self.warned_no_logprobs = False

    def enter(self, id_: str, parent_id: str | None, tags: Mapping[str, Any] | None) -> None:
        try:
            # A span whose parent was never seen (opened before instrumenting) is a top-level
            # span of its own.
            run, new = self.tree.enter(id_, parent_id)
            if new:
                tags = tags or {}
                if tags.get(EXTERNAL_ID_TAG) is not None:
                    run.external_id = str(tags[EXTERNAL_ID_TAG])
                if isinstance(tags.get(QUESTION_TAG), str):
                    run.question = tags[QUESTION_TAG]
                if isinstance(tags.get(METADATA_TAG), dict):
                    run.metadata = dict(tags[METADATA_TAG])
        except Exception:
            with contextlib.suppress(Exception):
                fw.logger.exception("treue: error in the LlamaIndex span handler")

    def exit(self, id_: str) -> None:
        self.tree.end(id_, self.treue, self._record, "a LlamaIndex query")

    def drop(self, id_: str) -> None:
        self.tree.drop(id_)

    def event(self, event: BaseEvent) -> None:
        run = None
        try:
            run = self.tree.of(event.span_id or "")
            if run is not None:
                self._file(run, event)
        except Exception:
            with contextlib.suppress(Exception):
                fw.logger.exception("treue: error in the LlamaIndex event handler")
            if run is not None:
                run.broken = True

    def _file(self, run: _Run, event: BaseEvent) -> None:
        if isinstance(event, QueryStartEvent):
            if run.question is None:  # the outermost query, not a sub-question
                run.question = _query_text(event.query)
        elif isinstance(event, RetrievalStartEvent):
            if run.query is None:
                run.query = _query_text(event.str_or_query_bundle)
        elif isinstance(event, (RetrievalEndEvent, ReRankEndEvent)):
            run.retrieved = True
            run.chunks = [_chunk(node) for node in event.nodes]
        elif isinstance(event, LLMChatStartEvent):
            run.llm_inputs[event.span_id or ""] = (
                [_message(m) for m in event.messages], _model_asked(event.model_dict)
            )
        elif isinstance(event, LLMCompletionStartEvent):
            run.llm_inputs[event.span_id or ""] = (
                [{"role": "user", "content": event.prompt}], _model_asked(event.model_dict)
            )
        elif isinstance(event, (LLMChatEndEvent, LLMCompletionEndEvent)):
            response = event.response
            if response is None:
                return
            messages, model_asked = run.llm_inputs.pop(event.span_id or "", (None, None))
            if isinstance(response, ChatResponse):
                run.answer = response.message.content
            else:
                run.answer = response.text
            raw = fw.plain(response.raw)
            raw = raw if isinstance(raw, Mapping) else {}
            choices = raw.get("choices") or [{}]
            choice = fw.plain(choices[0]) if isinstance(choices, list) else {}
            run.logprobs = fw.chat_logprobs(
                choice.get("logprobs") if isinstance(choice, Mapping) else None
            )
            run.model = str(raw["model"]) if raw.get("model") else model_asked
            run.messages = messages
        elif isinstance(event, QueryEndEvent):
            source_nodes = getattr(event.response, "source_nodes", None)
            if source_nodes:
                run.source_chunks = [_chunk(node) for node in source_nodes]
            # Response.response, never str(response): on a StreamingResponse that would
            # consume the caller's stream.
            text = getattr(event.response, "response", None)
            run.response_text = text if isinstance(text, str) else None

    def _record(self, run: _Run) -> None:
        if not run.retrieved:
            return  # no retriever ran: not a RAG answer
        # The LLM's own text, so that its tokens and log-probabilities line up with it; the
        # query's response (maybe post-processed) only when no LLM call was seen.
        answer = run.answer if run.answer is not None else run.response_text
        if answer is None:
            return
        question = run.question or run.query or fw.last_user_text(run.messages)
        if question is None:
            self.treue._count("rejected")
            fw.logger.warning(
                "treue: a LlamaIndex answer without a question was not recorded; give it with "
                "instrument_tags({%r: ...})", QUESTION_TAG,
            )
            return
        if run.logprobs is None and not self.warned_no_logprobs:
            self.warned_no_logprobs = True
            fw.logger.warning(
                "treue: the LLM returned no log-probabilities; ask for them (OpenAI(..., "
                "logprobs=True)) and use an LLM that keeps the provider's response in raw"
            )
        self.treue.record(
            question=question,
            answer=answer,
            chunks=run.source_chunks if run.source_chunks is not None else run.chunks,
            model=run.model,
            logprobs=run.logprobs,
            messages=run.messages,
            external_id=run.external_id,
            metadata=run.metadata,
            use_case=self.use_case,
        )


class _SpanHandler(BaseSpanHandler[BaseSpan]):
    """Files each span under its top-level span; records the answer when that one exits."""

    _collector: _Collector = PrivateAttr()

    def __init__(self, collector: _Collector) -> None:
        super().__init__()
        self._collector = collector

    @classmethod
    def class_name(cls) -> str:
        return "TreueSpanHandler"

    def new_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        parent_span_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> BaseSpan | None:
        self._collector.enter(id_, parent_span_id, tags)
        return None  # nothing kept in open_spans: the collector has what it needs

    def prepare_to_exit_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> BaseSpan | None:
        self._collector.exit(id_)
        return None

    def prepare_to_drop_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> BaseSpan | None:
        self._collector.drop(id_)
        return None


class _EventHandler(BaseEventHandler):
    _collector: _Collector = PrivateAttr()

    def __init__(self, collector: _Collector) -> None:
        super().__init__()
        self._collector = collector

    @classmethod
    def class_name(cls) -> str:
        return "TreueEventHandler"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        self._collector.event(event)


class TreueInstrumentation:
    """The handlers ``instrument_llama_index`` attached; ``remove()`` detaches them."""

    def __init__(self, collector: _Collector, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.span_handler = _SpanHandler(collector)
        self.event_handler = _EventHandler(collector)
        self._collector = collector

    def remove(self) -> None:
        """Stop recording: the handlers leave the dispatcher, open spans are forgotten."""
        with contextlib.suppress(ValueError):
            self.dispatcher.span_handlers.remove(self.span_handler)
        with contextlib.suppress(ValueError):
            self.dispatcher.event_handlers.remove(self.event_handler)
        self._collector.tree.clear()


def instrument_llama_index(
    treue: TreueClient,
    *,
    use_case: str | None = None,
    dispatcher: Dispatcher | None = None,
) -> TreueInstrumentation:
    """Record every RAG answer LlamaIndex gives from now on with ``treue`` (see the module
    doc). ``use_case`` overrides the client's; ``dispatcher`` defaults to LlamaIndex's root
    dispatcher, which sees every span and event. Around a call,
    ``instrument_tags({"treue_external_id": ..., "treue_question": ..., "treue_metadata":
    {...}})`` gives the answer's id (so that a resend is recognised), its question and its
    metadata. Never raises into LlamaIndex: an error of its own costs only the answer, counted
    as ``rejected`` in ``treue.stats()`` and logged."""
    target = dispatcher if dispatcher is not None else get_dispatcher()
    instrumentation = TreueInstrumentation(_Collector(treue, use_case), target)
    target.add_span_handler(instrumentation.span_handler)
    target.add_event_handler(instrumentation.event_handler)
    return instrumentation


def _query_text(query: Any) -> str | None:
    if isinstance(query, str):
        return query
    text = getattr(query, "query_str", None)
    return text if isinstance(text, str) else None


def _chunk(node_with_score: Any) -> dict[str, Any]:
    node = getattr(node_with_score, "node", node_with_score)
    metadata = getattr(node, "metadata", None) or {}
    return fw.chunk(
        node.get_content(),
        id=getattr(node, "node_id", None),
        score=getattr(node_with_score, "score", None),
        source=fw.first(metadata, fw.SOURCE_KEYS),
    )


def _message(message: Any) -> dict[str, Any]:
    role = getattr(message.role, "value", message.role)
    return {"role": str(role), "content": message.content}


def _model_asked(model_dict: Mapping[str, Any] | None) -> str | None:
    model = fw.first(model_dict or {}, ("model", "model_name"))
    return str(model) if model else None
