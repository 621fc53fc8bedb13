"""A local HTTP receiver for alarm channels' webhooks: `http.server` in a thread on a free
port, which records every request (path, headers, raw body, time) and answers with scripted
statuses (`fail_next`), else 200. `down()` stops it and keeps its port closed, for a receiver
that is not there. Real HTTP over 127.0.0.1; nothing of the product is replaced."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


class WebhookReceiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._statuses: deque[int] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def start(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.requests.append(Received(
                        self.path, {k.lower(): v for k, v in self.headers.items()}, body,
                        time.monotonic(),
                    ))
                    status = receiver._statuses.popleft() if receiver._statuses else 200
                reply = b"ok" if status < 400 else b"receiver says no"
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        # Handler threads are not waited for at shutdown (a client's idle keep-alive
        # connection would hold it up).
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def fail_next(self, *statuses: int) -> None:
        with self._lock:
            self._statuses.extend(statuses)

    def received(self) -> list[Received]:
        with self._lock:
            return list(self.requests)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._statuses.clear()

    def down(self) -> None:
        """Stop serving: the port refuses connections (until `start` again)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    stop = down
