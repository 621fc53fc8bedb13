"""Fuzzing the ingest API: schemathesis against the served OpenAPI schema, and hypothesis with
arbitrary JSON and text in every field. The promise under test: never a 5xx, and every response
is what the schema says.

Budgets are fixed and generation is derandomized, so CI runs the same cases every time.
"""

import json
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ingest.schemas import AnswerIn
from ingest.services import answer_ingest
from monitoring.models import Answer
from treue_site.urls import api

# It fuzzes the whole API: seconds a test, so the fast part leaves it to CI.
pytestmark = pytest.mark.integration

URL = "/api/v1/answers"
BATCH_URL = "/api/v1/answers/batch"

FUZZ_SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    # The pytest-django transaction is function scoped on purpose: all examples of one test
    # share it and it is rolled back at the end.
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)


@pytest.fixture
def wsgi_app(db):
    """The real WSGI application, inside the test's transaction.

    A WSGI handler closes "old" connections when a request starts and ends, and inside the
    test's atomic block every connection looks old: the test client unhooks that for its
    requests, and so must we.
    """
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def api_schema(wsgi_app):
    return schemathesis.openapi.from_wsgi("/api/v1/openapi.json", wsgi_app)


@pytest.fixture
def no_rate_limit(settings):
    # Hundreds of requests a minute with one key: the per-key limit (its own tests are in
    # tests/treue_site/test_ratelimit.py) would answer 429 and hide the operation.
    settings.TREUE_API_RATE_LIMIT = 0


# The operations, from the same schema the endpoint serves. schemathesis's own pytest
# plugin (schema.parametrize) does not run under pytest 9 (it reads the removed
# Function._nodeid), so each operation gets a hypothesis test from its strategy instead.
OPERATIONS = sorted(
    (path, method)
    for path, item in api.get_openapi_schema(path_prefix="/api/v1/")["paths"].items()
    for method in item
)

# The checks that matter here: no 5xx, a documented status code, a documented content type
# and a body that matches the schema of that status. Left out on purpose:
# - negative_data_rejection / positive_data_acceptance: a schema-valid body can still be
#   refused (an external_id already used is a 409, a use case the key may not send to - or
#   one that does not exist - a 403), which JSON Schema cannot express; and a body that breaks the
#   published schema can still be accepted where the schema is only a description (extra keys
#   inside an OpenAI completion or logprobs object are allowed);
# - ignored_auth and the stateful checks: authentication is covered table by table in
#   test_api.py, and GET ids of other services are 404 by design.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


# Examples per operation and mode. Generating from the answer schema (nested completion,
# logprobs, chunks) costs far more than the requests, most of all for negative batches; these
# budgets keep the whole file near a minute.
BUDGET = {
    ("/api/v1/answers", "post", "positive"): 100,
    ("/api/v1/answers", "post", "negative"): 30,
    ("/api/v1/answers", "get", "positive"): 60,
    ("/api/v1/answers", "get", "negative"): 60,
    ("/api/v1/answers/batch", "post", "positive"): 20,
    ("/api/v1/answers/batch", "post", "negative"): 20,
    ("/api/v1/answers/{answer_id}", "get", "positive"): 100,
    ("/api/v1/answers/{answer_id}", "get", "negative"): 100,
    ("/api/v1/use-cases/{slug}/estimates", "get", "positive"): 60,
    ("/api/v1/use-cases/{slug}/estimates", "get", "negative"): 60,
    ("/api/v1/use-cases/{slug}/segments", "get", "positive"): 60,
    ("/api/v1/use-cases/{slug}/segments", "get", "negative"): 60,
}


def test_budget_covers_every_operation():
    assert {(p, m) for p, m, _ in BUDGET} == set(OPERATIONS)
    assert len(OPERATIONS) == 6


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
                         ids=["positive", "negative"])
@pytest.mark.parametrize(("path", "method"), OPERATIONS)
def test_schemathesis(api_schema, service_and_key, no_rate_limit, path, method, mode):
    _, key = service_and_key
    headers = {"Authorization": f"Bearer {key}"}
    operation = api_schema[path][method.upper()]
    statuses = []

    @settings(FUZZ_SETTINGS, max_examples=BUDGET[path, method, mode.value])
    @given(case=operation.as_strategy(generation_mode=mode, headers=headers))
    def run(case):
        response = case.call(headers=headers)
        statuses.append(response.status_code)
        case.validate_response(response, checks=CHECKS, headers=headers)

    run()
    # the key was accepted: the cases reached the operation itself
    assert statuses and 401 not in statuses and 429 not in statuses, sorted(set(statuses))


# ------------------------------------------------------------------ plain hypothesis

