"""Turns a lost database connection into a 503 with Retry-After instead of a 500, keeps every
error of the API in its JSON shape, and keeps every response out of caches."""

from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import add_never_cache_headers

RETRY_AFTER_SECONDS = 5


class NoStoreMiddleware:
    """`Cache-Control: no-store` (Django's never_cache headers) on every response Django makes.

    Answers, verdicts, exports and the API's echoes must not stay in a browser's disk cache or a
    proxy after the person has logged out. Nearly every page and API response carries answer
    content, or a count or name that derives from it, so the rule is all of them rather than a
    list that a new view could miss. Static files never get here: WhiteNoise, placed before this
    middleware, answers them with its own caching. A view that set a Cache-Control of its own
    (/health and /metrics are never_cache already) made that choice and keeps it.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not response.has_header("Cache-Control"):
            add_never_cache_headers(response)
        return response


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        if request.path.startswith("/api/"):
            response: HttpResponse = JsonResponse(
                {"errors": [{"field": "", "message": "the database is unavailable; retry later"}]},
                status=503,
            )
        else:
            response = HttpResponse(
                "Treue ist vorübergehend nicht erreichbar (Datenbank). Bitte gleich noch einmal.\n"
                "Treue is temporarily unavailable (database). Please retry shortly.\n",
                status=503,
                content_type="text/plain; charset=utf-8",
            )
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response


class ApiErrorsAsJsonMiddleware:
    """Under /api/ every answer is `{"errors": [...]}`: Django's own pages for an unknown path
    (404), a wrong method (405, with its Allow header) and a Host it does not serve (400) are
    HTML otherwise, which an API client cannot read. The OTLP receiver's errors are
    google.rpc.Status messages, in protobuf or JSON as the request was (traces/api.py): left
    alone."""

    MESSAGES = {
        400: "bad request",
        404: "no such endpoint",
        405: "method not allowed",
    }

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            not request.path.startswith("/api/")
            or response.status_code not in self.MESSAGES
            or response.get("Content-Type", "").startswith(("application/json",
                                                             "application/x-protobuf"))
        ):
            return response
        message = self.MESSAGES[response.status_code]
        allow = response.get("Allow")
        if allow:
            message += f"; allowed: {allow}"
        converted = JsonResponse(
            {"errors": [{"field": "", "message": message}]}, status=response.status_code
        )
        if allow:
            converted["Allow"] = allow
        return converted
