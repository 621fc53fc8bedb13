"""Bodies sent chunked (no Content-Length): read and given their length where the server says
where they end, a 411 where it cannot (common.request_body). Through Django's real WSGI
handler here; tests/integration/test_http_server.py sends them to a real gunicorn."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import RequestFactory

from common.request_body import ChunkedBodies
from ingest.api.parsing import body_limit
from monitoring.models import Answer

LIMIT = 64 * 1024


class Response:
    def __init__(self) -> None:
        self.status = ""
        self.headers: dict[str, str] = {}

    def start(self, status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        self.status = status
        self.headers = dict(headers)


def chunked_environ(body: bytes, key: str | None, *, terminated: bool = True) -> dict[str, Any]:
    environ = RequestFactory()._base_environ(  # type: ignore[attr-defined]  # not in the stubs
        REQUEST_METHOD="POST", PATH_INFO="/api/v1/answers", CONTENT_TYPE="application/json",
        HTTP_TRANSFER_ENCODING="chunked", **{"wsgi.input": io.BytesIO(body)},
    )
    environ.pop("CONTENT_LENGTH", None)
    if terminated:
        environ["wsgi.input_terminated"] = True  # what gunicorn sets for a chunked body
    if key:
        environ["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    return environ


def call(app: Any, environ: dict[str, Any]) -> tuple[Response, bytes]:
    response = Response()
    body = b"".join(app(environ, response.start))
    return response, body


@pytest.fixture
def app() -> Iterator[ChunkedBodies]:
    # As Django's test client does: the request must not close the test's connection.
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    try:
        yield ChunkedBodies(WSGIHandler(), limit=lambda path: LIMIT)
    finally:
        for signal in (request_started, request_finished):
            signal.connect(close_old_connections)


def test_a_chunked_answer_is_stored(app, service_and_key, make_answer):
    body = json.dumps(make_answer()).encode()
    response, content = call(app, chunked_environ(body, service_and_key[1]))
    assert response.status.startswith("201"), content
    assert list(Answer.objects.values_list("external_id", flat=True)) == ["a-1"]


def test_a_chunked_body_over_the_limit_is_413(app, service_and_key, make_answer, settings):
    settings.TREUE_MAX_BODY_BYTES = 1000
    body = json.dumps(make_answer(question="x" * 2000)).encode()
    response, content = call(app, chunked_environ(body, service_and_key[1]))
    assert response.status.startswith("413"), content
    assert not Answer.objects.exists()


def test_a_chunked_body_over_what_any_endpoint_takes_is_read_no_further(make_answer):
    seen: dict[str, Any] = {}

    def inner(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen["length"] = environ["CONTENT_LENGTH"]
        seen["body"] = environ["wsgi.input"].read()
        start_response("413 Content Too Large", [])
        return [b""]

    stream = io.BytesIO(b"x" * (LIMIT * 3))
    environ = chunked_environ(b"", "some-key")
    environ["wsgi.input"] = stream
    call(ChunkedBodies(inner, limit=lambda path: LIMIT), environ)
    assert seen == {"length": str(LIMIT + 1), "body": b"x" * (LIMIT + 1)}
    assert stream.tell() == LIMIT + 1


def test_chunked_where_the_server_cannot_tell_its_end_is_411(service_and_key, make_answer):
    def inner(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        raise AssertionError("the application must not see a body it cannot read")

    body = json.dumps(make_answer()).encode()
    environ = chunked_environ(body, service_and_key[1], terminated=False)
    response, content = call(ChunkedBodies(inner, limit=lambda path: LIMIT), environ)
    assert response.status.startswith("411")
    assert response.headers["Content-Type"] == "application/json"
    assert "Content-Length" not in response.headers  # runserver closes the connection then
    assert json.loads(content)["errors"][0]["field"] == "Content-Length"


def test_a_body_with_its_length_passes_untouched():
    seen: dict[str, Any] = {}

    def inner(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen["input"] = environ["wsgi.input"]
        start_response("200 OK", [])
        return [b""]

    stream = io.BytesIO(b"{}")
    # Both headers: left to the server (gunicorn refuses such a request, a smuggling sign).
    environ = {"REQUEST_METHOD": "POST", "CONTENT_LENGTH": "2", "wsgi.input": stream,
               "HTTP_TRANSFER_ENCODING": "chunked", "PATH_INFO": "/api/v1/answers",
               "HTTP_AUTHORIZATION": "Bearer k"}
    call(ChunkedBodies(inner, limit=lambda path: LIMIT), environ)
    assert seen["input"] is stream and stream.tell() == 0


@pytest.mark.parametrize(("path", "key"), [("/api/v1/answers", None), ("/login/", "a key")],
                         ids=["no key: a 401 anyway", "a page: browsers send no chunked bodies"])
def test_nothing_is_read_without_a_key_or_outside_the_api(path, key):
    seen: dict[str, Any] = {}

    def inner(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen["length"] = environ.get("CONTENT_LENGTH")
        start_response("401 Unauthorized", [])
        return [b""]

    stream = io.BytesIO(b"x" * 1000)
    environ = chunked_environ(b"", key)
    environ.update({"wsgi.input": stream, "PATH_INFO": path})
    call(ChunkedBodies(inner, limit=lambda path: LIMIT), environ)
    assert seen["length"] is None and stream.tell() == 0


def test_each_endpoint_reads_up_to_its_own_limit(settings):
    settings.TREUE_MAX_BODY_BYTES, settings.TREUE_MAX_BATCH_BODY_BYTES = 100, 1000
    assert (body_limit("/api/v1/answers"), body_limit("/api/v1/answers/batch")) == (100, 1000)
