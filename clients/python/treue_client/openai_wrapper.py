"""``instrument()``: record every chat completion of an ``openai`` client with Treue.

The wrapper asks for token log-probabilities when the caller did not say otherwise, returns the
completion unchanged and queues the answer on a ``TreueClient``. Recording never raises into
the caller. Streaming calls (``stream=True``) are passed through untouched and not recorded:
their answer only exists once the caller has consumed the stream.

``openai`` itself is not imported unless a call fails, so the package works without it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any

from treue_client.client import TreueClient

logger = logging.getLogger("treue_client")

# The extra keywords a caller may pass to create() to describe the answer for Treue: the
# retrieved chunks, the question as the user asked it (without the passages the prompt adds),
# the answer's own id in the caller's system and metadata. Removed before the call reaches the
# SDK.
CHUNKS_KWARG = "treue_chunks"
QUESTION_KWARG = "treue_question"
EXTERNAL_ID_KWARG = "treue_external_id"
METADATA_KWARG = "treue_metadata"
_TREUE_KWARGS = (CHUNKS_KWARG, QUESTION_KWARG, EXTERNAL_ID_KWARG, METADATA_KWARG)
_WRAPPED = "__treue_wrapped__"


def instrument(
    openai_client: Any,
    treue_client: TreueClient,
    *,
    use_case: str | None = None,
    chunks_from: Callable[..., Any] | None = None,
) -> Any:
    """Wrap ``openai_client.chat.completions.create`` (``OpenAI`` or ``AsyncOpenAI``) in place.

    ``chunks_from(messages=..., kwargs=...)`` returns the retrieved chunks for a call (dicts
    ``{text, id?, score?, source?}`` or strings); a ``treue_chunks=[...]`` argument to
    ``create()`` does the same for one call and wins. ``create()`` also takes
    ``treue_question=`` (the question as the user asked it; default: the last user message,
    which often carries the passages too), ``treue_external_id=`` (your id for the answer, so a
    resend is recognised) and ``treue_metadata={...}``. Returns ``openai_client``.
    """
    completions = openai_client.chat.completions
    original = completions.create
    if getattr(original, _WRAPPED, False):
        return openai_client
    recorder = _Recorder(treue_client, use_case, chunks_from)

    if inspect.iscoroutinefunction(inspect.unwrap(original)):

        @functools.wraps(original)
        async def create_async(*args: Any, **kwargs: Any) -> Any:
            treue = _pop_treue_kwargs(kwargs)
            if kwargs.get("stream"):
                return await original(*args, **kwargs)
            added = _ask_for_logprobs(kwargs)
            try:
                completion = await original(*args, **kwargs)
            except Exception as error:
                if not (added and _rejects_logprobs(error)):
                    raise
                del kwargs["logprobs"]
                completion = await original(*args, **kwargs)
            recorder.record(completion, kwargs, treue)
            return completion

        setattr(create_async, _WRAPPED, True)
        completions.create = create_async
    else:

        @functools.wraps(original)
        def create(*args: Any, **kwargs: Any) -> Any:
            treue = _pop_treue_kwargs(kwargs)
            if kwargs.get("stream"):
                return original(*args, **kwargs)
            added = _ask_for_logprobs(kwargs)
            try:
                completion = original(*args, **kwargs)
            except Exception as error:
                if not (added and _rejects_logprobs(error)):
                    raise
                del kwargs["logprobs"]
                completion = original(*args, **kwargs)
            recorder.record(completion, kwargs, treue)
            return completion

        setattr(create, _WRAPPED, True)
        completions.create = create
    return openai_client


class _Recorder:
    def __init__(
        self,
        treue_client: TreueClient,
        use_case: str | None,
        chunks_from: Callable[..., Any] | None,
    ) -> None:
        self.treue = treue_client
        self.use_case = use_case
        self.chunks_from = chunks_from

    def record(self, completion: Any, kwargs: dict[str, Any], treue: dict[str, Any]) -> None:
        try:
            messages = [_plain(m) for m in kwargs.get("messages") or ()]
            chunks = treue.get(CHUNKS_KWARG)
            if chunks is None and self.chunks_from is not None:
                chunks = self.chunks_from(messages=messages, kwargs=kwargs)
            choice = completion.choices[0]
            logprobs = getattr(choice, "logprobs", None)
            if logprobs is not None and hasattr(logprobs, "model_dump"):
                logprobs = logprobs.model_dump()
            question = treue.get(QUESTION_KWARG)
            self.treue.record(
                question=question if question is not None else _last_user_text(messages),
                answer=choice.message.content,
                chunks=chunks,
                model=completion.model,
                logprobs=logprobs,
                messages=messages,
                use_case=self.use_case,
                external_id=treue.get(EXTERNAL_ID_KWARG),
                metadata=treue.get(METADATA_KWARG),
            )
        except Exception:
            # Lost, but not silently: counted with the answers the client could not read. Both
            # guarded: recording must never raise into the caller's chat call.
            with contextlib.suppress(Exception):
                self.treue._count("rejected")
            with contextlib.suppress(Exception):
                logger.exception("treue: could not record a chat completion")


def _pop_treue_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Take Treue's own keywords out of a create() call's keywords (the SDK refuses them)."""
    return {name: kwargs.pop(name) for name in _TREUE_KWARGS if name in kwargs}


def _ask_for_logprobs(kwargs: dict[str, Any]) -> bool:
    """Set logprobs=True unless the caller passed it; True when it was set here."""
    if _given(kwargs.get("logprobs")):
        return False
    kwargs["logprobs"] = True
    return True


def _given(value: Any) -> bool:
    # The SDK's NOT_GIVEN / omit sentinels mean "not passed".
    return value is not None and type(value).__name__ not in ("NotGiven", "Omit")


def _rejects_logprobs(error: Exception) -> bool:
    try:
        import openai
    except ImportError:
        return False
    if not isinstance(error, openai.BadRequestError):
        return False
    text = f"{getattr(error, 'message', '')} {error} {getattr(error, 'param', '')}"
    return "logprobs" in text.lower()


def _plain(message: Any) -> Any:
    if isinstance(message, dict):
        return message
    if hasattr(message, "model_dump"):
        return message.model_dump(exclude_none=True)
    return dict(message)


def _last_user_text(messages: list[Any]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # content parts: keep the text ones
                return "\n".join(
                    p.get("text", "") for p in content if isinstance(p, dict) and "text" in p
                )
    return None
