"""A LangChain callback handler that records each RAG answer of a chain with Treue.

Pass ``TreueCallbackHandler(treue)`` in the ``callbacks`` of a chain's ``invoke`` (or
``ainvoke``, ``batch``) config. For each top-level run it collects what its nested runs show:
the question (the chain's input), the documents of the last retriever (or of the last step
that returned documents) with their scores, and
from the last chat model call its answer, model, messages and token log-probabilities. When the
top-level run ends, the answer goes on the client's background queue; a run that raised records
nothing, and a run in which no retriever ran is not a RAG answer and is skipped.

A callback cannot change the request a model sends: ``with_logprobs(llm)`` asks an
OpenAI-compatible chat model for log-probabilities (without them, Treue's tier 1 is off for the
answer and only the random sample can judge it).

Needs ``langchain-core`` (the ``langchain`` extra); never imported by ``treue_client`` itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.runnables import Runnable

from treue_client import _frameworks as fw
from treue_client.client import TreueClient

__all__ = ["TreueCallbackHandler", "with_logprobs"]

# Keys of the top-level run's config metadata that describe the answer for Treue.
EXTERNAL_ID_KEY = "treue_external_id"
QUESTION_KEY = "treue_question"
METADATA_KEY = "treue_metadata"


def with_logprobs(llm: Runnable[Any, Any]) -> Runnable[Any, Any]:
    """``llm`` asking for token log-probabilities on every call (``logprobs=True``, as
    ``ChatOpenAI`` and other OpenAI-compatible chat models take it)."""
    return llm.bind(logprobs=True)


@dataclass
class _Run:
    """What one top-level run has shown so far."""

    run_id: UUID
    question: str | None = None
    query: str | None = None
    external_id: str | None = None
    metadata: dict[str, Any] | None = None
    retrieved: bool = False
    chunks: list[dict[str, Any]] = field(default_factory=list)
    answer: str | None = None
    model: str | None = None
    logprobs: dict[str, Any] | None = None
    messages: list[dict[str, Any]] | None = None
    # The nested runs, to forget them with the top-level one; the chat calls' inputs by run.
    members: list[UUID] = field(default_factory=list)
    llm_inputs: dict[UUID, tuple[list[dict[str, Any]] | None, str | None]] = field(
        default_factory=dict
    )
    broken: bool = False


class TreueCallbackHandler(BaseCallbackHandler):
    """Records the answer of each top-level LangChain run on ``treue`` (see the module doc).

    ``use_case`` overrides the client's. The answer's ``external_id`` is the config metadata's
    ``treue_external_id`` (your id, so that a resend is recognised), else the top-level run's
    id; ``treue_question`` and ``treue_metadata`` there give the question (when the chain's
    input is not it) and the answer's metadata. Never raises into the chain: an error of its
    own costs only the answer, counted as ``rejected`` in ``treue.stats()`` and logged.
    """

    # Errors are caught here; and run inline, not in a thread pool, in async chains: it only
    # files what it is given.
    raise_error = False
    run_inline = True

    def __init__(self, treue: TreueClient, *, use_case: str | None = None) -> None:
        self.treue = treue
        self.use_case = use_case
        self._tree: fw.RunTree[UUID, _Run] = fw.RunTree(_Run)
        self._warned_no_logprobs = False

    # Runs starting: each is filed under its top-level run.

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        with self._guard(run_id):
            run, is_root = self._enter(run_id, parent_run_id)
            if is_root:
                run.question = fw.question_from(inputs)
                meta = metadata or {}
                if isinstance(meta.get(QUESTION_KEY), str):
                    run.question = meta[QUESTION_KEY]
                if meta.get(EXTERNAL_ID_KEY) is not None:
                    run.external_id = str(meta[EXTERNAL_ID_KEY])
                if isinstance(meta.get(METADATA_KEY), dict):
                    run.metadata = dict(meta[METADATA_KEY])

    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        with self._guard(run_id):
            run, _ = self._enter(run_id, parent_run_id)
            if isinstance(query, str):
                run.query = query

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        with self._guard(run_id):
            run, _ = self._enter(run_id, parent_run_id)
            converted = convert_to_openai_messages(messages[0]) if messages else []
            model = _model_asked(kwargs.get("invocation_params"), metadata)
            run.llm_inputs[run_id] = (
                converted if isinstance(converted, list) else [converted], model
            )

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        with self._guard(run_id):
            run, _ = self._enter(run_id, parent_run_id)
            messages = [{"role": "user", "content": prompts[0]}] if prompts else []
            run.llm_inputs[run_id] = (
                messages, _model_asked(kwargs.get("invocation_params"), metadata)
            )

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        # Only filed: a retriever or model called by a tool belongs to the run above it.
        with self._guard(run_id):
            self._enter(run_id, parent_run_id)

    # Runs ending: what they gave is kept; the top-level run's end records the answer.

    def on_retriever_end(
        self, documents: Sequence[Document], *, run_id: UUID, **kwargs: Any
    ) -> None:
        with self._guard(run_id):
            run = self._run_of(run_id)
            if run is not None:
                run.retrieved = True
                run.chunks = [_chunk(document) for document in documents]
        self._end(run_id)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        with self._guard(run_id):
            run = self._run_of(run_id)
            if run is not None:
                generation = response.generations[0][0]
                messages, model_asked = run.llm_inputs.pop(run_id, (None, None))
                info = generation.generation_info or {}
                response_metadata: dict[str, Any] = {}
                if isinstance(generation, ChatGeneration):
                    response_metadata = generation.message.response_metadata or {}
                run.answer = generation.text
                run.messages = messages
                run.model = (
                    (response.llm_output or {}).get("model_name")
                    or response_metadata.get("model_name")
                    or info.get("model_name")
                    or model_asked
                )
                run.logprobs = fw.chat_logprobs(
                    info.get("logprobs") or response_metadata.get("logprobs")
                )
        self._end(run_id)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        # A step that returns documents is a retrieval too: a function searching a vector
        # store (to keep the scores that as_retriever() drops) or filtering, reranking, the
        # retriever's output. The last such step gives the chunks.
        with self._guard(run_id):
            if _is_documents(outputs):
                run = self._run_of(run_id)
                if run is not None:
                    run.retrieved = True
                    run.chunks = [_chunk(document) for document in outputs]
        self._end(run_id)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._drop(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._drop(run_id)

    def on_retriever_error(
        self, error: BaseException, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._drop(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._drop(run_id)

    # Bookkeeping.

    def _enter(self, run_id: UUID, parent_run_id: UUID | None) -> tuple[_Run, bool]:
        """The top-level run ``run_id`` belongs to, and whether it is that run itself. A run
        whose parent this handler never saw (it was given to a nested runnable only) counts as
        a top-level run of its own."""
        return self._tree.enter(run_id, parent_run_id)

    def _run_of(self, run_id: UUID) -> _Run | None:
        return self._tree.of(run_id)

    def _end(self, run_id: UUID) -> None:
        self._tree.end(run_id, self.treue, self._record, "a LangChain run")

    def _drop(self, run_id: UUID) -> None:
        self._tree.drop(run_id)

    def _record(self, run: _Run) -> None:
        if not run.retrieved or run.answer is None:
            return  # no retriever ran (or no model): not a RAG answer
        question = run.question or run.query or fw.last_user_text(run.messages)
        if question is None:
            self.treue._count("rejected")
            fw.logger.warning(
                "treue: a LangChain answer without a question was not recorded: its chain's "
                "input is no text; give the question as config metadata %r", QUESTION_KEY,
            )
            return
        if run.logprobs is None and not self._warned_no_logprobs:
            self._warned_no_logprobs = True
            fw.logger.warning(
                "treue: the model returned no log-probabilities; ask for them with "
                "treue_client.langchain.with_logprobs(llm)"
            )
        self.treue.record(
            question=question,
            answer=run.answer,
            chunks=run.chunks,
            model=run.model,
            logprobs=run.logprobs,
            messages=run.messages,
            # The top-level run's id unless the caller gave one: unique, and in LangSmith's
            # traces, should the service use them.
            external_id=run.external_id or run.run_id.hex,
            metadata=run.metadata,
            use_case=self.use_case,
        )

    @contextlib.contextmanager
    def _guard(self, run_id: UUID) -> Iterator[None]:
        """Runs a callback's body; an error in it marks its top-level run as broken (the
        answer is then counted as lost when that run ends) and is logged, not raised."""
        try:
            yield
        except Exception:
            with contextlib.suppress(Exception):
                fw.logger.exception("treue: error in the LangChain callback")
            with contextlib.suppress(Exception):
                run = self._run_of(run_id)
                if run is not None:
                    run.broken = True
                else:
                    self.treue._count("rejected")


def _is_documents(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(item, Document) for item in value)
    )


def _chunk(document: Document) -> dict[str, Any]:
    metadata = document.metadata or {}
    return fw.chunk(
        document.page_content,
        id=document.id or fw.first(metadata, fw.ID_KEYS),
        score=fw.first(metadata, fw.SCORE_KEYS),
        source=fw.first(metadata, fw.SOURCE_KEYS),
    )


def _model_asked(
    invocation_params: dict[str, Any] | None, metadata: dict[str, Any] | None
) -> str | None:
    params = invocation_params or {}
    model = params.get("model") or params.get("model_name") or (metadata or {}).get(
        "ls_model_name"
    )
    return str(model) if model else None
