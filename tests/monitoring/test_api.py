"""The ingest API through the Django test client: every status code it can answer with."""

import gzip
import json
import math
from collections.abc import Collection
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone
from openai import OpenAI

from ingest import services
from ingest.domain import sampling
from ingest.schemas import MAX_ANSWER_CHARS, MAX_JSON_DEPTH, MAX_QUESTION_CHARS, AnswerIn
from ingest.services import IngestOutcome
from monitoring.models import Answer, Chunk, JudgeRun, Service, UseCase
from monitoring.selectors.access import service_for_key
from monitoring.services.use_cases import service_create, service_rotate_key, use_case_create
from tests.conftest import ApiClient
from tests.support.openai_server import DEFAULT_ANSWER

URL = "/api/v1/answers"
BATCH_URL = "/api/v1/answers/batch"

SURE = 0.0
LOW = -2.0  # p = 0.135, below the default threshold 0.5

ANSWER_FIELDS = {
    "id", "external_id", "use_case", "created_at", "flagged", "logprobs_status",
    "uncertain_tokens", "sampled", "sample_reason", "inclusion_probability", "status",
    "warnings",
}

# The default answer of make_answer, split like a GPT tokeniser would.
DEFAULT_TOKENS = [
    "Der", " Beh", "älter", " muss", " alle", " 5", " Jahre", " geprüft", " werden", ".",
]


def logprobs_for(
    tokens: list[str], low: Collection[str] = frozenset(), value: float | str = LOW
) -> dict:
    """An OpenAI logprobs object; tokens in ``low`` get ``value`` (a string to test the
    refusal), the rest are sure."""
    return {
        "content": [
            {
                "token": t,
                "logprob": value if t in low else SURE,
                "bytes": list(t.encode()),
                "top_logprobs": [],
            }
            for t in tokens
        ]
    }


def errors_of(response) -> list[dict[str, str]]:
    data = response.json()
    assert set(data) == {"errors"}, data
    assert data["errors"], data
    for item in data["errors"]:
        assert set(item) == {"field", "message"}, item
        assert isinstance(item["field"], str)
        assert isinstance(item["message"], str) and item["message"], item
    return data["errors"]


def fields_of(response) -> list[str]:
    return [e["field"] for e in errors_of(response)]


def setp(path: list[Any], value: Any):
    def mutate(body: dict) -> None:
        target = body
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return mutate


def drop(*names: str):
    def mutate(body: dict) -> None:
        for name in names:
            body.pop(name)

    return mutate


def nest(depth: int) -> Any:
    """A JSON value whose innermost leaf lies ``depth`` levels below the top object."""
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def in_future(**delta: float) -> str:
    return (timezone.now() + timedelta(**delta)).isoformat()


@pytest.fixture
def service(service_and_key) -> Service:
    return service_and_key[0]


@pytest.fixture
def other_service(use_case) -> tuple[Service, str]:
    return service_create(name="other-bot", use_cases=[use_case])


# --------------------------------------------------------------------------------------- 201


@pytest.mark.parametrize(("given", "utc"), [
    ("2026-12-01T10:00:00+16:00", "2026-11-30T18:00:00+00:00"),
    ("2026-12-01T10:00:00-20:00", "2026-12-02T06:00:00+00:00"),
    ("2026-12-01T10:00:00+23:59", "2026-11-30T10:01:00+00:00"),
])
def test_an_offset_beyond_postgresqls_range_is_stored_as_its_instant(
    api, make_answer, given, utc
):
    # ISO 8601 allows offsets to ±23:59, PostgreSQL to ±15:59 ("time zone displacement out of
    # range" reached the client as a 400 with the database's message and no field).
    response = api.post(URL, make_answer(created_at=given))
    assert response.status_code == 201, response.content
    assert Answer.objects.get().created_at.isoformat() == utc


def test_created(api, make_answer, service, use_case):
    response = api.post(URL, make_answer())
    assert response.status_code == 201, response.content
    data = response.json()
    assert set(data) == ANSWER_FIELDS
    stored = Answer.objects.get()
    assert data["id"] == stored.pk
    assert data["external_id"] == "a-1" == stored.external_id
    assert data["use_case"] == "kundenservice"
    assert stored.service_id == service.pk and stored.use_case_id == use_case.pk
    assert data["flagged"] is False
    assert data["uncertain_tokens"] == []
    assert data["logprobs_status"] == "none"
    assert data["warnings"] == [services.WARNING_NO_LOGPROBS]
    expected = sampling.decide(service_key=str(service.pk), external_id="a-1", flagged=False,
                               rate=use_case.sample_rate)
    assert data["sampled"] is expected.sampled is stored.sampled
    assert data["sample_reason"] == expected.reason == stored.sample_reason
    assert data["inclusion_probability"] == use_case.sample_rate
    assert data["status"] == ("queued" if expected.sampled else "not_sampled") == stored.status
    assert stored.question == make_answer()["question"]
    assert stored.text == make_answer()["answer"]
    assert stored.model == "gpt-4o-mini"
    assert stored.chunk_count == 2
    assert stored.best_chunk_score == 0.82
    chunks = list(Chunk.objects.filter(answer=stored).order_by("rank"))
    assert [(c.rank, c.text, c.score, c.source_chunk_id, c.source) for c in chunks] == [
        (1, make_answer()["chunks"][0]["text"], 0.82, "doc-7#3", "Prüfordnung.pdf"),
        (2, make_answer()["chunks"][1]["text"], 0.61, "", ""),
    ]


# (id, mutation) of bodies that are valid, some at a limit; each is stored and reads back.
VALID_CASES = [
    ("as is", lambda b: None),
    ("no chunks", drop("chunks")),
    ("empty chunks", setp(["chunks"], [])),
    ("chunk with only text", setp(["chunks"], [{"text": "nur Text"}])),
    ("external_id of 200 chars", setp(["external_id"], "x" * 200)),
    ("external_id of unicode", setp(["external_id"], "Äpfel/ß/😀")),
    ("question at the limit", setp(["question"], "F" * MAX_QUESTION_CHARS)),
    ("answer at the limit", setp(["answer"], "A" * MAX_ANSWER_CHARS)),
    ("empty answer (abstention)", setp(["answer"], "")),
    ("emoji as surrogate pair", setp(["question"], "Wie geht es? \U0001F600")),
    ("integer score", setp(["chunks", 0, "score"], 1)),
    ("negative score", setp(["chunks", 0, "score"], -0.3)),
    ("null score", setp(["chunks", 0, "score"], None)),
    ("logprobs null", setp(["logprobs"], None)),
    ("logprobs absent", drop("logprobs")),
    ("logprob -9999.0", setp(["logprobs"], logprobs_for(DEFAULT_TOKENS, {" Jahre"}, -9999.0))),
    ("logprob 0", setp(["logprobs"], logprobs_for(DEFAULT_TOKENS, {" Jahre"}, 0))),
    ("logprob -0.0", setp(["logprobs"], logprobs_for(DEFAULT_TOKENS, {" Jahre"}, -0.0))),
    ("logprob integer", setp(["logprobs"], logprobs_for(DEFAULT_TOKENS, {" Jahre"}, -1))),
    ("logprob -1.7e308", setp(["logprobs"], logprobs_for(DEFAULT_TOKENS, {" Jahre"}, -1.7e308))),
    ("created_at naive", setp(["created_at"], "2025-03-01T10:00:00")),
    ("created_at with zone", setp(["created_at"], "2025-03-01T10:00:00+01:00")),
    ("created_at with Z", setp(["created_at"], "2025-03-01T10:00:00Z")),
    ("created_at 23 hours ahead", setp(["created_at"], in_future(hours=23))),
    ("metadata below the depth limit", setp(["metadata"], nest(MAX_JSON_DEPTH - 1))),
    ("metadata with unicode", setp(["metadata"], {"Mandant": "Müller", "n": [1, 2.5, None]})),
    ("messages", setp(["messages"], [{"role": "user", "content": "Wie oft?"}])),
]


