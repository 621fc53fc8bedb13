"""How the API reads a body: strictly, so that every way a body can be malformed (not UTF-8,
not JSON, NaN, nesting that exhausts the parser, compressed, too large) becomes a named 400,
413 or 415 (ingest/api/errors.py) rather than Django's form machinery's guess.

The fast way first (msgspec, ingest/decoding.py); what it refuses is parsed again, so that
the error names the problem.
"""

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja.parser import Parser

from ingest import decoding

# The OTLP receiver's paths (traces/api.py, routed in treue_site/urls.py).
OTLP_PATH_PREFIX = "/api/v1/otlp/"


class BodyTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is larger than {limit} bytes")


class BodyEncoded(Exception):
    """A compressed body (Content-Encoding gzip, br, ...): Treue reads JSON as it is sent."""


class StrictJSONParser(Parser):
    def parse_body(self, request: HttpRequest) -> Any:
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            raise BodyEncoded(f"Content-Encoding {encoding!r} is not read here; send the body "
                              "uncompressed")
        limit = _body_limit(request)
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            raise BodyTooLarge(limit)
        body = request.body
        if len(body) > limit:
            raise BodyTooLarge(limit)
        # The fast way first (msgspec, see ingest.decoding); what it refuses is parsed
        # again below, so that the error names the problem. `treue_raw` keeps each answer as
        # sent, for replays of answers stored under the old fingerprint.
        if _is_batch(request):
            answers, raws = _decode_batch(body)
            if answers is not None:
                request.treue_raw = raws  # type: ignore[attr-defined]  # ServiceRequest
                return {"answers": answers}
        else:
            answer = decoding.decode_answer(body)
            if answer is not None:
                request.treue_raw = body  # type: ignore[attr-defined]  # ServiceRequest
                return answer
        data = decoding.parse(body)
        if not isinstance(data, dict):
            raise decoding.BodyError("the body must be a JSON object")
        answers = data.get("answers")
        request.treue_raw = (  # type: ignore[attr-defined]  # ServiceRequest
            answers if _is_batch(request) and isinstance(answers, list) else data
        )
        return data


def _decode_batch(body: bytes) -> tuple[list[Any] | None, Sequence[bytes | None]]:
    """A batch's items the fast way: all in one pass; when an item is refused, item by item.
    (None, ()) when the body itself must go the slow way: not JSON, not UTF-8 (msgspec
    splits without checking the strings it skips), too many items."""
    answers = decoding.decode_batch(body)
    if answers is not None:
        return answers, decoding.BatchItems(body, len(answers))
    items = decoding.split_batch(body)
    if items is None or not _is_utf8(body):
        return None, ()
    return [decoding.decode_item(item) for item in items], items


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _is_batch(request: HttpRequest) -> bool:
    return request.path.endswith("/batch")


def _body_limit(request: HttpRequest) -> int:
    return body_limit(request.path)


def body_limit(path: str) -> int:
    """The most an ingest endpoint takes, by its path: the batch endpoint and the OTLP receiver
    (traces/api.py) have their own limits."""
    if path.startswith(OTLP_PATH_PREFIX):
        return settings.TREUE_OTLP_MAX_BODY_BYTES
    if path.endswith("/batch"):
        return settings.TREUE_MAX_BATCH_BODY_BYTES
    return settings.TREUE_MAX_BODY_BYTES
