"""The API's per-key rate limit: 429 with Retry-After past the limit, fail open without a cache."""

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from ingest import ratelimit
from monitoring.models import Service, UseCase
from monitoring.services.use_cases import service_create, service_rotate_key
from tests.conftest import ApiClient

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(autouse=True)
def _fresh_breaker() -> Iterator[None]:
    ratelimit.reset_breaker()
    yield
    ratelimit.reset_breaker()


def post(api: ApiClient, make_answer: Any, n: int) -> Any:
    return api.post("/api/v1/answers", make_answer(external_id=f"rl-{n}"))


def test_requests_over_the_limit_get_429_with_retry_after(
    api: ApiClient, make_answer: Any, settings: Any
) -> None:
    settings.TREUE_API_RATE_LIMIT = 3
    assert [post(api, make_answer, n).status_code for n in range(3)] == [201, 201, 201]
    response = post(api, make_answer, 3)
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= ratelimit.WINDOW_SECONDS
    body = response.json()
    assert body == {"errors": [{"field": "", "message": body["errors"][0]["message"]}]}
    assert "3 requests a minute" in body["errors"][0]["message"]
    # Reading counts too: the limit is on calls with the key, whatever they do.
    assert api.get("/api/v1/answers/1").status_code == 429


def test_retry_after_is_the_time_left_in_the_window(
    api: ApiClient, make_answer: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.TREUE_API_RATE_LIMIT = 1
    now = 60 * 29_000_000 + 45.5  # 45.5 s into a window: 14.5 s left, rounded up
    monkeypatch.setattr(time, "time", lambda: now)  # the module ingest.ratelimit reads
    assert post(api, make_answer, 0).status_code == 201
    response = post(api, make_answer, 1)
    assert response.status_code == 429
    assert response["Retry-After"] == "15"
    # The next window starts afresh.
    now += 15
    assert post(api, make_answer, 2).status_code == 201


def test_a_batch_counts_as_one_request(
    api: ApiClient, make_answer: Any, settings: Any
) -> None:
    settings.TREUE_API_RATE_LIMIT = 2
    for round_ in range(2):
        batch = {"answers": [make_answer(external_id=f"b{round_}-{i}") for i in range(5)]}
        response = api.post("/api/v1/answers/batch", batch)
        assert response.status_code == 200
        assert response.json()["created"] == 5
    assert api.post("/api/v1/answers/batch", {"answers": []}).status_code == 429


def test_each_key_has_its_own_allowance(
    api: ApiClient, make_answer: Any, settings: Any, use_case: UseCase, client: Any
) -> None:
    settings.TREUE_API_RATE_LIMIT = 1
    assert post(api, make_answer, 0).status_code == 201
    assert post(api, make_answer, 1).status_code == 429
    _, other_key = service_create(name="other-bot", use_cases=[use_case])
    other = ApiClient(client, other_key)
    assert post(other, make_answer, 0).status_code == 201


def test_wrong_keys_do_not_use_up_a_real_keys_allowance(
    api: ApiClient, make_answer: Any, settings: Any, service_and_key: tuple[Service, str],
    client: Any,
) -> None:
    settings.TREUE_API_RATE_LIMIT = 1
    service, key = service_and_key
    wrong = ApiClient(client, key[:-4] + "AAAA")
    for n in range(3):
        assert post(wrong, make_answer, n).status_code == 401
    assert post(api, make_answer, 0).status_code == 201


def test_zero_turns_the_limit_off(api: ApiClient, make_answer: Any, settings: Any) -> None:
    settings.TREUE_API_RATE_LIMIT = 0
    assert {post(api, make_answer, n).status_code for n in range(25)} == {201}


def test_a_rotated_key_starts_a_fresh_window(
    api: ApiClient, make_answer: Any, settings: Any, service_and_key: tuple[Service, str]
) -> None:
    settings.TREUE_API_RATE_LIMIT = 1
    assert post(api, make_answer, 0).status_code == 201
    assert post(api, make_answer, 1).status_code == 429
    api.key = service_rotate_key(service=service_and_key[0])
    assert post(api, make_answer, 1).status_code == 201


def _redis_cache(url: str) -> dict[str, Any]:
    return {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "ratelimit": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "OPTIONS": {"socket_connect_timeout": 0.25, "socket_timeout": 0.25},
        },
    }


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timing
def test_a_dead_redis_fails_open_quickly(
    api: ApiClient, make_answer: Any, settings: Any
) -> None:
    settings.TREUE_API_RATE_LIMIT = 1
    settings.CACHES = _redis_cache(f"redis://127.0.0.1:{_closed_port()}/0")
    started = time.monotonic()
    statuses = [post(api, make_answer, n).status_code for n in range(5)]
    assert statuses == [201] * 5  # over the limit of 1, but the limit cannot be counted
    assert time.monotonic() - started < 3  # ingest itself takes most of this


def test_a_hanging_redis_costs_one_timeout_not_one_per_request(
    api: ApiClient, make_answer: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server that accepts connections and never answers: every call waits for the timeout.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        settings.TREUE_API_RATE_LIMIT = 1
        settings.CACHES = _redis_cache(f"redis://127.0.0.1:{server.getsockname()[1]}/0")
        calls: list[str] = []
        real_count = ratelimit._count

        def counting(key: str) -> int:
            calls.append(key)
            return real_count(key)

        monkeypatch.setattr(ratelimit, "_count", counting)
        statuses = [post(api, make_answer, n).status_code for n in range(4)]
    assert statuses == [201] * 4
    assert len(calls) == 1  # the breaker kept the other three requests off the cache


@pytest.fixture
def real_redis(settings: Any) -> Iterator[None]:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=0.5).ping()
    except redis.RedisError:
        pytest.skip("needs Redis at 127.0.0.1:6379")
    settings.CACHES = _redis_cache(REDIS_URL)
    yield


def test_counts_in_redis_when_configured(
    api: ApiClient, make_answer: Any, settings: Any, real_redis: None
) -> None:
    settings.TREUE_API_RATE_LIMIT = 2
    assert [post(api, make_answer, n).status_code for n in range(3)] == [201, 201, 429]


def test_openapi_documents_429_on_every_operation(client: Any) -> None:
    schema = client.get("/api/v1/openapi.json").json()
    operations = [op for item in schema["paths"].values() for op in item.values()]
    assert operations
    for op in operations:
        assert "429" in op["responses"], op["operationId"]
