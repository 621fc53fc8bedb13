"""The OTLP/HTTP receiver through the Django test client: the status codes and bodies the
OTLP specification asks for, spans held and assembled once into an answer through the ingest
service, with its question, chunks, model, messages and log-probabilities."""

import gzip
import json
import time
from datetime import timedelta
from typing import Any

import orjson
import pytest
from django.utils import timezone
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ingest import services
from monitoring.models import Answer, Service, UseCase
from monitoring.services.use_cases import service_create
from tests.support.http import Environ
from tests.traces.conftest import OtlpClient
from tests.traces.otlp import (
    ANSWER,
    ANSWER_TOKENS,
    CHUNKS,
    JSON,
    PROTOBUF,
    QUESTION,
    URL,
    logprobs,
    rag_spans,
    request,
    span,
    trace_id,
)
from traces.decoding import MAX_SPANS
from traces.domain.assembly import Outcome
from traces.models import OtlpOutcomeCount, OtlpSpan, OtlpTrace
from traces.services import otlp_traces_assemble_due

pytestmark = pytest.mark.django_db


def export_response(response: Any) -> trace_service_pb2.ExportTraceServiceResponse:
    message = trace_service_pb2.ExportTraceServiceResponse()
    message.ParseFromString(response.content)
    return message


def status_body(response: Any) -> dict[str, Any]:
    """The google.rpc.Status of an error, in either encoding, as a dict."""
    if response["Content-Type"] == PROTOBUF:
        status = status_pb2.Status()
        status.ParseFromString(response.content)
        return {"code": status.code, "message": status.message}
    return orjson.loads(response.content)


def answer_of(trace: str) -> Answer:
    return Answer.objects.get(external_id=trace)


def counts(service: Service) -> dict[str, int]:
    return dict(
        OtlpOutcomeCount.objects.filter(service=service).values_list("outcome", "count")
    )


# --- encodings ---------------------------------------------------------------------------------

def test_protobuf_trace_becomes_an_answer_with_chunks_model_and_messages(
    otlp: OtlpClient, quiet: None, use_case: UseCase, service_and_key: tuple[Service, str],
) -> None:
    trace = trace_id(1)
    response = otlp.post(request(rag_spans(trace)))
    assert response.status_code == 200
    assert response["Content-Type"] == PROTOBUF
    assert response.content == b""  # full success: partial_success unset
    assert OtlpSpan.objects.count() == 3
    assert not Answer.objects.exists()  # held until assembled

    assert otlp_traces_assemble_due() == 1
    answer = answer_of(trace)
    assert answer.use_case == use_case  # the key's only use case
    assert answer.question == QUESTION
    assert answer.text == ANSWER
    assert answer.model == "gpt-4o-mini-2024-07-18"
    assert [(c.text, c.source_chunk_id, c.score, c.source) for c in answer.chunks.all()] == [
        (text, doc_id, score, "Prüfordnung.pdf") for text, doc_id, score in CHUNKS
    ]
    assert answer.messages == [
        {"role": "system", "content": "Antworte aus den Dokumenten."},
        {"role": "user", "content": QUESTION},
    ]
    assert answer.metadata["otlp"]["usage"] == {"prompt": 120, "completion": 12, "total": 132}
    assert answer.metadata["otlp"]["service_name"] == "rag-bot"
    assert answer.logprobs_status == Answer.LogprobsStatus.NONE
    # The spans (prompts, documents) are gone; the trace row says what it came to.
    assert not OtlpSpan.objects.exists()
    row = OtlpTrace.objects.get()
    assert (row.status, row.outcome, row.answer_pk) == ("done", "created", answer.pk)
    assert counts(service_and_key[0]) == {"created": 1}

    # The ingest API reads it back like any other answer of the key.
    detail = otlp.client.get(f"/api/v1/answers/{answer.pk}",
                             HTTP_AUTHORIZATION=f"Bearer {otlp.key}").json()
    assert detail["external_id"] == trace
    assert detail["warnings"] == [services.WARNING_NO_LOGPROBS]


def test_json_trace_with_hex_ids_becomes_an_answer(otlp: OtlpClient, quiet: None) -> None:
    trace = trace_id(0xABCDEF)
    response = otlp.post(request(rag_spans(trace)), media=JSON)
    assert response.status_code == 200
    assert response["Content-Type"] == JSON
    assert orjson.loads(response.content) == {}
    otlp_traces_assemble_due()
    answer = answer_of(trace)
    assert answer.text == ANSWER
    assert answer.chunks.count() == 2


