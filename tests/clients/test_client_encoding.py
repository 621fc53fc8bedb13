"""TreueClient never loses an answer silently: an answer that cannot be encoded costs only
itself (counted as rejected, logged with its external_id), whatever goes wrong in the sending
thread is counted and the thread goes on, and flush() and close() say True once the rest is
delivered. Against a live Treue server, through real HTTP."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from monitoring.models import Answer
from tests.clients.conftest import Proxy, wait_for
from tests.clients.test_client import answer


class Broken(Exception):
    pass


class Abort(BaseException):
    """Not even an Exception: what a careless library might raise."""


class Unprintable:
    """A metadata value whose text cannot be had: JSON falls back to str(), which raises."""

    def __init__(self, error: type[BaseException]) -> None:
        self.error = error

    def __str__(self) -> str:
        raise self.error("no text for this value")

    __repr__ = __str__


def circular() -> dict[str, Any]:
    loop: dict[str, Any] = {"name": "loop"}
    loop["self"] = loop
    return loop


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    return value


def stored_ids() -> set[str]:
    return set(Answer.objects.values_list("external_id", flat=True))


def test_an_answer_that_cannot_be_encoded_costs_only_itself(
    make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # One batch for all of them, however slow the machine: only flush() ends it.
    client = make_client(batch_size=8, flush_interval=30)
    caplog.set_level(logging.INFO, logger="treue_client")
    unencodable: dict[str, tuple[dict[str, Any], str]] = {
        "req-2": ({"metadata": circular()}, "Circular reference"),
        "req-3": ({"metadata": nested(1100)}, "recursion"),
        "req-4": ({"metadata": {"score": float("nan")}}, "Out of range float"),
        "req-5": ({"answer": "Alle 5 Jahre \ud800."}, "surrogates"),
        "req-6": ({"metadata": {"odd": Unprintable(Broken)}}, "Broken: no text"),
        "req-7": ({"metadata": {"odd": Unprintable(Abort)}}, "Abort: no text"),
    }

    assert client.record(**answer(1)) == "req-1"
    # record() takes them at once, as any other: they are encoded in the sending thread.
    for external_id, (fields, _) in unencodable.items():
        n = int(external_id.removeprefix("req-"))
        assert client.record(**{**answer(n), **fields}) == external_id
    odd_but_fine = {"when": datetime(2024, 5, 6, tzinfo=UTC), "price": Decimal("1.50")}
    assert client.record(**answer(8), metadata=odd_but_fine) == "req-8"

    assert client.flush(5)
    assert client.stats() == {
        "sent": 2, "retried": 0, "dropped": 0, "rejected": 6, "failed": 0, "queued": 0
    }
    assert stored_ids() == {"req-1", "req-8"}
    # What JSON has no type for goes as text rather than costing the answer.
    assert Answer.objects.get(external_id="req-8").metadata == {
        "when": "2024-05-06 00:00:00+00:00", "price": "1.50"
    }

    def all_logged() -> bool:
        messages = [r.getMessage() for r in caplog.records if r.name == "treue_client"]
        return all(
            any(external_id in m and reason in m for m in messages)
            for external_id, (_, reason) in unencodable.items()
        )

    # Each with its external_id and the reason. (Logged just after the answer is counted, so
    # flush() may return first.)
    assert wait_for(all_logged, 5), caplog.text

    # The client goes on: later answers arrive, and close() reports all delivered.
    assert client.record(**answer(9)) == "req-9"
    assert client.close(5)
    assert client.stats()["sent"] == 3
    assert "req-9" in stored_ids()


@pytest.mark.parametrize(
    "body",
    [
        b'{"results": [{"index": 0, "status": 201}]}',  # no result for the second answer
        b'{"results": [{"index": 9, "status": 400}, {"index": 0, "status": 201}]}',
        b'{"results": "all fine"}',
        b'{"results": [{"index": 0, "status": "201"}, {"index": 1, "status": 201}]}',
        b'{"results": [null, 5]}',
    ],
)
def test_a_reply_the_client_cannot_read_still_settles_the_batch(
    make_client: Any, proxy: Proxy, body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    proxy.start()
    proxy.reply_next(200, body)
    client = make_client(url=proxy.url, batch_size=2, flush_interval=30)
    client.record(**answer(1))
    client.record(**answer(2))

    # A 200 means Treue took the batch; what its reply does not say is assumed stored, as
    # for a reply that is not JSON at all, and said so in the log.
    assert client.flush(5)
    assert client.stats()["sent"] == 2
    assert client.stats()["queued"] == 0
    # (Logged just after the answers are counted, so flush() may return first.)
    assert wait_for(lambda: any("assuming" in r.getMessage() for r in caplog.records), 5)

    client.record(**answer(3))
    assert client.flush(5)
    assert stored_ids() == {"req-3"}
    assert len(proxy.requests) == 2


class Raising(logging.Handler):
    """A caller's log handler that raises on whatever the sending thread logs."""

    def __init__(self, error: type[BaseException]) -> None:
        super().__init__()
        self.error = error
        self.raised = 0

    def emit(self, record: logging.LogRecord) -> None:
        if threading.current_thread().name == "treue-client":
            self.raised += 1
            raise self.error("the log is broken")


@pytest.fixture
def raising_log() -> Iterator[Any]:
    logger = logging.getLogger("treue_client")
    handlers: list[Raising] = []
    level = logger.level

    def add(error: type[BaseException]) -> Raising:
        handler = Raising(error)
        handlers.append(handler)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        return handler

    yield add
    for handler in handlers:
        logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.mark.parametrize("error", [LookupError, SystemExit])
def test_the_sending_thread_survives_an_error_inside_it_and_counts_the_batch(
    make_client: Any, proxy: Proxy, raising_log: Any, error: type[BaseException]
) -> None:
    proxy.start()
    proxy.fail_next(503)
    client = make_client(url=proxy.url, batch_size=2, flush_interval=30)
    handler = raising_log(error)
    client.record(**answer(1))
    client.record(**answer(2))

    # The 503 is to be retried, but saying so in the log raises: the batch cannot go on, and
    # is counted as given up rather than vanishing.
    assert client.flush(5)
    assert handler.raised >= 1
    assert client.stats()["failed"] == 2
    assert client._thread.is_alive()

    logging.getLogger("treue_client").removeHandler(handler)
    client.record(**answer(3))
    assert client.close(5)
    assert client.stats()["sent"] == 1
    assert stored_ids() == {"req-3"}


def test_record_never_raises_even_when_the_log_does(make_client: Any) -> None:
    client = make_client()
    logger = logging.getLogger("treue_client")

    class RaisingHere(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            raise RuntimeError("the log is broken")

    class Unlistable:
        def __iter__(self) -> Any:
            raise Broken("broken chunks")

    handler = RaisingHere()
    logger.addHandler(handler)
    try:
        assert client.record(**answer(1, chunks=Unlistable())) is None
    finally:
        logger.removeHandler(handler)
    assert client.stats()["rejected"] == 1
    assert client.flush(5)
