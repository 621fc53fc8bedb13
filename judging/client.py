"""The only module that talks to models: the judge, and the generator that self-consistency
investigations re-ask (any OpenAI-compatible endpoints).

It turns the SDK's errors into two kinds the task understands: `JudgeUnavailable` (transient:
timeouts, connection errors, 429, 5xx, a 200 whose body is not a chat completion — a proxy's
HTML page, JSON of another shape — retry later, honouring Retry-After) and
`JudgeMisconfigured` (400, 401, 403, 404, 422 — retrying cannot help; the run fails with the
reason shown). The SDK's own retries are off: the Celery task owns retrying,
with backoff that survives a worker restart.
"""

import email.utils
import json
import math
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import openai
from django.conf import settings

from judging.domain.batched import StructuredOutputRefused
from judging.domain.judge_parse import storable_text
from judging.domain.judgement import CallResult, usage_figure


class JudgeError(Exception):
    pass


class JudgeUnavailable(JudgeError):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class JudgeMisconfigured(JudgeError):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the endpoint's HTTP status, where it refused a request


@dataclass(frozen=True)
class JudgeConfig:
    base_url: str
    api_key: str
    model: str
    timeout: float
    max_tokens_decompose: int
    max_tokens_verify: int
    # Azure OpenAI: the resource's endpoint instead of base_url; the model is the deployment.
    azure_endpoint: str = ""
    azure_api_version: str = ""
    azure_ad_token: str = ""  # an Entra ID access token, instead of the API key

    @classmethod
    def from_settings(cls, model: str | None = None) -> "JudgeConfig":
        azure = settings.TREUE_JUDGE_AZURE_ENDPOINT
        return cls(
            base_url=settings.TREUE_JUDGE_BASE_URL,
            # Azure takes a key or a token: "unused" would be sent as a key that is wrong.
            api_key=settings.TREUE_JUDGE_API_KEY or ("" if azure else "unused"),
            model=model or settings.TREUE_JUDGE_MODEL,
            timeout=settings.TREUE_JUDGE_TIMEOUT_SECONDS,
            max_tokens_decompose=settings.TREUE_JUDGE_MAX_TOKENS_DECOMPOSE,
            max_tokens_verify=settings.TREUE_JUDGE_MAX_TOKENS_VERIFY,
            azure_endpoint=azure,
            azure_api_version=settings.TREUE_JUDGE_AZURE_API_VERSION,
            azure_ad_token=settings.TREUE_JUDGE_AZURE_AD_TOKEN,
        )

    @property
    def endpoint(self) -> str:
        """Where the calls go, as the pages and errors name it."""
        return self.azure_endpoint or self.base_url


