"""A local OpenAI-compatible chat completions server for tests, and its pytest fixture.

Tests call it through the real ``openai`` client, so the request and response shapes are the
SDK's, not ours. It answers ``POST /v1/chat/completions`` with a ChatCompletion whose content
comes from ``server.responder``. With ``logprobs: true`` it adds token log-probabilities from a
deterministic fake tokeniser that behaves like OpenAI's where it matters to tier 1: words carry
their leading space, long words split into pieces, and some multi-byte characters split
between two tokens (written in the style chosen by ``byte_style``).

For the judge tier it can play a judge (``ScriptedJudge``), hold replies back
(``delay_for``, released early by ``wake()``), answer with scripted failures (``fail_next``, with
headers such as Retry-After), fix the reported token usage (``usage_for``), end a reply at its
token limit (``finish_reason_for``) or refuse it in OpenAI's ``refusal`` field (``refusal_for``),
and record when each request arrived (``request_times``).

Load it with ``pytest_plugins = ["tests.support.openai_server"]`` in the top-level conftest.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from judging.domain.batched import VERIFY_BATCH_SYSTEM_DE, VERIFY_BATCH_SYSTEM_EN
from judging.domain.judge_prompt import (
    DECOMPOSE_RETRY_DE,
    DECOMPOSE_RETRY_EN,
    DECOMPOSE_SYSTEM_DE,
    DECOMPOSE_SYSTEM_EN,
    VERIFY_RETRY_DE,
    VERIFY_RETRY_EN,
)
from judging.domain.single import SINGLE_SYSTEM_DE, SINGLE_SYSTEM_EN

DEFAULT_ANSWER = (
    "Die Aufbewahrungsfrist beträgt 3,5 Jahre gemäß § 4 der Verordnung. "
    "Ab 2026 kostet die Prüfung 1.250,00 € für Behältergrößen über 5 m³; "
    "Straßenfahrzeuge sind ausgenommen."
)

BYTE_STYLES = ("openai", "escape", "replacement")

# Pre-tokenisation like GPT's: a word with its leading space, a run of digits, one
# punctuation mark with its leading space, whitespace, or any other single character.
# Azure OpenAI's path for a chat completion: /openai/deployments/<deployment>/chat/completions.
_AZURE_PATH = re.compile(r"/openai/deployments/([^/]+)/chat/completions/?")
_PIECE_RE = re.compile(r" ?[^\W\d_]+| ?\d{1,3}| ?[^\w\s]|\s+|.")
_PIECE_CHARS = 4


def default_responder(request: dict[str, Any]) -> str:
    return DEFAULT_ANSWER


def default_logprob(index: int, token: str) -> float:
    """A pseudo-random log-probability in [-3, 0], the same for the same token and place."""
    digest = hashlib.sha256(f"{index}:{token}".encode()).digest()
    return -3.0 * int.from_bytes(digest[:4], "big") / 0xFFFFFFFF


def fake_tokenise(text: str) -> list[bytes]:
    """Split ``text`` into token byte strings; three of every four non-ASCII characters are cut
    between two tokens (after the first byte, or after the second in some 3-byte ones)."""
    chunks: list[bytes] = []
    non_ascii = 0
    for match in _PIECE_RE.finditer(text):
        piece = match.group()
        space = " " if piece.startswith(" ") and len(piece) > 1 else ""
        body = piece[len(space) :]
        parts = [body[i : i + _PIECE_CHARS] for i in range(0, len(body), _PIECE_CHARS)]
        parts[0] = space + parts[0]
        for part in parts:
            current = b""
            for char in part:
                # A lone surrogate (a model's slip some tests replay) as its three bytes.
                encoded = char.encode("utf-8", "surrogatepass")
                if len(encoded) > 1:
                    non_ascii += 1
                if len(encoded) > 1 and non_ascii % 4 != 3:
                    cut = 1 + (non_ascii // 4) % (len(encoded) - 1)
                    chunks.append(current + encoded[:cut])
                    current = encoded[cut:]
                else:
                    current += encoded
            if current:
                chunks.append(current)
    return chunks


def token_text(chunk: bytes, byte_style: str) -> str:
    """How a server writes a token whose bytes may not be valid UTF-8 on their own."""
    try:
        return chunk.decode()
    except UnicodeDecodeError:
        pass
    if byte_style == "openai":
        return "bytes:" + "".join(f"\\x{b:02x}" for b in chunk)
    if byte_style == "escape":
        return chunk.decode(errors="backslashreplace")
    return chunk.decode(errors="replace")


_CLAIM_LINE = re.compile(r"^(?:Aussage|Claim): (.*)$", re.MULTILINE)
# A batched request lists its claims after the context: "Aussagen (3):", then "K7: claim".
_LISTED_CLAIM = re.compile(r"^([A-Z][0-9]): (.*)$", re.MULTILINE)
_CORRECTION_IDS = re.compile(r"\b([A-Z][0-9])\b")


class Refused(Exception):
    """Raised by a responder: the server answers with ``status`` and this message, as an
    endpoint refuses a request (a 400 for a response_format it does not take)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ScriptedJudge:
    """A responder that plays the LLM judge of tier 2, reading requests as the model would.

    A decomposition (recognised by its system prompt) is answered with ``claims`` as a JSON
    array, or with ``decomposition`` (raw text; a list gives the replies in order of attempts).
    A verification is answered with ``verdicts[claim]`` (a list gives the replies in order of
    attempts, the last one repeating), else ``default``. A retry is recognised by the reminder
    the judge domain appends.

    A batched verification gets one line per listed claim, "<id>: <its verdict>
    [<evidence[claim]>] <reasons[claim]>" (a claim in ``skip_in_batch`` gets no line), or
    ``batch_reply`` as it is where given (a list: the first reply, then the correction's). A
    request with a JSON schema (response_format) is refused with a 400 unless ``structured``,
    which answers it in the schema. A correction (the domain's follow-up in the same
    conversation) is answered for the ids it names, like a first reply. A one-call request
    gets ``{"claims": [{claim, verdict, chunks, reason}]}`` from ``claims``, or
    ``single_reply``. ``seen`` records (kind, claim or None, attempt) per request and claim.
    """

    def __init__(
        self,
        claims: list[str] | tuple[str, ...] = ("Der Behälter wird alle 5 Jahre geprüft.",),
        verdicts: dict[str, str | list[str]] | None = None,
        default: str = "GEDECKT",
        decomposition: str | list[str] | None = None,
        evidence: dict[str, str] | None = None,
        reasons: dict[str, str] | None = None,
        skip_in_batch: tuple[str, ...] = (),
        batch_reply: str | list[str] | None = None,
        structured: bool = False,
        single_reply: str | list[str] | None = None,
    ) -> None:
        self.batch_reply = batch_reply
        self.evidence = dict(evidence or {})
        self.reasons = dict(reasons or {})
        self.skip_in_batch = skip_in_batch
        self.claims = list(claims)
        self.verdicts = dict(verdicts or {})
        self.default = default
        self.decomposition = decomposition
        self.structured = structured
        self.single_reply = single_reply
        self.seen: list[tuple[str, str | None, int]] = []
        self._lock = threading.Lock()

    def copy(self) -> ScriptedJudge:
        """An independent copy (its own scripts and record), for a test on a shared world."""
        twin = copy.copy(self)
        twin.evidence, twin.reasons = dict(self.evidence), dict(self.reasons)
        twin.claims, twin.verdicts, twin.seen = list(self.claims), dict(self.verdicts), []
        twin._lock = threading.Lock()
        return twin

    def __call__(self, request: dict[str, Any]) -> str:
        messages = request.get("messages") or []
        system = messages[0].get("content", "") if messages else ""
        last = messages[-1].get("content", "") if messages else ""
        schema = request.get("response_format")
        if system in (DECOMPOSE_SYSTEM_DE, DECOMPOSE_SYSTEM_EN):
            attempt = 2 if last in (DECOMPOSE_RETRY_DE, DECOMPOSE_RETRY_EN) else 1
            with self._lock:
                self.seen.append(("decompose", None, attempt))
            if self.decomposition is None:
                return json.dumps(self.claims, ensure_ascii=False)
            return _nth(self.decomposition, attempt)
        if schema is not None and not self.structured:
            raise Refused(400, "Unsupported parameter: 'response_format'")
        if system.startswith((SINGLE_SYSTEM_DE, SINGLE_SYSTEM_EN)):
            attempt = 2 if len(messages) > 2 else 1
            with self._lock:
                self.seen.append(("single", None, attempt))
            if self.single_reply is not None:
                return _nth(self.single_reply, attempt)
            return json.dumps({"claims": [
                {"claim": claim, "verdict": _nth(self.verdicts.get(claim, self.default), 1),
                 "chunks": [int(r) for r in re.findall(r"\d+", self.evidence.get(claim, ""))],
                 "reason": self.reasons.get(claim, "")}
                for claim in self.claims
            ]}, ensure_ascii=False)
        if system.startswith((VERIFY_BATCH_SYSTEM_DE, VERIFY_BATCH_SYSTEM_EN)):
            # The claims are listed after the context (whose chunks may hold such lines too).
            content = messages[1].get("content", "")
            tail = re.split(r"\n\n(?:Aussagen|Claims) \(\d+\):\n", content)[-1]
            listed = _LISTED_CLAIM.findall(tail)
            attempt = 2 if len(messages) > 2 else 1
            if attempt == 2:
                named = set(_CORRECTION_IDS.findall(last.split("\n")[0]))
                listed = [(id_, claim) for id_, claim in listed if id_ in named]
            with self._lock:
                kind = "verify_batch" if attempt == 1 else "correct_batch"
                self.seen += [(kind, claim, attempt) for _, claim in listed]
            if self.batch_reply is not None:
                return _nth(self.batch_reply, attempt)
            given = [(id_, claim) for id_, claim in listed if claim not in self.skip_in_batch
                     or attempt == 2]
            if schema is not None:
                return json.dumps({"verdicts": [
                    {"id": id_, "verdict": _nth(self.verdicts.get(claim, self.default), 1),
                     "chunks": [int(r) for r in re.findall(r"\d+",
                                                          self.evidence.get(claim, ""))],
                     "reason": self.reasons.get(claim, "")}
                    for id_, claim in given
                ]}, ensure_ascii=False)
            return "\n".join(
                f"{id_}: {_nth(self.verdicts.get(claim, self.default), 1)} "
                f"[{self.evidence.get(claim, '')}] {self.reasons.get(claim, '')}".rstrip()
                for id_, claim in given
            )
        attempt = 2 if last in (VERIFY_RETRY_DE, VERIFY_RETRY_EN) else 1
        user = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
        match = _CLAIM_LINE.search(user)
        claim = match.group(1) if match else None
        with self._lock:
            self.seen.append(("verify", claim, attempt))
        return _nth(self.verdicts.get(claim or "", self.default), attempt)


