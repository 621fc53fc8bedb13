"""Fixtures for the Python client's tests: a live Treue server with a use case and a key, and
a proxy in front of it that can be down, fail on purpose and count requests.

The judge's queue is replaced by a no-op here: these tests are about getting answers into
Treue, and must not depend on a broker (embedded or Redis) being reachable.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionTokenLogprob

from judging.services import runs as judging
from monitoring.services.use_cases import service_create, use_case_create

USE_CASE = "kundenservice"


@dataclass
class Treue:
    url: str
    key: str
    use_case: str


@pytest.fixture
def treue(live_server: Any, transactional_db: None, monkeypatch: pytest.MonkeyPatch) -> Treue:
    monkeypatch.setattr(judging, "judge_runs_enqueue", lambda *, run_ids: 0)
    use_case = use_case_create(slug=USE_CASE, name="Kundenservice", language="de")
    use_case_create(slug="vertrieb", name="Vertrieb", language="en")
    _, key = service_create(name="rag-bot", use_cases=[use_case])
    return Treue(url=live_server.url, key=key, use_case=USE_CASE)


def logprob_tokens(completion: ChatCompletion) -> list[ChatCompletionTokenLogprob]:
    """The first choice's token logprobs (asked for, so there)."""
    logprobs = completion.choices[0].logprobs
    assert logprobs is not None and logprobs.content is not None
    return logprobs.content


def free_port() -> int:
    """A port nothing listens on (until a Proxy is started on it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proxy:
    """An HTTP proxy to ``target`` on a fixed port: closed until ``start()``, then forwarding
    every request, or answering the next ones with a scripted failure (``fail_next``) or reply
    (``reply_next``)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.port = free_port()
        self.requests: list[tuple[float, str]] = []
        self._failures: list[tuple[int, dict[str, str], bytes]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail_next(self, status: int, headers: dict[str, str] | None = None, times: int = 1):
        self.reply_next(status, b'{"errors": []}', headers, times)

    def reply_next(
        self, status: int, body: bytes, headers: dict[str, str] | None = None, times: int = 1
    ) -> None:
        """Answer the next requests with this status and body instead of forwarding them."""
        with self._lock:
            self._failures.extend([(status, dict(headers or {}), body)] * times)

    def start(self) -> Proxy:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), _proxy_handler(self))
        self._httpd.daemon_threads = True
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def _take_failure(self) -> tuple[int, dict[str, str], bytes] | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None


def _proxy_handler(proxy: Proxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with proxy._lock:
                proxy.requests.append((time.monotonic(), self.path))
            failure = proxy._take_failure()
            if failure is not None:
                status, headers, payload = failure
                self._reply(status, payload, headers)
                return
            response = httpx.post(
                proxy.target + self.path,
                content=body,
                headers={
                    "Authorization": self.headers.get("Authorization", ""),
                    "Content-Type": "application/json",
                },
                timeout=30,
            )
            self._reply(response.status_code, response.content, {})

        def _reply(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@pytest.fixture
def proxy(treue: Treue) -> Iterator[Proxy]:
    proxy = Proxy(treue.url)
    yield proxy
    proxy.stop()


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


@pytest.fixture
def make_client(treue: Treue) -> Iterator[Callable[..., Any]]:
    """A TreueClient for the live server (or ``url``), with quick backoff; closed afterwards."""
    from treue_client import TreueClient

    made: list[TreueClient] = []

    def make(url: str | None = None, key: str | None = None, **options: Any) -> TreueClient:
        options = {"backoff_base": 0.05, "backoff_max": 0.2, "flush_interval": 0.05, **options}
        client = TreueClient(url or treue.url, key or treue.key, treue.use_case, **options)
        made.append(client)
        return client

    yield make
    # Each test has checked what it sent; a client whose Treue is down waits out the whole
    # timeout here, so it is short.
    for client in made:
        client.close(timeout=0.5)


@pytest.fixture
def no_internet() -> Iterator[None]:
    """Fails the test if anything in this process tried to reach a host other than this
    machine meanwhile (tests/support/no_network.py)."""
    from tests.support.no_network import outside_hosts

    with outside_hosts() as seen:
        yield
    assert not seen, f"tried to reach the internet: {seen}"