def test_json_as_the_specification_writes_it(otlp: OtlpClient, quiet: None) -> None:
    """Hand-written OTLP/JSON: upper-case hex ids, int64 as strings and numbers, enum as an
    integer and as a name, unknown fields, a content type with parameters."""
    trace = "5B8EFFF798038103D269B633813FC60C"
    spans = []
    layout: list[tuple[str, str, dict[str, str | int]]] = [
        ("EEE19B7EC3C1B174", "", {"openinference.span.kind": "CHAIN", "input.value": "Frage?"}),
        ("EEE19B7EC3C1B175", "EEE19B7EC3C1B174", {
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents.0.document.content": "Ein Dokument.",
        }),
        ("EEE19B7EC3C1B176", "EEE19B7EC3C1B174", {
            "openinference.span.kind": "LLM", "llm.model_name": "m",
            "llm.output_messages.0.message.content": "Antwort.",
            "llm.token_count.prompt": 7,
        }),
    ]
    for span_id, parent, attrs in layout:
        spans.append({
            "traceId": trace, "spanId": span_id, "parentSpanId": parent, "name": "s",
            "kind": 1 if parent else "SPAN_KIND_SERVER",
            "startTimeUnixNano": "1544712660000000000", "endTimeUnixNano": 1544712661000000000,
            "attributes": [
                {"key": k, "value": {"intValue": str(v)} if isinstance(v, int)
                 else {"stringValue": v}}
                for k, v in attrs.items()
            ],
            "droppedLinksCount": 0, "someFutureField": {"x": 1},
        })
    body = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "b"}}]},
        "scopeSpans": [{"scope": {"name": "x"}, "spans": spans}],
        "schemaUrl": "https://opentelemetry.io/schemas/1.4.0",
    }]}
    response = otlp.post(json.dumps(body).encode(), media="application/json; charset=utf-8")
    assert response.status_code == 200, response.content
    otlp_traces_assemble_due()
    answer = answer_of(trace.lower())
    assert (answer.question, answer.text, answer.model) == ("Frage?", "Antwort.", "m")
    assert answer.metadata["otlp"]["usage"] == {"prompt": 7}


@pytest.mark.parametrize("media", [PROTOBUF, JSON])
def test_gzip_body(otlp: OtlpClient, quiet: None, media: str) -> None:
    trace = trace_id(7)
    response = otlp.post(request(rag_spans(trace)), media=media, gzip=True)
    assert response.status_code == 200
    otlp_traces_assemble_due()
    assert answer_of(trace).text == ANSWER


# --- errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("content_type", "encoding"),
    [("text/plain", ""), ("", ""), ("application/grpc", ""), (PROTOBUF, "br"),
     (JSON, "deflate")],
)
def test_unsupported_media_is_415_with_a_status_body(
    otlp: OtlpClient, content_type: str, encoding: str
) -> None:
    headers: Environ = {"HTTP_CONTENT_ENCODING": encoding} if encoding else {}
    response = otlp.post(request(rag_spans(trace_id(1))).SerializeToString(),
                         media=content_type, **headers)
    assert response.status_code == 415
    status = status_body(response)
    assert status["code"] == 3 and status["message"]
    assert not OtlpSpan.objects.exists()


@pytest.mark.parametrize(
    ("media", "body", "words"),
    [
        (PROTOBUF, b"\xff\xff\xff\xff", "not an OTLP"),
        (JSON, b"{not json", "not JSON"),
        (JSON, b"[1, 2]", "JSON object"),
        (JSON, b'{"resourceSpans": 5}', "not an OTLP"),
        (JSON, b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}',
         "not hex"),
        (JSON, b'{"x": NaN}', "not JSON"),
    ],
)
def test_undecodable_body_is_400_in_the_requests_encoding(
    otlp: OtlpClient, media: str, body: bytes, words: str
) -> None:
    response = otlp.post(body, media=media)
    assert response.status_code == 400
    assert response["Content-Type"] == media
    status = status_body(response)
    assert status["code"] == 3
    assert words in status["message"]