@pytest.mark.parametrize("mutate", [c[1] for c in VALID_CASES], ids=[c[0] for c in VALID_CASES])
def test_valid_bodies_are_stored(api, make_answer, mutate):
    body = make_answer()
    mutate(body)
    response = api.post(URL, body)
    assert response.status_code == 201, response.content
    stored = Answer.objects.get()
    assert response.json()["id"] == stored.pk
    assert stored.external_id == body["external_id"]
    assert stored.question == body["question"]
    assert stored.text == body["answer"]
    assert stored.metadata == body.get("metadata", {})
    assert stored.messages == body.get("messages")
    assert Chunk.objects.count() == len(body.get("chunks", []))
    detail = api.get(f"{URL}/{stored.pk}").json()
    assert detail["question"] == body["question"] and detail["answer"] == body["answer"]


# --------------------------------------------------------------------------- 200 and 409


def test_identical_replay_is_200_and_duplicates_nothing(api, make_answer):
    first = api.post(URL, make_answer())
    assert first.status_code == 201
    for _ in range(3):
        again = api.post(URL, make_answer())
        assert again.status_code == 200, again.content
        assert again.json() == first.json()
    assert Answer.objects.count() == 1
    assert Chunk.objects.count() == 2


def test_null_chunks_and_metadata_mean_none_given(api, make_answer):
    response = api.post(URL, make_answer(chunks=None, metadata=None))
    assert response.status_code == 201, response.content
    answer = Answer.objects.get()
    assert (answer.chunks.count(), answer.metadata) == (0, {})
    # The same answer written with empty ones is the same content: a replay, 200.
    again = api.post(URL, make_answer(chunks=[], metadata={}))
    assert again.status_code == 200, again.content
    assert Answer.objects.count() == 1


@pytest.mark.parametrize(
    "encode",
    [
        lambda b: json.dumps(dict(reversed(list(b.items())))),
        lambda b: json.dumps(b, indent=4),
        lambda b: json.dumps(b, ensure_ascii=False),
    ],
    ids=["keys reordered", "other whitespace", "unescaped unicode"],
)
def test_replay_with_other_json_spelling_is_200(api, make_answer, encode):
    first = api.post(URL, make_answer())
    assert first.status_code == 201
    again = api.post(URL, encode(make_answer()).encode("utf-8"), raw=True)
    assert again.status_code == 200, again.content
    assert again.json()["id"] == first.json()["id"]
    assert Answer.objects.count() == 1


CONFLICT_CASES = [
    ("other answer", setp(["answer"], "Der Behälter muss jährlich geprüft werden.")),
    ("other question", setp(["question"], "Wie oft wird geprüft?")),
    ("other model", setp(["model"], "gpt-4o")),
    ("other chunk text", setp(["chunks", 0, "text"], "Ganz anderer Text.")),
    ("chunks reordered", lambda b: b.update(chunks=b["chunks"][::-1])),
    ("chunk dropped", lambda b: b.update(chunks=b["chunks"][:1])),
    ("metadata added", setp(["metadata"], {"k": "v"})),
    ("logprobs added", setp(["logprobs"], logprobs_for(DEFAULT_TOKENS))),
    ("created_at added", setp(["created_at"], "2025-03-01T10:00:00Z")),
]


@pytest.mark.parametrize(
    "mutate", [c[1] for c in CONFLICT_CASES], ids=[c[0] for c in CONFLICT_CASES]
)
def test_same_external_id_other_content_is_409(api, make_answer, mutate):
    assert api.post(URL, make_answer()).status_code == 201
    body = make_answer()
    mutate(body)
    response = api.post(URL, body)
    assert response.status_code == 409, response.content
    assert fields_of(response) == ["external_id"]
    stored = Answer.objects.get()
    assert stored.text == make_answer()["answer"]
    assert stored.question == make_answer()["question"]
    assert Chunk.objects.count() == 2
    # the original still replays as 200 after the conflict
    assert api.post(URL, make_answer()).status_code == 200


def test_external_id_is_unique_per_service_only(client, api, make_answer, other_service):
    other = ApiClient(client, other_service[1])
    first = api.post(URL, make_answer())
    second = other.post(URL, make_answer(answer="Etwas anderes."))
    assert (first.status_code, second.status_code) == (201, 201)
    assert first.json()["id"] != second.json()["id"]
    assert Answer.objects.count() == 2


# ------------------------------------------------------------------------------------ 400

