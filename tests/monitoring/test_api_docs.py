"""/api/v1/docs: interactive API docs (Swagger UI) with every asset served by Treue itself."""

import re

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_docs_page_is_public_and_loads_nothing_from_elsewhere() -> None:
    response = Client().get("/api/v1/docs")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert "<title>Treue ingest API</title>" in html
    assert '"url": "/api/v1/openapi.json"' in html
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert {"/static/ninja/swagger-ui-bundle.js", "/static/ninja/swagger-ui-init.js",
            "/static/ninja/swagger-ui.css"} <= set(assets)
    # Nothing from a CDN: every asset is a path on this site that the static files hold.
    for asset in assets:
        assert asset.startswith("/static/"), asset
        assert finders.find(asset.removeprefix("/static/")), asset
    assert "script-src 'self'" in response["Content-Security-Policy"]


def test_the_schema_the_docs_read_lists_the_ingest_operations() -> None:
    paths = Client().get("/api/v1/openapi.json").json()["paths"]
    assert "/api/v1/answers" in paths and "/api/v1/answers/batch" in paths
