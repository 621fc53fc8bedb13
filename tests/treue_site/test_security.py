"""Security headers, script hygiene under the CSP, service keys, CSRF on every form."""

import hashlib
import hmac
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.test import Client

from monitoring.domain import keys
from monitoring.models import Answer, Service, UseCase
from monitoring.services.use_cases import service_create
from tests.conftest import ApiClient
from tests.support.world import WorldBuilder
from tests.treue_site.test_permission_matrix import ROWS, Row, fill
from tests.treue_site.world import World, build_world

TEMPLATES = Path(django_settings.BASE_DIR) / "templates"


def csp_directives(response: Any) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {
        name: values
        for name, *values in (part.split() for part in header.split(";") if part.strip())
    }


# --- headers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/login/", "/health", "/api/v1/openapi.json"])
def test_every_response_has_nosniff_csp_and_no_framing(
    client: Client, path: str, db: None
) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    csp = csp_directives(response)
    assert csp["default-src"] == ["'self'"]
    assert csp["script-src"] == ["'self'"]  # no inline script, no eval, no other origin
    assert csp["object-src"] == ["'none'"]
    assert csp["base-uri"] == ["'self'"]
    assert csp["frame-ancestors"] == ["'none'"]
    assert csp["form-action"] == ["'self'"]
    # No directive names another origin (a scheme like data: is not one).
    for values in csp.values():
        for value in values:
            assert value.startswith("'") or value == "data:", value


def test_logged_in_pages_and_api_errors_carry_the_headers(
    client: Client, django_user_model: Any, api: ApiClient
) -> None:
    client.force_login(django_user_model.objects.create_user("x", password="pw-x-12345678"))
    for response in (client.get("/answers/"), api.get("/api/v1/answers/999")):
        assert response["X-Content-Type-Options"] == "nosniff"
        assert "script-src 'self'" in response["Content-Security-Policy"]


def test_hsts_on_secure_requests_in_production(client: Client, settings: Any) -> None:
    # settings.py sets this when DEBUG is off (test_deploy_check proves that); Django sends the
    # header on HTTPS responses only.
    settings.SECURE_HSTS_SECONDS = 31536000
    assert client.get("/login/", secure=True)["Strict-Transport-Security"] == "max-age=31536000"
    assert "Strict-Transport-Security" not in client.get("/login/")


# --- no inline script in any template ---------------------------------------------------------

SCRIPT_TAG = re.compile(r"<script\b([^>]*)>", re.IGNORECASE)
EVENT_HANDLER = re.compile(r"<[^>]*\son[a-z]+\s*=", re.IGNORECASE)
JS_URL = re.compile(r"""(href|src|action|formaction)\s*=\s*["']?\s*javascript:""", re.IGNORECASE)


def test_templates_have_no_inline_script_handlers_or_javascript_urls() -> None:
    problems = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        text = path.read_text()
        for match in SCRIPT_TAG.finditer(text):
            attrs = match.group(1)
            # json_script's data blocks are not executed, and the CSP does not apply to them.
            if "src=" not in attrs and 'type="application/json"' not in attrs:
                problems.append(f"{path.name}: inline <script{attrs}>")
        problems += [f"{path.name}: handler {m.group(0)!r}" for m in EVENT_HANDLER.finditer(text)]
        problems += [f"{path.name}: {m.group(0)!r}" for m in JS_URL.finditer(text)]
    assert not problems, "\n".join(problems)


# --- service keys -----------------------------------------------------------------------------


def test_only_a_hash_of_the_key_is_stored(use_case: UseCase) -> None:
    service, key = service_create(name="hash-bot", use_cases=[use_case])
    row = Service.objects.filter(pk=service.pk).values().get()
    assert row["key_hash"] == hashlib.sha256(key.encode()).hexdigest()
    assert key not in json.dumps(row, default=str)
    assert row["key_prefix"] == keys.key_prefix(key)
    assert key.split("_", 2)[2] not in json.dumps(row, default=str)  # not even the secret part


def test_create_service_prints_the_key_once_as_its_last_line(use_case: UseCase) -> None:
    out = io.StringIO()
    call_command("create_service", "cli-bot", "--use-case", use_case.slug, stdout=out)
    text = out.getvalue()
    key = text.strip().splitlines()[-1]
    assert keys.key_prefix(key) is not None
    assert text.count(key) == 1
    assert Service.objects.get(name="cli-bot").key_hash == keys.hash_key(key)


