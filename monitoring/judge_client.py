"""The only module that talks to the judge model (any OpenAI-compatible endpoint).

It turns the SDK's errors into two kinds the task understands: `JudgeUnavailable` (transient:
timeouts, connection errors, 429, 5xx — retry later, honouring Retry-After) and
`JudgeMisconfigured` (400, 401, 403, 404, 422 — retrying cannot help; the run fails with the
reason shown). The SDK's own retries are off: the Celery task owns retrying, with backoff that
survives a worker restart.
"""

import time
from dataclasses import dataclass

import openai
from django.conf import settings

from monitoring.domain.judging import CallResult


class JudgeError(Exception):
    pass


class JudgeUnavailable(JudgeError):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class JudgeMisconfigured(JudgeError):
    pass


@dataclass(frozen=True)
class JudgeConfig:
    base_url: str
    api_key: str
    model: str
    timeout: float
    max_tokens_decompose: int
    max_tokens_verify: int

    @classmethod
    def from_settings(cls, model: str | None = None) -> "JudgeConfig":
        return cls(
            base_url=settings.TREUE_JUDGE_BASE_URL,
            api_key=settings.TREUE_JUDGE_API_KEY or "unused",
            model=model or settings.TREUE_JUDGE_MODEL,
            timeout=settings.TREUE_JUDGE_TIMEOUT_SECONDS,
            max_tokens_decompose=settings.TREUE_JUDGE_MAX_TOKENS_DECOMPOSE,
            max_tokens_verify=settings.TREUE_JUDGE_MAX_TOKENS_VERIFY,
        )


def _retry_after(headers: object) -> float | None:
    value = getattr(headers, "get", lambda _k: None)("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date; the task's own backoff applies


class JudgeClient:
    """Calls the judge with temperature 0. Thread-safe: one answer's claims share it."""

    def __init__(self, config: JudgeConfig) -> None:
        if not config.base_url:
            raise JudgeMisconfigured("no judge endpoint: set TREUE_JUDGE_BASE_URL")
        if not config.model:
            raise JudgeMisconfigured("no judge model: set TREUE_JUDGE_MODEL")
        self.config = config
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key,
            timeout=config.timeout,
            max_retries=0,
        )

    def close(self) -> None:
        self._client.close()

    def call(self, messages: list[dict[str, str]], *, max_tokens: int) -> CallResult:
        started = time.monotonic()
        try:
            completion = self._client.chat.completions.create(
                model=self.config.model,
                messages=messages,  # type: ignore[arg-type]
                temperature=0,
                max_tokens=max_tokens,
            )
        except openai.APIConnectionError as e:  # includes timeouts
            raise JudgeUnavailable(f"judge unreachable: {type(e).__name__}") from e
        except openai.RateLimitError as e:
            raise JudgeUnavailable(
                "judge rate limit (429)", retry_after=_retry_after(e.response.headers)
            ) from e
        except openai.APIStatusError as e:
            if e.status_code >= 500 or e.status_code in (408, 409):
                raise JudgeUnavailable(
                    f"judge error {e.status_code}", retry_after=_retry_after(e.response.headers)
                ) from e
            raise JudgeMisconfigured(
                f"judge refused the request ({e.status_code}): {e.message}"[:500]
            ) from e
        latency_ms = int((time.monotonic() - started) * 1000)
        choice = completion.choices[0] if completion.choices else None
        text = (choice.message.content if choice else None) or ""
        usage = completion.usage
        return CallResult(
            text=text,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            latency_ms=latency_ms,
            model=completion.model or self.config.model,
        )
