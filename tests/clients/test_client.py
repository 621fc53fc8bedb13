"""TreueClient against a live Treue server: batches arrive, outages are waited out, a full
queue drops and counts, refused answers are not sent again, close() flushes."""

from __future__ import annotations

import queue
import time
from typing import Any

import pytest
from treue_client import client as client_module

from monitoring.models import Answer
from tests.clients.conftest import Proxy, Treue, free_port, wait_for

LOGPROBS = {
    "content": [
        {"token": "Alle", "logprob": -0.1},
        {"token": " 5", "logprob": -1.6},
        {"token": " Jahre", "logprob": -0.01},
        {"token": ".", "logprob": 0.0},
    ]
}


def answer(n: int = 0, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "question": "Wie oft wird der Behälter geprüft?",
        "answer": "Alle 5 Jahre.",
        "model": "gpt-4o-mini",
        "chunks": [
            {"text": "Prüfintervall: 5 Jahre.", "score": 0.82, "source": "Prüfordnung.pdf"},
            "Ein zweiter Abschnitt als Text.",
        ],
        "logprobs": LOGPROBS,
        "external_id": f"req-{n}",
    }
    body.update(overrides)
    return body


def test_recorded_answers_arrive_in_batches(make_client: Any) -> None:
    client = make_client(batch_size=7)
    for n in range(20):
        assert client.record(**answer(n), metadata={"n": n}) == f"req-{n}"

    assert client.flush(10)
    assert client.stats()["sent"] == 20
    stored = Answer.objects.get(external_id="req-3")
    assert (stored.question, stored.text, stored.model) == (
        "Wie oft wird der Behälter geprüft?", "Alle 5 Jahre.", "gpt-4o-mini"
    )
    assert stored.metadata == {"n": 3}
    assert stored.token_data is not None
    assert stored.token_data["t"] == ["Alle", " 5", " Jahre", "."]
    assert stored.token_data["lp"] == [-0.1, -1.6, -0.01, 0.0]
    assert [c.text for c in stored.chunks.order_by("rank")] == [
        "Prüfintervall: 5 Jahre.", "Ein zweiter Abschnitt als Text."
    ]
    assert Answer.objects.count() == 20


def test_external_id_defaults_to_a_fresh_uuid(make_client: Any) -> None:
    client = make_client()
    first = client.record(**answer(external_id=None))
    second = client.record(**answer(external_id=None))
    assert first and second and first != second and len(first) == 32

    assert client.flush(10)
    assert set(Answer.objects.values_list("external_id", flat=True)) == {first, second}


@pytest.mark.timing
def test_treue_down_the_caller_waits_not_and_the_answers_arrive_later(
    make_client: Any, proxy: Proxy
) -> None:
    client = make_client(url=proxy.url)
    started = time.monotonic()
    for n in range(5):
        client.record(**answer(n))
    assert time.monotonic() - started < 0.1

    # Down: connection refused, retried with backoff, nothing lost.
    assert wait_for(lambda: client.stats()["retried"] >= 3)
    assert client.stats()["sent"] == 0
    assert Answer.objects.count() == 0

    proxy.start()
    assert client.flush(10)
    assert client.stats()["sent"] == 5
    assert client.stats()["dropped"] == client.stats()["rejected"] == 0
    assert Answer.objects.count() == 5


def test_5xx_is_retried_and_retry_after_honoured(make_client: Any, proxy: Proxy) -> None:
    proxy.start()
    proxy.fail_next(503)
    proxy.fail_next(429, {"Retry-After": "1"})
    client = make_client(url=proxy.url)
    client.record(**answer(1))

    assert client.flush(10)
    assert client.stats()["sent"] == 1
    assert client.stats()["retried"] == 2
    times = [t for t, _ in proxy.requests]
    assert len(times) == 3
    # After the 429 the client waited the second Retry-After asked for, not its 0.2 s backoff.
    assert times[2] - times[1] >= 0.95
    assert Answer.objects.filter(external_id="req-1").exists()