# (id, mutation of a valid body, the field the error must name)
BAD_CASES = [
    # wrong types
    ("question is a number", setp(["question"], 5), "question"),
    ("question is null", setp(["question"], None), "question"),
    ("question is a list", setp(["question"], ["Wie?"]), "question"),
    ("external_id is a number", setp(["external_id"], 17), "external_id"),
    ("model is a number", setp(["model"], 4), "model"),
    ("answer is a bool", setp(["answer"], True), "answer"),
    ("score is a string", setp(["chunks", 0, "score"], "0.5"), "chunks[0].score"),
    ("score is a bool", setp(["chunks", 0, "score"], True), "chunks[0].score"),
    ("score is an object", setp(["chunks", 1, "score"], {}), "chunks[1].score"),
    ("chunks is a string", setp(["chunks"], "kein Array"), "chunks"),
    ("chunks is an object", setp(["chunks"], {"text": "x"}), "chunks"),
    ("chunks is a number", setp(["chunks"], 3), "chunks"),
    ("chunk is a string", setp(["chunks", 0], "Text"), "chunks[0]"),
    ("chunk without text", setp(["chunks", 0], {"score": 0.5}), "chunks[0].text"),
    ("chunk text is a number", setp(["chunks", 1, "text"], 3), "chunks[1].text"),
    ("chunk with unknown field", setp(["chunks", 0, "url"], "x"), "chunks[0].url"),
    ("logprobs is a string", setp(["logprobs"], "viele"), "logprobs"),
    ("logprobs content is a string", setp(["logprobs"], {"content": "x"}), "logprobs.content"),
    ("logprob is a bool",
     setp(["logprobs"], logprobs_for(DEFAULT_TOKENS, {"Der"}, True)),
     "logprobs.content[0].logprob"),
    ("logprob is a string",
     setp(["logprobs"], logprobs_for(DEFAULT_TOKENS, {"Der"}, "-0.5")),
     "logprobs.content[0].logprob"),
    ("logprob is positive",
     setp(["logprobs"], logprobs_for(DEFAULT_TOKENS, {"Der"}, 0.1)),
     "logprobs.content[0].logprob"),
    ("logprob is slightly positive",
     setp(["logprobs"], logprobs_for(DEFAULT_TOKENS, {" muss"}, 1e-12)),
     "logprobs.content[3].logprob"),
    ("logprob is missing",
     setp(["logprobs"], {"content": [{"token": "Der"}]}), "logprobs.content[0].logprob"),
    ("token is a number",
     setp(["logprobs"], {"content": [{"token": 5, "logprob": -0.1}]}), "logprobs.content[0].token"),
    ("byte above 255",
     setp(["logprobs"], {"content": [{"token": "D", "logprob": 0, "bytes": [256]}]}),
     "logprobs.content[0].bytes[0]"),
    ("byte negative",
     setp(["logprobs"], {"content": [{"token": "D", "logprob": 0, "bytes": [68, -1]}]}),
     "logprobs.content[0].bytes[1]"),
    ("byte is a bool",
     setp(["logprobs"], {"content": [{"token": "D", "logprob": 0, "bytes": [True]}]}),
     "logprobs.content[0].bytes[0]"),
    ("metadata is a list", setp(["metadata"], [1]), "metadata"),
    ("messages is an object", setp(["messages"], {"role": "user"}), "messages"),
    ("messages item is a string", setp(["messages"], ["hallo"]), "messages[0]"),
    # missing fields
    ("external_id missing", drop("external_id"), "external_id"),
    ("use_case missing", drop("use_case"), "use_case"),
    ("question missing", drop("question"), "question"),
    ("answer missing without completion", drop("answer"), "answer"),
    ("answer null without completion", setp(["answer"], None), "answer"),
    ("model missing without completion", drop("model"), "model"),
    ("model null without completion", setp(["model"], None), "model"),
    # use case
    ("use case with a space", setp(["use_case"], "kunden service"), "use_case"),
    ("use case empty", setp(["use_case"], ""), "use_case"),
    # sizes
    ("external_id of 201 chars", setp(["external_id"], "x" * 201), "external_id"),
    ("external_id empty", setp(["external_id"], ""), "external_id"),
    ("question over the limit", setp(["question"], "F" * (MAX_QUESTION_CHARS + 1)), "question"),
    ("question empty", setp(["question"], ""), "question"),
    ("answer over the limit", setp(["answer"], "A" * (MAX_ANSWER_CHARS + 1)), "answer"),
    ("model of 201 chars", setp(["model"], "m" * 201), "model"),
    ("model empty", setp(["model"], ""), "model"),
    ("chunk id of 201 chars", setp(["chunks", 0, "id"], "i" * 201), "chunks[0].id"),
    ("metadata too large", setp(["metadata"], {"x": "a" * 70_000}), "metadata"),
    # NUL characters and unpaired surrogates (ApiClient writes "\ud800" as a JSON escape)
    ("NUL in question", setp(["question"], "Wie\x00oft?"), "question"),
    ("NUL in answer", setp(["answer"], "Alle\x005 Jahre."), "answer"),
    ("NUL in external_id", setp(["external_id"], "a\x00"), "external_id"),
    ("NUL in model", setp(["model"], "gpt\x00"), "model"),
    ("NUL in chunk text", setp(["chunks", 0, "text"], "\x00"), "chunks[0].text"),
    ("NUL in chunk source", setp(["chunks", 0, "source"], "a\x00.pdf"), "chunks[0].source"),
    ("NUL in metadata value", setp(["metadata"], {"k": "v\x00"}), "metadata"),
    ("NUL in metadata key", setp(["metadata"], {"k\x00": "v"}), "metadata"),
    ("NUL in messages", setp(["messages"], [{"role": "user", "content": "\x00"}]), "messages"),
    ("NUL in a token",
     setp(["logprobs"], {"content": [{"token": "D\x00", "logprob": 0}]}), "logprobs.content"),
    ("surrogate in question", setp(["question"], "Wie\ud800?"), "question"),
    ("low surrogate in answer", setp(["answer"], "\udfffAlle"), "answer"),
    ("surrogate in chunk text", setp(["chunks", 1, "text"], "x\udc00"), "chunks[1].text"),
    ("surrogate in metadata key", setp(["metadata"], {"\ud800": 1}), "metadata"),
    ("surrogate in metadata value", setp(["metadata"], {"k": ["\ud800"]}), "metadata"),
    ("surrogate in a token",
     setp(["logprobs"], {"content": [{"token": "\ud800", "logprob": 0}]}), "logprobs.content"),
    # nesting
    ("metadata nested beyond the limit", setp(["metadata"], nest(MAX_JSON_DEPTH + 2)), "metadata"),
    ("messages nested beyond the limit",
     setp(["messages"], [{"role": "user", "content": nest(MAX_JSON_DEPTH + 2)}]), "messages"),
    # created_at
    ("created_at unparseable", setp(["created_at"], "gestern"), "created_at"),
    ("created_at Unix seconds as a string", setp(["created_at"], "1700000000"), "created_at"),
    ("created_at a date without a time", setp(["created_at"], "2026-12-01"), "created_at"),
    ("created_at month 13", setp(["created_at"], "2025-13-01T00:00:00Z"), "created_at"),
    ("created_at empty", setp(["created_at"], ""), "created_at"),
    ("created_at a number", setp(["created_at"], 1764633600), "created_at"),
    ("created_at two days ahead", setp(["created_at"], in_future(days=2)), "created_at"),
    ("created_at a year ahead", setp(["created_at"], in_future(days=365)), "created_at"),
    ("created_at far future", setp(["created_at"], "9999-12-31T23:59:59Z"), "created_at"),
    # year 1 at +14:00 is year 0 in UTC: not storable
    ("created_at before year 1 in UTC", setp(["created_at"], "0001-01-01T00:00:00+14:00"),
     "created_at"),
    # unknown fields
    ("unknown top-level field", setp(["answer_text"], "x"), "answer_text"),
    ("unknown field named like a header", setp(["Authorization"], "x"), "Authorization"),
    ("unknown field named body", setp(["body"], "x"), "body"),
    ("unknown field named payload", setp(["payload"], "x"), "payload"),
    ("unknown field named path", setp(["path"], "x"), "path"),
    # completion
    ("completion is a string", setp(["completion"], "x"), "completion"),
    ("completion without choices",
     lambda b: (drop("answer", "model")(b), b.update(completion={"model": "m", "choices": []})),
     "completion.choices"),
    ("completion without model",
     lambda b: (drop("answer", "model")(b),
                b.update(completion={"choices": [{"message": {"content": "x"}}]})),
     "completion.model"),
]


@pytest.mark.parametrize(
    ("mutate", "field"), [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES]
)
def test_bad_input_is_400_naming_the_field(api, make_answer, mutate, field):
    body = make_answer()
    mutate(body)
    response = api.post(URL, body)
    assert response.status_code == 400, response.content
    # the error names the field or a part of it: "logprobs.content[0].token" for "logprobs.content"
    assert any(f == field or f.startswith((f"{field}.", f"{field}["))
               for f in fields_of(response)), response.json()
    assert not Answer.objects.exists()


def _valid_json(make_answer) -> bytes:
    return json.dumps(make_answer()).encode()