def test_keys_are_compared_in_constant_time(
    api: ApiClient, make_answer: Any, service_and_key: tuple[Service, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    service, key = service_and_key
    # Right prefix, wrong secret: found by its prefix, refused by the hash comparison.
    api.key = key[:-6] + ("A" * 6 if not key.endswith("A" * 6) else "B" * 6)
    assert api.post("/api/v1/answers", make_answer()).status_code == 401
    assert compared == [(keys.hash_key(api.key), service.key_hash)]
    api.key = key
    assert api.post("/api/v1/answers", make_answer()).status_code == 201
    assert len(compared) == 2


def test_api_looks_keys_up_by_prefix_only_and_never_compares_secrets_with_eq() -> None:
    source = (Path(django_settings.BASE_DIR) / "ingest" / "api" / "auth.py").read_text()
    # The key check, shared by the API's ServiceKey and the OTLP receiver (traces/api.py).
    authenticate = source[
        source.index("def service_for_token"):source.index("class PersonSession")
    ]
    # The current key's hash, or in its grace period the one before a rotation.
    assert "keys.key_matches(token, digest)" in authenticate
    assert "digest = found.service.key_hash" in authenticate
    assert "digest = found.service.previous_key_hash" in authenticate
    assert "key_hash=" not in authenticate and "== service.key_hash" not in authenticate
    assert "token ==" not in authenticate


@pytest.mark.parametrize("header", [
    None, "Bearer", "Bearer ", "Bearer nonsense", "Basic dXNlcjpwdw==", "Bearer tr_zz_zz",
])
def test_missing_or_malformed_keys_are_401(api: ApiClient, make_answer: Any, header: Any,
                                           client: Client) -> None:
    extra = {} if header is None else {"HTTP_AUTHORIZATION": header}
    response = client.post("/api/v1/answers", json.dumps(make_answer()),
                           content_type="application/json", **extra)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json()["errors"][0]["field"] == "Authorization"


def test_a_revoked_key_is_refused_at_once(
    api: ApiClient, make_answer: Any, service_and_key: tuple[Service, str]
) -> None:
    assert api.post("/api/v1/answers", make_answer(external_id="r-1")).status_code == 201
    Service.objects.filter(pk=service_and_key[0].pk).update(active=False)
    assert api.post("/api/v1/answers", make_answer(external_id="r-2")).status_code == 401
    assert api.get(f"/api/v1/answers/{Answer.objects.get().pk}").status_code == 401


def test_the_admin_action_revokes_keys(
    api: ApiClient, make_answer: Any, service_and_key: tuple[Service, str],
    django_user_model: Any, settings: Any,
) -> None:
    service, _ = service_and_key
    admin = Client()
    admin.force_login(django_user_model.objects.create_superuser("root", "r@example.org", "pw"))
    page = admin.get("/admin/monitoring/service/").content.decode()
    assert "Schlüssel widerrufen" in page
    response = admin.post("/admin/monitoring/service/", {
        "action": "revoke_keys", "_selected_action": [service.pk],
    }, follow=True)
    assert response.status_code == 200
    assert "Widerrufen: rag-bot." in response.content.decode()
    service.refresh_from_db()
    assert not service.active
    assert api.post("/api/v1/answers", make_answer()).status_code == 401


def test_a_key_writes_only_to_its_use_cases(
    api: ApiClient, make_answer: Any, other_use_case: UseCase
) -> None:
    response = api.post("/api/v1/answers", make_answer(use_case=other_use_case.slug))
    assert response.status_code == 403
    assert not Answer.objects.exists()
    batch = api.post("/api/v1/answers/batch", {"answers": [
        make_answer(external_id="mine"), make_answer(external_id="theirs", use_case="vertrieb"),
    ]}).json()
    assert [r["status"] for r in batch["results"]] == [201, 403]


def test_a_key_reads_only_its_own_answers_and_learns_nothing_of_others(
    api: ApiClient, make_answer: Any, other_use_case: UseCase, client: Client
) -> None:
    other, other_key = service_create(name="other-bot", use_cases=[other_use_case])
    theirs = ApiClient(client, other_key).post(
        "/api/v1/answers", make_answer(use_case="vertrieb")
    ).json()["id"]
    foreign = api.get(f"/api/v1/answers/{theirs}")
    missing = api.get(f"/api/v1/answers/{theirs + 1000}")
    # The same 404 with the same body as an id that does not exist: ids do not leak.
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json()


# --- CSRF on every form -----------------------------------------------------------------------


@pytest.fixture
def world(world_builder: WorldBuilder, db: None) -> World:
    return build_world(world_builder)


def page_rows() -> list[Row]:
    """One row per page URL pattern (the API and the OTLP receiver authenticate by bearer key
    only, a session counts nothing there, and are exempt)."""
    seen: dict[str, Row] = {}
    for row in ROWS:
        if not row.name.startswith("api:") and row.name != "otlp_traces":
            seen.setdefault(row.name, row)
    return list(seen.values())


def role_for(row: Row) -> str:
    return "expert_a" if row.name.startswith("review:") else "lead_a"


def test_every_page_refuses_a_post_without_csrf_token(world: World) -> None:
    wrong = []
    for row in page_rows():
        client = Client(enforce_csrf_checks=True)
        user = world.users["superuser" if row.name.startswith("admin:") else role_for(row)]
        client.force_login(user)
        path = fill(row.path, world)
        response = client.post(path, row.body or {})
        if response.status_code != 403 or b"CSRF" not in response.content:
            wrong.append(f"POST {path} ({row.name}): {response.status_code}")
    assert not wrong, "POSTs accepted without a CSRF token:\n" + "\n".join(wrong)


def test_anonymous_login_post_needs_the_token_too() -> None:
    client = Client(enforce_csrf_checks=True)
    assert client.post("/login/", {"username": "x", "password": "y"}).status_code == 403


def test_the_forms_work_with_the_token(world: World) -> None:
    """The control: with the token the same POSTs get what the permission matrix expects."""
    for row in page_rows():
        if row.method != "POST":
            continue
        client = Client(enforce_csrf_checks=True)
        client.force_login(world.users[role_for(row)])
        client.get("/login/")  # sets the CSRF cookie
        token = client.cookies[django_settings.CSRF_COOKIE_NAME].value
        path = fill(row.path, world)
        response = client.post(path, row.body or {}, HTTP_X_CSRFTOKEN=token)
        expected = row.expected[role_for(row)]
        expected_status = expected if isinstance(expected, int) else 302
        assert response.status_code == expected_status, (row.name, response.status_code)
