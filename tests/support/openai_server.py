"""A local OpenAI-compatible chat completions server for tests, and its pytest fixture.

Tests call it through the real ``openai`` client, so the request and response shapes are the
SDK's, not ours. It answers ``POST /v1/chat/completions`` with a ChatCompletion whose content
comes from ``server.responder``. With ``logprobs: true`` it adds token log-probabilities from a
deterministic fake tokeniser that behaves like OpenAI's where it matters to tier 1: words carry
their leading space, long words split into pieces, and some multi-byte characters split
between two tokens (written in the style chosen by ``byte_style``).

Load it with ``pytest_plugins = ["tests.support.openai_server"]`` in the top-level conftest.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

DEFAULT_ANSWER = (
    "Die Aufbewahrungsfrist beträgt 3,5 Jahre gemäß § 4 der Verordnung. "
    "Ab 2026 kostet die Prüfung 1.250,00 € für Behältergrößen über 5 m³; "
    "Straßenfahrzeuge sind ausgenommen."
)

BYTE_STYLES = ("openai", "escape", "replacement")

# Pre-tokenisation like GPT's: a word with its leading space, a run of digits, one
# punctuation mark with its leading space, whitespace, or any other single character.
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
                encoded = char.encode()
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


class FakeOpenAIServer:
    """An OpenAI-compatible server on 127.0.0.1 in a background thread."""

    def __init__(self) -> None:
        self.responder: Callable[[dict[str, Any]], str] = default_responder
        self.logprob_for: Callable[[int, str], float] = default_logprob
        self.byte_style = "openai"
        self.requests: list[dict[str, Any]] = []
        self._failures: list[list[Any]] = []
        self._lock = threading.Lock()
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
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": None},
            "finish_reason": "stop",
            "logprobs": None,
        }
        if request.get("logprobs"):
            choice["logprobs"] = {"content": self._logprobs(chunks, request), "refusal": None}
        prompt_chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
        return {
            "id": f"chatcmpl-test{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "test-model"),
            "system_fingerprint": None,
            "choices": [choice],
            "usage": {
                "prompt_tokens": max(1, prompt_chars // 4),
                "completion_tokens": len(chunks),
                "total_tokens": max(1, prompt_chars // 4) + len(chunks),
            },
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

        def log_message(self, format: str, *args: Any) -> None:
            # Quiet: pytest shows stderr of failing tests, and request lines are noise there.
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") != "/v1/chat/completions":
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
            with server._lock:
                server.requests.append(request)
            failure = server._take_failure()
            if failure is not None:
                self._send(*failure)
                return
            try:
                body = server.completion(request)
            except Exception as error:  # a broken responder hook: show it, as OpenAI would
                message = f"responder failed: {error!r}"
                self._send(500, {"error": {"message": message, "type": "server_error"}})
                return
            self._send(200, body)

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()
