"""The judge client (judging.client) through the real `openai` SDK against the local
OpenAI-compatible server: what each failure of the endpoint becomes, and what every request
carries. The task decides on retries from these two kinds, so a wrong mapping either retries a
misconfiguration forever or gives up on a passing outage."""

import socket
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from judging.client import (
    GeneratorClient,
    JudgeClient,
    JudgeConfig,
    JudgeMisconfigured,
    JudgeUnavailable,
)

MESSAGES = [
    {"role": "system", "content": "Du bist ein sorgfältiger Prüfer."},
    {"role": "user", "content": "Aussage: Der Behälter wird alle 5 Jahre geprüft."},
]


def make_client(base_url: str, *, timeout: float = 5.0, model: str = "judge-x") -> JudgeClient:
    return JudgeClient(
        JudgeConfig(
            base_url=base_url,
            api_key="test-key",
            model=model,
            timeout=timeout,
            max_tokens_decompose=1500,
            max_tokens_verify=16,
        )
    )


@pytest.fixture
def client(openai_server):
    judge = make_client(openai_server.base_url)
    yield judge
    judge.close()


def closed_port() -> int:
    """A port on loopback that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_reply_carries_text_tokens_latency_and_the_reported_model(openai_server, client):
    openai_server.responder = lambda request: "GEDECKT"
    openai_server.usage_for = lambda request, content: (321, 2)
    openai_server.delay_for = lambda index, request: 0.05

    result = client.call(MESSAGES, max_tokens=16)

    assert result.text == "GEDECKT"
    assert (result.prompt_tokens, result.completion_tokens) == (321, 2)
    assert result.latency_ms >= 50
    assert result.model == "judge-x"
    assert openai_server.requests[0]["messages"] == MESSAGES


def test_temperature_0_and_the_token_cap_on_every_request(openai_server, client):
    client.call(MESSAGES, max_tokens=16)
    client.call(MESSAGES, max_tokens=1500)
    openai_server.fail_next(503)
    with pytest.raises(JudgeUnavailable):
        client.call(MESSAGES, max_tokens=16)

    assert [r["max_tokens"] for r in openai_server.requests] == [16, 1500, 16]
    for request in openai_server.requests:
        assert request["temperature"] == 0
        assert request["model"] == "judge-x"


def test_429_with_retry_after_seconds_is_unavailable_with_that_delay(openai_server, client):
    openai_server.fail_next(429, headers={"Retry-After": "7"})

    with pytest.raises(JudgeUnavailable) as caught:
        client.call(MESSAGES, max_tokens=16)

    assert caught.value.retry_after == 7.0
    assert "429" in str(caught.value)
    assert len(openai_server.requests) == 1  # the SDK did not retry on its own


def test_429_with_retry_after_as_an_http_date(openai_server, client):
    # RFC 9110 allows a date as well as seconds; both must be honoured.
    when = datetime.now(UTC) + timedelta(seconds=30)
    openai_server.fail_next(429, headers={"Retry-After": format_datetime(when, usegmt=True)})

    with pytest.raises(JudgeUnavailable) as caught:
        client.call(MESSAGES, max_tokens=16)

    assert caught.value.retry_after is not None
    assert 25 <= caught.value.retry_after <= 31


@pytest.mark.parametrize("value", ["inf", "nan", "-5", "soon", "1e400"])
def test_a_senseless_retry_after_gives_a_finite_delay_or_none(openai_server, client, value):
    openai_server.fail_next(429, headers={"Retry-After": value})

    with pytest.raises(JudgeUnavailable) as caught:
        client.call(MESSAGES, max_tokens=16)

    retry_after = caught.value.retry_after
    assert retry_after is None or 0 <= retry_after < 10**6


def test_429_without_retry_after(openai_server, client):
    openai_server.fail_next(429)

    with pytest.raises(JudgeUnavailable) as caught:
        client.call(MESSAGES, max_tokens=16)

    assert caught.value.retry_after is None


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 409])
def test_server_errors_are_unavailable_and_not_retried_by_the_sdk(openai_server, client, status):
    openai_server.fail_next(status, times=3)

    with pytest.raises(JudgeUnavailable) as caught:
        client.call(MESSAGES, max_tokens=16)

    assert str(status) in str(caught.value)
    assert len(openai_server.requests) == 1


def test_503_with_retry_after_passes_the_delay_on(openai_server, client):
    openai_server.fail_next(503, headers={"Retry-After": "2"})

    with pytest.raises(JudgeUnavailable) as caught:
        client.call(MESSAGES, max_tokens=16)

    assert caught.value.retry_after == 2.0


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_misconfiguration(openai_server, client, status):
    openai_server.fail_next(
        status, body={"error": {"message": f"nope {status}", "type": "invalid_request_error"}}
    )

    with pytest.raises(JudgeMisconfigured) as caught:
        client.call(MESSAGES, max_tokens=16)

    assert str(status) in str(caught.value)
    assert f"nope {status}" in str(caught.value)  # the endpoint's reason is shown
    assert not isinstance(caught.value, JudgeUnavailable)
    assert len(openai_server.requests) == 1


def test_a_wrong_path_is_a_404_misconfiguration(openai_server):
    judge = make_client(openai_server.base_url.removesuffix("/v1") + "/wrong")
    try:
        with pytest.raises(JudgeMisconfigured, match="404"):
            judge.call(MESSAGES, max_tokens=16)
    finally:
        judge.close()


def test_connection_refused_is_unavailable():
    judge = make_client(f"http://127.0.0.1:{closed_port()}/v1")
    try:
        with pytest.raises(JudgeUnavailable, match="unreachable") as caught:
            judge.call(MESSAGES, max_tokens=16)
    finally:
        judge.close()
    assert caught.value.retry_after is None


@pytest.mark.timing
def test_a_reply_slower_than_the_timeout_is_unavailable(openai_server):
    openai_server.delay_for = lambda index, request: 5.0
    judge = make_client(openai_server.base_url, timeout=0.3)
    started = time.monotonic()
    try:
        with pytest.raises(JudgeUnavailable, match="unreachable"):
            judge.call(MESSAGES, max_tokens=16)
    finally:
        judge.close()
        openai_server.wake()

    assert time.monotonic() - started < 3  # the timeout applied, not the server's delay
    assert len(openai_server.requests) == 1  # and the SDK did not try again


def test_a_reply_that_is_not_json_is_unavailable(openai_server, client):
    # A proxy's or gateway's page with status 200: the endpoint's trouble, retried later.
    openai_server.fail_next(200, body="<html><body>Bitte warten …</body></html>")

    with pytest.raises(JudgeUnavailable, match="not JSON"):
        client.call(MESSAGES, max_tokens=16)


# A 200 that is not a chat completion: a proxy's page served as text/html (the SDK hands it
# back as a str), or JSON of another shape (the SDK builds a ChatCompletion from it unchecked).
NOT_COMPLETIONS = [
    ("<html><body>Wartung</body></html>", "text/html; charset=utf-8"),
    ("Service temporarily unavailable", "text/plain"),
    ("[1, 2, 3]", "application/json"),
    ('"ok"', "application/json"),
    ('{"choices": "x"}', "application/json"),
    ('{"choices": [1]}', "application/json"),
    ('{"choices": [{"message": {"content": 42}}]}', "application/json"),
    ('{"choices": [], "usage": "lots"}', "application/json"),
    ('{"choices": [], "model": ["m"]}', "application/json"),
]


@pytest.mark.parametrize(("body", "content_type"), NOT_COMPLETIONS)
def test_a_200_that_is_not_a_completion_is_unavailable(openai_server, client, body, content_type):
    openai_server.fail_next(200, body=body, headers={"Content-Type": content_type})

    with pytest.raises(JudgeUnavailable, match="judge reply is not a chat completion"):
        client.call(MESSAGES, max_tokens=16)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [*NOT_COMPLETIONS, ('{"choices": [{"message": {"content": "x"}, "logprobs": 5}]}',
                        "application/json")],
)
def test_the_generator_maps_a_200_that_is_not_a_completion_alike(
    openai_server, settings, body, content_type
):
    settings.TREUE_GENERATOR_BASE_URL = openai_server.base_url
    openai_server.fail_next(200, body=body, headers={"Content-Type": content_type})

    with pytest.raises(JudgeUnavailable, match="generator reply is not a chat completion"):
        GeneratorClient().generate(MESSAGES, model="gen-x", temperature=0.7)


def test_an_empty_reply_is_empty_text_not_an_error(openai_server, client):
    openai_server.responder = lambda request: ""

    assert client.call(MESSAGES, max_tokens=16).text == ""


@pytest.mark.parametrize(
    ("base_url", "model", "message"),
    [("", "judge-x", "TREUE_JUDGE_BASE_URL"), ("http://127.0.0.1:9/v1", "", "TREUE_JUDGE_MODEL")],
)
def test_missing_configuration_is_misconfigured_before_any_call(base_url, model, message):
    with pytest.raises(JudgeMisconfigured, match=message):
        make_client(base_url, model=model)


# --- Azure OpenAI ----------------------------------------------------------------------------


def azure_client(openai_server, *, key: str = "", token: str = "", version: str = "2024-10-21",
                 deployment: str = "prüfer-4o") -> JudgeClient:
    return JudgeClient(JudgeConfig(
        base_url="", api_key=key, model=deployment, timeout=5.0, max_tokens_decompose=1500,
        max_tokens_verify=16, azure_endpoint=openai_server.base_url.removesuffix("/v1"),
        azure_api_version=version, azure_ad_token=token,
    ))


def test_azure_openai_calls_the_deployment_with_its_api_version_and_key(openai_server):
    openai_server.responder = lambda request: "GEDECKT"
    openai_server.usage_for = lambda request, content: (120, 1)

    result = azure_client(openai_server, key="azure-key").call(MESSAGES, max_tokens=16)

    assert (result.text, result.prompt_tokens) == ("GEDECKT", 120)
    assert openai_server.azure_calls == [{
        "deployment": "prüfer-4o", "api_version": "2024-10-21", "api_key": "azure-key",
        "authorization": None,
    }]
    assert openai_server.requests[0]["messages"] == MESSAGES


def test_azure_openai_with_an_entra_token_sends_it_as_a_bearer(openai_server):
    openai_server.responder = lambda request: "UNGEDECKT"

    client = azure_client(openai_server, token="eyJ0eXAi.entra", version="2025-01-01-preview")
    assert client.call(MESSAGES, max_tokens=16).text == "UNGEDECKT"

    (call,) = openai_server.azure_calls
    assert call["authorization"] == "Bearer eyJ0eXAi.entra" and call["api_key"] is None
    assert call["api_version"] == "2025-01-01-preview"


@pytest.mark.parametrize(("key", "token", "version", "message"), [
    ("", "", "2024-10-21", "Azure OpenAI takes one credential"),
    ("k", "t", "2024-10-21", "Azure OpenAI takes one credential"),
    ("k", "", "", "TREUE_JUDGE_AZURE_API_VERSION"),
])
def test_azure_openai_misconfigured_before_any_call(openai_server, key, token, version, message):
    with pytest.raises(JudgeMisconfigured, match=message):
        azure_client(openai_server, key=key, token=token, version=version)
    assert openai_server.requests == []


def test_an_unknown_deployment_is_a_misconfiguration(openai_server):
    openai_server.fail_next(404, body={"error": {"code": "DeploymentNotFound",
                                                 "message": "The API deployment does not exist."}})
    with pytest.raises(JudgeMisconfigured, match="404.*deployment does not exist"):
        azure_client(openai_server, key="k", deployment="fehlt").call(MESSAGES, max_tokens=16)