# (id, function of a valid body's bytes -> the bytes to send)
RAW_BAD_CASES = [
    ("NaN", lambda raw: raw.replace(b"0.82", b"NaN")),
    ("Infinity", lambda raw: raw.replace(b"0.82", b"Infinity")),
    ("-Infinity", lambda raw: raw.replace(b"0.82", b"-Infinity")),
    ("NaN as logprob",
     lambda raw: raw.replace(b'"logprobs": null',
                             b'"logprobs": {"content": [{"token": "D", "logprob": NaN}]}')),
    ("invalid UTF-8 byte", lambda raw: raw.replace(b"Wie", b"W\xffe")),
    ("truncated UTF-8 sequence", lambda raw: raw.replace(b"Wie", b"W\xc3e")),
    ("UTF-8 encoded surrogate", lambda raw: raw.replace(b"Wie", b"W\xed\xa0\x80e")),
    ("Latin-1 instead of UTF-8",
     lambda raw: json.dumps(json.loads(raw), ensure_ascii=False).encode("latin-1", "replace")),
    ("100000 nested [", lambda raw: b"[" * 100_000),
    ("100000 nested [ in metadata",
     lambda raw: raw[:-1] + b', "metadata": {"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"),
    ("10000 nested objects",
     lambda raw: b'{"a":' * 10_000 + b"1" + b"}" * 10_000),
    ("array body", lambda raw: b"[" + raw + b"]"),
    ("string body", lambda raw: b'"Antwort"'),
    ("number body", lambda raw: b"5"),
    ("null body", lambda raw: b"null"),
    ("true body", lambda raw: b"true"),
    ("empty body", lambda raw: b""),
    ("whitespace body", lambda raw: b"   "),
    ("truncated JSON", lambda raw: raw[:-3]),
    ("trailing garbage", lambda raw: raw + b"}"),
    ("single quotes", lambda raw: raw.replace(b'"', b"'")),
    ("byte order mark", lambda raw: b"\xef\xbb\xbf" + raw),
    ("form encoding", lambda raw: b"external_id=a-1&question=x"),
    ("integer with 5000 digits",
     lambda raw: raw[:-1] + b', "metadata": {"n": ' + b"9" * 5000 + b"}}"),
]


@pytest.mark.parametrize("url", [URL, BATCH_URL], ids=["single", "batch"])
@pytest.mark.parametrize(
    "transform", [c[1] for c in RAW_BAD_CASES], ids=[c[0] for c in RAW_BAD_CASES]
)
def test_malformed_body_is_400(api, make_answer, transform, url):
    raw = _valid_json(make_answer)
    if url == BATCH_URL:
        raw = b'{"answers": [' + raw + b"]}"
    body = transform(raw)
    response = api.post(url, body, raw=True)
    assert response.status_code == 400, response.content[:300]
    errors_of(response)
    assert not Answer.objects.exists()


@pytest.mark.parametrize(
    ("method", "path", "status", "allow"),
    [
        ("post", "/api/v1/answers/", 404, None),  # a trailing slash is another path
        ("get", "/api/v1/nope", 404, None),
        ("get", "/api/v1/", 404, None),
        ("put", URL, 405, "GET, POST"),  # GET finds an answer by its external_id
        ("delete", BATCH_URL, 405, "POST"),
        ("post", "/api/v1/answers/5", 405, "GET"),
    ],
)
def test_unknown_paths_and_wrong_methods_are_json_errors(api, method, path, status, allow):
    response = getattr(api.client, method)(path, **api._headers())
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    [error] = errors_of(response)
    if allow:
        # ninja names the methods of a path from a set: in no fixed order.
        assert set(response["Allow"].split(", ")) == set(allow.split(", "))
        assert error["message"] == f"method not allowed; allowed: {response['Allow']}"
    else:
        assert error["message"] == "no such endpoint"


@pytest.mark.parametrize("url", [URL, BATCH_URL])
def test_a_compressed_body_is_415_not_a_misleading_400(api, make_answer, url):
    body = json.dumps(make_answer() if url == URL else {"answers": [make_answer()]}).encode()
    response = api.client.post(url, gzip.compress(body), content_type="application/json",
                               HTTP_CONTENT_ENCODING="gzip", **api._headers())
    assert response.status_code == 415
    assert errors_of(response)[0]["field"] == "Content-Encoding"
    assert not Answer.objects.exists()
    # "identity" is no encoding at all.
    plain = api.client.post(url, body, content_type="application/json",
                            HTTP_CONTENT_ENCODING="identity", **api._headers())
    assert plain.status_code in (200, 201)


def test_a_host_not_served_is_a_json_400(client, settings):
    settings.ALLOWED_HOSTS = ["treue.example"]
    response = client.post(URL, b"{}", content_type="application/json",
                           HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert errors_of(response)[0]["message"].startswith("bad request")
    # The pages keep Django's own answer.
    assert client.get("/login/", HTTP_HOST="evil.example")["Content-Type"].startswith("text/html")


# ------------------------------------------------------------------------------------ 401


def _auth_cases():
    def wrong_secret(key):
        return key[:-1] + ("A" if key[-1] != "A" else "B")

    return [
        ("no header", lambda key: None),
        ("basic scheme", lambda key: f"Basic {key}"),
        ("token scheme", lambda key: f"Token {key}"),
        ("key without scheme", lambda key: key),
        ("scheme without key", lambda key: "Bearer"),
        ("scheme and space", lambda key: "Bearer "),
        ("garbage key", lambda key: "Bearer wrong"),
        ("malformed key", lambda key: "Bearer tr_abc"),
        ("well-formed unknown key", lambda key: "Bearer tr_00000000_" + "x" * 43),
        ("right prefix wrong secret", lambda key: f"Bearer {wrong_secret(key)}"),
        ("key with a suffix", lambda key: f"Bearer {key}x"),
        ("truncated key", lambda key: f"Bearer {key[:-5]}"),
        ("non-ASCII key", lambda key: "Bearer tr_äöüäöüäö_x"),
    ]


AUTH_CASES = _auth_cases()


@pytest.mark.parametrize(
    "header", [c[1] for c in AUTH_CASES], ids=[c[0] for c in AUTH_CASES]
)
@pytest.mark.parametrize("method,path", [("post", URL), ("post", BATCH_URL), ("get", URL + "/1")])
def test_missing_or_wrong_key_is_401(client, make_answer, service_and_key, header, method, path):
    _, key = service_and_key
    value = header(key)
    extra = {"HTTP_AUTHORIZATION": value} if value is not None else {}
    if method == "post":
        body = make_answer() if path == URL else {"answers": [make_answer()]}
        response = client.post(path, json.dumps(body), content_type="application/json", **extra)
    else:
        response = client.get(path, **extra)
    assert response.status_code == 401, response.content
    assert fields_of(response) == ["Authorization"]
    assert response["WWW-Authenticate"] == "Bearer"
    assert not Answer.objects.exists()


def test_key_of_inactive_service_is_401(api, make_answer, service):
    Service.objects.filter(pk=service.pk).update(active=False)
    response = api.post(URL, make_answer())
    assert response.status_code == 401
    assert not Answer.objects.exists()
    Service.objects.filter(pk=service.pk).update(active=True)
    assert api.post(URL, make_answer()).status_code == 201


def test_rotated_key_is_401_and_new_key_works(client, api, make_answer, service):
    new_key = service_rotate_key(service=service)
    assert api.post(URL, make_answer()).status_code == 401
    assert ApiClient(client, new_key).post(URL, make_answer()).status_code == 201


def test_key_use_is_recorded(api, make_answer, service):
    assert Service.objects.get(pk=service.pk).last_used_at is None
    api.post(URL, make_answer())
    assert Service.objects.get(pk=service.pk).last_used_at is not None


# ------------------------------------------------------------------------------------ 403


def test_use_case_not_allowed_is_403(api, make_answer, other_use_case):
    response = api.post(URL, make_answer(use_case=other_use_case.slug))
    assert response.status_code == 403, response.content
    assert fields_of(response) == ["use_case"]
    assert not Answer.objects.exists()


def test_another_tenants_use_case_reads_exactly_as_one_that_does_not_exist(
    api, make_answer, other_use_case
):
    # Seen in an attack: another tenant's slug was a 403, one that does not exist a 400, and
    # another tenant's inactive use case said "inactive": a key could list every slug.
    inactive = use_case_create(slug="stillgelegt", name="Stillgelegt")
    UseCase.objects.filter(pk=inactive.pk).update(active=False)
    answers = []
    for slug in (other_use_case.slug, "stillgelegt", "gibt-es-nicht"):
        response = api.post(URL, make_answer(use_case=slug))
        answers.append((response.status_code, response.json()))
    assert answers == [(403, {"errors": [
        {"field": "use_case", "message": "this key may not send to this use case"}
    ]})] * 3
    assert not Answer.objects.exists()


def test_inactive_use_case_is_403(api, make_answer, use_case):
    UseCase.objects.filter(pk=use_case.pk).update(active=False)
    response = api.post(URL, make_answer())
    assert response.status_code == 403
    # It says why: the use case, not the key (the key is allowed on it).
    assert errors_of(response) == [{"field": "use_case", "message": "this use case is inactive"}]
    assert not Answer.objects.exists()


def test_a_key_without_any_use_case_is_403_not_401(api, make_answer, service):
    service.use_cases.clear()
    response = api.post(URL, make_answer())
    assert response.status_code == 403, response.content
    assert fields_of(response) == ["use_case"]
    assert not Answer.objects.exists()


def test_the_key_finds_its_service_with_only_its_active_use_cases(
    service, use_case, other_use_case
):
    third = use_case_create(slug="einkauf", name="Einkauf")
    service.use_cases.add(other_use_case, third)
    UseCase.objects.filter(pk=third.pk).update(active=False)
    found = service_for_key(service.key_prefix)
    assert found is not None
    assert (found.service.pk, found.service.name, found.service.active) == (
        service.pk, "rag-bot", True
    )
    assert found.service.created_at == Service.objects.get(pk=service.pk).created_at
    assert sorted(found.use_cases) == ["kundenservice", "vertrieb"]
    assert found.use_cases["vertrieb"].language == "en"
    assert found.use_cases["kundenservice"].sample_rate == use_case.sample_rate
    Service.objects.filter(pk=service.pk).update(active=False)
    assert service_for_key(service.key_prefix) is None
    assert service_for_key("00000000") is None


def test_use_case_allowed_after_granting(api, make_answer, service, other_use_case):
    assert api.post(URL, make_answer(use_case="vertrieb")).status_code == 403
    service.use_cases.add(other_use_case)
    response = api.post(URL, make_answer(use_case="vertrieb"))
    assert response.status_code == 201
    assert Answer.objects.get().use_case == other_use_case


# ------------------------------------------------------------------------------------ 413


@override_settings(TREUE_MAX_BODY_BYTES=2000)
@pytest.mark.parametrize(("extra", "status"), [(-50, 201), (0, 201), (1, 413), (10_000, 413)])
def test_body_over_the_limit_is_413(api, make_answer, extra, status):
    body = make_answer(question="")
    size = len(json.dumps(body).encode())
    body["question"] = "F" * (2000 - size + extra)
    raw = json.dumps(body).encode()
    assert len(raw) == 2000 + extra
    response = api.post(URL, raw, raw=True)
    assert response.status_code == status, response.content[:200]
    if status == 413:
        errors_of(response)
        assert not Answer.objects.exists()


@override_settings(TREUE_MAX_BODY_BYTES=1000, TREUE_MAX_BATCH_BODY_BYTES=3000)
def test_batch_has_its_own_body_limit(api, make_answer):
    items = [make_answer(external_id=f"b-{i}") for i in range(3)]
    raw = json.dumps({"answers": items}).encode()
    assert 1000 < len(raw) < 3000
    assert api.post(BATCH_URL, raw, raw=True).status_code == 200
    single = json.dumps(make_answer(external_id="b-x")).encode()
    assert len(single) < 1000
    assert api.post(URL, single, raw=True).status_code == 201
    items = [make_answer(external_id=f"c-{i}") for i in range(10)]
    raw = json.dumps({"answers": items}).encode()
    assert len(raw) > 3000
    response = api.post(BATCH_URL, raw, raw=True)
    assert response.status_code == 413
    errors_of(response)
    assert not Answer.objects.filter(external_id__startswith="c-").exists()


@override_settings(TREUE_MAX_BODY_BYTES=1000)
def test_single_limit_applies_to_single_endpoint(api, make_answer):
    raw = json.dumps(make_answer(question="F" * 1000)).encode()
    response = api.post(URL, raw, raw=True)
    assert response.status_code == 413
    # the same answer in a batch is within the (larger) batch limit
    response = api.post(BATCH_URL, {"answers": [make_answer(question="F" * 1000)]})
    assert response.status_code == 200
    assert response.json()["created"] == 1


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2000, TREUE_MAX_BATCH_BODY_BYTES=2000)
def test_django_upload_cap_is_413_too(api, make_answer):
    """Django's own cap (DATA_UPLOAD_MAX_MEMORY_SIZE) also answers 413 with errors JSON."""
    items = [make_answer(external_id=f"b-{i}") for i in range(6)]
    response = api.post(BATCH_URL, {"answers": items})
    assert response.status_code == 413, response.content[:200]
    errors_of(response)
    assert not Answer.objects.exists()


# ------------------------------------------------------------------------- completion


@pytest.fixture
def openai_client(openai_server):
    return OpenAI(base_url=openai_server.base_url, api_key="test-key", max_retries=0)


def _completion_body(make_answer, completion: dict) -> dict:
    body = make_answer(completion=completion)
    for name in ("answer", "model", "logprobs"):
        body.pop(name)
    return body


def test_completion_is_read_from_choices_0(api, make_answer, openai_server, openai_client):
    # only " Jahr" (of "Jahre") is uncertain
    openai_server.logprob_for = lambda index, token: LOW if token == " Jahr" else SURE
    completion = openai_client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Wie lange?"}],
        logprobs=True,
        top_logprobs=2,
    )
    response = api.post(URL, _completion_body(make_answer, completion.model_dump()))
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["logprobs_status"] == "ok"
    assert data["flagged"] is True
    position = DEFAULT_ANSWER.index("Jahre")
    assert [(t["token"], t["position"]) for t in data["uncertain_tokens"]] == [("Jahre", position)]
    assert data["uncertain_tokens"][0]["probability"] == pytest.approx(math.exp(LOW), abs=1e-4)
    stored = Answer.objects.get()
    assert stored.text == DEFAULT_ANSWER
    assert stored.model == "gpt-4o-mini"
    detail = api.get(f"{URL}/{stored.pk}").json()
    assert detail["answer"] == DEFAULT_ANSWER and detail["model"] == "gpt-4o-mini"
    # a replay of the same completion is a 200
    again = api.post(URL, _completion_body(make_answer, completion.model_dump()))
    assert again.status_code == 200