def test_corrupt_gzip_is_400(otlp: OtlpClient) -> None:
    response = otlp.post(b"\x1f\x8b\x08\x00garbage", HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 400
    assert "gzip" in status_body(response)["message"]


@pytest.mark.parametrize("key", [None, "trk_wrong", "not-a-key"])
def test_missing_or_wrong_key_is_401(otlp: OtlpClient, key: str | None) -> None:
    response = otlp.post(request(rag_spans(trace_id(1))), key=key)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert status_body(response)["code"] == 16
    assert not OtlpTrace.objects.exists()


def test_revoked_key_is_401(otlp: OtlpClient, service_and_key: tuple[Service, str]) -> None:
    Service.objects.filter(pk=service_and_key[0].pk).update(active=False)
    assert otlp.post(request(rag_spans(trace_id(1)))).status_code == 401


def test_wrong_method_is_405_json(otlp: OtlpClient) -> None:
    response = otlp.client.get(URL, HTTP_AUTHORIZATION=f"Bearer {otlp.key}")
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert status_body(response)["code"] == 12


def test_body_over_the_limit_is_413(otlp: OtlpClient, settings: Any) -> None:
    body = request(rag_spans(trace_id(1))).SerializeToString()
    settings.TREUE_OTLP_MAX_BODY_BYTES = len(body) - 1
    response = otlp.post(body)
    assert response.status_code == 413
    assert status_body(response)["code"] == 8
    settings.TREUE_OTLP_MAX_BODY_BYTES = len(body)
    assert otlp.post(body).status_code == 200


def test_gzip_that_unpacks_over_the_limit_is_413(otlp: OtlpClient, settings: Any) -> None:
    settings.TREUE_OTLP_MAX_BODY_BYTES = 100_000
    bomb = gzip.compress(b"\x00" * 10_000_000)  # ~10 KB that unpack to 10 MB
    assert len(bomb) < 100_000
    response = otlp.post(bomb, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413


def test_over_the_rate_limit_is_429_with_retry_after(otlp: OtlpClient, settings: Any) -> None:
    settings.TREUE_API_RATE_LIMIT = 1
    assert otlp.post(request([])).status_code == 200
    response = otlp.post(request([]))
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    assert status_body(response)["code"] == 8


def test_empty_request_is_success(otlp: OtlpClient) -> None:
    # (The test client sends no Content-Type with an empty body unless told.)
    response = otlp.post(b"", CONTENT_TYPE=PROTOBUF)
    assert (response.status_code, response.content) == (200, b"")


# --- partial success ---------------------------------------------------------------------------

def test_bad_spans_cost_only_themselves(otlp: OtlpClient, quiet: None) -> None:
    trace = trace_id(3)
    bad_trace = span(trace, 9, parent=1)
    bad_trace.trace_id = b"\x00" * 16
    bad_span = span(trace, 10, parent=1)
    bad_span.span_id = b"\x01\x02"
    nul = span(trace, 11, parent=1, attrs={"llm.x": "a\x00b"})
    response = otlp.post(request([*rag_spans(trace), bad_trace, bad_span, nul]))
    assert response.status_code == 200
    partial = export_response(response).partial_success
    assert partial.rejected_spans == 3
    assert "trace id" in partial.error_message and "span id" in partial.error_message
    assert "NUL" in partial.error_message
    otlp_traces_assemble_due()
    assert answer_of(trace).text == ANSWER  # nothing valid is lost


def test_partial_success_in_json(otlp: OtlpClient) -> None:
    bad = span(trace_id(3), 1)
    bad.trace_id = b"short"
    response = otlp.post(request([bad]), media=JSON)
    assert orjson.loads(response.content) == {"partialSuccess": {
        "rejectedSpans": "1", "errorMessage": "1 span: trace id is not 16 bytes or is all zero",
    }}


# --- holding, assembling once, idempotency -----------------------------------------------------

def test_spans_split_over_two_requests_are_assembled_once(
    otlp: OtlpClient, quiet: None
) -> None:
    trace = trace_id(5)
    first = rag_spans(trace, with_root=False)  # children end first, and are exported first
    assert otlp.post(request(first)).status_code == 200
    # No root yet: not due, however quiet.
    assert otlp_traces_assemble_due() == 0
    assert OtlpTrace.objects.get().root_seen_at is None

    assert otlp.post(request(rag_spans(trace, with_retriever=False, with_llm=False))
                     ).status_code == 200
    assert OtlpTrace.objects.get().span_count == 3
    assert otlp_traces_assemble_due() == 1
    assert otlp_traces_assemble_due() == 0
    answer = answer_of(trace)
    assert (answer.question, answer.text, answer.chunks.count()) == (QUESTION, ANSWER, 2)
    assert Answer.objects.count() == 1


def test_not_assembled_while_spans_still_arrive(otlp: OtlpClient, settings: Any) -> None:
    settings.TREUE_OTLP_QUIET_SECONDS = 30.0
    otlp.post(request(rag_spans(trace_id(6))))
    assert otlp_traces_assemble_due() == 0
    # 31 s later (the clock moved by moving the trace's times back)
    past = timezone.now() - timedelta(seconds=31)
    OtlpTrace.objects.update(not_before=past + timedelta(seconds=30), last_span_at=past)
    assert otlp_traces_assemble_due() == 1


def test_orphan_trace_is_assembled_after_the_orphan_period(
    otlp: OtlpClient, quiet: None, settings: Any
) -> None:
    trace = trace_id(8)
    spans = rag_spans(trace, with_root=False)  # the root is never sent
    otlp.post(request(spans, resource={"treue.use_case": "kundenservice"}))
    assert otlp_traces_assemble_due() == 0
    OtlpTrace.objects.update(
        last_span_at=timezone.now() - timedelta(seconds=settings.TREUE_OTLP_ORPHAN_SECONDS + 1)
    )
    assert otlp_traces_assemble_due() == 1
    answer = answer_of(trace)
    assert answer.metadata["otlp"]["orphan"] is True
    assert answer.question == QUESTION  # from the retriever's input


def test_remote_parent_makes_a_root(otlp: OtlpClient, quiet: None) -> None:
    """The RAG service's top span under an upstream caller's span that never reaches Treue."""
    trace = trace_id(9)
    spans = rag_spans(trace)
    spans[0].parent_span_id = (77).to_bytes(8, "big")
    spans[0].flags = 0x100 | 0x200 | 0x01
    otlp.post(request(spans))
    assert otlp_traces_assemble_due() == 1
    assert "orphan" not in answer_of(trace).metadata["otlp"]


def test_replayed_request_stores_nothing_twice(otlp: OtlpClient, quiet: None) -> None:
    trace = trace_id(10)
    body = request(rag_spans(trace))
    assert otlp.post(body).status_code == 200
    assert otlp.post(body).status_code == 200  # an exporter's retry
    assert OtlpSpan.objects.count() == 3
    assert OtlpTrace.objects.get().span_count == 3
    otlp_traces_assemble_due()

    # After assembly the same spans are late: refused, no second answer.
    response = otlp.post(body)
    partial = export_response(response).partial_success
    assert partial.rejected_spans == 3
    assert "after its trace was assembled" in partial.error_message
    assert otlp_traces_assemble_due() == 0
    assert Answer.objects.count() == 1


def test_trace_sent_again_after_its_row_was_purged_meets_the_stored_answer(
    otlp: OtlpClient, quiet: None, service_and_key: tuple[Service, str]
) -> None:
    trace = trace_id(11)
    otlp.post(request(rag_spans(trace)))
    otlp_traces_assemble_due()
    OtlpTrace.objects.all().delete()
    otlp.post(request(rag_spans(trace)))
    otlp_traces_assemble_due()
    assert OtlpTrace.objects.get().outcome == Outcome.EXISTING
    assert Answer.objects.count() == 1
    assert counts(service_and_key[0]) == {"created": 1, "existing": 1}


def test_too_many_spans_for_one_trace(otlp: OtlpClient, settings: Any) -> None:
    settings.TREUE_OTLP_MAX_SPANS_PER_TRACE = 2
    response = otlp.post(request(rag_spans(trace_id(12))))
    partial = export_response(response).partial_success
    assert partial.rejected_spans == 1
    assert "TREUE_OTLP_MAX_SPANS_PER_TRACE" in partial.error_message
    assert OtlpSpan.objects.count() == 2


# --- not RAG -----------------------------------------------------------------------------------

def test_trace_without_rag_spans_is_counted_and_not_stored(
    otlp: OtlpClient, quiet: None, service_and_key: tuple[Service, str]
) -> None:
    trace = trace_id(20)
    http = [
        span(trace, 2, parent=1, name="SELECT", attrs={"db.system": "postgresql"}),
        span(trace, 1, name="GET /", attrs={"http.request.method": "GET"}),
    ]
    response = otlp.post(request(http))
    assert (response.status_code, response.content) == (200, b"")
    assert not OtlpTrace.objects.exists()
    assert not OtlpSpan.objects.exists()
    assert counts(service_and_key[0]) == {"not_rag": 1}


@pytest.mark.parametrize("missing", ["with_retriever", "with_llm"])
def test_trace_without_retrieval_or_llm_is_dropped_and_counted(
    otlp: OtlpClient, quiet: None, service_and_key: tuple[Service, str], missing: str
) -> None:
    otlp.post(request(rag_spans(trace_id(21), with_retriever=missing != "with_retriever",
                                with_llm=missing != "with_llm")))
    assert otlp_traces_assemble_due() == 1
    assert not Answer.objects.exists()
    assert not OtlpSpan.objects.exists()
    assert OtlpTrace.objects.get().outcome == Outcome.NOT_RAG
    assert counts(service_and_key[0]) == {"not_rag": 1}


def test_http_root_of_a_rag_trace_is_kept_as_a_skeleton(otlp: OtlpClient, quiet: None) -> None:
    """The pipeline under a web framework's server span: the RAG spans come first (they end
    first), the HTTP root after them, stored without its attributes."""
    trace = trace_id(22)
    otlp.post(request(rag_spans(trace, with_root=False)[::-1]))
    root = span(trace, 1, name="POST /ask", attrs={"http.request.method": "POST",
                                                   "input.value": QUESTION})
    otlp.post(request([root]))
    stored = OtlpSpan.objects.get(span_id=f"{1:016x}")
    assert stored.data["attributes"] == {"input.value": QUESTION}
    assert otlp_traces_assemble_due() == 1
    assert answer_of(trace).question == QUESTION


# --- use case ----------------------------------------------------------------------------------

@pytest.fixture
def two_use_case_key(use_case: UseCase, other_use_case: UseCase) -> str:
    return service_create(name="multi", use_cases=[use_case, other_use_case])[1]


def test_use_case_from_the_treue_use_case_attribute(
    otlp: OtlpClient, quiet: None, two_use_case_key: str, other_use_case: UseCase
) -> None:
    otlp.key = two_use_case_key
    otlp.post(request(rag_spans(trace_id(30), root_attrs={"treue.use_case": "vertrieb"})))
    otlp.post(request(rag_spans(trace_id(31)), resource={"treue.use_case": "vertrieb"}))
    otlp_traces_assemble_due()
    assert answer_of(trace_id(30)).use_case == other_use_case
    assert answer_of(trace_id(31)).use_case == other_use_case


def test_key_with_several_use_cases_and_no_attribute(
    otlp: OtlpClient, quiet: None, two_use_case_key: str
) -> None:
    otlp.key = two_use_case_key
    otlp.post(request(rag_spans(trace_id(32))))
    otlp_traces_assemble_due()
    trace = OtlpTrace.objects.get()
    assert trace.outcome == Outcome.USE_CASE_MISSING
    assert "treue.use_case" in trace.detail
    assert not Answer.objects.exists()


def test_use_case_the_key_may_not_send_to_is_rejected(
    otlp: OtlpClient, quiet: None, other_use_case: UseCase
) -> None:
    for slug in ("vertrieb", "does-not-exist"):
        response = otlp.post(request(rag_spans(trace_id(33)), resource={"treue.use_case": slug}))
        partial = export_response(response).partial_success
        assert partial.rejected_spans == 3
        # The same words whether the use case is another's or does not exist, with the slug
        # the spans named, so that the exporter's log (where it shows) says which.
        assert partial.error_message == (
            f"3 spans: treue.use_case '{slug}' names no use case this key may send to (the "
            "key's use cases: manage.py create_service --use-case, or the admin)"
        )
    assert not OtlpTrace.objects.exists()


def test_refused_spans_are_counted_on_metrics_and_logged(
    otlp: OtlpClient, other_use_case: UseCase, admin_client: Any,
    service_and_key: tuple[Service, str], caplog: pytest.LogCaptureFixture,
) -> None:
    """The exporter gets a partial success, which an SDK reports as a success: the operator
    finds the refused spans on /metrics, by a reason from a fixed set, and in the log."""
    from prometheus_client.parser import text_string_to_metric_families

    def refused() -> dict[str, float]:
        text = admin_client.get("/metrics").content.decode()
        return {
            s.labels["reason"]: s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == "treue_otlp_spans_refused_total"
            and s.labels["service"] == service_and_key[0].name
        }

    assert refused() == {"invalid_span": 0, "use_case_not_allowed": 0, "trace_too_large": 0,
                         "late": 0}
    caplog.set_level("WARNING", logger="traces.services")
    otlp.post(request(rag_spans(trace_id(34)), resource={"treue.use_case": "vertrieb"}))
    bad = span(trace_id(35), 1)
    bad.trace_id = b"short"
    otlp.post(request([bad]))
    assert refused() == {"invalid_span": 1, "use_case_not_allowed": 3, "trace_too_large": 0,
                         "late": 0}
    records = [r for r in caplog.records if r.name == "traces.services"]
    assert [r.levelname for r in records] == ["WARNING", "WARNING"]
    message = records[0].getMessage()
    assert service_and_key[0].name in message and "3 spans refused" in message
    assert "'vertrieb'" in message


# --- log-probabilities (tier 1) ----------------------------------------------------------------

def test_logprobs_from_the_treue_logprobs_attribute(otlp: OtlpClient, quiet: None) -> None:
    trace = trace_id(40)
    otlp.post(request(rag_spans(trace, llm_attrs={
        "treue.logprobs": json.dumps(logprobs(value=-0.01)),
    })))
    otlp_traces_assemble_due()
    answer = answer_of(trace)
    assert answer.logprobs_status == Answer.LogprobsStatus.OK
    assert not answer.flagged


def test_low_logprobs_flag_the_answer(otlp: OtlpClient, quiet: None) -> None:
    trace = trace_id(41)
    otlp.post(request(rag_spans(trace, llm_attrs={
        "treue.logprobs": json.dumps(logprobs(value=-3.0)),
    })))
    otlp_traces_assemble_due()
    answer = answer_of(trace)
    assert answer.logprobs_status == Answer.LogprobsStatus.OK
    assert answer.flagged


def test_logprobs_from_the_chat_completion_in_output_value(
    otlp: OtlpClient, quiet: None
) -> None:
    """OpenInference's openai instrumentor writes the whole ChatCompletion as output.value."""
    trace = trace_id(42)
    completion = {
        "id": "c1", "model": "gpt-4o-mini-2024-07-18", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": logprobs(),
                     "message": {"role": "assistant", "content": ANSWER}}],
    }
    otlp.post(request(rag_spans(trace, llm_attrs={
        "output.value": json.dumps(completion), "output.mime_type": "application/json",
    })))
    otlp_traces_assemble_due()
    assert answer_of(trace).logprobs_status == Answer.LogprobsStatus.OK


