"""The recording client: a bounded in-memory queue and a background thread that sends batches.

``record()`` only builds a dict and puts it on the queue, so the caller's request never waits
for Treue and never sees an error from it. The thread sends up to ``batch_size`` answers per
``POST /api/v1/answers/batch``, retries what failed for a reason that may pass (network errors,
429, 5xx) with capped exponential backoff and jitter, and gives up at once on answers Treue
refused (4xx): sending them again cannot help.
"""

from __future__ import annotations

import atexit
import json
import logging
import queue
import random
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import httpx

logger = logging.getLogger("treue_client")

BATCH_PATH = "/api/v1/answers/batch"
# The server takes at most 500 answers per batch request.
MAX_BATCH_SIZE = 500
# Backoff: base * 2**attempt seconds, at most BACKOFF_MAX, times a jitter in [0.5, 1] so that
# many service processes do not retry in step after an outage.
BACKOFF_BASE = 0.5
BACKOFF_MAX = 30.0
# A Retry-After longer than this is not waited for in full: the queue keeps filling meanwhile.
RETRY_AFTER_MAX = 60.0
# Drops are logged once and then every this many, not for every answer of a full queue.
DROP_LOG_EVERY = 1000
CHUNK_FIELDS = ("text", "id", "score", "source")

# Put on the queue by flush() and close(): ends the batch being gathered at once.
_WAKE = object()


