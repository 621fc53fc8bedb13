"""The fast way in (ingest.decoding) against the contract (pydantic's AnswerIn).

The promise: whatever the fast decoder accepts, pydantic would have accepted from the body
parsed the slow way, with the same values and the same fingerprint; and a valid answer does
take the fast way (else the speed is silently gone).
"""

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ingest import decoding
from ingest.decoding import BatchItems, decode_answer, decode_batch, split_batch
from ingest.schemas import AnswerIn, CheckedTokens
from ingest.services import content_hash, field_errors, legacy_content_hash
from monitoring.models import Answer

SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TOKENS = [("Der", 0.0), (" Beh", -0.1), ("älter", -2.0), (" muss", 0.0), (" alle", 0.0),
          (" 5", -3.0), (" Jahre", 0.0), (" geprüft", 0.0), (" werden", 0.0), (".", 0.0)]


def logprobs() -> dict[str, Any]:
    return {
        "content": [
            {"token": t, "logprob": lp, "bytes": list(t.encode()),
             "top_logprobs": [{"token": "x", "logprob": -5.0, "bytes": [120]}]}
            for t, lp in TOKENS
        ]
    }


def body(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "external_id": "a-1",
        "use_case": "kundenservice",
        "question": "Wie oft muss der Behälter geprüft werden?",
        "answer": "".join(t for t, _ in TOKENS),
        "model": "gpt-4o-mini",
        "chunks": [{"text": "Prüfintervall: 5 Jahre.", "id": "doc-7#3", "score": 0.82}],
        "logprobs": logprobs(),
        "metadata": {"channel": "web"},
    }
    data.update(overrides)
    return data


def completion_body() -> dict[str, Any]:
    data = body(logprobs=None)
    del data["answer"], data["model"], data["logprobs"]
    data["completion"] = {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "".join(t for t, _ in TOKENS),
                                 "refusal": None},
                     "logprobs": {"content": logprobs()["content"], "refusal": None}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 10, "total_tokens": 13},
    }
    return data


def dumps(data: Any) -> bytes:
    # ensure_ascii writes unpaired surrogates as escapes, as a client library would.
    return json.dumps(data).encode("ascii")


