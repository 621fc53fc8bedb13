"""Who may do what: every URL pattern of the site against every role, cell by cell.

The rows are the site's URL patterns, found by walking Django's resolver: a pattern without a row
fails `test_every_url_pattern_has_a_row`, so a new page cannot be forgotten. To add a page, add a
`Row` to ROWS: its resolver name, the method, a path (with `{answer_a}`, `{answer_b}`, `{run_a}`,
`{item_a}`, `{reviewed_a}`, `{inv_a}`, `{chan_a}`, `{a}`, `{b}` filled in from the world) and one
expected cell per role, in the order of ROLES. A pattern may have several rows (another method,
another object).

Roles: an anonymous visitor; a RAG service's bearer key (of use case A, no session); the expert
and the team lead of use case A (the one the objects mostly belong to); the expert and the lead of
use case B (another use case: A's objects must be 404 for them, so ids do not leak); a user with
no use case; staff (is_staff, without model permissions in the admin).

Cells: a status code, LOGIN (302 to /login/?next=<the path>), ADMIN_LOGIN (302 to the admin's
login page), or Redirect(<location>). Each role is one test that walks all rows in one world
and reports every wrong cell at once.
"""

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.support.http import Environ, bearer
from tests.support.world import WorldBuilder
from tests.support.xlsx import read_sheet
from tests.treue_site.world import World, build_world

LOGIN = "LOGIN"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
ADMIN_LOGIN = "ADMIN_LOGIN"


@dataclass(frozen=True)
class Redirect:
    location: str


# The blind answer's score (1/7) as a page, a CSV, a workbook or JSON would write it (1/3 would
# not do: Plotly's template holds 0.3333 in its colour scales): a number of its own, not digits
# inside another (a timestamp's "…:40.143212" once passed for it).
_BLIND_SCORE = re.compile(r"(?<!\d)0[.,]14")


@dataclass(frozen=True)
class Blind:
    """The status, and not a trace of the score of the answer the expert reviews blind."""

    status: int = 200


@dataclass(frozen=True)
class Sees:
    """The status, and that score shown: the same URL is not blind for everyone (which also
    proves the Blind check would find the score if it were there)."""

    status: int = 200


B, S = Blind(), Sees()


ROLES = ("anonymous", "service", "expert_a", "lead_a", "expert_b", "lead_b", "nobody", "staff")
OV = Redirect("/overview/")
RQ = Redirect("/review/")  # an expert lands on the review queue
TO_LOGIN = Redirect("/login/")


@dataclass
class Row:
    name: str
    method: str
    path: str
    cells: tuple[Any, ...]
    body: dict[str, Any] | None = None
    json: bool = False
    note: str = ""
    expected: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        assert len(self.cells) == len(ROLES), self.name
        self.expected = dict(zip(ROLES, self.cells, strict=True))


def answer_body(use_case: str, external_id: str) -> dict[str, Any]:
    return {"external_id": external_id, "use_case": use_case, "question": "Frage?",
            "answer": "Antwort.", "model": "gpt-4o-mini", "chunks": [], "logprobs": None}