class TreueClient:
    """Records answers for one use case and ships them to a Treue server in the background.

    ``max_retries=None`` (the default) retries a failing batch until it is sent or the client is
    closed, so that answers survive an outage of Treue; meanwhile new answers wait in the queue
    and only a full queue drops (and counts) them. A number gives up on a batch after that many
    retries and counts its answers as ``failed``.
    """

    def __init__(
        self,
        url: str,
        api_key: str,
        use_case: str,
        *,
        max_queue: int = 10_000,
        batch_size: int = 100,
        flush_interval: float = 1.0,
        timeout: float = 5.0,
        max_retries: int | None = None,
        backoff_base: float = BACKOFF_BASE,
        backoff_max: float = BACKOFF_MAX,
    ) -> None:
        self.use_case = use_case
        self.max_queue = max_queue
        self.batch_size = max(1, min(batch_size, MAX_BATCH_SIZE))
        self.flush_interval = flush_interval
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queue)
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"},
            timeout=timeout,
        )
        self._lock = threading.Lock()
        # Answers accepted by record() and not yet sent, rejected or given up on.
        self._pending = 0
        self._settled = threading.Condition(self._lock)
        self._counts = {"sent": 0, "retried": 0, "dropped": 0, "rejected": 0, "failed": 0}
        self._closed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="treue-client", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    # The caller's side: never blocks, never raises.

    def record(
        self,
        *,
        question: str | None = None,
        answer: str | None = None,
        chunks: Iterable[Any] | None = None,
        model: str | None = None,
        logprobs: Any = None,
        messages: list[Any] | None = None,
        external_id: str | None = None,
        created_at: Any = None,
        metadata: Mapping[str, Any] | None = None,
        use_case: str | None = None,
    ) -> str | None:
        """Queue one answer; return its external_id, or None when it was not queued."""
        try:
            if self._closed:
                self._count("dropped")
                return None
            external_id = external_id or uuid.uuid4().hex
            body: dict[str, Any] = {
                "external_id": external_id,
                "use_case": use_case or self.use_case,
                "question": question,
                "answer": answer,
                "model": model,
                "chunks": [_chunk(c) for c in chunks or ()],
            }
            if logprobs is not None:
                body["logprobs"] = _logprobs(logprobs)
            if messages is not None:
                body["messages"] = list(messages)
            if created_at is not None:
                body["created_at"] = (
                    created_at.isoformat() if isinstance(created_at, datetime) else created_at
                )
            if metadata:
                body["metadata"] = dict(metadata)
            with self._lock:
                self._queue.put_nowait(body)
                self._pending += 1
            return external_id
        except queue.Full:
            dropped = self._count("dropped")
            if dropped == 1 or dropped % DROP_LOG_EVERY == 0:
                logger.warning(
                    "treue: queue full (%d answers), %d dropped", self.max_queue, dropped
                )
        except Exception:
            logger.exception("treue: could not record an answer")
        return None

    def stats(self) -> dict[str, int]:
        """sent, retried (answers sent again), dropped (queue full or client closed),
        rejected (refused by Treue with 4xx), failed (given up after retries or at close),
        queued (waiting now)."""
        with self._lock:
            return {**self._counts, "queued": self._queue.qsize()}

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every answer recorded so far is sent or settled; False on timeout."""
        deadline = time.monotonic() + timeout
        self._wake()
        with self._settled:
            while self._pending > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._thread.is_alive():
                    return False
                self._settled.wait(remaining)
        return True

    def close(self, timeout: float = 5.0) -> bool:
        """Flush for up to ``timeout`` seconds, then stop the thread; answers still unsent count
        as failed. Safe to call twice; runs at interpreter exit as well."""
        if self._closed:
            return True
        self._closed = True
        try:
            atexit.unregister(self.close)
            flushed = self.flush(timeout)
            self._stop.set()
            self._wake()
            # A request in flight may take up to the HTTP timeout; the thread is a daemon, so
            # waiting a moment for it is enough.
            self._thread.join(timeout=1.0)
            self._http.close()
            return flushed
        except Exception:
            logger.exception("treue: error while closing the client")
            return False

    def __enter__(self) -> TreueClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The background thread.

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                batch = self._gather()
                if batch:
                    self._send(batch)
            except Exception:
                logger.exception("treue: unexpected error in the sending thread")
        # Stopped: whatever is still queued will not be sent.
        left = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _WAKE:
                left += 1
        if left:
            self._settle(left, "failed")
            logger.warning("treue: closed with %d answers unsent", left)

    def _gather(self) -> list[dict[str, Any]]:
        """Wait for a first answer, then collect more until batch_size, flush_interval or a
        wake-up, whichever comes first."""
        batch: list[dict[str, Any]] = []
        try:
            first = self._queue.get(timeout=self.flush_interval)
        except queue.Empty:
            return batch
        if first is _WAKE:
            return batch
        batch.append(first)
        deadline = time.monotonic() + self.flush_interval
        while len(batch) < self.batch_size and not self._stop.is_set():
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    item = self._queue.get_nowait()
                else:
                    item = self._queue.get(timeout=remaining)
            except queue.Empty:
                break
            if item is _WAKE:
                break
            batch.append(item)
        return batch

    def _send(self, items: list[dict[str, Any]]) -> None:
        attempt = 0
        while items:
            retry_after: float | None = None
            try:
                response = self._http.post(BATCH_PATH, content=_encode(items))
            except httpx.HTTPError as error:
                reason = f"{type(error).__name__}: {error}"
            else:
                status = response.status_code
                if status == 200:
                    items = self._settle_results(items, response)
                    if not items:
                        return
                    reason = "server errors on some answers"
                elif status == 413 and len(items) > 1:
                    half = len(items) // 2
                    self._send(items[:half])
                    self._send(items[half:])
                    return
                elif status == 429 or status >= 500:
                    reason = f"HTTP {status}"
                    retry_after = _retry_after(response.headers.get("Retry-After"))
                else:
                    # 400/401/403/413: the same request would be refused again.
                    logger.error(
                        "treue: %d answers refused with HTTP %d: %s",
                        len(items), status, response.text[:500],
                    )
                    self._settle(len(items), "rejected")
                    return
            if self._stop.is_set() or (
                self.max_retries is not None and attempt >= self.max_retries
            ):
                logger.warning("treue: giving up on %d answers (%s)", len(items), reason)
                self._settle(len(items), "failed")
                return
            delay = min(self.backoff_max, self.backoff_base * 2**attempt)
            delay *= random.uniform(0.5, 1.0)
            if retry_after is not None:
                delay = max(delay, min(retry_after, RETRY_AFTER_MAX))
            attempt += 1
            logger.info("treue: %s; retrying %d answers in %.2f s", reason, len(items), delay)
            if self._stop.wait(delay):
                logger.warning("treue: closed while retrying; %d answers unsent", len(items))
                self._settle(len(items), "failed")
                return
            self._count("retried", len(items))

    def _settle_results(
        self, items: list[dict[str, Any]], response: httpx.Response
    ) -> list[dict[str, Any]]:
        """Count the batch's per-item results; return the items to retry (5xx and 429)."""
        try:
            results = response.json()["results"]
        except Exception:
            logger.warning("treue: unreadable batch response; assuming it was stored")
            self._settle(len(items), "sent")
            return []
        sent = rejected = 0
        retry = []
        for result in results:
            index, status = result.get("index"), result.get("status", 0)
            if status < 400:
                sent += 1
            elif status == 429 or status >= 500:
                retry.append(items[index])
            else:
                rejected += 1
                logger.error(
                    "treue: answer %s refused with HTTP %d: %s",
                    items[index].get("external_id"), status, result.get("errors"),
                )
        self._settle(sent, "sent")
        self._settle(rejected, "rejected")
        return retry

    # Bookkeeping.

    def _count(self, name: str, n: int = 1) -> int:
        with self._lock:
            self._counts[name] += n
            return self._counts[name]

    def _settle(self, n: int, name: str) -> None:
        if n <= 0:
            return
        with self._settled:
            self._counts[name] += n
            self._pending -= n
            self._settled.notify_all()

    def _wake(self) -> None:
        try:
            self._queue.put_nowait(_WAKE)
        except queue.Full:
            pass  # a full queue wakes the thread by itself: its batch fills at once


def _chunk(chunk: Any) -> dict[str, Any]:
    if isinstance(chunk, str):
        return {"text": chunk}
    if isinstance(chunk, Mapping):
        return {k: chunk[k] for k in CHUNK_FIELDS if chunk.get(k) is not None}
    return {k: getattr(chunk, k) for k in CHUNK_FIELDS if getattr(chunk, k, None) is not None}


def _logprobs(logprobs: Any) -> Any:
    """OpenAI's choice.logprobs as a plain dict (from an SDK object, a dict or a token list)."""
    if hasattr(logprobs, "model_dump"):
        logprobs = logprobs.model_dump()
    if isinstance(logprobs, list):
        return {"content": logprobs}
    return logprobs


def _encode(items: list[dict[str, Any]]) -> bytes:
    # default=str: an odd value inside metadata or messages becomes text rather than costing
    # the whole batch.
    return json.dumps({"answers": items}, default=str, ensure_ascii=False).encode()


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare from Treue, the backoff applies instead
