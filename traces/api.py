"""`POST /api/v1/otlp/v1/traces`: the OTLP/HTTP trace receiver (docs/api.md, "OpenTelemetry").

A plain Django view rather than a ninja operation: the body is protobuf or JSON, perhaps
gzip-compressed, and the errors are what the OTLP specification says, not the rest of the API's
`{"errors": [...]}`: a google.rpc.Status message (`{"code", "message"}` in JSON) in the
request's encoding (JSON when the encoding is unknown), with 400 for a body that cannot be
decoded, 401 for a missing or wrong key, 413 for a body over TREUE_OTLP_MAX_BODY_BYTES (before
or after decompression) or with more spans or attribute values than one request may hold
(traces.decoding.MAX_SPANS and its neighbours: a request's work is bounded; a 413 is not
retried, and the message says to export smaller batches), 415 for a content type or encoding
other than protobuf/JSON and gzip, 429 over the key's rate limit and 503 while the database
is away (both with Retry-After; the exporter retries them, and nothing else). Spans refused one
by one (a bad id, a use case the key may not send to, a span after its trace was assembled)
cost only themselves: 200 with `partial_success` counting them, which the exporter does not
retry (and SDKs do not show): they are logged as a warning and counted on /metrics
(`treue_otlp_spans_refused_total`).

The key is checked as for the rest of the API (ingest.api.auth.service_for_token): an
export is one request of the key's TREUE_API_RATE_LIMIT.
"""

import logging

import orjson
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ingest.api.auth import RateLimited, service_for_token
from traces import decoding, services

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
# The partial success message lists each reason once with its count, up to this length.
MAX_MESSAGE_CHARS = 1000


@csrf_exempt
def export_traces(request: HttpRequest) -> HttpResponse:
    try:
        media: str | None = decoding.media_type(request.META.get("CONTENT_TYPE", ""))
    except decoding.UnsupportedMedia as e:
        media, unsupported = None, e
    answer_in = media or decoding.JSON
    if request.method != "POST":
        response = _status(405, code_pb2.UNIMPLEMENTED, "POST an ExportTraceServiceRequest",
                           answer_in)
        response["Allow"] = "POST"
        return response

    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    try:
        found = service_for_token(token.strip()) if scheme.lower() == "bearer" else None
    except RateLimited as e:
        response = _status(429, code_pb2.RESOURCE_EXHAUSTED, str(e), answer_in)
        response["Retry-After"] = str(e.retry_after)
        return response
    except (OperationalError, InterfaceError) as e:
        return _unavailable(request, e, answer_in)
    if found is None:
        response = _status(401, code_pb2.UNAUTHENTICATED, "missing or invalid service key "
                           "(Authorization: Bearer <key>)", answer_in)
        response["WWW-Authenticate"] = "Bearer"
        return response
    service, use_cases = found
    if media is None:
        return _status(415, code_pb2.INVALID_ARGUMENT, str(unsupported), answer_in)

    limit = settings.TREUE_OTLP_MAX_BODY_BYTES
    too_large = _status(413, code_pb2.RESOURCE_EXHAUSTED,
                        f"the body is larger than {limit} bytes", media)
    try:
        compressed = decoding.check_encoding(request.headers.get("Content-Encoding", ""))
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            return too_large
        body = request.body
        if len(body) > limit:
            return too_large
        if compressed:
            body = decoding.gunzip(body, limit)
        decoded = decoding.decode(body, media)
    except decoding.UnsupportedMedia as e:
        return _status(415, code_pb2.INVALID_ARGUMENT, str(e), media)
    except (decoding.BodyTooLarge, RequestDataTooBig):
        return too_large
    except decoding.TooMuch as e:
        return _status(413, code_pb2.RESOURCE_EXHAUSTED, str(e), media)
    except decoding.BodyInvalid as e:
        return _status(400, code_pb2.INVALID_ARGUMENT, str(e), media)
    except ValueError:  # a Content-Length that is no number
        return _status(400, code_pb2.INVALID_ARGUMENT, "invalid Content-Length", media)

    try:
        received = services.otlp_spans_receive(
            service=service, spans=decoded.spans, allowed=use_cases
        )
    except (OperationalError, InterfaceError) as e:
        return _unavailable(request, e, media)
    rejected = dict(decoded.rejected)
    for reason, count in received.rejected.items():
        rejected[reason] = rejected.get(reason, 0) + count
    message = trace_service_pb2.ExportTraceServiceResponse()
    if rejected:
        codes = dict(received.codes)
        invalid = sum(decoded.rejected.values())
        if invalid:
            codes[services.SPAN_INVALID] = codes.get(services.SPAN_INVALID, 0) + invalid
        services.otlp_refusals_record(service=service, codes=codes, reasons=rejected)
        # Set only when something was refused: an empty partial_success means full success.
        message.partial_success.rejected_spans = sum(rejected.values())
        message.partial_success.error_message = "; ".join(
            f"{count} span{'s' if count > 1 else ''}: {reason}"
            for reason, count in rejected.items()
        )[:MAX_MESSAGE_CHARS]
    return _response(200, message, media)


def _status(http_status: int, code: int, message: str, media: str) -> HttpResponse:
    return _response(http_status, status_pb2.Status(code=code, message=message), media)


def _response(http_status: int, message: Message, media: str) -> HttpResponse:
    if media == decoding.PROTOBUF:
        body = message.SerializeToString()
    else:
        body = orjson.dumps(json_format.MessageToDict(message))
    return HttpResponse(body, status=http_status, content_type=media)


def _unavailable(request: HttpRequest, error: Exception, media: str) -> HttpResponse:
    # The exporter retries a 503 after Retry-After; the operator needs to see why.
    logger.warning("503 for %s: %s: %s", request.path, type(error).__name__, error)
    response = _status(503, code_pb2.UNAVAILABLE, "the database is unavailable; retry later",
                       media)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