def test_logprobs_that_do_not_align_are_kept_out_of_tier_1(
    otlp: OtlpClient, quiet: None
) -> None:
    trace = trace_id(43)
    otlp.post(request(rag_spans(trace, llm_attrs={
        "treue.logprobs": json.dumps(logprobs(tokens=["Etwas", " anderes"])),
    })))
    otlp_traces_assemble_due()
    assert answer_of(trace).logprobs_status == Answer.LogprobsStatus.UNALIGNED


def test_answer_tokens_are_the_fixtures_answer() -> None:
    assert "".join(ANSWER_TOKENS) == ANSWER


def test_admin_lists_traces_and_counts(
    otlp: OtlpClient, quiet: None, admin_client: Any
) -> None:
    otlp.post(request(rag_spans(trace_id(50))))
    otlp_traces_assemble_due()
    page = admin_client.get("/admin/traces/otlptrace/")
    assert page.status_code == 200
    assert trace_id(50) in page.content.decode()
    assert admin_client.get("/admin/traces/otlpoutcomecount/").status_code == 200
    assert admin_client.get("/admin/traces/otlptrace/add/").status_code == 403


def test_chunked_bodies_are_read_up_to_the_otlp_limit(settings: Any) -> None:
    """common.request_body reads a chunked body up to its endpoint's limit."""
    from ingest.api.parsing import body_limit

    settings.TREUE_OTLP_MAX_BODY_BYTES = 12345
    assert body_limit(URL) == 12345
    assert body_limit("/api/v1/answers") == settings.TREUE_MAX_BODY_BYTES


