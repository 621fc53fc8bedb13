"""Fixtures of the OTLP receiver's tests: a client that posts export requests with the key."""

from typing import Any

import pytest
from django.test import Client
from google.protobuf.message import Message

from monitoring.models import Service

# The live Treue with a use case and a key of the client's tests, for the real producers' tests.
from tests.clients.conftest import treue  # noqa: F401  (a fixture)
from tests.traces.otlp import PROTOBUF, URL, gzipped, to_json


class OtlpClient:
    def __init__(self, client: Client, key: str | None) -> None:
        self.client = client
        self.key = key

    def post(
        self, body: Message | bytes, *, media: str = PROTOBUF, gzip: bool = False,
        key: str | None = "", **headers: Any,
    ) -> Any:
        if isinstance(body, Message):
            body = body.SerializeToString() if media == PROTOBUF else to_json(body)
        if gzip:
            body = gzipped(body)
            headers["HTTP_CONTENT_ENCODING"] = "gzip"
        key = self.key if key == "" else key
        if key is not None:
            headers.setdefault("HTTP_AUTHORIZATION", f"Bearer {key}")
        return self.client.generic("POST", URL, body, content_type=media, **headers)


@pytest.fixture
def otlp(client: Client, service_and_key: tuple[Service, str]) -> OtlpClient:
    return OtlpClient(client, service_and_key[1])


@pytest.fixture
def quiet(settings: Any) -> None:
    """Traces are due as soon as their root has arrived."""
    settings.TREUE_OTLP_QUIET_SECONDS = 0.0