L, AL = LOGIN, ADMIN_LOGIN
# Order matters only for the last row: logging out ends the session.
ROWS = [
    #                                                   anon svc  ex_a ld_a ex_b ld_b none staff
    # --- outside the apps
    Row("health", "GET", "/health",                     (200, 200, 200, 200, 200, 200, 200, 200)),
    Row("metrics", "GET", "/metrics",                   (401, 401, 403, 403, 403, 403, 403, 200),
        note="a bearer header that is not the metrics token is a 401, never a login redirect"),
    Row("login", "GET", "/login/",                      (200, 200, 200, 200, 200, 200, 200, 200)),
    Row("oidc_authentication_init", "GET", "/oidc/authenticate/",
        (404, 404, 404, 404, 404, 404, 404, 404),
        note="single sign-on is not configured here (tests/accounts log in through it)"),
    Row("oidc_authentication_callback", "GET", "/oidc/callback/?code=x&state=y",
        (404, 404, 404, 404, 404, 404, 404, 404)),
    Row("favicon", "GET", "/favicon.ico",               (301, 301, 301, 301, 301, 301, 301, 301),
        note="to the static SVG icon, for anyone"),
    Row("set_language", "POST", "/i18n/setlang/",       (302, 302, 302, 302, 302, 302, 302, 302),
        body={"language": "en"}),
    Row("admin:index", "GET", "/admin/",                (AL, AL, AL, AL, AL, AL, AL, 200)),
    # The alarms' old admin address, before they had their own app: a redirect for everyone
    # (the admin then asks who it is).
    Row("admin_alarm_moved", "GET", "/admin/monitoring/alarm/",
                                                        (301, 301, 301, 301, 301, 301, 301, 301)),
    Row("admin:monitoring_service_changelist", "GET", "/admin/monitoring/service/",
                                                        (AL, AL, AL, AL, AL, AL, AL, 403),
        note="staff without model permissions"),
    # --- the API: a bearer key; a session only reads estimates
    Row("api:api-root", "GET", "/api/v1/",              (404, 404, 404, 404, 404, 404, 404, 404)),
    Row("api:openapi-json", "GET", "/api/v1/openapi.json",
                                                        (200, 200, 200, 200, 200, 200, 200, 200)),
    Row("api:openapi-view", "GET", "/api/v1/docs",      (200, 200, 200, 200, 200, 200, 200, 200),
        note="the interactive docs, public like the schema"),
    Row("api:post_answer", "POST", "/api/v1/answers",   (401, 201, 401, 401, 401, 401, 401, 401),
        body=answer_body("recht", "matrix-own"), json=True),
    Row("api:post_answer", "POST", "/api/v1/answers",   (401, 403, 401, 401, 401, 401, 401, 401),
        body=answer_body("fremd", "matrix-foreign"), json=True,
        note="a key writes only to its own use cases"),
    Row("api:post_answer", "PUT", "/api/v1/answers",    (405, 405, 405, 405, 405, 405, 405, 405)),
    Row("api:find_answer", "GET", "/api/v1/answers?external_id={ext_a}",
                                                        (401, 200, 401, 401, 401, 401, 401, 401)),
    Row("api:find_answer", "GET", "/api/v1/answers?external_id={ext_b}",
                                                        (401, 404, 401, 401, 401, 401, 401, 401),
        note="another service's answer is not found by its external_id either"),
    Row("api:post_batch", "POST", "/api/v1/answers/batch",
                                                        (401, 200, 401, 401, 401, 401, 401, 401),
        body={"answers": []}, json=True),
    Row("api:get_answer", "GET", "/api/v1/answers/{answer_a}",
                                                        (401, 200, 401, 401, 401, 401, 401, 401)),
    Row("api:get_answer", "GET", "/api/v1/answers/{answer_b}",
                                                        (401, 404, 401, 401, 401, 401, 401, 401),
        note="another service's answer is not found, not forbidden"),
    Row("api:get_estimates", "GET", "/api/v1/use-cases/{a}/estimates",
                                                        (401, 200, 403, 200, 404, 404, 404, 200)),
    Row("api:get_estimates", "GET", "/api/v1/use-cases/{b}/estimates",
                                                        (401, 404, 404, 404, 403, 200, 404, 200),
        note="another tenant's use case reads as one that does not exist"),
    Row("api:get_segments", "GET", "/api/v1/use-cases/{a}/segments?dimension=model",
                                                        (401, 200, 403, 200, 404, 404, 404, 200)),
    Row("api:get_segments", "GET", "/api/v1/use-cases/{b}/segments?dimension=model",
                                                        (401, 404, 404, 404, 403, 200, 404, 200),
        note="another tenant's use case reads as one that does not exist"),
    # --- the OTLP receiver (traces/): a bearer key; an empty export request is a success
    Row("otlp_traces", "POST", "/api/v1/otlp/v1/traces",
                                                        (401, 200, 401, 401, 401, 401, 401, 401),
        body={}, json=True, note="a session is no key: the receiver reads only bearer keys"),
    Row("otlp_traces", "GET", "/api/v1/otlp/v1/traces",
                                                        (405, 405, 405, 405, 405, 405, 405, 405)),
    # --- monitoring pages
    Row("monitoring:home", "GET", "/",                  (L, L, RQ, OV, RQ, OV, 200, OV)),
    Row("monitoring:answer_list", "GET", "/answers/",   (L, L, B, S, 200, 200, 200, S)),
    Row("monitoring:answer_list", "GET", "/answers/?sort=score",
                                                        (L, L, B, S, 200, 200, 200, S)),
    Row("monitoring:overview", "GET", "/overview/",     (L, L, 200, 200, 200, 200, 200, 200)),
    Row("monitoring:answer_export", "GET", "/answers/export.csv",
                                                        (L, L, B, S, 200, 200, 200, S)),
    Row("monitoring:answer_export_xlsx", "GET", "/answers/export.xlsx",
                                                        (L, L, B, S, 200, 200, 200, S)),
    Row("monitoring:answer_detail", "GET", "/answers/{answer_a}/",
                                                        (L, L, 200, 200, 404, 404, 404, 200)),
    Row("monitoring:answer_detail", "GET", "/answers/{blind_a}/",
                                                        (L, L, B, S, 404, 404, 404, S)),
    Row("monitoring:answer_record", "GET", "/answers/{blind_a}/record.json",
                                                        (L, L, B, S, 404, 404, 404, S)),
    Row("monitoring:answer_record", "GET", "/answers/{answer_a}/record.json",
                                                        (L, L, 200, 200, 404, 404, 404, 200)),
    Row("monitoring:answer_record", "GET", "/answers/{answer_b}/record.json",
                                                        (L, L, 404, 404, 200, 200, 404, 200)),
    Row("monitoring:answer_rescore", "POST", "/answers/{answer_a}/rescore/",
                                                        (L, L, 403, 200, 404, 404, 404, 200),
        body={}, note="leads and staff rescore; the empty form comes back with its errors"),
    Row("monitoring:answer_rescore", "GET", "/answers/{answer_a}/rescore/",
                                                        (L, L, 405, 405, 405, 405, 405, 405)),
    Row("monitoring:answer_judge_on_demand", "POST", "/answers/{answer_a}/judge/",
                                                        (L, L, 403, 200, 404, 404, 404, 200),
        body={}, note="leads and staff judge on demand; without `confirm`: the confirmation"),
    Row("monitoring:answer_judge_on_demand", "GET", "/answers/{answer_a}/judge/",
                                                        (L, L, 405, 405, 405, 405, 405, 405)),
    Row("monitoring:judge_run_retry", "POST", "/answers/{answer_a}/runs/{run_a}/retry/",
                                                        (L, L, 403, 200, 404, 404, 404, 200),
        body={}, note="without `confirm`: the confirmation page"),
    # The blind answer is alone in a similarity and a chunk-count bucket (and one of two in
    # its week): the lead sees its score there, its expert no figure on fewer than 5 answers.
    Row("monitoring:use_case", "GET", "/use-cases/{a}/",
                                                        (L, L, B, S, 404, 404, 404, S)),
    Row("monitoring:use_case", "GET", "/use-cases/{a}/?pooled=1",
                                                        (L, L, B, S, 404, 404, 404, S)),
    Row("monitoring:use_case", "GET", "/use-cases/{a}/?pooled=13",
                                                        (L, L, B, S, 404, 404, 404, S)),
    Row("monitoring:use_case_judge", "GET", "/use-cases/{a}/judge/",
                                                        (L, L, B, S, 404, 404, 404, S)),
    Row("monitoring:use_case_judge_mode", "POST", "/use-cases/{a}/judge/mode/",
                                                        (L, L, 403, 400, 404, 404, 404, 400),
        body={}, note="no mode given: a 400 saying which modes there are"),
    Row("monitoring:use_case_judge_evidence", "POST", "/use-cases/{a}/judge/evidence/",
                                                        (L, L, 403, 400, 404, 404, 404, 400),
        body={}, note="no value given: a 400 saying that it is 1 or 0"),
    Row("monitoring:use_case_tune", "POST", "/use-cases/{a}/settings/",
                                                        (L, L, 403, 400, 404, 404, 404, 400),
        body={}, note="no setting given: the page with the form's error"),
    Row("monitoring:use_case_tune", "GET", "/use-cases/{a}/settings/",
                                                        (L, L, 405, 405, 405, 405, 405, 405)),
    Row("monitoring:use_case_segment_keys", "POST", "/use-cases/{a}/segment-keys/",
                                                        (L, L, 403, 400, 404, 404, 404, 400),
        body={"segment_keys": "kan$al"}, note="a bad key list: the page with the form's error"),
    Row("monitoring:use_case_segment_keys", "GET", "/use-cases/{a}/segment-keys/",
                                                        (L, L, 405, 405, 405, 405, 405, 405)),
    Row("monitoring:use_case_rescore_week", "POST", "/use-cases/{a}/judge/rescore/",
                                                        (L, L, 403, 200, 404, 404, 404, 200),
        body={}),
    Row("monitoring:use_case_retry_failed", "POST", "/use-cases/{a}/judge/retry-failed/",
                                                        (L, L, 403, 302, 404, 404, 404, 302),
        body={}, note="nothing failed: a message, back to the judge page"),
    # --- weekly review: an item is its use case's experts' alone
    Row("review:queue", "GET", "/review/",              (L, L, 200, 200, 200, 200, 200, 200)),
    Row("review:item", "GET", "/review/items/{item_a}/",
                                                        (L, L, 200, 404, 404, 404, 404, 404)),
    Row("review:item", "POST", "/review/items/{item_a}/",
                                                        (L, L, 405, 405, 405, 405, 405, 405)),
    Row("review:item_save", "POST", "/review/items/{item_a}/save/",
                                                        (L, L, 302, 404, 404, 404, 404, 404),
        body={}),
    Row("review:item_submit", "POST", "/review/items/{item_a}/submit/",
                                                        (L, L, 302, 404, 404, 404, 404, 404),
        body={}, note="nothing labelled: refused with a message, back to the item"),
    Row("review:item_reopen", "POST", "/review/items/{item_a}/reopen/",
                                                        (L, L, 302, 404, 404, 404, 404, 404),
        body={}),
    Row("review:calibration", "GET", "/review/calibration/{a}/",
                                                        (L, L, B, 200, 404, 404, 404, 200)),
    # The experts' submitted reviews behind the calibration page: whoever may open that page
    # reads them (an expert too: what is submitted is no longer blind).
    Row("review:calibration_reviews", "GET", "/review/calibration/{a}/reviews/",
                                                        (L, L, B, 200, 404, 404, 404, 200)),
    Row("review:calibration_review", "GET", "/review/calibration/{a}/reviews/{reviewed_a}/",
                                                        (L, L, 200, 200, 404, 404, 404, 200)),
    Row("review:calibration_review", "GET", "/review/calibration/{b}/reviews/{reviewed_a}/",
                                                        (L, L, 404, 404, 404, 404, 404, 404),
        note="a review is read under its own use case only; staff too get a 404 elsewhere"),
    Row("review:calibration_review", "GET", "/review/calibration/{a}/reviews/{item_a}/",
                                                        (L, L, 404, 404, 404, 404, 404, 404),
        note="not submitted: nothing to read, and nothing blind to leak"),
    # The judge comparison: whoever may open the calibration page sees the comparisons; its
    # leads and staff start them (a first post shows the cost) and adopt a candidate.
    Row("review:judges", "GET", "/review/calibration/{a}/judges/",
                                                        (L, L, B, 200, 404, 404, 404, 200)),
    Row("review:judges", "POST", "/review/calibration/{a}/judges/",
                                                        (L, L, 403, 200, 404, 404, 404, 200),
        body={"judge_model": "kandidat-x", "judge_mode": "batched", "answers": 5},
        note="no confirm: the expected cost, nothing started"),
    Row("review:judge_comparison", "GET", "/review/calibration/{a}/judges/999999/",
                                                        (L, L, 404, 404, 404, 404, 404, 404),
        note="no such comparison"),
    Row("review:judge_comparison_adopt", "POST", "/review/calibration/{a}/judges/999999/adopt/",
                                                        (L, L, 403, 404, 404, 404, 404, 404),
        body={}),
    # --- self-consistency investigations: the use case's experts see them, its leads and staff
    # start and cancel them
    Row("investigations:list", "GET", "/investigations/",
                                                        (L, L, 200, 200, 200, 200, 200, 200)),
    Row("investigations:new", "GET", "/investigations/new/",
                                                        (L, L, 403, 200, 403, 200, 403, 200)),
    Row("investigations:new", "POST", "/investigations/new/",
                                                        (L, L, 403, 400, 403, 400, 403, 400),
        body={}, note="an empty form is refused with its errors"),
    Row("investigations:detail", "GET", "/investigations/{inv_a}/",
                                                        (L, L, B, 200, 404, 404, 404, 200)),
    Row("investigations:progress", "GET", "/investigations/{inv_a}/progress.json",
                                                        (L, L, B, 200, 404, 404, 404, 200)),
    Row("investigations:new", "GET", "/investigations/new/?use_case={a}&selection=below&n=5",
                                                        (L, L, 403, 200, 403, 200, 403, 200),
        note="the preview lists the answers below the threshold"),
    Row("investigations:cancel", "GET", "/investigations/{inv_a}/cancel/",
                                                        (L, L, 405, 405, 405, 405, 405, 405)),
    Row("investigations:cancel", "POST", "/investigations/{inv_a}/cancel/",
                                                        (L, L, 403, 302, 404, 404, 404, 302),
        body={}),
    # --- alarm channels: staff set them up; who may not see the use case gets a 404
    Row("alarms:channels", "GET", "/use-cases/{a}/alarm-channels/",
                                                        (L, L, 403, 403, 404, 404, 404, 200)),
    Row("alarms:channels", "GET", "/use-cases/{b}/alarm-channels/",
                                                        (L, L, 404, 404, 403, 403, 404, 200)),
    Row("alarms:channels", "POST", "/use-cases/{a}/alarm-channels/",
                                                        (L, L, 403, 403, 404, 404, 404, 400),
        body={}, note="an empty form is refused with its errors"),
    Row("alarms:channel", "GET", "/use-cases/{a}/alarm-channels/{chan_a}/",
                                                        (L, L, 403, 403, 404, 404, 404, 200)),
    Row("alarms:channel", "GET", "/use-cases/{b}/alarm-channels/{chan_a}/",
                                                        (L, L, 404, 404, 403, 403, 404, 404),
        note="a channel is found under its own use case only"),
    Row("alarms:channel", "POST", "/use-cases/{a}/alarm-channels/{chan_a}/",
                                                        (L, L, 403, 403, 404, 404, 404, 400),
        body={}),
    Row("alarms:channel_test", "GET", "/use-cases/{a}/alarm-channels/{chan_a}/test/",
                                                        (L, L, 403, 403, 404, 404, 404, 405)),
    Row("alarms:channel_test", "POST", "/use-cases/{a}/alarm-channels/{chan_a}/test/",
                                                        (L, L, 403, 403, 404, 404, 404, 302),
        body={}, note="nobody listens at the address: the error as a message, back to the page"),
    Row("alarms:channel_delete", "POST", "/use-cases/{a}/alarm-channels/{chan_a}/delete/",
                                                        (L, L, 403, 403, 404, 404, 404, 302),
        body={}, note="after the other channel rows: staff delete it"),
    # --- last: ends the session
    Row("logout", "GET", "/logout/",                    (405, 405, 405, 405, 405, 405, 405, 405)),
    Row("logout", "POST", "/logout/",                   (TO_LOGIN,) * 8),
]

