"""The API (`/api/v1/`): RAG services post answers with a bearer key; the weekly estimates of
a use case are read with a service key allowed on it or by a team lead logged in to the pages.

Errors are always `{"errors": [{"field", "message"}]}` with a 4xx status; a client's mistake is
never a 500. The body is parsed by the API rather than by Django's form machinery so that every
way a body can be malformed (not UTF-8, not JSON, NaN, nesting that exhausts the parser, too
large) becomes a named 400 or 413. The one exception is the OTLP receiver beside it
(`/api/v1/otlp/v1/traces`, traces/api.py, not part of this API object or its OpenAPI document):
its errors are google.rpc.Status messages, as the OTLP specification asks.

By concern: `parsing` reads the body, `auth` knows the callers, `errors` says every error the
same way, `ingest` and `estimates` are the two groups of endpoints. The URLs and the OpenAPI
document are the ones of the single module this package was.
"""

from collections.abc import Sequence
from typing import Any

from ninja import NinjaAPI, Router, Swagger
from ninja.operation import Operation

from ingest.api.auth import ServiceKey
from ingest.api.errors import handle_errors
from ingest.api.parsing import StrictJSONParser


class TreueAPI(NinjaAPI):
    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(*args, **kwargs)
        # Batch items are validated one by one (a bad item must not cost the others), so the
        # model holds them as Any; the published schema still says what an item must be.
        answers = schema["components"]["schemas"]["BatchIn"]["properties"]["answers"]
        answers["items"] = {"$ref": "#/components/schemas/AnswerIn"}
        return schema

    def get_openapi_operation_id(self, operation: Operation) -> str:
        # The ids the endpoints had when they were one module (ingest/api/site.py): a client
        # generated from the document keeps its method names.
        return f"monitoring_api_{operation.view_func.__name__}"


def api_build(*, routers: Sequence[Router]) -> TreueAPI:
    """The API with the apps' routers (ingest's answers, the dashboard's estimates), in the
    order given: the project's URLs build it once (treue_site/urls.py)."""
    api = TreueAPI(
        title="Treue ingest API",
        version="1",
        description=(
            "RAG services send every answer they produce. Treue flags doubtful answers from token "
            "log-probabilities and samples answers for the LLM judge. Each service key may make a "
            "limited number of requests a minute (a batch counts as one); above it the answer is "
            "429 with Retry-After, the seconds until the minute is over."
        ),
        parser=StrictJSONParser(),
        auth=ServiceKey(),
        urls_namespace="api",
        # Swagger UI from django-ninja's own static files ("ninja" is installed for them), never a
        # CDN: the page works offline and under the site's Content-Security-Policy. Public, like
        # the schema it reads: it holds no data, and "Authorize" takes a service key.
        docs=Swagger(settings={"persistAuthorization": False}),
        docs_url="/docs",
    )
    handle_errors(api)
    for router in routers:
        api.add_router("", router)
    return api
