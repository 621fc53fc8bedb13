"""The recording client: a bounded in-memory queue and a background thread that sends batches.

``record()`` only builds a dict and puts it on the queue, so the caller's request never waits
for Treue and never sees an error from it. The thread encodes each answer on its own, sends up
to ``batch_size`` answers per ``POST /api/v1/answers/batch``, retries what failed for a reason
that may pass (network errors, 429, 5xx) with capped exponential backoff and jitter, and gives
up at once on answers Treue refused (4xx) or that cannot be encoded as JSON: sending them again
cannot help.

No answer is lost silently: every answer given to ``record()`` ends up in exactly one of the
counters of ``stats()``, and is logged whenever it is not sent.
"""

from __future__ import annotations

import atexit
import contextlib
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

from treue_client.wire import (
    Item,
    batch_body,
    batch_results,
    chunk_fields,
    encode,
    logprobs_dict,
    retry_after_seconds,
)

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

# Put on the queue by flush() and close(): ends the batch being gathered at once.
_WAKE = object()


class _AnswerQueue(queue.Queue[Any]):
    """The bounded queue, counting the answers in it (not the wake-ups) under its own lock: the
    count moves with each put and get, so it never runs ahead of the queue (a count kept
    beside it read one more than the bound while the sending thread was taking an answer)."""

    def _init(self, maxsize: int) -> None:
        super()._init(maxsize)
        self.answers = 0

    def _put(self, item: Any) -> None:
        super()._put(item)
        if item is not _WAKE:
            self.answers += 1

    def _get(self) -> Any:
        item = super()._get()
        if item is not _WAKE:
            self.answers -= 1
        return item

