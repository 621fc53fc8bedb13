"""The API's errors: always `{"errors": [{"field", "message"}]}` with a 4xx status (503 when
the database is away); a client's mistake is never a 500. `handle_errors` installs the handlers
on the API."""

import logging

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from ingest import decoding, services
from ingest.api.auth import RateLimited
from ingest.api.parsing import BodyEncoded, BodyTooLarge

logger = logging.getLogger(__name__)

# Retry-After on 503: long enough for a database failover, short enough not to pile up answers.
RETRY_AFTER_SECONDS = 5


def errors(status: int, items: list[dict[str, str]], **headers: str) -> JsonResponse:
    response = JsonResponse({"errors": items}, status=status)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    items = []
    for err in exc.errors:
        # ninja prefixes where the value came from: ("body", "payload", ...) or ("path", ...).
        # Only that prefix goes, so a client's field called "body" or "path" is still named.
        loc = list(err["loc"])
        if loc[:1] in (["body"], ["path"], ["query"]):
            loc = loc[1:]
        if loc[:1] == ["payload"]:
            loc = loc[1:]
        message = str(err["msg"]).removeprefix("Value error, ")
        if not loc and ": " in message:
            name, message = message.split(": ", 1)
            loc = [name]
        items.append({"field": services.format_loc(loc), "message": message})
    return errors(400, items)


def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    cause = exc.__cause__
    if isinstance(cause, BodyTooLarge | RequestDataTooBig):
        return errors(413, [{"field": "", "message": str(cause) or "the body is too large"}])
    if isinstance(cause, BodyEncoded):
        return errors(415, [{"field": "Content-Encoding", "message": str(cause)}])
    if isinstance(cause, decoding.BodyError):
        return errors(400, [{"field": cause.field, "message": str(cause)}])
    if isinstance(cause, ValueError):
        return errors(400, [{"field": "", "message": str(cause)}])
    return errors(exc.status_code, [{"field": "", "message": str(exc)}])


def _request_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    # Django's own cap (DATA_UPLOAD_MAX_MEMORY_SIZE) trips when ninja first reads request.body,
    # outside the parser: without this it is Django's HTML 400 page.
    return errors(413, [{"field": "", "message": "the body is too large"}])


def _unauthorized(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return errors(
        401,
        [{"field": "Authorization", "message": "missing or invalid service key"}],
        WWW_Authenticate="Bearer",
    )


def _rate_limited(request: HttpRequest, exc: RateLimited) -> HttpResponse:
    return errors(429, [{"field": "", "message": str(exc)}], Retry_After=str(exc.retry_after))


def _database_unavailable(request: HttpRequest, exc: DatabaseError) -> HttpResponse:
    # The client retries; the operator needs to see why.
    logger.warning("503 for %s: %s: %s", request.path, type(exc).__name__, exc)
    return errors(
        503,
        [{"field": "", "message": "the database is unavailable; retry later"}],
        Retry_After=str(RETRY_AFTER_SECONDS),
    )


def handle_errors(api: NinjaAPI) -> None:
    api.exception_handler(ValidationError)(_validation_error)
    api.exception_handler(HttpError)(_http_error)
    api.exception_handler(RequestDataTooBig)(_request_too_big)
    api.exception_handler(AuthenticationError)(_unauthorized)
    api.exception_handler(RateLimited)(_rate_limited)
    api.exception_handler(OperationalError)(_database_unavailable)
    api.exception_handler(InterfaceError)(_database_unavailable)