@pytest.mark.timing
def test_queue_full_drops_and_counts_and_the_queue_stays_bounded(make_client: Any) -> None:
    client = make_client(url=f"http://127.0.0.1:{free_port()}", max_queue=50, batch_size=10)
    started = time.monotonic()
    results = [client.record(**answer(n)) for n in range(2000)]
    elapsed = time.monotonic() - started

    stats = client.stats()
    assert stats["queued"] <= 50
    assert client._queue.qsize() <= 50
    # At most one batch is out of the queue, being retried; everything else beyond the bound
    # was dropped, and each drop was counted and reported to the caller as None.
    assert 2000 - 50 - 10 <= stats["dropped"] <= 2000 - 50
    assert results.count(None) == stats["dropped"]
    assert stats["sent"] == 0
    assert elapsed < 2.0


def test_the_queue_counts_its_answers_with_each_put_and_get() -> None:
    # The count lives in the queue, under its lock: it cannot read one more than the bound
    # while the sending thread is between taking an answer and counting it (it did once).
    answers = client_module._AnswerQueue(maxsize=3)
    answers.put_nowait({"n": 1})
    answers.put_nowait(client_module._WAKE)  # a wake-up is not an answer
    answers.put_nowait({"n": 2})
    assert answers.answers == 2
    with pytest.raises(queue.Full):
        answers.put_nowait({"n": 3})
    assert answers.answers == 2
    assert answers.get_nowait() == {"n": 1}
    assert answers.answers == 1
    assert answers.get_nowait() is client_module._WAKE
    assert answers.answers == 1
    answers.get_nowait()
    assert answers.answers == 0


def test_refused_answers_are_counted_and_not_sent_again(
    make_client: Any, proxy: Proxy
) -> None:
    proxy.start()
    # One batch of exactly these four, however slow the machine.
    client = make_client(url=proxy.url, batch_size=4, flush_interval=30)
    client.record(**answer(1))
    client.record(**answer(2, question=""))  # 400: a question is required
    client.record(**answer(3), use_case="vertrieb")  # 403: not this key's use case
    client.record(**answer(4, logprobs={"content": [{"token": "x", "logprob": 1.5}]}))

    assert client.flush(10)
    assert client.stats()["sent"] == 1
    assert client.stats()["rejected"] == 3
    assert client.stats()["retried"] == 0
    time.sleep(0.3)  # several backoff periods: a retry would have happened by now
    assert len(proxy.requests) == 1
    assert list(Answer.objects.values_list("external_id", flat=True)) == ["req-1"]


def test_a_wrong_key_rejects_the_batch_without_retrying(
    make_client: Any, proxy: Proxy, treue: Treue
) -> None:
    proxy.start()
    client = make_client(url=proxy.url, key="trk_wrong", batch_size=2, flush_interval=30)
    client.record(**answer(1))
    client.record(**answer(2))

    assert client.flush(10)
    time.sleep(0.3)
    assert client.stats()["rejected"] == 2
    assert client.stats()["retried"] == 0
    assert len(proxy.requests) == 1
    assert Answer.objects.count() == 0


def test_close_flushes_what_is_queued(make_client: Any) -> None:
    # A long flush interval: without close() the thread would still be gathering its batch.
    client = make_client(flush_interval=30, batch_size=100)
    for n in range(3):
        client.record(**answer(n))

    started = time.monotonic()
    assert client.close(timeout=10)
    assert time.monotonic() - started < 5
    assert Answer.objects.count() == 3
    assert client.stats()["sent"] == 3
    assert not client._thread.is_alive()

    assert client.record(**answer(9)) is None
    assert client.stats()["dropped"] == 1


def test_close_gives_up_in_time_when_treue_stays_down(make_client: Any) -> None:
    client = make_client(url=f"http://127.0.0.1:{free_port()}")
    client.record(**answer(1))

    started = time.monotonic()
    assert client.close(timeout=0.5) is False
    assert time.monotonic() - started < 2.5
    assert client.stats()["failed"] == 1


def test_record_never_raises(make_client: Any) -> None:
    client = make_client()

    class Unlistable:
        def __iter__(self) -> Any:
            raise RuntimeError("broken chunks")

    # Not queued, and counted: an answer lost on the caller's side is not lost silently.
    assert client.record(**answer(1, chunks=Unlistable())) is None
    assert client.stats()["rejected"] == 1
    assert client.record(question="Frage ohne Antwort") is not None  # refused by Treue later
    assert client.flush(10)
    assert client.stats()["rejected"] == 2