def _retry_after(headers: object) -> float | None:
    """Seconds to wait from a Retry-After header: delay-seconds or an HTTP date (RFC 9110).

    None when absent or unreadable (the task's own backoff applies). "inf", "nan" and the like
    are unreadable too: float() accepts them, but no delay can be scheduled from them.
    """
    value = getattr(headers, "get", lambda _k: None)("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # an HTTP date is GMT even where the zone is missing
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


_lock = threading.Lock()
_clients: dict[tuple[str, ...], openai.OpenAI] = {}
_slots: dict[int, threading.BoundedSemaphore] = {}


def _shared_client(config: JudgeConfig) -> openai.OpenAI:
    # Creating a client loads the certificate store (~0.1 s): once per endpoint and process.
    key = (config.base_url, config.api_key, str(config.timeout), config.azure_endpoint,
           config.azure_api_version, config.azure_ad_token)
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = _new_client(config)
        return client


def _new_client(config: JudgeConfig) -> openai.OpenAI:
    if not config.azure_endpoint:
        return openai.OpenAI(
            base_url=config.base_url, api_key=config.api_key, timeout=config.timeout,
            max_retries=0,
        )
    if bool(config.api_key) == bool(config.azure_ad_token):
        raise JudgeMisconfigured(
            "Azure OpenAI takes one credential: set TREUE_JUDGE_API_KEY or "
            "TREUE_JUDGE_AZURE_AD_TOKEN (an Entra ID access token), not both and not neither"
        )
    if not config.azure_api_version:
        raise JudgeMisconfigured("no Azure OpenAI API version: set TREUE_JUDGE_AZURE_API_VERSION")
    # The deployment is the model of each call: the SDK puts it in the path
    # (/openai/deployments/<model>/chat/completions?api-version=...), so a comparison's
    # candidate is another deployment of the same resource.
    return openai.AzureOpenAI(
        azure_endpoint=config.azure_endpoint,
        api_version=config.azure_api_version,
        api_key=config.api_key or None,
        azure_ad_token=config.azure_ad_token or None,
        timeout=config.timeout,
        max_retries=0,
    )


def _call_slots(concurrency: int) -> threading.BoundedSemaphore:
    """TREUE_JUDGE_CONCURRENCY bounds the judge calls in flight in this worker process, across
    all the tasks its thread pool runs at once: the endpoint's rate limit is per caller, and the
    benchmark's ideal (calls x latency / concurrency) assumes exactly this bound."""
    with _lock:
        slots = _slots.get(concurrency)
        if slots is None:
            slots = _slots[concurrency] = threading.BoundedSemaphore(max(1, concurrency))
        return slots


class JudgeClient:
    """Calls the judge with temperature 0. Thread-safe: one answer's claims share it."""

    def __init__(self, config: JudgeConfig, *, deadline: float | None = None) -> None:
        """`deadline` (time.monotonic()) is the task's soft time limit, enforced here for every
        pool: Celery's own limits apply only to prefork, and the workers run threads."""
        self.deadline = deadline
        if not config.endpoint:
            raise JudgeMisconfigured(
                "no judge endpoint: set TREUE_JUDGE_BASE_URL (or TREUE_JUDGE_AZURE_ENDPOINT)"
            )
        if not config.model:
            raise JudgeMisconfigured("no judge model: set TREUE_JUDGE_MODEL")
        self.config = config
        self._client = _shared_client(config)
        self._slots = _call_slots(settings.TREUE_JUDGE_CONCURRENCY)

    def close(self) -> None:
        """Nothing to release: the HTTP client is shared by every run in this process, so
        connections are reused instead of set up (with TLS) again for each answer."""

    def call(
        self, messages: list[dict[str, str]], *, max_tokens: int,
        response_format: dict[str, Any] | None = None,
    ) -> CallResult:
        """One chat completion at temperature 0. With ``response_format`` (a JSON schema), a
        400 or 422 is the endpoint refusing the schema: StructuredOutputRefused, so the caller
        asks again without one and remembers."""
        with self._slots:
            if response_format is None:
                return self._call(messages, max_tokens=max_tokens)
            try:
                return self._call(messages, max_tokens=max_tokens,
                                  response_format=response_format)
            except JudgeMisconfigured as e:
                if e.status in (400, 422):
                    raise StructuredOutputRefused(str(e)) from e
                raise

    def _timeout(self) -> float:
        if self.deadline is None:
            return self.config.timeout
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise JudgeUnavailable("time limit exceeded")
        return min(self.config.timeout, left)

    def _call(self, messages: list[dict[str, str]], *, max_tokens: int,
              **extra: Any) -> CallResult:
        timeout = self._timeout()
        started = time.monotonic()
        completion = _create(
            self._client,
            "judge",
            model=self.config.model,
            messages=messages,
            temperature=0,
            max_tokens=max_tokens,
            timeout=timeout,
            **extra,
        )
        return _result(completion, self.config.model, started, "judge")


def _create(client: openai.OpenAI, who: str, **request: Any) -> Any:
    """One chat completion, the SDK's errors mapped to retry (unavailable) or not."""
    try:
        return client.chat.completions.create(**request)
    except openai.APIConnectionError as e:  # includes timeouts
        raise JudgeUnavailable(f"{who} unreachable: {type(e).__name__}") from e
    except openai.RateLimitError as e:
        raise JudgeUnavailable(
            f"{who} rate limit (429)", retry_after=_retry_after(e.response.headers)
        ) from e
    except openai.APIStatusError as e:
        if e.status_code >= 500 or e.status_code in (408, 409):
            raise JudgeUnavailable(
                f"{who} error {e.status_code}", retry_after=_retry_after(e.response.headers)
            ) from e
        # The endpoint's own words: stored as the run's error, so made storable (a NUL in them
        # made PostgreSQL refuse the failure itself, and the run was paid for again).
        raise JudgeMisconfigured(
            storable_text(f"{who} refused the request ({e.status_code}): {e.message}")[:500],
            status=e.status_code,
        ) from e
    except json.JSONDecodeError as e:
        # A 200 whose body is not JSON (a proxy's or gateway's page): the endpoint's
        # trouble, not ours; retried like a 5xx, and shown if it persists.
        raise JudgeUnavailable(storable_text(f"{who} reply is not JSON: {e}")[:500]) from e


def _result(completion: Any, model: str, started: float, who: str) -> CallResult:
    latency_ms = int((time.monotonic() - started) * 1000)
    try:
        choice = completion.choices[0] if completion.choices else None
        text = (choice.message.content if choice and choice.message else None) or ""
        truncated = getattr(choice, "finish_reason", None) == "length"
        usage = completion.usage
        prompt_tokens = _usage(usage, "prompt_tokens")
        completion_tokens = _usage(usage, "completion_tokens")
        cached_tokens = _cached_tokens(usage)
        reported = completion.model or model
    except (AttributeError, TypeError, IndexError, KeyError) as e:
        # The SDK hands back whatever a 200 carried: a str for a text/html page, a list, or a
        # ChatCompletion built without validation from JSON of another shape. Like a 5xx, that
        # is the endpoint's (or a proxy's) trouble: retried, and shown if it persists.
        raise _not_a_completion(who, completion) from e
    if not (isinstance(text, str) and isinstance(reported, str)):
        raise _not_a_completion(who, completion)
    # Usage figures a call cannot have had (-5, 10**30, "12") are the endpoint's slip, not a
    # reason to fail a run whose verdicts were read: the call counts, its tokens are unknown.
    # A missing figure (None) is taken as 0, as endpoints that report no usage do.
    known = prompt_tokens is not None and completion_tokens is not None
    prompt = prompt_tokens if prompt_tokens is not None and known else 0
    return CallResult(
        text=storable_text(text),
        prompt_tokens=prompt,
        completion_tokens=completion_tokens if completion_tokens is not None and known else 0,
        latency_ms=latency_ms,
        model=storable_text(reported)[:200],
        cached_tokens=min(cached_tokens, prompt),
        usage_known=known,
        truncated=truncated,
    )


def _usage(usage: Any, name: str) -> int | None:
    """A usage figure of the completion: 0 where the endpoint reports none, None where what it
    reports cannot be a token count."""
    value = getattr(usage, name) if usage else None
    return 0 if value is None else usage_figure(value)


def _cached_tokens(usage: Any) -> int:
    """``usage.prompt_tokens_details.cached_tokens`` where the endpoint reports it (OpenAI and
    compatible servers with a prefix cache), else 0; a value of another kind counts as none,
    as these are only a discount on tokens already counted."""
    details = getattr(usage, "prompt_tokens_details", None) if usage else None
    if isinstance(details, dict):  # an endpoint's extra field the SDK did not model
        cached = details.get("cached_tokens")
    else:
        cached = getattr(details, "cached_tokens", None)
    return usage_figure(cached) or 0


def _not_a_completion(who: str, reply: object) -> JudgeUnavailable:
    kind = "text" if isinstance(reply, str) else type(reply).__name__
    return JudgeUnavailable(f"{who} reply is not a chat completion ({kind})")


@dataclass(frozen=True)
class Generation:
    """One re-asked answer: the text, its token log-probabilities as the API returned them
    (`choices[0].logprobs` as a plain dict, or None) and the call's usage."""

    result: CallResult
    logprobs: dict[str, Any] | None


class GeneratorClient:
    """Re-asks the generator (self-consistency investigations): the answer's own messages at a
    temperature above 0, with log-probabilities on. Errors map like the judge's, so the task
    retries the same way."""

    def __init__(self, *, deadline: float | None = None) -> None:
        self.base_url = settings.TREUE_GENERATOR_BASE_URL
        if not self.base_url:
            raise JudgeMisconfigured("no generator endpoint: set TREUE_GENERATOR_BASE_URL")
        self.config = JudgeConfig(
            base_url=self.base_url,
            api_key=settings.TREUE_GENERATOR_API_KEY or "unused",
            model="",
            timeout=settings.TREUE_GENERATOR_TIMEOUT_SECONDS,
            max_tokens_decompose=0,
            max_tokens_verify=0,
        )
        self.deadline = deadline
        self._client = _shared_client(self.config)

    def generate(
        self, messages: list[dict[str, Any]], *, model: str, temperature: float
    ) -> Generation:
        timeout = self.config.timeout
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise JudgeUnavailable("time limit exceeded")
            timeout = min(timeout, left)
        started = time.monotonic()
        completion = _create(
            self._client,
            "generator",
            model=model,
            messages=messages,
            temperature=temperature,
            max_tokens=settings.TREUE_GENERATOR_MAX_TOKENS,
            logprobs=True,
            timeout=timeout,
        )
        result = _result(completion, model, started, "generator")
        choice = completion.choices[0] if completion.choices else None
        logprobs = getattr(choice, "logprobs", None)
        if logprobs is not None and not hasattr(logprobs, "model_dump"):
            raise _not_a_completion("generator", completion)
        return Generation(
            result=result,
            logprobs=_storable(logprobs.model_dump(mode="json")) if logprobs else None,
        )


def _storable(value: Any) -> Any:
    """A reply's JSON with every string made storable (storable_text): a generator's token may
    be a NUL or half of a character's surrogate pair, which the database refuses in JSON."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, list):
        return [_storable(v) for v in value]
    if isinstance(value, dict):
        return {k: _storable(v) for k, v in value.items()}
    return value