def test_completion_without_logprobs(api, make_answer, openai_client):
    completion = openai_client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Wie lange?"}]
    )
    response = api.post(URL, _completion_body(make_answer, completion.model_dump()))
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["logprobs_status"] == "none"
    assert data["flagged"] is False
    assert data["warnings"] == [services.WARNING_NO_LOGPROBS]
    assert Answer.objects.get().text == DEFAULT_ANSWER


def test_explicit_fields_take_precedence_over_completion(api, make_answer, openai_client):
    completion = openai_client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Wie lange?"}]
    )
    body = make_answer(completion=completion.model_dump(), model="mein-modell")
    response = api.post(URL, body)
    assert response.status_code == 201
    stored = Answer.objects.get()
    assert (stored.text, stored.model) == (body["answer"], "mein-modell")


def test_completion_with_null_content_is_400(api, make_answer, openai_client):
    completion = openai_client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Wie lange?"}]
    ).model_dump()
    completion["choices"][0]["message"]["content"] = None
    response = api.post(URL, _completion_body(make_answer, completion))
    assert response.status_code == 400, response.content
    assert "completion" in fields_of(response)
    assert not Answer.objects.exists()


# ------------------------------------------------------------------------------- batch


def test_batch_answers_each_item_in_order(api, make_answer, other_use_case):
    items = [
        make_answer(external_id="b-1"),  # 201
        make_answer(external_id="b-2", question=5),  # 400
        make_answer(external_id="b-1"),  # duplicate in batch, same content: 200
        make_answer(external_id="b-3", use_case=other_use_case.slug),  # 403
        make_answer(external_id="b-4", answer="Andere Antwort."),  # 201
        make_answer(external_id="b-4", answer="Noch eine andere."),  # same id, other content: 409
        17,  # not an object: 400
        make_answer(external_id="b-5", use_case="gibt-es-nicht"),  # unknown use case: 403
        make_answer(external_id="b-6", extra_field=1),  # unknown field: 400
    ]
    expected = [201, 400, 200, 403, 201, 409, 400, 403, 400]
    response = api.post(BATCH_URL, {"answers": items})
    assert response.status_code == 200, response.content
    data = response.json()
    assert set(data) == {"results", "created", "existing", "failed"}
    results = data["results"]
    assert [r["index"] for r in results] == list(range(len(items)))
    assert [r["status"] for r in results] == expected
    assert (data["created"], data["existing"], data["failed"]) == (2, 1, 6)
    for item, result in zip(items, results, strict=True):
        if result["status"] < 300:
            assert set(result["answer"]) == ANSWER_FIELDS
            assert result["answer"]["external_id"] == item["external_id"]
            assert result.get("errors") is None
        else:
            errors = result["errors"]
            assert errors and all(set(e) == {"field", "message"} for e in errors)
            assert result.get("answer") is None
    assert "question" in [e["field"] for e in results[1]["errors"]]
    assert [e["field"] for e in results[3]["errors"]] == ["use_case"]
    assert [e["field"] for e in results[5]["errors"]] == ["external_id"]
    assert [e["field"] for e in results[7]["errors"]] == ["use_case"]
    assert "extra_field" in [e["field"] for e in results[8]["errors"]]
    # the good ones are stored although others failed, each once
    assert results[0]["answer"]["id"] == results[2]["answer"]["id"]
    stored = dict(Answer.objects.values_list("external_id", "text"))
    assert stored == {"b-1": items[0]["answer"], "b-4": "Andere Antwort."}
    assert Chunk.objects.count() == 4

    # the same batch again: stored items are 200, the rest fail the same way
    again = api.post(BATCH_URL, {"answers": items}).json()
    assert [r["status"] for r in again["results"]] == [200, 400, 200, 403, 200, 409, 400, 403, 400]
    assert again["results"][0]["answer"] == results[0]["answer"]
    assert Answer.objects.count() == 2
    assert Chunk.objects.count() == 4


