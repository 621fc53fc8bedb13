"""What ``treue_client.instrument`` adds to a chat call: median wrapped vs unwrapped.

Starts, in this process, the tests' OpenAI-compatible server (``tests/support/openai_server``,
whose answers carry ~50 tokens with log-probabilities) and a small Treue stand-in that accepts
every batch (so the client's background thread does its real work - encoding and posting -
while the calls are timed). Then it times N chat calls through the real ``openai`` SDK with a
plain client and N through an instrumented one, alternating the two so that drift on a shared
machine hits both alike, and prints the medians and their difference (target: < 1 ms).

    .venv/bin/python bench/client_overhead.py [N]
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

# Run as a script, this folder comes first on sys.path, where bench/statistics.py would
# shadow the standard library's statistics module (Django and this file import it).
_sys.path[0] = str(_Path(__file__).resolve().parents[1])

import json
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import openai
from treue_client import TreueClient, instrument

from tests.support.openai_server import FakeOpenAIServer

TARGET_MS = 1.0
WARMUP = 20
OWN_WORK_CALLS = 2000
MESSAGES = [
    {"role": "system", "content": "Answer only from the sources."},
    {"role": "user", "content": "Sources:\nPrüfintervall: 5 Jahre.\n\nQuestion: Wie oft?"},
]
CHUNKS = [{"text": "Prüfintervall: 5 Jahre.", "score": 0.82, "source": "Prüfordnung.pdf"}]


class Sink(BaseHTTPRequestHandler):
    """Treue's batch endpoint, minus the storing: every item 201."""

    protocol_version = "HTTP/1.1"
    received = 0

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n = len(body["answers"])
        Sink.received += n
        payload = json.dumps(
            {"results": [{"index": i, "status": 201} for i in range(n)], "created": n}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _own_work(model_server: FakeOpenAIServer, treue: TreueClient) -> list[float]:
    """The wrapper's synchronous part alone: a stand-in ``create`` returns a prepared
    completion at once, so what is timed is what instrument() does around a call."""
    completion = openai.types.chat.ChatCompletion.model_validate(
        model_server.completion({"model": "m", "messages": MESSAGES, "logprobs": True})
    )
    fake = openai.OpenAI(api_key="sk-bench", base_url=model_server.base_url)
    fake.chat.completions.create = lambda **kwargs: completion
    instrument(fake, treue)
    times = []
    for _ in range(OWN_WORK_CALLS):
        started = time.perf_counter()
        fake.chat.completions.create(model="m", messages=MESSAGES, treue_chunks=CHUNKS)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    model_server = FakeOpenAIServer()
    # The test server writes headers and body in two sends; with Nagle's algorithm and delayed
    # ACKs that costs ~40 ms per call, noise that would swamp a sub-millisecond difference.
    model_server._httpd.RequestHandlerClass.disable_nagle_algorithm = True
    model_server.start()
    sink = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    treue = TreueClient(f"http://127.0.0.1:{sink.server_address[1]}", "trk_bench", "bench")
    plain = openai.OpenAI(api_key="sk-bench", base_url=model_server.base_url, max_retries=0)
    wrapped = instrument(
        openai.OpenAI(api_key="sk-bench", base_url=model_server.base_url, max_retries=0), treue
    )

    def call_plain() -> float:
        started = time.perf_counter()
        plain.chat.completions.create(model="m", messages=MESSAGES, logprobs=True)
        return time.perf_counter() - started

    def call_wrapped() -> float:
        # The wrapper adds logprobs=True itself: the same request reaches the server.
        started = time.perf_counter()
        wrapped.chat.completions.create(model="m", messages=MESSAGES, treue_chunks=CHUNKS)
        return time.perf_counter() - started

    try:
        for _ in range(WARMUP):
            call_plain()
            call_wrapped()
        plain_times, wrapped_times = [], []
        for i in range(n):
            # Alternate which goes first, so neither always follows the other's work.
            if i % 2:
                plain_times.append(call_plain())
                wrapped_times.append(call_wrapped())
            else:
                wrapped_times.append(call_wrapped())
                plain_times.append(call_plain())
        own_times = _own_work(model_server, treue)
        treue.flush(10)
    finally:
        treue.close(5)
        model_server.stop()
        sink.shutdown()

    own_ms = statistics.median(own_times) * 1000
    plain_ms = statistics.median(plain_times) * 1000
    wrapped_ms = statistics.median(wrapped_times) * 1000
    overhead = wrapped_ms - plain_ms
    stats = treue.stats()
    print(f"chat calls: {n} plain, {n} wrapped (after {WARMUP} warm-up each)")
    print(f"median plain    {plain_ms:7.3f} ms")
    print(f"median wrapped  {wrapped_ms:7.3f} ms")
    verdict = "ok" if overhead < TARGET_MS else "OVER TARGET"
    print(f"overhead        {overhead:7.3f} ms  (target < {TARGET_MS:.0f} ms: {verdict})")
    print(f"wrapper's own work per call (no network), median {own_ms:.3f} ms")
    expected = WARMUP + n + OWN_WORK_CALLS
    print(f"recorded: sent {stats['sent']} of {expected}, dropped {stats['dropped']}, "
          f"received by the stand-in {Sink.received}")


if __name__ == "__main__":
    main()