def test_metrics_count_traces_by_outcome(otlp: OtlpClient, quiet: None, admin_client: Any
                                         ) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    otlp.post(request(rag_spans(trace_id(60))))
    otlp.post(request(rag_spans(trace_id(61), with_llm=False)))
    otlp.post(request(rag_spans(trace_id(62), with_root=False)))  # waits for its root
    otlp_traces_assemble_due()
    text = admin_client.get("/metrics").content.decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }
    labels = (("outcome", "created"), ("service", "rag-bot"))
    assert samples[("treue_otlp_traces_total", labels)] == 1
    labels = (("outcome", "not_rag"), ("service", "rag-bot"))
    assert samples[("treue_otlp_traces_total", labels)] == 1
    # Every outcome of an active service from 0 on, so that a rate sees its first trace.
    labels = (("outcome", "invalid"), ("service", "rag-bot"))
    assert samples[("treue_otlp_traces_total", labels)] == 0
    assert samples[("treue_otlp_traces_pending", ())] == 1
    assert samples[("treue_otlp_oldest_pending_seconds", ())] >= 0


def test_other_signals_are_404(otlp: OtlpClient) -> None:
    """Metrics and logs that an exporter sends to the same endpoint: not read here."""
    response = otlp.client.post("/api/v1/otlp/v1/metrics", b"", content_type=PROTOBUF,
                                HTTP_AUTHORIZATION=f"Bearer {otlp.key}")
    assert response.status_code == 404