def _with_raw_field(item: dict, name: str, raw: bytes) -> bytes:
    """The item's JSON with one more field whose value is written as it is (JSON that Python's
    own encoder cannot write, such as an integer of 5000 digits)."""
    return json.dumps(item).encode()[:-1] + b', "' + name.encode() + b'": ' + raw + b"}"


HUGE_NUMBER = b"9" * 5000  # Python converts integers of up to 4300 digits


def test_an_item_no_parser_can_read_costs_only_itself(api, make_answer):
    items = [
        json.dumps(make_answer(external_id="ok-1")).encode(),
        _with_raw_field(make_answer(external_id="n-1"), "metadata", b'{"n": ' + HUGE_NUMBER + b"}"),
        _with_raw_field(make_answer(external_id="n-2"), "foo", HUGE_NUMBER),
        _with_raw_field(make_answer(external_id="n-3"), "metadata", b"[" + HUGE_NUMBER + b"]"),
        json.dumps(make_answer(external_id="ok-2")).encode(),
    ]
    response = api.post(BATCH_URL, b'{"answers": [' + b", ".join(items) + b"]}", raw=True)
    assert response.status_code == 200, response.content[:300]
    results = response.json()["results"]
    assert [r["status"] for r in results] == [201, 400, 400, 400, 201]
    assert [[(e["field"], e["message"]) for e in r["errors"]] for r in results[1:4]] == [
        [("metadata", "the value holds a number of more than 4300 digits")],
        [("", "the item holds a number of more than 4300 digits")],
        [("metadata", "the value holds a number of more than 4300 digits")],
    ]
    assert set(Answer.objects.values_list("external_id", flat=True)) == {"ok-1", "ok-2"}


@pytest.mark.parametrize("depth", [1_024, 100_000])
def test_an_item_nested_too_deeply_costs_only_itself(api, make_answer, depth):
    # Seen in an attack: one item nested 1,024 levels deep made the whole batch a body-level
    # 400 (the fast decoder refuses such a body even where it only skips an item).
    deep = b'{"a": ' * depth + b"1" + b"}" * depth
    items = [
        json.dumps(make_answer(external_id="ok-1")).encode(),
        _with_raw_field(make_answer(external_id="deep-1"), "metadata", deep),
        b"[" * depth + b"]" * depth,
        json.dumps(make_answer(external_id="ok-2", question='Was heißt "[", und \\"?')).encode(),
    ]
    response = api.post(BATCH_URL, b'{"answers": [' + b", ".join(items) + b"]}", raw=True)
    assert response.status_code == 200, response.content[:300]
    results = response.json()["results"]
    assert [r["status"] for r in results] == [201, 400, 400, 201]
    assert results[1]["errors"] == [{"field": "", "message": "the item is nested too deeply"}]
    assert results[2]["errors"]  # a list, or nested too deeply: not an answer either way
    assert set(Answer.objects.values_list("external_id", flat=True)) == {"ok-1", "ok-2"}


def test_a_deep_body_that_is_not_a_batch_envelope_is_still_the_bodys_400(api, make_answer):
    deep = b"[" * 2_000 + b"]" * 2_000
    for body in (
        b'{"answers": [' + deep + b'], "extra": 1}',
        b'{"answers": [' + deep + b"]",
        b'{"answers": [' + deep + b', "unterminated]}',
    ):
        response = api.post(BATCH_URL, body, raw=True)
        assert response.status_code == 400, (body[-30:], response.content[:300])
        assert response.json()["errors"][0]["field"] in ("", "answers", "extra")
    assert not Answer.objects.exists()


@pytest.mark.parametrize("field", ["metadata", "messages", "chunks"])
def test_a_number_python_cannot_read_is_400_naming_its_field(api, make_answer, field):
    item = make_answer()
    item.pop(field, None)  # a key written twice would be read as the last one
    body = _with_raw_field(item, field, b"[" + HUGE_NUMBER + b"]")
    response = api.post(URL, body, raw=True)
    assert response.status_code == 400, response.content[:300]
    assert errors_of(response) == [
        {"field": field, "message": "the value holds a number of more than 4300 digits"}
    ]
    assert not Answer.objects.exists()


def test_a_batch_body_not_utf8_is_the_whole_batchs_400(api, make_answer):
    # JSON text is UTF-8: a body that is not is not JSON, whichever item holds the bad byte.
    good = json.dumps(make_answer(external_id="ok-1")).encode()
    bad = json.dumps(make_answer(external_id="bad", extra=1)).encode().replace(b"Wie", b"W\xffe")
    response = api.post(BATCH_URL, b'{"answers": [' + good + b", " + bad + b"]}", raw=True)
    assert response.status_code == 400, response.content[:300]
    assert errors_of(response) == [{"field": "", "message": "the body is not valid UTF-8"}]
    assert not Answer.objects.exists()


def test_batch_and_single_share_idempotency(api, make_answer):
    single = api.post(URL, make_answer(external_id="s-1"))
    assert single.status_code == 201
    data = api.post(
        BATCH_URL,
        {"answers": [make_answer(external_id="s-1"), make_answer(external_id="s-1", model="x")]},
    ).json()
    assert [r["status"] for r in data["results"]] == [200, 409]
    assert data["results"][0]["answer"]["id"] == single.json()["id"]
    # and the other way round
    api.post(BATCH_URL, {"answers": [make_answer(external_id="s-2")]})
    assert api.post(URL, make_answer(external_id="s-2")).status_code == 200
    assert api.post(URL, make_answer(external_id="s-2", model="x")).status_code == 409
    assert Answer.objects.count() == 2


def test_a_batch_item_repeating_the_stored_content_is_200_after_a_conflicting_first(
    api, make_answer
):
    # The stored content arrived first; in the batch its id comes first with other content
    # (409), then with the stored content: that one is a replay, whatever the first got.
    stored = api.post(URL, make_answer(external_id="c-1", model="stored"))
    assert stored.status_code == 201
    data = api.post(BATCH_URL, {"answers": [
        make_answer(external_id="c-1", model="other"),
        make_answer(external_id="c-1", model="stored"),
        make_answer(external_id="c-1", model="third"),
    ]}).json()
    assert [r["status"] for r in data["results"]] == [409, 200, 409]
    assert data["results"][1]["answer"]["id"] == stored.json()["id"]
    assert Answer.objects.get().model == "stored"


def test_batch_items_are_flagged_like_single_answers(api, make_answer, use_case):
    flagged = make_answer(external_id="f", logprobs=logprobs_for(DEFAULT_TOKENS, {" Jahre"}))
    plain = make_answer(external_id="p", logprobs=logprobs_for(DEFAULT_TOKENS))
    results = api.post(BATCH_URL, {"answers": [flagged, plain]}).json()["results"]
    first, second = (r["answer"] for r in results)
    assert (first["flagged"], first["sample_reason"], first["inclusion_probability"]) == (
        True, "flagged", 1.0,
    )
    assert [t["token"] for t in first["uncertain_tokens"]] == ["Jahre"]
    assert second["flagged"] is False and second["inclusion_probability"] == use_case.sample_rate