def slow(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def validate(data: Any) -> tuple[AnswerIn | None, list[dict[str, str]] | None]:
    try:
        return AnswerIn.model_validate(data), None
    except ValidationError as e:
        return None, field_errors(e)


def stored_values(payload: AnswerIn) -> dict[str, Any]:
    """What Treue keeps of an answer; extras it ignores (top_logprobs, usage) are left out."""
    tokens = payload.logprobs.content if payload.logprobs else None
    return {
        "fields": payload.model_dump(exclude={"logprobs", "completion"}),
        "tokens": None if tokens is None else [
            (t["token"], t["logprob"], t.get("bytes")) for t in tokens
        ],
        "hash": content_hash(payload),
    }


def assert_same_as_slow(raw: bytes) -> bool:
    """When the fast way takes `raw`, pydantic decides as on the slow way. True when taken."""
    fast = decode_answer(raw)
    if fast is None:
        return False
    fast_model, fast_errors = validate(fast)
    slow_model, slow_errors = validate(slow(raw))
    assert fast_errors == slow_errors
    if fast_model is not None:
        assert slow_model is not None
        assert stored_values(fast_model) == stored_values(slow_model)
    return True


def put(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return data


@pytest.mark.parametrize("make", [body, completion_body], ids=["answer", "completion"])
def test_a_valid_answer_takes_the_fast_way_with_the_same_result(make):
    raw = dumps(make())
    decoded = decode_answer(raw)
    assert decoded is not None
    where = decoded["completion"]["choices"][0] if "completion" in decoded else decoded
    assert isinstance(where["logprobs"]["content"], CheckedTokens)
    assert "top_logprobs" not in where["logprobs"]["content"].tokens[0]
    assert assert_same_as_slow(raw)


@pytest.mark.parametrize("token", [
    {"token": "a\x00", "logprob": -1.0},           # NUL: checked by pydantic on the joined text
    {"token": "a", "logprob": 0.5},                # above 0
    {"token": "a", "logprob": "-1"},               # a string
    {"token": "a", "logprob": True},               # a bool
    {"token": "a", "logprob": -1.0, "bytes": [256]},
    {"token": "a", "logprob": -1.0, "bytes": [97.0]},
    {"token": "a", "logprob": -1.0, "bytes": "a"},
    {"token": "x" * 1001, "logprob": -1.0},
    {"token": 5, "logprob": -1.0},
    {"logprob": -1.0},
    "a token",
])
def test_a_bad_token_is_refused_with_the_slow_ways_error(token):
    data = body()
    data["logprobs"]["content"][3] = token
    raw = dumps(data)
    slow_model, slow_errors = validate(slow(raw))
    assert slow_model is None and slow_errors
    assert slow_errors[0]["field"].startswith("logprobs")
    assert_same_as_slow(raw)


@pytest.mark.parametrize("raw", [
    b'{"external_id": "a", "logprobs": {"content": [{"token": "a", "logprob": -1e400}]}}',
    b'{"external_id": "a", "unknown": 1}',
    b'{"external_id": "\\ud800"}',
    b'{"external_id": "a"} trailing',
    b'[1, 2]',
    b'{"metadata": ' + b"[" * 5000 + b"]" * 5000 + b"}",
])
def test_what_the_fast_way_refuses_goes_the_slow_way(raw):
    assert decode_answer(raw) is None


def test_duplicate_keys_decide_as_on_the_slow_way():
    raw = b'{"external_id": "a", "external_id": "b", "use_case": "u", "question": "q", ' \
          b'"answer": "x", "model": "m"}'
    decoded = decode_answer(raw)
    assert decoded is not None
    assert decoded["external_id"] == slow(raw)["external_id"] == "b"


def test_a_batch_is_split_into_its_items_as_sent():
    items = [body(external_id="a"), {"x": 1}, 5]
    raw = b'{"answers": [' + b", ".join(dumps(i) for i in items) + b"]}"
    parts = split_batch(raw)
    assert parts is not None
    assert [json.loads(i) for i in parts] == items
    assert split_batch(b'{"answers": [], "more": 1}') is None
    assert split_batch(b'{"answers": [' + b"1," * 500 + b"1]}") is None  # over 500
    assert split_batch(b'{"answers": [1,]}') is None


def batch_of(items: list[Any]) -> bytes:
    return b'{"answers": [' + b", ".join(dumps(i) for i in items) + b"]}"


@pytest.mark.parametrize("items", [
    [body(external_id="a"), completion_body(), body(external_id="c", chunks=[], metadata=None)],
    [body(external_id="x", question="q" * 30_000)],  # too long for pydantic, not for decoding
    [],
], ids=["three", "too-long", "empty"])
def test_a_batch_decodes_in_one_pass_as_its_items_do_one_by_one(items):
    raw = batch_of(items)
    together = decode_batch(raw)
    assert together is not None
    parts = split_batch(raw)
    assert parts is not None
    one_by_one = [decode_answer(item) for item in parts]
    assert [validate(d)[1] for d in together] == [validate(d)[1] for d in one_by_one]
    assert [stored_values(m) for m, _ in map(validate, together) if m] == [
        stored_values(m) for m, _ in map(validate, one_by_one) if m
    ]
    assert list(BatchItems(raw, len(items))) == split_batch(raw)
    assert list(BatchItems(b"not what was decoded", 2)) == [None, None]  # never an error


@pytest.mark.parametrize("raw", [
    batch_of([body(external_id="a"), {"x": 1}]),            # an item with an unknown key
    batch_of([body(external_id="a"), 5]),                   # an item that is not an object
    batch_of([put(body(), ("logprobs", "content", 2, "logprob"), 0.5)]),  # a bad token
    b'{"answers": [], "more": 1}',
    b'{"answers": [' + b"{}," * 500 + b"{}]}",              # over 500
    b'{"answers": [{},]}',
])
def test_a_batch_with_anything_the_fast_way_refuses_is_not_decoded_in_one_pass(raw):
    assert decode_batch(raw) is None


@pytest.mark.django_db
def test_a_valid_batch_is_not_split_and_a_bad_item_costs_only_itself(
    api, use_case, monkeypatch
):
    items = [body(use_case=use_case.slug, external_id=f"b-{i}") for i in range(3)]
    calls: list[int] = []
    real_split = decoding.split_batch

    def counting_split(raw: bytes) -> list[bytes] | None:
        calls.append(1)
        return real_split(raw)

    monkeypatch.setattr(decoding, "split_batch", counting_split)
    response = api.post("/api/v1/answers/batch", batch_of(items), raw=True)
    assert [r["status"] for r in response.json()["results"]] == [201, 201, 201]
    assert calls == []  # one pass: the items were never split out of the body
    items[1] = put(body(use_case=use_case.slug, external_id="b-9"),
                   ("logprobs", "content", 2, "logprob"), 0.5)
    response = api.post("/api/v1/answers/batch", batch_of(items), raw=True)
    assert [r["status"] for r in response.json()["results"]] == [200, 400, 200]
    assert response.json()["results"][1]["errors"][0]["field"] == "logprobs.content[2].logprob"
    assert calls == [1]


# Values of every JSON kind, strings with what PostgreSQL cannot store among them.
any_text = st.text(
    st.one_of(st.characters(), st.characters(categories=["Cs"]),
              st.sampled_from(["\x00", "\ufeff", "ä", "😀"])),
    max_size=20,
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
              st.floats(allow_nan=False, allow_infinity=False), any_text),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=10,
)
PATHS: list[tuple[Any, ...]] = [
    ("external_id",), ("use_case",), ("question",), ("answer",), ("model",), ("chunks",),
    ("chunks", 0, "score"), ("chunks", 0, "text"), ("logprobs",), ("logprobs", "content"),
    ("logprobs", "content", 0), ("logprobs", "content", 1, "token"),
    ("logprobs", "content", 2, "logprob"), ("logprobs", "content", 3, "bytes"),
    ("logprobs", "content", 4, "bytes", 0), ("logprobs", "content", 5, "top_logprobs"),
    ("logprobs", "refusal"), ("completion",), ("messages",), ("created_at",), ("metadata",),
    ("metadata", "k"), ("unknown",),
]
COMPLETION_PATHS: list[tuple[Any, ...]] = [
    ("completion", "model"), ("completion", "choices"), ("completion", "choices", 0),
    ("completion", "choices", 0, "message"), ("completion", "choices", 0, "message", "content"),
    ("completion", "choices", 0, "logprobs"), ("completion", "choices", 0, "logprobs", "content"),
    ("completion", "choices", 0, "logprobs", "content", 2, "logprob"),
    ("completion", "usage"), ("answer",), ("model",), ("logprobs",),
]


@settings(SETTINGS, max_examples=400)
@given(path=st.sampled_from(PATHS), value=json_values)
def test_any_value_anywhere_decides_as_on_the_slow_way(path, value):
    assert_same_as_slow(dumps(put(body(), path, value)))


@settings(SETTINGS, max_examples=200)
@given(path=st.sampled_from(COMPLETION_PATHS), value=json_values)
def test_any_value_in_a_completion_decides_as_on_the_slow_way(path, value):
    assert_same_as_slow(dumps(put(completion_body(), path, value)))


@settings(SETTINGS, max_examples=200)
@given(token=any_text, logprob=st.one_of(st.floats(), st.integers(), json_values),
       raw_bytes=st.one_of(st.none(), st.lists(st.integers(-2, 300), max_size=5), json_values))
def test_any_token_decides_as_on_the_slow_way(token, logprob, raw_bytes):
    data = body()
    data["logprobs"]["content"][6] = {"token": token, "logprob": logprob, "bytes": raw_bytes}
    try:
        raw = dumps(data)
    except ValueError:  # NaN: not JSON at all
        return
    assert_same_as_slow(raw)


@pytest.mark.django_db
def test_a_replay_of_an_answer_stored_under_the_old_fingerprint_is_still_a_replay(
    api, use_case
):
    sent = body(use_case=use_case.slug, external_id="old-1")
    first = api.post("/api/v1/answers", dumps(sent), raw=True)
    assert first.status_code == 201, first.content
    # As stored before the fingerprint changed: of the whole item as sent.
    Answer.objects.filter(pk=first.json()["id"]).update(content_hash=legacy_content_hash(sent))
    assert legacy_content_hash(sent) != content_hash(AnswerIn.model_validate(sent))
    again = api.post("/api/v1/answers", dumps(sent), raw=True)
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    batch = api.post("/api/v1/answers/batch", b'{"answers": [' + dumps(sent) + b"]}", raw=True)
    assert batch.json()["results"][0]["status"] == 200
    changed = api.post("/api/v1/answers", dumps({**sent, "answer": "Anders."}), raw=True)
    assert changed.status_code == 409


@pytest.mark.django_db
def test_a_replay_differing_only_in_what_treue_ignores_is_a_replay(api, use_case):
    sent = body(use_case=use_case.slug, external_id="same-1")
    assert api.post("/api/v1/answers", dumps(sent), raw=True).status_code == 201
    # Other alternatives and the keys in another order: the same answer, as Treue stores it.
    again = body(use_case=use_case.slug, external_id="same-1")
    for token in again["logprobs"]["content"]:
        token["top_logprobs"] = []
    again = dict(reversed(list(again.items())))
    assert api.post("/api/v1/answers", dumps(again), raw=True).status_code == 200


DEEP = b"[" * 2_000 + b"]" * 2_000  # deeper than msgspec goes: the flat splitter's case


@pytest.mark.parametrize(
    ("body", "items"),
    [
        (b'{"answers": [' + DEEP + b", 1]}", [DEEP, b"1"]),
        (b' {\n"answers" : [ ' + DEEP + b' , {"q": "a]\\\\", "r": "\\"[,"} ] }\n',
         [DEEP, b'{"q": "a]\\\\", "r": "\\"[,"}']),
        (b'{"answers": [' + DEEP + b"]}", [DEEP]),
        # not a batch envelope, or not JSON: the slow way answers for the whole body
        (b'{"answers": [' + DEEP + b'], "x": 1}', None),
        (b'{"answers": [' + DEEP + b", ]}", None),
        (b'{"answers": [' + DEEP + b', "open]}', None),
        (b'{"answers": [' + DEEP + b"]]}", None),
        (b'{"other": [' + DEEP + b"]}", None),
        (b'{"answers": [' + DEEP + b"]} x", None),
    ],
)
def test_a_batch_too_deep_for_msgspec_is_split_by_its_brackets(body, items):
    assert decoding.split_batch(body) == items