# The admin's own pages are Django's; the index and one changelist stand for them.
ADMIN_ROWS = {"admin:index", "admin:monitoring_service_changelist"}


def url_pattern_names() -> set[str]:
    def walk(resolver: URLResolver, namespace: str | None) -> Any:
        for p in resolver.url_patterns:
            if isinstance(p, URLResolver):
                inner = ":".join(x for x in (namespace, p.namespace) if x) or None
                yield from walk(p, inner)
            elif isinstance(p, URLPattern):
                yield f"{namespace}:{p.name}" if namespace else (p.name or str(p.pattern))

    return set(walk(get_resolver(), None))


def test_every_url_pattern_has_a_row() -> None:
    names = {n for n in url_pattern_names() if not n.startswith("admin:")}
    covered = {row.name for row in ROWS}
    missing = sorted(names - covered)
    assert not missing, f"URL patterns without a row in the permission matrix: {missing}"
    stale = sorted(covered - names - ADMIN_ROWS)
    assert not stale, f"rows for URL patterns that no longer exist: {stale}"


@pytest.fixture
def world(world_builder: WorldBuilder, db: None) -> World:
    return build_world(world_builder)


def client_for(world: World, role: str) -> tuple[Client, Environ]:
    client = Client()
    if role == "service":
        return client, bearer(world.key_a)
    if role != "anonymous":
        client.force_login(world.users[role])
    return client, {}