@pytest.mark.parametrize(("count", "status"), [(500, 200), (501, 400)])
def test_batch_item_limit(api, make_answer, count, status):
    items = [make_answer(external_id=f"n-{i}", chunks=[]) for i in range(count)]
    response = api.post(BATCH_URL, {"answers": items})
    assert response.status_code == status, response.content[:300]
    if status == 400:
        assert "answers" in fields_of(response)
        assert not Answer.objects.exists()
    else:
        assert response.json()["created"] == count
        assert Answer.objects.count() == count


def test_empty_batch_is_200_with_no_results(api):
    response = api.post(BATCH_URL, {"answers": []})
    assert response.status_code == 200
    assert response.json() == {"results": [], "created": 0, "existing": 0, "failed": 0}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "answers"),
        ({"answers": "x"}, "answers"),
        ({"answers": {"external_id": "x"}}, "answers"),
        ({"answers": None}, "answers"),
        ({"answers": [], "extra": 1}, "extra"),
    ],
)
def test_bad_batch_envelope_is_400(api, body, field):
    response = api.post(BATCH_URL, body)
    assert response.status_code == 400, response.content
    assert field in fields_of(response)


# --------------------------------------------------------------------------------- GET


def test_get_own_answer_with_chunks_in_rank_order(api, make_answer):
    chunks = [
        {"text": "erster", "id": "c1", "score": 0.9, "source": "a.pdf"},
        {"text": "zweiter", "score": 0.95},
        {"text": "dritter", "id": "c3"},
    ]
    posted = api.post(URL, make_answer(chunks=chunks)).json()
    response = api.get(f"{URL}/{posted['id']}")
    assert response.status_code == 200
    data = response.json()
    for name in ANSWER_FIELDS:
        assert data[name] == posted[name], name
    assert data["question"] == make_answer()["question"]
    assert data["answer"] == make_answer()["answer"]
    assert data["model"] == "gpt-4o-mini"
    assert data["chunks"] == [
        {"rank": 1, "text": "erster", "id": "c1", "score": 0.9, "source": "a.pdf"},
        {"rank": 2, "text": "zweiter", "id": None, "score": 0.95, "source": None},
        {"rank": 3, "text": "dritter", "id": "c3", "score": None, "source": None},
    ]
    assert data["score"] is None
    assert data["claims"] == []


def test_get_other_services_answer_is_404(client, api, make_answer, other_service):
    other = ApiClient(client, other_service[1])
    theirs = other.post(URL, make_answer()).json()["id"]
    response = api.get(f"{URL}/{theirs}")
    assert response.status_code == 404
    assert fields_of(response) == ["answer_id"]
    assert other.get(f"{URL}/{theirs}").status_code == 200


def test_get_nonexistent_is_404(api, make_answer):
    posted = api.post(URL, make_answer()).json()["id"]
    response = api.get(f"{URL}/{posted + 1000}")
    assert response.status_code == 404
    errors_of(response)


def test_get_without_key_is_401(client, api, make_answer):
    posted = api.post(URL, make_answer()).json()["id"]
    response = client.get(f"{URL}/{posted}")
    assert response.status_code == 401
    assert fields_of(response) == ["Authorization"]


@pytest.mark.parametrize(
    "answer_id", [str(10**30), str(2**63), str(2**63 - 1), "0", "-1", "abc", "1.5", "1e3"]
)
def test_get_odd_ids_are_4xx(api, answer_id):
    response = api.get(f"{URL}/{answer_id}")
    assert 400 <= response.status_code < 500, (answer_id, response.status_code)
    if response.status_code == 400:
        assert fields_of(response) == ["answer_id"]


@pytest.mark.parametrize("answer_id", [str(10**30), str(2**63), "0", "abc", "1.5"])
def test_get_invalid_ids_are_400_naming_answer_id(api, answer_id):
    response = api.get(f"{URL}/{answer_id}")
    assert response.status_code == 400, (answer_id, response.status_code)
    assert fields_of(response) == ["answer_id"]


# ----------------------------------------------------------------- GET by external_id


def find(api, external_id: str):
    return api.client.get(URL, {"external_id": external_id}, **api._headers())


def test_find_own_answer_by_external_id(api, make_answer):
    posted = api.post(URL, make_answer(external_id="kunde/42 ä")).json()
    response = find(api, "kunde/42 ä")
    assert response.status_code == 200, response.content
    # The same body as reading it by Treue's id.
    assert response.json() == api.get(f"{URL}/{posted['id']}").json()
    assert response.json()["id"] == posted["id"]
    assert response.json()["external_id"] == "kunde/42 ä"


def test_find_unknown_external_id_is_404(api, make_answer):
    api.post(URL, make_answer(external_id="da"))
    response = find(api, "nicht-da")
    assert response.status_code == 404
    assert fields_of(response) == ["external_id"]
    # Case matters, as for the idempotency key.
    assert find(api, "DA").status_code == 404


def test_find_never_shows_another_services_answer(client, api, make_answer, other_service):
    other = ApiClient(client, other_service[1])
    theirs = other.post(URL, make_answer(external_id="nur-fremd")).json()
    assert find(api, "nur-fremd").status_code == 404
    assert find(other, "nur-fremd").json()["id"] == theirs["id"]
    # The same external_id at both services: each key finds its own.
    mine = api.post(URL, make_answer(external_id="beide")).json()
    also = other.post(URL, make_answer(external_id="beide")).json()
    assert find(api, "beide").json()["id"] == mine["id"]
    assert find(other, "beide").json()["id"] == also["id"] != mine["id"]


@pytest.mark.parametrize(("query", "message"), [
    ({}, "Field required"),
    ({"external_id": ""}, "String should have at least 1 character"),
    ({"external_id": "x" * 201}, "String should have at most 200 characters"),
    ({"external_id": "a\x00b"}, "must not contain NUL characters"),
])
def test_find_with_bad_external_id_is_400_naming_it(api, query, message):
    response = api.client.get(URL, query, **api._headers())
    assert response.status_code == 400, response.content
    assert errors_of(response) == [{"field": "external_id", "message": message}]


def test_find_without_key_is_401(client, api, make_answer):
    api.post(URL, make_answer(external_id="geheim"))
    response = client.get(URL, {"external_id": "geheim"})
    assert response.status_code == 401
    assert fields_of(response) == ["Authorization"]


# ----------------------------------------------------------------------------- OpenAPI


def test_openapi_schema_describes_the_operations(client):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    operations = {
        (path, method)
        for path, item in schema["paths"].items()
        for method in item
        if method in {"get", "post", "put", "patch", "delete"}
    }
    assert operations == {
        ("/api/v1/answers", "post"),
        ("/api/v1/answers", "get"),  # by external_id
        ("/api/v1/answers/batch", "post"),
        ("/api/v1/answers/{answer_id}", "get"),
        ("/api/v1/use-cases/{slug}/estimates", "get"),  # tests/monitoring/test_estimates_api.py
        ("/api/v1/use-cases/{slug}/segments", "get"),  # tests/monitoring/test_segments_api.py
    }
    components = schema["components"]
    answer_in = components["schemas"]["AnswerIn"]
    assert {"external_id", "use_case", "question"} <= set(answer_in["required"])
    assert {"answer", "model", "chunks", "logprobs", "completion", "messages", "created_at",
            "metadata", "prompt_version"} <= set(answer_in["properties"])
    batch_items = components["schemas"]["BatchIn"]["properties"]["answers"]["items"]
    assert batch_items == {"$ref": "#/components/schemas/AnswerIn"}
    schemes = components["securitySchemes"]
    assert any(s.get("scheme", "").lower() == "bearer" for s in schemes.values())
    single = schema["paths"]["/api/v1/answers"]["post"]["responses"]
    assert {"200", "201", "400", "401", "403", "409", "413"} <= set(single)
    batch = schema["paths"]["/api/v1/answers/batch"]["post"]["responses"]
    assert {"200", "400", "401", "413"} <= set(batch)
    # an id that is no integer or out of range is a 400, and documented as one
    detail = schema["paths"]["/api/v1/answers/{answer_id}"]["get"]["responses"]
    assert {"200", "400", "401", "404"} <= set(detail)
    # Finding an answer by its external_id: the same body, the parameter with its limits.
    find = schema["paths"]["/api/v1/answers"]["get"]
    assert {"200", "400", "401", "404"} <= set(find["responses"])
    assert find["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/AnswerDetailOut"}
    [param] = find["parameters"]
    assert (param["name"], param["in"], param["required"]) == ("external_id", "query", True)
    assert (param["schema"]["minLength"], param["schema"]["maxLength"]) == (1, 200)
    assert "on_demand" in components["schemas"]["AnswerDetailOut"]["properties"]
    # The limits the API enforces are in the schema too.
    props = answer_in["properties"]
    assert (props["external_id"]["minLength"], props["external_id"]["maxLength"]) == (1, 200)
    assert props["use_case"]["pattern"] == r"^[-a-zA-Z0-9_]+$"
    assert props["question"]["maxLength"] == MAX_QUESTION_CHARS


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("external_id", "", "String should have at least 1 character"),
        ("external_id", "x" * 201, "String should have at most 200 characters"),
        ("question", "", "String should have at least 1 character"),
        ("use_case", "a b", "String should match pattern '^[-a-zA-Z0-9_]+$'"),
    ],
)
def test_a_string_out_of_its_limits_is_named_in_characters(api, make_answer, field, value,
                                                             message):
    response = api.post(URL, make_answer(**{field: value}))
    assert response.status_code == 400
    assert errors_of(response) == [{"field": field, "message": message}]