def _nth(script: str | list[str], attempt: int) -> str:
    if isinstance(script, str):
        return script
    return script[min(attempt, len(script)) - 1]


class FakeOpenAIServer:
    """An OpenAI-compatible server on 127.0.0.1 in a background thread."""

    def __init__(self) -> None:
        self.responder: Callable[[dict[str, Any]], str] = default_responder
        self.logprob_for: Callable[[int, str], float] = default_logprob
        self.byte_style = "openai"
        self.requests: list[dict[str, Any]] = []
        # time.monotonic() at which each request of ``requests`` arrived, in the same order.
        self.request_times: list[float] = []
        # Seconds to hold the reply to the request with this 0-based arrival index; ``wake()``
        # ends every wait at once (a held reply is then sent as usual).
        self.delay_for: Callable[[int, dict[str, Any]], float] | None = None
        # (prompt_tokens, completion_tokens[, cached_tokens]) to report for a request and its
        # reply content.
        self.usage_for: Callable[[dict[str, Any], str], tuple[int, ...]] | None = None
        # The choice's finish_reason for a reply ("length": cut off at max_tokens); "stop" without.
        self.finish_reason_for: Callable[[dict[str, Any], str], str] | None = None
        # An OpenAI refusal for a request and its reply content: the message then carries this
        # text in ``refusal`` and no content (None: the content as usual).
        self.refusal_for: Callable[[dict[str, Any], str], str | None] | None = None
        # Requests that came the Azure OpenAI way: deployment, API version and credential.
        self.azure_calls: list[dict[str, Any]] = []
        # The status to fail the request with this 0-based arrival index with (an OpenAI-shaped
        # error body; 429 with Retry-After: 0), or None to answer it: a share of failing calls.
        self.fail_for: Callable[[int, dict[str, Any]], int | None] | None = None
        # Requests being answered right now, and the most there ever were at once.
        self.in_flight = 0
        self.max_in_flight = 0
        self._failures: list[list[Any]] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        # A short poll interval: shutdown() waits for it, once per test.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.wake()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def fail_next(
        self,
        status: int,
        body: dict[str, Any] | str | None = None,
        headers: dict[str, str] | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` requests with ``status`` (an OpenAI-shaped error body
        unless ``body`` is given); the requests are still recorded."""
        if body is None:
            body = {
                "error": {
                    "message": f"Simulated failure with status {status}",
                    "type": "server_error" if status >= 500 else "invalid_request_error",
                    "param": None,
                    "code": None,
                }
            }
        with self._lock:
            self._failures.append([status, body, dict(headers or {}), times])

    def wake(self) -> None:
        """Send every reply held back by ``delay_for`` now; later requests are held as usual."""
        with self._lock:
            self._wake.set()
            self._wake = threading.Event()

    def reset(self) -> None:
        """Forget requests, failures, delays, usage and responder (for a shared server)."""
        self.wake()
        with self._lock:
            self.responder = default_responder
            self.logprob_for = default_logprob
            self.byte_style = "openai"
            self.delay_for = None
            self.usage_for = None
            self.finish_reason_for = None
            self.refusal_for = None
            self.fail_for = None
            self.requests.clear()
            self.azure_calls.clear()
            self.request_times.clear()
            self.max_in_flight = self.in_flight
            self._failures.clear()

    def _record(self, request: dict[str, Any]) -> int:
        with self._lock:
            self.requests.append(request)
            self.request_times.append(time.monotonic())
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return len(self.requests) - 1

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _hold(self, index: int, request: dict[str, Any]) -> None:
        delay_for = self.delay_for
        seconds = delay_for(index, request) if delay_for is not None else 0.0
        if seconds > 0:
            with self._lock:
                wake = self._wake
            wake.wait(seconds)

    def _take_failure(self) -> tuple[int, Any, dict[str, str]] | None:
        with self._lock:
            if not self._failures:
                return None
            failure = self._failures[0]
            failure[3] -= 1
            if failure[3] <= 0:
                self._failures.pop(0)
            return failure[0], failure[1], failure[2]

    def completion(self, request: dict[str, Any]) -> dict[str, Any]:
        content = self.responder(request)
        chunks = fake_tokenise(content)
        refusal = None if self.refusal_for is None else self.refusal_for(request, content)
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if refusal is not None:
            message = {"role": "assistant", "content": None, "refusal": refusal}
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": (
                "stop" if self.finish_reason_for is None
                else self.finish_reason_for(request, content)
            ),
            "logprobs": None,
        }
        if request.get("logprobs"):
            choice["logprobs"] = {"content": self._logprobs(chunks, request), "refusal": None}
        prompt_chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
        usage: dict[str, Any] = {
            "prompt_tokens": max(1, prompt_chars // 4), "completion_tokens": len(chunks)
        }
        if self.usage_for is not None:
            # (prompt, completion), or (prompt, completion, cached) for a provider's prefix cache.
            figures = self.usage_for(request, content)
            usage["prompt_tokens"], usage["completion_tokens"] = figures[0], figures[1]
            if len(figures) > 2:
                usage["prompt_tokens_details"] = {"cached_tokens": figures[2]}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return {
            "id": f"chatcmpl-test{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "test-model"),
            "system_fingerprint": None,
            "choices": [choice],
            "usage": usage,
        }

    def _logprobs(self, chunks: list[bytes], request: dict[str, Any]) -> list[dict[str, Any]]:
        top_n = request.get("top_logprobs") or 0
        items = []
        for index, chunk in enumerate(chunks):
            text = token_text(chunk, self.byte_style)
            logprob = self.logprob_for(index, text)
            raw = list(chunk) if self.byte_style == "openai" else None
            top = [{"token": text, "logprob": logprob, "bytes": raw}]
            for alt in range(1, top_n):
                alt_text = f" alt{alt}"
                top.append(
                    {
                        "token": alt_text,
                        "logprob": logprob - 1.0 - alt,
                        "bytes": list(alt_text.encode()) if raw is not None else None,
                    }
                )
            items.append(
                {"token": text, "logprob": logprob, "bytes": raw, "top_logprobs": top[:top_n]}
            )
        return items


def _make_handler(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes; with Nagle on, the client's delayed ACK adds
        # ~40 ms to every reply on a kept-alive connection (as in treue_demo/server.py).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            # Quiet: pytest shows stderr of failing tests, and request lines are noise there.
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            path, _, query = self.path.partition("?")
            azure = _AZURE_PATH.fullmatch(path)
            if azure is not None:
                # Azure OpenAI: the deployment in the path, the API version in the query, the
                # key in api-key or an Entra token as a bearer (never both).
                versions = urllib.parse.parse_qs(query).get("api-version", [])
                key, bearer = self.headers.get("api-key"), self.headers.get("Authorization")
                if len(versions) != 1 or bool(key) == bool(bearer):
                    self._send(400, {"error": {"message": "api-version and one credential",
                                               "type": "invalid_request_error"}})
                    return
                server.azure_calls.append({
                    "deployment": urllib.parse.unquote(azure.group(1)),
                    "api_version": versions[0], "api_key": key, "authorization": bearer,
                })
            elif path.rstrip("/") != "/v1/chat/completions":
                self._send(
                    404, {"error": {"message": "Not found", "type": "invalid_request_error"}}
                )
                return
            try:
                request = json.loads(raw or b"{}")
            except ValueError:
                self._send(
                    400, {"error": {"message": "Invalid JSON", "type": "invalid_request_error"}}
                )
                return
            index = server._record(request)
            try:
                self._answer(index, request)
            finally:
                server._done()

        def _answer(self, index: int, request: dict[str, Any]) -> None:
            server._hold(index, request)
            failure = server._take_failure()
            if failure is not None:
                self._send(*failure)
                return
            fail_for = server.fail_for
            status = fail_for(index, request) if fail_for is not None else None
            if status is not None:
                kind = "rate_limit_exceeded" if status == 429 else "server_error"
                self._send(
                    status, {"error": {"message": f"Simulated {status}", "type": kind}},
                    {"Retry-After": "0"} if status == 429 else None,
                )
                return
            try:
                body = server.completion(request)
            except Refused as refused:
                self._send(refused.status, {"error": {
                    "message": str(refused), "type": "invalid_request_error"}})
                return
            except Exception as error:  # a broken responder hook: show it, as OpenAI would
                message = f"responder failed: {error!r}"
                self._send(500, {"error": {"message": message, "type": "server_error"}})
                return
            self._send(200, body)

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            try:
                self.send_response(status)
                if not any(name.lower() == "content-type" for name in headers or {}):
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                # The client gave up (a timeout, or a killed worker) while the reply was held.
                self.close_connection = True

    return Handler


@pytest.fixture(scope="session")
def _openai_server_of_this_process() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def openai_server(
    _openai_server_of_this_process: FakeOpenAIServer,
) -> Iterator[FakeOpenAIServer]:
    """The local server, as new for this test: one per test process (pytest-xdist worker), reset
    before and after each test. Not one per test: the judge's client is made once per endpoint
    and process (judging/client.py), so a new port for every test meant a new client
    and its certificate store loaded again each time, a twelfth of the fast tests' time."""
    server = _openai_server_of_this_process
    server.reset()
    try:
        yield server
    finally:
        server.reset()
