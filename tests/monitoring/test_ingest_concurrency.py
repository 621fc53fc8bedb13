"""Idempotency under real concurrency: many requests for the same external_id at once.

The unique constraint on (service, external_id) decides races, not a prior lookup; these tests
prove it on PostgreSQL (SQLite serialises writers, so it would prove nothing and is skipped).
Each thread has its own database connection, closed at the end of the thread.
"""

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from ingest.storage import bulk_insert
from monitoring.models import Answer, Chunk
from monitoring.services.rollup_rebuild import rollups_check
from tests.support.http import bearer

# integration: committed transactions racing in threads, the product at its limits.
pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True),
              pytest.mark.integration]

URL = "/api/v1/answers"
BATCH_URL = "/api/v1/answers/batch"
THREADS = 16


def run_together(n: int, work: Callable[[int], Any]) -> list[Any]:
    """Run work(0..n-1) in n threads released at the same moment by a barrier."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n
    failures: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = work(i)
        except BaseException as e:  # reported below, with the thread's index
            failures.append(e)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not failures, failures
    return results


def poster(key: str, url: str) -> Callable[[Any], Any]:
    def post(body: Any) -> Any:
        return Client().post(
            url, json.dumps(body), content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )

    return post


@pytest.fixture
def slow_chunk_insert(monkeypatch):
    """Keep each inserting transaction open a little longer, so that the others run into the
    uncommitted row (and wait on the unique index) instead of finding it committed."""
    original = Chunk.objects.bulk_create

    def slow(*args, **kwargs):
        result = original(*args, **kwargs)
        time.sleep(0.05)
        return result

    monkeypatch.setattr(Chunk.objects, "bulk_create", slow)


@pytest.mark.parametrize("slow", [False, True], ids=["plain", "slow insert"])
def test_same_answer_at_once_is_stored_once(request, service_and_key, make_answer, slow):
    if slow:
        request.getfixturevalue("slow_chunk_insert")
    _, key = service_and_key
    post = poster(key, URL)
    responses = run_together(THREADS, lambda i: post(make_answer()))
    statuses = Counter(r.status_code for r in responses)
    assert statuses == {201: 1, 200: THREADS - 1}, statuses
    ids = {r.json()["id"] for r in responses}
    assert len(ids) == 1
    assert Answer.objects.count() == 1
    assert Chunk.objects.count() == len(make_answer()["chunks"])
    assert ids == {Answer.objects.get().pk}


@pytest.mark.parametrize("slow", [False, True], ids=["plain", "slow insert"])
def test_same_id_other_content_at_once_is_one_201_rest_409(request, service_and_key,
                                                           make_answer, slow):
    if slow:
        request.getfixturevalue("slow_chunk_insert")
    _, key = service_and_key
    post = poster(key, URL)
    responses = run_together(
        THREADS, lambda i: post(make_answer(answer=f"Der Behälter muss {i} Jahre halten."))
    )
    statuses = [r.status_code for r in responses]
    assert Counter(statuses) == {201: 1, 409: THREADS - 1}, statuses
    winner = statuses.index(201)
    stored = Answer.objects.get()
    assert stored.text == f"Der Behälter muss {winner} Jahre halten."
    assert responses[winner].json()["id"] == stored.pk
    for r in responses:
        if r.status_code == 409:
            assert [e["field"] for e in r.json()["errors"]] == ["external_id"]
    assert Chunk.objects.count() == len(make_answer()["chunks"])


@pytest.mark.parametrize("slow", [False, True], ids=["plain", "slow insert"])
def test_overlapping_batches_at_once_store_every_id_once(request, service_and_key,
                                                         make_answer, slow):
    if slow:
        request.getfixturevalue("slow_chunk_insert")
    _, key = service_and_key
    post = poster(key, BATCH_URL)
    batches = 4
    # batch k holds ids 10k .. 10k+29: each id is in up to three batches
    windows = [[f"ov-{j}" for j in range(10 * k, 10 * k + 30)] for k in range(batches)]

    def send(k: int) -> Any:
        # different batches list the shared ids in different orders
        ids = windows[k] if k % 2 == 0 else windows[k][::-1]
        return post({"answers": [make_answer(external_id=i) for i in ids]})

    responses = run_together(batches, send)
    created: Counter[str] = Counter()
    for response in responses:
        assert response.status_code == 200, response.content[:300]
        for result in response.json()["results"]:
            assert result["status"] in (200, 201), result
            if result["status"] == 201:
                created[result["answer"]["external_id"]] += 1
    all_ids = {i for w in windows for i in w}
    assert set(created) == all_ids
    assert all(n == 1 for n in created.values()), created
    assert Answer.objects.count() == len(all_ids)
    assert set(Answer.objects.values_list("external_id", flat=True)) == all_ids
    assert Chunk.objects.count() == 2 * len(all_ids)


def test_single_and_batch_requests_at_once(service_and_key, make_answer):
    _, key = service_and_key
    single, batch = poster(key, URL), poster(key, BATCH_URL)

    def send(i: int) -> int:
        if i % 2:
            return single(make_answer()).status_code
        response = batch({"answers": [make_answer(), make_answer(external_id="other")]})
        assert response.status_code == 200
        return response.json()["results"][0]["status"]

    statuses = run_together(THREADS, send)
    assert Counter(statuses) == {201: 1, 200: THREADS - 1}, statuses
    assert Answer.objects.filter(external_id="a-1").count() == 1
    assert Answer.objects.filter(external_id="other").count() == 1


def test_an_id_stored_between_the_lookup_and_a_large_copy_is_a_replay(
    service_and_key, make_answer, monkeypatch
):
    # A batch big enough that PostgreSQL finds the duplicate while the COPY is still streaming
    # (~40 KB a row): the item stored meanwhile by another request is a 200, the others 201.
    from ingest import services as ingest

    _, key = service_and_key
    text = "Der Behälter muss alle 5 Jahre geprüft werden. " * 800
    answers = [make_answer(external_id=f"big-{i}", answer=text) for i in range(100)]
    real = bulk_insert
    calls: list[int] = []

    def racing_bulk_insert(model, rows, *, with_ids):
        if model is Answer and not calls:
            calls.append(1)
            run_together(1, lambda _: poster(key, URL)(answers[90]))
        real(model, rows, with_ids=with_ids)

    monkeypatch.setattr(ingest, "bulk_insert", racing_bulk_insert)
    response = poster(key, BATCH_URL)({"answers": answers})
    assert response.status_code == 200, response.content[:300]
    statuses = [r["status"] for r in response.json()["results"]]
    assert statuses == [201] * 90 + [200] + [201] * 9
    assert Answer.objects.filter(external_id__startswith="big-").count() == 100
    assert Chunk.objects.filter(answer__external_id__startswith="big-").count() == 200


def test_batches_with_the_same_ids_in_opposite_orders_do_not_deadlock(
    service_and_key, make_answer
):
    # Two transactions inserting the same unique keys in opposite orders wait on each other
    # unless both insert in one order; PostgreSQL would end one with "deadlock detected".
    _, key = service_and_key
    text = "Die Frist beträgt 3 Monate zum Quartalsende. " * 1500
    for round_ in range(3):
        answers = [make_answer(external_id=f"o{round_}-{i:03d}", answer=text) for i in range(60)]
        bodies = [{"answers": answers}, {"answers": answers[::-1]}]

        def post_one(i: int, bodies: list[dict[str, Any]] = bodies) -> Any:
            return poster(key, BATCH_URL)(bodies[i])

        responses = run_together(2, post_one)
        assert [r.status_code for r in responses] == [200, 200], responses[0].content[:300]
        statuses = Counter(
            r["status"] for response in responses for r in response.json()["results"]
        )
        assert statuses == {201: 60, 200: 60}
    assert Answer.objects.filter(external_id__startswith="o").count() == 180


def test_rollups_stay_exact_while_batches_and_single_answers_race_a_rebuild(
    service_and_key, make_answer
):
    """Four threads ingest into the same use case and day (two in batches, two one by one)
    while two others rebuild its rollups again and again: afterwards the rollups equal a
    recount - no answer lost, none counted twice - and nothing deadlocked."""
    from django.core.management import call_command


    _, key = service_and_key
    headers = bearer(key)
    rounds = 10

    def work(i: int) -> int:
        client = Client()
        sent = 0
        try:
            for r in range(rounds):
                if i < 2:
                    body = {"answers": [make_answer(external_id=f"rb-{i}-{r}-{k}")
                                        for k in range(10)]}
                    response = client.post(BATCH_URL, json.dumps(body),
                                           content_type="application/json", **headers)
                    assert response.status_code == 200, response.content
                    sent += 10
                elif i < 4:
                    response = client.post(URL, json.dumps(make_answer(external_id=f"rs-{i}-{r}")),
                                           content_type="application/json", **headers)
                    assert response.status_code == 201, response.content
                    sent += 1
                else:
                    call_command("rebuild_rollups", "--weeks", "1", stdout=open(os.devnull, "w"))
            return sent
        finally:
            connection.close()

    started = time.monotonic()
    sent = run_together(6, work)
    assert time.monotonic() - started < 60
    assert sum(sent) == 2 * rounds * 10 + 2 * rounds
    assert Answer.objects.count() == sum(sent)
    assert rollups_check() == []


def test_a_single_answer_waiting_on_a_batchs_key_holds_no_rollup_row(
    service_and_key, make_answer, monkeypatch
):
    # A batch has inserted its keys and is about to count its answers in the rollups (its day's
    # row) when a single request sends one of its ids. The single insert must wait on the key
    # before it locks the day's row: the other way round, each waits on the other and
    # PostgreSQL ends one as a deadlock (a 503 for the single request, found by CI).
    from monitoring.services import rollups

    _, key = service_and_key
    keys_in = threading.Event()
    real = rollups.answers_added

    def slow_answers_added(answers):
        keys_in.set()
        time.sleep(1.5)  # the single request starts meanwhile and waits on the key
        return real(answers)

    monkeypatch.setattr(rollups, "answers_added", slow_answers_added)
    body = make_answer(external_id="shared")

    def send(i: int) -> int:
        if i == 0:
            response = poster(key, BATCH_URL)({"answers": [body]})
            assert response.status_code == 200, response.content[:300]
            return response.json()["results"][0]["status"]
        assert keys_in.wait(timeout=30)
        time.sleep(0.2)
        return poster(key, URL)(body).status_code

    statuses = run_together(2, send)
    assert statuses == [201, 200], statuses  # the batch stored it; the single one is a replay
    assert Answer.objects.filter(external_id="shared").count() == 1


class _Cause(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


def _failing(real, sqlstate: str, times: int, calls: list[int]):
    from django.db import OperationalError

    def insert_once(*args, **kwargs):
        calls.append(1)
        if len(calls) <= times:
            error = OperationalError(f"SQLSTATE {sqlstate}")
            error.__cause__ = _Cause(sqlstate)
            raise error
        return real(*args, **kwargs)

    return insert_once


@pytest.mark.parametrize(("sqlstate", "times", "status", "tries"), [
    ("40P01", 1, 201, 2),  # a deadlock ended the insert once: tried again, stored
    ("40001", 2, 201, 3),  # a serialization failure twice: the third attempt stores it
    ("40P01", 3, 503, 3),  # every attempt ended: the client is asked to retry later
    ("08006", 1, 503, 1),  # a lost connection is not retried here
])
def test_an_insert_ended_by_a_conflict_is_tried_again(
    service_and_key, make_answer, monkeypatch, sqlstate, times, status, tries
):
    from ingest import services as ingest

    _, key = service_and_key
    calls: list[int] = []
    monkeypatch.setattr(ingest, "_insert_once", _failing(ingest._insert_once, sqlstate, times,
                                                         calls))
    response = poster(key, URL)(make_answer())
    assert response.status_code == status, response.content[:300]
    assert len(calls) == tries
    assert Answer.objects.filter(external_id="a-1").count() == (1 if status == 201 else 0)