# ----------------------------------------------------------------------- tier 1 wiring

# (id, tokens, low tokens, flagged, uncertain words)
TIER1_CASES = [
    ("capitalised word", DEFAULT_TOKENS, {" Jahre"}, True, ["Jahre"]),
    ("number", DEFAULT_TOKENS, {" 5"}, True, ["5"]),
    ("fragment reports the whole noun", DEFAULT_TOKENS, {"älter"}, True, ["Behälter"]),
    ("two words", DEFAULT_TOKENS, {"Der", " Jahre"}, True, ["Der", "Jahre"]),
    ("lower-case word only", DEFAULT_TOKENS, {" muss", " geprüft"}, False, []),
    ("punctuation only", DEFAULT_TOKENS, {"."}, False, []),
    ("all sure", DEFAULT_TOKENS, set(), False, []),
]


@pytest.mark.parametrize(
    ("tokens", "low", "flagged", "words"), [c[1:] for c in TIER1_CASES],
    ids=[c[0] for c in TIER1_CASES],
)
def test_tier1_flags_through_the_api(api, make_answer, use_case, tokens, low, flagged, words):
    response = api.post(URL, make_answer(logprobs=logprobs_for(tokens, low)))
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["logprobs_status"] == "ok"
    assert data["warnings"] == []
    assert data["flagged"] is flagged
    answer_text = make_answer()["answer"]
    assert [t["token"] for t in data["uncertain_tokens"]] == words
    for token in data["uncertain_tokens"]:
        assert {"token", "probability", "position"} <= set(token)
        assert answer_text[token["position"]:].startswith(token["token"])
        assert token["probability"] == pytest.approx(math.exp(LOW), abs=1e-4)
    stored = Answer.objects.get()
    assert stored.flagged is flagged
    if flagged:
        assert data["sampled"] is True
        assert data["sample_reason"] == "flagged"
        assert data["inclusion_probability"] == 1.0
        assert data["status"] == "queued"
    else:
        assert data["sample_reason"] in {"random", "not_sampled"}
        assert data["inclusion_probability"] == use_case.sample_rate


@pytest.mark.parametrize(
    "logprobs", [None, {"content": None}, {"content": []}, {}],
    ids=["null", "content null", "content empty", "empty object"],
)
def test_no_logprobs_is_none_with_warning(api, make_answer, logprobs):
    response = api.post(URL, make_answer(logprobs=logprobs))
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["logprobs_status"] == "none"
    assert data["warnings"] == [services.WARNING_NO_LOGPROBS]
    assert data["flagged"] is False and data["uncertain_tokens"] == []
    assert data["sample_reason"] != "flagged"


@pytest.mark.parametrize(
    "tokens",
    [
        ["Etwas", " ganz", " Anderes", "."],
        DEFAULT_TOKENS[:-2],  # tokens stop early
        [*DEFAULT_TOKENS, " Mehr"],  # tokens run on
        ["Der", " Beh", "aelter", *DEFAULT_TOKENS[3:]],  # one token misspelt
    ],
    ids=["other text", "too few", "too many", "misspelt"],
)
def test_unaligned_tokens_are_stored_with_warning(api, make_answer, tokens):
    # every token is uncertain, yet an unaligned answer must not be flagged
    body = make_answer(logprobs=logprobs_for(tokens, set(tokens)))
    response = api.post(URL, body)
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["logprobs_status"] == "unaligned"
    assert data["warnings"] == [services.WARNING_UNALIGNED]
    assert data["flagged"] is False and data["uncertain_tokens"] == []
    assert Answer.objects.get().text == body["answer"]


# ---------------------------------------------------------------------------- sampling


def test_sampling_is_deterministic_per_service_and_external_id(api, make_answer, service,
                                                               use_case):
    UseCase.objects.filter(pk=use_case.pk).update(sample_rate=0.5)
    ids = [f"det-{i}" for i in range(40)]

    def post_all():
        out = {}
        for external_id in ids:
            data = api.post(URL, make_answer(external_id=external_id)).json()
            out[external_id] = (data["sampled"], data["sample_reason"],
                                data["inclusion_probability"])
        return out

    first = post_all()
    for external_id, (sampled, reason, pi) in first.items():
        expected = sampling.decide(service_key=str(service.pk), external_id=external_id,
                                   flagged=False, rate=0.5)
        assert (sampled, reason, pi) == (
            expected.sampled, expected.reason, expected.inclusion_probability
        )
    assert {s for s, _, _ in first.values()} == {True, False}
    # forget everything and send again: the same decisions
    Answer.objects.all().delete()
    assert post_all() == first


def test_rate_one_samples_every_unflagged_answer(api, make_answer, use_case):
    UseCase.objects.filter(pk=use_case.pk).update(sample_rate=1.0)
    for i in range(20):
        data = api.post(URL, make_answer(external_id=f"all-{i}")).json()
        assert data["flagged"] is False
        assert (data["sampled"], data["sample_reason"], data["inclusion_probability"],
                data["status"]) == (True, "random", 1.0, "queued")
    assert Answer.objects.filter(in_random_sample=True).count() == 20


@pytest.mark.postgres  # SQLite does not enforce a column's length
@pytest.mark.parametrize("sampled", [False, True], ids=["not sampled", "sampled"])
def test_a_value_too_long_for_its_column_is_refused_whole_not_cut(
    make_answer, service, use_case, sampled
):
    """The single-answer insert (one statement on PostgreSQL) leaves the column's length to the
    column: a chunk id longer than it (which validation stops before, should the two ever
    drift) makes the database refuse the answer, nothing of it is stored, nothing is cut."""
    UseCase.objects.filter(pk=use_case.pk).update(sample_rate=1.0 if sampled else 0.001)
    use_case.refresh_from_db()
    payload = AnswerIn.model_validate(make_answer(logprobs=None))
    payload.chunks[0].id = "x" * 300
    result = services.answer_ingest(service=service, payload=payload)
    assert result.outcome == IngestOutcome.INVALID, result
    assert "the database refused" in result.errors[0]["message"]
    assert not Answer.objects.exists() and not Chunk.objects.exists()
    assert not JudgeRun.objects.exists()
    payload.chunks[0].id = "x" * 200
    stored = services.answer_ingest(service=service, payload=payload)
    assert stored.outcome == IngestOutcome.CREATED
    assert Chunk.objects.get(answer=stored.answer, rank=1).source_chunk_id == "x" * 200
    assert JudgeRun.objects.filter(answer=stored.answer).count() == (1 if sampled else 0)
