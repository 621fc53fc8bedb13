"""What the LangChain and LlamaIndex callbacks share: reading chunks, log-probabilities and
questions out of framework objects, and the rule that a failure of the callback costs only the
answer it was recording (counted as ``rejected`` and logged, never raised into the caller's
chain). Imports no framework, so that the base package stays httpx-only.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from treue_client.client import TreueClient

logger = logging.getLogger("treue_client")

# Where retrievers and rerankers put a document's score, its id and its source in metadata.
SCORE_KEYS = ("score", "relevance_score", "similarity_score", "similarity")
ID_KEYS = ("id", "doc_id", "chunk_id")
SOURCE_KEYS = ("source", "file_name", "file_path", "url")
# Keys of a chain's input that hold the user's question.
QUESTION_KEYS = ("question", "query", "input", "query_str")


def count_failure(treue: TreueClient, what: str) -> None:
    """An answer lost to an error of the callback itself: counted with the answers the client
    could not read, and logged with the traceback. Both guarded: a callback never raises."""
    with contextlib.suppress(Exception):
        treue._count("rejected")
    with contextlib.suppress(Exception):
        logger.exception("treue: could not record %s", what)


def plain(value: Any) -> Any:
    """An SDK object (pydantic) as a dict; anything else unchanged."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return value


def number(value: Any) -> float | None:
    """A finite score as a float (numpy floats too); None for anything else, bools included."""
    if isinstance(value, bool):
        return None
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def first(mapping: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = mapping.get(key)
        if value is not None and value != "":
            return value
    return None


def chunk(text: Any, *, id: Any = None, score: Any = None, source: Any = None) -> dict[str, Any]:
    """One chunk for ``TreueClient.record``: ids and sources as text (Treue takes strings only),
    the score only when it is a finite number."""
    result: dict[str, Any] = {"text": text if isinstance(text, str) else str(text)}
    if id is not None and id != "":
        result["id"] = str(id)
    if (value := number(score)) is not None:
        result["score"] = value
    if source is not None and source != "":
        result["source"] = str(source)
    return result


def chat_logprobs(value: Any) -> dict[str, Any] | None:
    """OpenAI's ``choice.logprobs`` of a chat completion as a dict ``{"content": [...]}``, from
    an SDK object, a dict or a token list; None when there are none or they are of another
    shape (the legacy completions format, a provider's own), which Treue could not read."""
    value = plain(value)
    if isinstance(value, list):
        value = {"content": value}
    if isinstance(value, Mapping) and isinstance(value.get("content"), list):
        content = [plain(token) for token in value["content"]]
        return {"content": content} if content else None
    return None


def question_from(value: Any) -> str | None:
    """The question in a chain's input: the text itself, or the text under one of
    ``QUESTION_KEYS``, or a dict's only text value."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        found = first(value, QUESTION_KEYS)
        if isinstance(found, str):
            return found
        texts = [v for v in value.values() if isinstance(v, str)]
        if len(texts) == 1:
            return texts[0]
    return None


def last_user_text(messages: list[dict[str, Any]] | None) -> str | None:
    for message in reversed(messages or ()):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return None


class OpenRun(Protocol):
    members: list[Any]  # its nested runs, forgotten with it
    broken: bool  # an error of the callback cost this answer


K = TypeVar("K", bound=Hashable)
R = TypeVar("R", bound=OpenRun)


class RunTree(Generic[K, R]):
    """The open top-level runs (LangChain runs, LlamaIndex spans) and the nested ones filed
    under each, under one lock: frameworks call back from threads and async tasks."""

    def __init__(self, new: Callable[[K], R]) -> None:
        self.lock = threading.Lock()
        self.root_of: dict[K, K] = {}
        self.runs: dict[K, R] = {}
        self._new = new

    def enter(self, id_: K, parent: K | None) -> tuple[R, bool]:
        """The top-level run `id_` belongs to, and whether it is that run itself (then new).
        A run whose parent was never seen counts as a top-level run of its own."""
        with self.lock:
            root = self.root_of.get(parent) if parent is not None else None
            run = self.runs.get(root) if root is not None else None
            if root is None or run is None:
                root, run = id_, self._new(id_)
                self.runs[id_] = run
            self.root_of[id_] = root
            run.members.append(id_)
            return run, root == id_

    def of(self, id_: K) -> R | None:
        """The top-level run `id_` is filed under."""
        with self.lock:
            root = self.root_of.get(id_)
            return self.runs.get(root) if root is not None else None

    def pop_if_root(self, id_: K) -> R | None:
        """The top-level run `id_` (forgotten with its nested runs), or None when it is
        nested or unknown."""
        with self.lock:
            if self.root_of.get(id_) != id_:
                return None
            run = self.runs.pop(id_)
            for member in run.members:
                self.root_of.pop(member, None)
            return run

    def end(self, id_: K, treue: TreueClient, record: Callable[[R], None], what: str) -> None:
        """A run ended: a top-level one is recorded, unless the callback broke on it (then
        counted as rejected); never raises."""
        try:
            run = self.pop_if_root(id_)
            if run is None:
                return
            if run.broken:
                # An error of this callback (logged where it happened) cost this answer.
                treue._count("rejected")
                return
            record(run)
        except Exception:
            count_failure(treue, what)

    def drop(self, id_: K) -> None:
        """A run raised: it gave its caller no answer, so nothing is recorded."""
        with contextlib.suppress(Exception):
            self.pop_if_root(id_)

    def clear(self) -> None:
        with self.lock:
            self.runs.clear()
            self.root_of.clear()
