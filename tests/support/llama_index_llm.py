"""A LlamaIndex LLM on the real ``openai`` SDK, for the tests of treue_client.llama_index.

llama-index-llms-openai needs ``openai<3`` and so cannot be installed beside Treue's pinned
openai 3. This small ``CustomLLM`` does what its ``OpenAI`` does on the path the tests take
(read in its 0.8.3 source): ``chat()`` calls ``chat.completions.create`` over HTTP, with
``logprobs=True`` and ``top_logprobs=0`` when built with ``logprobs=True``, and returns the SDK's
``ChatCompletion`` as ``ChatResponse.raw``; it reads ``OPENAI_API_KEY`` and ``OPENAI_API_BASE``
(not ``OPENAI_BASE_URL``) when not given them. ``STANDIN_PACKAGE`` makes it importable as
``llama_index.llms.openai.OpenAI`` for the README's example (tests/clients/test_readme.py).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, cast

import openai
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from openai.types.chat import ChatCompletionMessageParam
from pydantic import PrivateAttr

# llama_index/llms/openai/__init__.py of a folder put first on PYTHONPATH (llama_index is a
# namespace package, so it joins the installed llama_index.core).
STANDIN_PACKAGE = "from tests.support.llama_index_llm import OpenAIChatLLM as OpenAI\n"


class OpenAIChatLLM(CustomLLM):
    model: str = "gpt-4o-mini"
    logprobs: bool | None = None
    api_key: str | None = None
    api_base: str | None = None
    max_retries: int = 0
    _client: openai.OpenAI = PrivateAttr()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._client = openai.OpenAI(
            api_key=self.api_key or os.environ.get("OPENAI_API_KEY"),
            base_url=self.api_base or os.environ.get("OPENAI_API_BASE"),
            max_retries=self.max_retries,
        )

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            model_name=self.model, is_chat_model=True, context_window=128_000, num_output=512
        )

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        extra: dict[str, Any] = {"logprobs": True, "top_logprobs": 0} if self.logprobs else {}
        completion = self._client.chat.completions.create(
            model=self.model,
            # llama-index's roles are the API's (system, user, assistant), passed on as they are.
            messages=[
                cast(ChatCompletionMessageParam, {"role": m.role.value, "content": m.content or ""})
                for m in messages
            ],
            **extra,
        )
        content = completion.choices[0].message.content
        return ChatResponse(
            message=ChatMessage(role="assistant", content=content), raw=completion
        )

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        # The local server does not stream: the whole answer is asked for, then handed out a
        # word at a time, as deltas with the text so far.
        whole = self.chat(messages, **kwargs)
        content = whole.message.content or ""

        def deltas() -> ChatResponseGen:
            so_far = ""
            for word in content.split(" "):
                delta = word if not so_far else " " + word
                so_far += delta
                yield ChatResponse(
                    message=ChatMessage(role="assistant", content=so_far), delta=delta,
                    raw=whole.raw,
                )

        return deltas()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        response = self.chat([ChatMessage(role="user", content=prompt)])
        return CompletionResponse(text=response.message.content or "", raw=response.raw)

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError("streaming is not needed by these tests")
