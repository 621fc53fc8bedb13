"""Request bodies sent without a length (``Transfer-Encoding: chunked``).

Django reads a body by its ``Content-Length`` alone: a chunked body, which has none, reads as
empty, so a valid answer sent that way (httpx does, given a generator; curl with the header)
got a 400 naming no field. Gunicorn decodes the chunks and says so with
``wsgi.input_terminated``; then the body of an API request with a key is read here, up to one
byte over what its endpoint takes (the batch endpoint's limit, the OTLP receiver's or the single
one's: ingest.api.parsing.body_limit), and handed on with its length, so that every limit and error
downstream applies as to any other body.
Without a key nothing is read (the answer is a 401 anyway), and the pages take no chunked
bodies (browsers send none). A server that does not say where a chunked body ends (Django's
runserver, the demo's) gets a 411 asking for a Content-Length.
"""

import io
import json
from collections.abc import Callable, Iterable
from typing import Any

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

LENGTH_REQUIRED = json.dumps({"errors": [{
    "field": "Content-Length",
    "message": "this server reads no chunked bodies; send the body with a Content-Length",
}]}).encode()


class ChunkedBodies:
    """WSGI middleware: gives a chunked API body its length (see the module). `limit(path)` is
    the most an endpoint takes."""

    def __init__(self, app: WSGIApp, limit: Callable[[str], int]) -> None:
        self.app = app
        self.limit = limit

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]
                 ) -> Iterable[bytes]:
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        path = environ.get("PATH_INFO", "")
        if (chunked and not environ.get("CONTENT_LENGTH") and path.startswith("/api/")
                and environ.get("HTTP_AUTHORIZATION")):
            if not environ.get("wsgi.input_terminated"):
                # No Content-Length on the answer either: runserver then closes the connection,
                # so the chunks left unread are not taken for the next request.
                start_response("411 Length Required", [("Content-Type", "application/json")])
                return [LENGTH_REQUIRED]
            body = environ["wsgi.input"].read(self.limit(path) + 1)  # over it: a 413 later
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return self.app(environ, start_response)