def test_sweep_purges_old_finished_traces(otlp: OtlpClient, quiet: None) -> None:
    otlp.post(request(rag_spans(trace_id(70))))
    otlp.post(request(rag_spans(trace_id(71))))
    otlp_traces_assemble_due()
    OtlpTrace.objects.filter(trace_id=trace_id(70)).update(
        finished_at=timezone.now() - timedelta(days=31)
    )
    otlp_traces_assemble_due()
    assert list(OtlpTrace.objects.values_list("trace_id", flat=True)) == [trace_id(71)]
    assert Answer.objects.count() == 2  # the answers stay


def test_a_trace_whose_assembler_died_is_taken_over(otlp: OtlpClient, quiet: None) -> None:
    from jobs import framework
    from traces.services import KIND

    otlp.post(request(rag_spans(trace_id(72))))
    trace = OtlpTrace.objects.get()
    assert framework.claim(KIND, trace.pk) is not None  # an assembler that then died
    assert otlp_traces_assemble_due() == 0  # its lease still runs
    OtlpTrace.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert otlp_traces_assemble_due() == 1
    assert OtlpTrace.objects.get().attempts == 2
    assert answer_of(trace_id(72)).text == ANSWER


def test_a_bug_in_the_mapping_fails_that_trace_only(
    otlp: OtlpClient, quiet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from traces.domain import assembly

    real = assembly.assemble

    def fragile(spans: Any) -> Any:
        if spans[0].trace_id == trace_id(73):
            raise KeyError("surprise")
        return real(spans)

    monkeypatch.setattr(assembly, "assemble", fragile)
    otlp.post(request(rag_spans(trace_id(73))))
    otlp.post(request(rag_spans(trace_id(74))))
    assert otlp_traces_assemble_due() == 1
    failed = OtlpTrace.objects.get(trace_id=trace_id(73))
    assert (failed.status, failed.error) == ("failed", "KeyError: 'surprise'")
    assert not OtlpSpan.objects.exists()  # its prompts are not kept either
    assert answer_of(trace_id(74)).text == ANSWER


# --- bounded and fair ------------------------------------------------------------------------

def test_a_gzip_body_of_two_members_is_read_whole(otlp: OtlpClient, quiet: None) -> None:
    # Two serialized requests one after the other are one request (protobuf merges repeated
    # fields); gzip-compressed apart and concatenated they are one gzip stream of two members.
    first = request(rag_spans(trace_id(80))).SerializeToString()
    second = request(rag_spans(trace_id(81))).SerializeToString()
    response = otlp.post(gzip.compress(first) + gzip.compress(second),
                         HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 200
    assert response.content == b""
    assert otlp_traces_assemble_due() == 2
    assert answer_of(trace_id(81)).text == ANSWER


def test_more_spans_than_a_request_may_hold_is_413_and_stores_nothing(
    otlp: OtlpClient, use_case: UseCase
) -> None:
    spans = [span(trace_id(i + 1), 1, attrs={"openinference.span.kind": "CHAIN"})
             for i in range(MAX_SPANS + 1)]
    response = otlp.post(request(spans), gzip=True)
    assert response.status_code == 413
    status = status_body(response)
    assert status["code"] == 8  # RESOURCE_EXHAUSTED
    assert f"at most {MAX_SPANS}" in status["message"]
    assert "smaller batches" in status["message"]
    assert not OtlpTrace.objects.exists()


@pytest.mark.postgres
@pytest.mark.timing
def test_ten_thousand_single_span_traces_cost_little_web_cpu(
    otlp: OtlpClient, use_case: UseCase
) -> None:
    # The flood of issue 36: one request of 10,000 single-span traces cost 8 s of web CPU
    # (two statements a trace). bench/otlp.py measures it in gunicorn; here the budget is
    # loose, the CPU of this process (PostgreSQL's is its own).
    spans = [span(trace_id(i + 1), 1, attrs={"openinference.span.kind": "CHAIN"})
             for i in range(10_000)]
    body = gzip.compress(request(spans).SerializeToString())
    otlp.post(request([]))  # the first request of a process loads code
    started = time.process_time()
    response = otlp.post(body, HTTP_CONTENT_ENCODING="gzip")
    cpu = time.process_time() - started
    assert response.status_code == 200
    assert OtlpTrace.objects.count() == OtlpSpan.objects.count() == 10_000
    assert set(OtlpTrace.objects.values_list("span_count", flat=True)) == {1}
    assert cpu < 3.0, f"{cpu:.1f} s of CPU"


def test_one_senders_backlog_does_not_delay_another_senders_trace(
    otlp: OtlpClient, quiet: None, use_case: UseCase,
) -> None:
    # One service floods with 30 traces, another sends one afterwards: a sweep of 10 takes
    # the other's trace in turn with the flood's oldest (before: the 30 came first, in the order
    # they arrived, and the other's trace waited for the third sweep).
    flood = [span(trace_id(100 + i), 1, attrs={"openinference.span.kind": "CHAIN"})
             for i in range(30)]
    assert otlp.post(request(flood)).status_code == 200
    _, other_key = service_create(name="other-bot", use_cases=[use_case])
    assert otlp.post(request(rag_spans(trace_id(99))), key=other_key).status_code == 200

    assert otlp_traces_assemble_due(limit=10) == 10
    assert answer_of(trace_id(99)).text == ANSWER
    assert OtlpTrace.objects.filter(status="done").count() == 10
    # ... and the flood's oldest went first.
    assert set(OtlpTrace.objects.filter(status="done").values_list("trace_id", flat=True)) == {
        trace_id(99), *(trace_id(100 + i) for i in range(9))
    }


def test_one_use_cases_backlog_does_not_delay_another_use_case_of_the_same_key(
    client: Any, quiet: None, use_case: UseCase, other_use_case: UseCase,
) -> None:
    _, key = service_create(name="two-bots", use_cases=[use_case, other_use_case])
    otlp = OtlpClient(client, key)
    flood = [span(trace_id(200 + i), 1, attrs={"openinference.span.kind": "CHAIN"})
             for i in range(30)]
    assert otlp.post(request(flood, resource={"treue.use_case": use_case.slug})
                     ).status_code == 200
    # The use case named only on a later span of the trace counts too.
    late = trace_id(199)
    assert otlp.post(request(rag_spans(late, with_root=False))).status_code == 200
    assert otlp.post(request(rag_spans(late, with_retriever=False, with_llm=False),
                             resource={"treue.use_case": other_use_case.slug})
                     ).status_code == 200
    assert OtlpTrace.objects.get(trace_id=late).use_case == other_use_case.slug

    otlp_traces_assemble_due(limit=5)
    assert answer_of(late).use_case == other_use_case