# An answer ready to send: its external_id (for the log) and its JSON.


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
        self._queue = _AnswerQueue(maxsize=max_queue)
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"},
            timeout=timeout,
        )
        self._lock = threading.Lock()
        # Answers accepted by record() and not yet sent, rejected or given up on; of those, the
        # ones still on the queue; and how many the thread has settled so far (it tells what
        # part of a batch is still unaccounted for when something unexpected happens).
        self._pending = 0
        self._settled_total = 0
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
        """Queue one answer; return its external_id, or None when it was not queued (counted
        as dropped, or as rejected when its arguments cannot be read, and logged)."""
        try:
            if self._closed:
                self._count("dropped")
                return None
            external_id = external_id or uuid.uuid4().hex
            body = self._body(
                question=question, answer=answer, chunks=chunks, model=model,
                logprobs=logprobs, messages=messages, external_id=external_id,
                created_at=created_at, metadata=metadata, use_case=use_case,
            )
        except Exception as error:
            self._count("rejected")
            self._log_not_sent(external_id, "its arguments could not be read", error)
            return None
        # Not encoded here but in the thread: encoding costs about 1.4 ms for an answer of 1,000
        # tokens with log-probabilities, which would be the caller's to wait for.
        try:
            with self._lock:
                if self._closed:
                    self._counts["dropped"] += 1
                    return None
                self._queue.put_nowait(body)
                self._pending += 1
            return external_id
        except queue.Full:
            dropped = self._count("dropped")
            if dropped == 1 or dropped % DROP_LOG_EVERY == 0:
                with contextlib.suppress(Exception):
                    logger.warning(
                        "treue: queue full (%d answers), %d dropped", self.max_queue, dropped
                    )
        except Exception:
            with contextlib.suppress(Exception):
                logger.exception("treue: could not record an answer")
        return None

    def _body(
        self,
        *,
        question: str | None,
        answer: str | None,
        chunks: Iterable[Any] | None,
        model: str | None,
        logprobs: Any,
        messages: list[Any] | None,
        external_id: str,
        created_at: Any,
        metadata: Mapping[str, Any] | None,
        use_case: str | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "external_id": external_id,
            "use_case": use_case or self.use_case,
            "question": question,
            "answer": answer,
            "model": model,
            "chunks": [chunk_fields(c) for c in chunks or ()],
        }
        if logprobs is not None:
            body["logprobs"] = logprobs_dict(logprobs)
        if messages is not None:
            body["messages"] = list(messages)
        if created_at is not None:
            body["created_at"] = (
                created_at.isoformat() if isinstance(created_at, datetime) else created_at
            )
        if metadata:
            body["metadata"] = dict(metadata)
        return body

    @staticmethod
    def _log_not_sent(external_id: Any, reason: str, error: BaseException) -> None:
        # A caller's log handler that raises must not make record() raise; in the thread, the
        # answer is counted before this.
        with contextlib.suppress(Exception):
            logger.error(
                "treue: answer %s not sent: %s (%s: %s)",
                external_id, reason, type(error).__name__, error,
            )

    def stats(self) -> dict[str, int]:
        """sent, retried (answers sent again), dropped (queue full or client closed),
        rejected (refused by Treue with 4xx, or not readable or not encodable as JSON), failed
        (given up after retries, at close or after an unexpected error), queued (waiting now)."""
        with self._lock:
            return {**self._counts, "queued": self._queue.answers}

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
        with self._lock:
            if self._closed:
                return True
            # Under the lock: an answer is either on the queue before this, or dropped.
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
        try:
            while not self._stop.is_set():
                batch: list[dict[str, Any]] = []
                settled_before = self._settled_total
                try:
                    self._gather(batch)
                    items = self._encode_each(batch)
                    if items:
                        self._send(items)
                except BaseException as error:
                    # Whatever it was (a caller's log handler can raise anything here), the
                    # answers of the batch not yet accounted for are given up, so that flush()
                    # does not wait for them forever; and the thread goes on, being the only
                    # one that sends.
                    unsettled = len(batch) - (self._settled_total - settled_before)
                    self._settle(unsettled, "failed")
                    with contextlib.suppress(BaseException):
                        logger.error(
                            "treue: unexpected error in the sending thread; %d answers given up",
                            unsettled, exc_info=error,
                        )
        finally:
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

    def _gather(self, batch: list[dict[str, Any]]) -> None:
        """Wait for a first answer, then collect more into ``batch`` until batch_size,
        flush_interval or a wake-up, whichever comes first. Each answer goes into ``batch`` as
        soon as it leaves the queue, so that none is unaccounted for if something raises."""
        try:
            first = self._queue.get(timeout=self.flush_interval)
        except queue.Empty:
            return
        if first is _WAKE:
            return
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

    def _encode_each(self, batch: list[dict[str, Any]]) -> list[Item]:
        """Each answer on its own: one that cannot be encoded costs only itself, and is counted
        as rejected and logged. Encoded once, so that every retry sends the same bytes."""
        items: list[Item] = []
        for body in batch:
            external_id = body.get("external_id")
            try:
                items.append((external_id, encode(body)))
            except BaseException as error:
                # BaseException too: a value's __str__ may raise anything, and there is no one
                # in this thread it would be meant for.
                self._settle(1, "rejected")
                self._log_not_sent(external_id, "it cannot be encoded as JSON", error)
        return items

    def _send(self, items: list[Item]) -> None:
        attempt = 0
        while items:
            retry_after: float | None = None
            try:
                response = self._http.post(BATCH_PATH, content=batch_body(items))
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
                    retry_after = retry_after_seconds(response.headers.get("Retry-After"))
                else:
                    # 400/401/403/413: the same request would be refused again. Counted before
                    # anything else is done, here and below, so that nothing can come between.
                    self._settle(len(items), "rejected")
                    logger.error(
                        "treue: %d answers refused with HTTP %d: %s",
                        len(items), status, response.text[:500],
                    )
                    return
            if self._stop.is_set() or (
                self.max_retries is not None and attempt >= self.max_retries
            ):
                self._settle(len(items), "failed")
                logger.warning("treue: giving up on %d answers (%s)", len(items), reason)
                return
            delay = min(self.backoff_max, self.backoff_base * 2**attempt)
            delay *= random.uniform(0.5, 1.0)
            if retry_after is not None:
                delay = max(delay, min(retry_after, RETRY_AFTER_MAX))
            attempt += 1
            logger.info("treue: %s; retrying %d answers in %.2f s", reason, len(items), delay)
            if self._stop.wait(delay):
                self._settle(len(items), "failed")
                logger.warning("treue: closed while retrying; %d answers unsent", len(items))
                return
            self._count("retried", len(items))

    def _settle_results(self, items: list[Item], response: httpx.Response) -> list[Item]:
        """Count the batch's per-item results; return the items to retry (5xx and 429).

        A 200 means Treue took the batch: what its reply does not make clear (not JSON, not
        the expected shape, no result for an answer) is assumed stored, and logged."""
        results = batch_results(response, len(items))
        if results is None:
            self._settle(len(items), "sent")
            logger.warning(
                "treue: unreadable batch response; assuming its %d answers were stored",
                len(items),
            )
            return []
        sent = unknown = 0
        retry: list[Item] = []
        refused: list[tuple[str, int, Any]] = []
        # (Not zip(strict=True): the package still runs on Python 3.9; the lengths are equal.)
        for (external_id, data), result in zip(items, results):  # noqa: B905
            if result is None:
                unknown += 1
                continue
            status, errors = result
            if status < 400:
                sent += 1
            elif status == 429 or status >= 500:
                retry.append((external_id, data))
            else:
                refused.append((external_id, status, errors))
        self._settle(sent + unknown, "sent")
        self._settle(len(refused), "rejected")
        if unknown:
            logger.warning(
                "treue: the batch response names no result for %d answers; assuming they "
                "were stored", unknown,
            )
        for external_id, status, errors in refused:
            logger.error(
                "treue: answer %s refused with HTTP %d: %s", external_id, status, errors
            )
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
            self._settled_total += n
            self._settled.notify_all()

    def _wake(self) -> None:
        try:
            self._queue.put_nowait(_WAKE)
        except queue.Full:
            pass  # a full queue wakes the thread by itself: its batch fills at once