# Text with everything PostgreSQL and UTF-8 choke on: NUL, unpaired surrogates, control chars.
any_text = st.text(
    st.one_of(
        st.characters(),
        st.characters(categories=["Cs"]),
        st.sampled_from(["\x00", "\ufeff", "\u2028", "ä", "€", "😀"]),
    ),
    max_size=30,
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    any_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)

VALID_LOGPROBS = {
    "content": [
        {"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []}
        for t, lp in [("Der", 0.0), (" Beh", -0.1), ("älter", -2.0), (" muss", 0.0),
                      (" alle", 0.0), (" 5", -3.0), (" Jahre", 0.0), (" geprüft", 0.0),
                      (" werden", 0.0), (".", 0.0)]
    ]
}

# Places a value can go: top-level fields and fields inside chunks and tokens.
FIELD_PATHS: list[tuple[Any, ...]] = [
    ("external_id",), ("use_case",), ("question",), ("answer",), ("model",), ("chunks",),
    ("logprobs",), ("completion",), ("messages",), ("created_at",), ("metadata",),
    ("unknown_field",),
    ("chunks", 0), ("chunks", 0, "text"), ("chunks", 0, "score"), ("chunks", 0, "id"),
    ("chunks", 1, "source"),
    ("logprobs", "content"), ("logprobs", "content", 0), ("logprobs", "content", 0, "token"),
    ("logprobs", "content", 5, "logprob"), ("logprobs", "content", 2, "bytes"),
    ("logprobs", "content", 1, "top_logprobs"), ("metadata", "k"),
]


def _put(body: dict, path: tuple[Any, ...], value: Any) -> None:
    target = body
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


def _dumps(body: Any) -> bytes:
    # ensure_ascii writes unpaired surrogates as \\udXXX escapes, as a client library would
    return json.dumps(body).encode("ascii")


def _assert_round_trip(api, body: dict, response) -> None:
    """A stored answer reads back as it was sent, and sending it again changes nothing."""
    data = response.json()
    assert data["external_id"] == body["external_id"]
    detail = api.get(f"{URL}/{data['id']}")
    assert detail.status_code == 200
    stored = detail.json()
    assert stored["question"] == body["question"]
    if isinstance(body.get("answer"), str):
        assert stored["answer"] == body["answer"]
    if isinstance(body.get("model"), str):
        assert stored["model"] == body["model"]
    assert [c["text"] for c in stored["chunks"]] == [c["text"] for c in body.get("chunks") or []]
    count = Answer.objects.count()
    again = api.post(URL, _dumps(body), raw=True)
    assert again.status_code == 200, again.content[:300]
    assert again.json()["id"] == data["id"]
    assert Answer.objects.count() == count


@settings(FUZZ_SETTINGS, max_examples=200)
@given(
    path=st.sampled_from(FIELD_PATHS),
    value=json_values,
    external_id=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1,
                        max_size=12),
)
def test_any_json_in_any_field_is_never_a_5xx(api, make_answer, path, value, external_id):
    body = make_answer(external_id=external_id, logprobs=json.loads(json.dumps(VALID_LOGPROBS)),
                       metadata={})
    _put(body, path, value)
    response = api.post(URL, _dumps(body), raw=True)
    assert response.status_code < 500, response.content[:300]
    if response.status_code in (200, 201):
        _assert_round_trip(api, body, response)
    else:
        errors = response.json()["errors"]
        assert errors and all(set(e) == {"field", "message"} for e in errors)


@settings(FUZZ_SETTINGS, max_examples=150)
@given(
    field=st.sampled_from(["external_id", "use_case", "question", "answer", "model",
                           "created_at"]),
    text=any_text,
)
def test_any_text_in_string_fields_is_never_a_5xx(api, make_answer, field, text):
    body = make_answer(external_id=f"t-{len(text)}-{text.encode('utf-8', 'replace').hex()}"[:200])
    body[field] = text
    response = api.post(URL, _dumps(body), raw=True)
    assert response.status_code < 500, response.content[:300]
    if response.status_code in (200, 201):
        _assert_round_trip(api, body, response)
    elif field == "use_case" and response.status_code == 403:
        # A well-formed slug of no use case this key may send to: refused like another
        # tenant's, naming the field.
        assert [e["field"] for e in response.json()["errors"]] == ["use_case"]
    else:
        assert response.status_code in (400, 409), response.content[:300]


@settings(FUZZ_SETTINGS, max_examples=100)
@given(items=st.lists(st.one_of(json_values, st.just(None)), max_size=5), index=st.integers(0, 4))
def test_batch_with_arbitrary_items_is_never_a_5xx(api, make_answer, items, index):
    answers: list[Any] = list(items)
    answers.insert(min(index, len(answers)), make_answer(external_id="fuzz-good"))
    response = api.post(BATCH_URL, _dumps({"answers": answers}), raw=True)
    assert response.status_code == 200, response.content[:300]
    results = response.json()["results"]
    assert [r["index"] for r in results] == list(range(len(answers)))
    assert all(r["status"] < 500 for r in results)
    # the one good item is stored whatever the others are
    good = results[min(index, len(items))]
    assert good["status"] in (200, 201)
    assert Answer.objects.filter(external_id="fuzz-good").count() == 1