def fill(path: str, world: World) -> str:
    return path.format(
        answer_a=world.answer_a.pk, answer_b=world.answer_b.pk, run_a=world.run_a.pk,
        item_a=world.item_a.pk, inv_a=world.investigation_a.pk, a=world.a.slug, b=world.b.slug,
        blind_a=world.blind_a.pk, reviewed_a=world.reviewed_a.pk, chan_a=world.channel_a.pk,
        ext_a=quote(world.answer_a.external_id), ext_b=quote(world.answer_b.external_id),
    )


def check(response: Any, expected: Any, path: str) -> str | None:
    status = response.status_code
    location = response.get("Location")
    if expected == LOGIN:
        ok = status == 302 and location == f"/login/?next={quote(path, safe='/')}"
    elif expected == ADMIN_LOGIN:
        ok = status == 302 and location == f"/admin/login/?next={path}"
    elif isinstance(expected, Redirect):
        ok = status == 302 and location == expected.location
    elif isinstance(expected, Blind | Sees):
        body = b"".join(response) if response.streaming else response.content
        if response.get("Content-Type") == XLSX:
            text = read_sheet(body).text()  # a zip: its cells, numbers as stored
        else:
            text = body.decode()
        shown = _BLIND_SCORE.findall(text)
        ok = status == expected.status and bool(shown) == isinstance(expected, Sees)
        if not ok:
            return f"expected {expected}, got {status} showing {shown}"
    else:
        ok = status == expected
    if ok:
        return None
    got = f"{status}" + (f" → {location}" if location else "")
    return f"expected {expected}, got {got}"


@pytest.mark.parametrize("role", ROLES)
def test_permission_matrix(world: World, role: str) -> None:
    client, headers = client_for(world, role)
    wrong = []
    for row in ROWS:
        path = fill(row.path, world)
        if row.json:
            response = client.generic(row.method, path, json.dumps(row.body),
                                      content_type="application/json", **headers)
        elif row.method == "POST":
            response = client.post(path, row.body or {}, **headers)
        else:
            response = client.generic(row.method, path, **headers)
        problem = check(response, row.expected[role], path)
        if problem:
            wrong.append(f"{row.method} {path} ({row.name}): {problem}")
    assert not wrong, f"{role}:\n" + "\n".join(wrong)