@settings(FUZZ_SETTINGS, max_examples=150)
@given(raw=st.one_of(st.binary(max_size=200), any_text.map(lambda t: t.encode("utf-8",
                                                                               "surrogatepass"))))
def test_arbitrary_bytes_are_never_a_5xx(api, raw):
    for url in (URL, BATCH_URL):
        response = api.post(url, raw, raw=True)
        assert 400 <= response.status_code < 500, (raw, response.status_code)
        assert response.json()["errors"]


# ------------------------------------------------------- schemathesis on known resources

# Generated freely, a slug or id almost never exists: positive cases then end in 400 "unknown
# use case" and 404, and the success responses (201, 200 with a stored answer, the estimates)
# are never checked against the schema. Here the same strategies are pointed at what exists.
KNOWN_BUDGET = {
    ("/api/v1/answers", "post"): 60,
    ("/api/v1/answers", "get"): 30,
    ("/api/v1/answers/batch", "post"): 15,
    ("/api/v1/answers/{answer_id}", "get"): 30,
    ("/api/v1/use-cases/{slug}/estimates", "get"): 40,
    ("/api/v1/use-cases/{slug}/segments", "get"): 40,
}
# What each operation must reach at least once, or the test proved less than it claims.
KNOWN_SUCCESS = {
    ("/api/v1/answers", "post"): {201},
    ("/api/v1/answers", "get"): {200},
    ("/api/v1/answers/batch", "post"): {200},
    ("/api/v1/answers/{answer_id}", "get"): {200},
    ("/api/v1/use-cases/{slug}/estimates", "get"): {200},
    ("/api/v1/use-cases/{slug}/segments", "get"): {200},
}


def test_every_served_operation_is_fuzzed(wsgi_app, api_schema):
    """The operations fuzzed are those the running site serves at /api/v1/openapi.json."""
    served = sorted(
        (path, method.lower())
        for path, item in api_schema.raw_schema["paths"].items()
        for method in item
    )
    assert served == OPERATIONS
    assert set(KNOWN_BUDGET) == set(OPERATIONS)


def _known(path: str, answer_ids: list[int]):
    """A function that points a generated case at an existing use case or answer."""

    def point(case, data):
        if path == "/api/v1/answers" and case.method == "GET":
            case.query = {"external_id": data.draw(
                st.sampled_from([f"known-{i}" for i in range(len(answer_ids))]))}
        elif path == "/api/v1/answers" and isinstance(case.body, dict):
            case.body["use_case"] = "kundenservice"
        elif path == "/api/v1/answers/batch" and isinstance(case.body, dict):
            for item in case.body.get("answers") or []:
                if isinstance(item, dict):
                    item["use_case"] = "kundenservice"
        elif path == "/api/v1/answers/{answer_id}":
            case.path_parameters["answer_id"] = data.draw(st.sampled_from(answer_ids))
        elif path == "/api/v1/use-cases/{slug}/estimates":
            case.path_parameters["slug"] = "kundenservice"
        elif path == "/api/v1/use-cases/{slug}/segments":
            case.path_parameters["slug"] = "kundenservice"
            case.query = {**(case.query or {}), "dimension": data.draw(st.sampled_from(
                ["model", "service", "prompt_version", "source"]))}
        return case

    return point


@pytest.mark.parametrize(("path", "method"), OPERATIONS)
def test_schemathesis_on_known_resources(
    api_schema, make_answer, service_and_key, no_rate_limit, path, method
):
    service, key = service_and_key
    headers = {"Authorization": f"Bearer {key}"}
    # Through the service, not the test client: its requests would hook close_old_connections
    # back in, and the WSGI requests would then close the test's connection.
    answer_ids = []
    for i in range(3):
        body = make_answer(external_id=f"known-{i}")
        result = answer_ingest(service=service, payload=AnswerIn.model_validate(body), raw=body)
        assert result.answer is not None
        answer_ids.append(result.answer.pk)
    operation = api_schema[path][method.upper()]
    point = _known(path, answer_ids)
    statuses = []

    @settings(FUZZ_SETTINGS, max_examples=KNOWN_BUDGET[path, method])
    @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE, headers=headers),
           data=st.data())
    def run(case, data):
        case = point(case, data)
        response = case.call(headers=headers)
        statuses.append(response.status_code)
        case.validate_response(response, checks=CHECKS, headers=headers)

    run()
    assert KNOWN_SUCCESS[path, method] <= set(statuses), sorted(set(statuses))
    assert 429 not in statuses
