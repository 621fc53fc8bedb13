"""Hostile strings from the RAG services, end to end: every one is either refused at the API with
a 400 that names the field, or stored as sent and shown inert on every page that shows it —
the answer list and detail, the use case's judge page, the review queue and item, the
calibration page, the overview and use-case dashboard, the CSV export and the Django admin.

Answers come in through the real ingest API and are judged through the real judge service
against the local OpenAI-compatible server, whose claims carry hostile text too.
"""

from __future__ import annotations

import csv
import io
import json
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from common.domain.weeks import shift_week
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, Chunk, JudgeRun
from monitoring.services.use_cases import service_create
from review import services as review_services

# The review tests' world (use case, service, judge, users of every role), used here as is.
from tests.review.conftest import ReviewWorld, review_world, week_time  # noqa: F401

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE
HTML = "<b>fett</b><a href=javascript:alert(1)>link</a>"
CSV_INJECTIONS = ['=HYPERLINK("http://evil.example","klick")', "+cmd|' /C calc'!A0", "@SUM(1+1)",
                  "-1+1"]
MB_WORD = "W" * 1_000_000
# Pages and the export must stay quick with the longest texts the API accepts.
MAX_PAGE_SECONDS = 5.0

# Every place a RAG service can put text, and how to put a value there.
FIELDS = {
    "question": lambda body, v: body.update(question=v),
    "answer": lambda body, v: body.update(answer=v),
    "chunks[0].text": lambda body, v: body["chunks"][0].update(text=v),
    "chunks[0].source": lambda body, v: body["chunks"][0].update(source=v),
    "chunks[0].id": lambda body, v: body["chunks"][0].update(id=v),
    "external_id": lambda body, v: body.update(external_id=v),
    "model": lambda body, v: body.update(model=v),
    "metadata": lambda body, v: body.update(metadata={"note": v, v[:50]: 1}),
}
STORED_AS_SENT = {
    "script": SCRIPT,
    "img onerror": IMG,
    "html": HTML,
    "rtl override": f"abc{RLO}fed",
    **{f"csv {s[0]}": s for s in CSV_INJECTIONS},
}
REFUSED = {"nul": "a\x00b", "lone surrogate": "a\ud800b", "1 MB word": MB_WORD}


def body_for(external_id: str) -> dict[str, Any]:
    return {
        "external_id": external_id,
        "use_case": "kundenservice",
        "question": "Wie oft muss der Behälter geprüft werden?",
        "answer": "Der Behälter muss alle 5 Jahre geprüft werden.",
        "model": "gpt-4o-mini",
        "chunks": [{"text": "Prüfintervall: 5 Jahre.", "id": "d#1", "score": 0.8,
                    "source": "Ordnung.pdf"}],
        "metadata": {},
    }


def post_raw(client: Client, key: str, raw: bytes, url: str = "/api/v1/answers") -> Any:
    return client.post(url, raw, content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {key}")


def error_fields(response: Any) -> list[str]:
    assert response["Content-Type"].startswith("application/json")
    errors = response.json()["errors"]
    assert errors and all(e["message"] for e in errors)
    return [e["field"] for e in errors]


# --- At the API: stored as sent, or a 400 naming the field ---------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("field", list(FIELDS))
def test_hostile_text_in_every_field_is_stored_as_sent(client, service_and_key, field):
    _, key = service_and_key
    for n, (name, value) in enumerate(STORED_AS_SENT.items()):
        body = body_for(f"stored-{n}")
        FIELDS[field](body, value)
        response = post_raw(client, key, json.dumps(body).encode())
        assert response.status_code == 201, (name, response.content[:300])
        detail = client.get(f"/api/v1/answers/{response.json()['id']}",
                            HTTP_AUTHORIZATION=f"Bearer {key}").json()
        answer = Answer.objects.get(pk=detail["id"])
        chunk = Chunk.objects.get(answer=answer)
        stored = {
            "question": answer.question, "answer": answer.text, "chunks[0].text": chunk.text,
            "chunks[0].source": chunk.source, "chunks[0].id": chunk.source_chunk_id,
            "external_id": answer.external_id, "model": answer.model,
            "metadata": answer.metadata.get("note"),
        }[field]
        assert stored == value, name  # not stripped, not escaped in the database


@pytest.mark.django_db
@pytest.mark.parametrize("field", list(FIELDS))
@pytest.mark.parametrize("kind", list(REFUSED))
def test_unstorable_text_is_a_400_naming_the_field(client, service_and_key, field, kind):
    _, key = service_and_key
    body = body_for("refused")
    FIELDS[field](body, REFUSED[kind])
    # ensure_ascii writes the lone surrogate as \ud800, as a client's JSON library would.
    response = post_raw(client, key, json.dumps(body).encode("ascii"))
    assert response.status_code in (400, 413), response.content[:300]
    if response.status_code == 400:
        fields = error_fields(response)
        assert any(f == field or f.startswith(field.split(".")[0]) for f in fields), fields
    assert not Answer.objects.exists()


def _nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "raw", "field"),
    [
        ("invalid UTF-8 in a string", b'{"external_id": "x\xff\xfey", "use_case": "k"}', ""),
        ("a raw NUL byte in a string", b'{"external_id": "x\x00y", "use_case": "k"}', ""),
        ("metadata nested 40 deep", _nested(40), "metadata"),
        ("metadata nested 100 000 deep", _nested(100_000), ""),
    ],
)
def test_malformed_bodies_are_a_clear_400(client, service_and_key, name, raw, field):
    _, key = service_and_key
    if isinstance(raw, str):  # nested metadata in an otherwise valid answer
        raw = json.dumps(body_for("deep")).replace('"metadata": {}', f'"metadata": {raw}')
        raw = raw.encode()
    response = post_raw(client, key, raw)
    assert response.status_code == 400, (name, response.content[:300])
    assert field in error_fields(response)
    batch = post_raw(client, key, b'{"answers": [' + raw + b"]}", "/api/v1/answers/batch")
    if field or "nested" in name:
        # The batch itself is fine; its one item is refused on its own, the field named where
        # the item could be read (an item too deep to read at all is refused as a whole).
        assert batch.status_code == 200, batch.content[:300]
        (item,) = batch.json()["results"]
        assert item["status"] == 400 and field in [e["field"] for e in item["errors"]]
    else:
        assert batch.status_code == 400, (name, batch.content[:300])
        error_fields(batch)
    assert not Answer.objects.exists()


# --- On every page: inert ---------------------------------------------------------------------


def ingest(client: Client, key: str, body: dict[str, Any]) -> Answer:
    response = post_raw(client, key, json.dumps(body).encode())
    assert response.status_code == 201, response.content[:300]
    return Answer.objects.get(pk=response.json()["id"])


def judge(world: ReviewWorld, answer: Answer, claims: list[str]) -> None:
    world.judge.claims = claims
    world.judge.verdicts.update({c: "GEDECKT" for c in claims})
    run = JudgeRun.objects.get(answer=answer, status=JudgeRun.Status.PENDING)
    assert judge_run_execute(run_id=run.pk) == "scored"


def assert_inert(html: str, where: str) -> None:
    assert "<script>alert" not in html, where
    assert "<img src=x" not in html, where
    if "<b>fett</b>" in html or "<a href=javascript:" in html:
        at = max(html.find("<b>fett</b>"), html.find("<a href=javascript:"))
        raise AssertionError(f"{where}: live HTML from the input: {html[at - 300:at + 100]}")
    # Escaped, the handler's name is still there, but never as a live attribute.
    assert "onerror=alert(1)>" not in html, where
    assert "\x00" not in html, where


@pytest.fixture
def hostile_world(request: pytest.FixtureRequest, client: Client) -> dict[str, Any]:
    """Two judged answers of last week (one hostile in every field, one with the longest words
    the API accepts) and this week's review batch drawn from them."""
    w: ReviewWorld = request.getfixturevalue("review_world")
    _, key = service_create(name="feindlich", use_cases=[w.use_case])
    this_week = review_services.current_week()
    week = shift_week(this_week, -1)
    created = week_time(week).isoformat()
    hostile = body_for('=HYPERLINK("x")' + IMG)
    hostile.update(
        use_case=w.use_case.slug,
        question=f"+cmd|' /C calc'!A0 {SCRIPT} {IMG} {HTML} {RLO}rückwärts?",
        answer=f"-1+1 {SCRIPT} Der Behälter {IMG} wird {RLO}geprüft {HTML}.",
        model=f"@SUM(1+1){SCRIPT}",
        chunks=[{"text": f"{SCRIPT}{IMG}{HTML}", "source": f"{IMG}{SCRIPT}", "id": IMG,
                 "score": 0.4}],
        metadata={"note": SCRIPT, IMG: "=1+1", "tief": {"x": [HTML]}},
        created_at=created,
    )
    answer = ingest(client, key, hostile)
    judge(w, answer, [f"Aussage {SCRIPT}.", f"Bild {IMG}.", f"=SUM(A1) {HTML}"])
    long = body_for("lang")
    long.update(
        use_case=w.use_case.slug,
        question="Q" * 50_000,
        answer="A" * 100_000,
        chunks=[{"text": "C" * 100_000, "source": "S" * 500, "id": "I" * 200}],
        # The one place a 1 MB word is accepted (messages may hold 2 MB): stored for re-asks,
        # shown by the admin.
        messages=[{"role": "user", "content": MB_WORD}],
        created_at=created,
    )
    long_answer = ingest(client, key, long)
    judge(w, long_answer, ["L" * 5_000])
    batch = review_services.review_batch_create(use_case=w.use_case, week=this_week).batch
    assert batch is not None and batch.items.count() == 2
    client.logout()
    return {"answer": answer, "long": long_answer, "batch": batch, "world": w}


def get(client: Client, path: str) -> tuple[str, Any]:
    started = time.monotonic()
    response = client.get(path)
    # getvalue(): the content, or the streamed content joined.
    body = response.getvalue().decode()
    seconds = time.monotonic() - started
    assert response.status_code == 200, (path, response.status_code, body[:500])
    assert seconds < MAX_PAGE_SECONDS, f"{path} took {seconds:.1f} s"
    return body, response


@pytest.mark.timing
@pytest.mark.django_db
def test_hostile_text_is_inert_on_every_page(hostile_world, client):
    w = hostile_world["world"]
    answer, long_answer, batch = hostile_world["answer"], hostile_world["long"], hostile_world[
        "batch"]
    slug = w.use_case.slug
    items = {i.answer_id: i for i in batch.items.all()}
    admin = User.objects.create_superuser("root", "root@example.org", "pw-root-31c")
    answer.refresh_from_db()
    run = answer.current_run

    pages = {
        w.users["lead"]: [
            "/answers/", f"/answers/{answer.pk}/", f"/answers/{long_answer.pk}/",
            f"/use-cases/{slug}/judge/", "/overview/", f"/use-cases/{slug}/",
            f"/review/calibration/{slug}/",
        ],
        w.users["expert"]: [
            "/review/", f"/review/items/{items[answer.pk].pk}/",
            f"/review/items/{items[long_answer.pk].pk}/",
        ],
        admin: [
            "/admin/monitoring/answer/", f"/admin/monitoring/answer/{answer.pk}/change/",
            f"/admin/monitoring/answer/{long_answer.pk}/change/",
            "/admin/monitoring/judgerun/", f"/admin/monitoring/judgerun/{run.pk}/change/",
            "/admin/monitoring/answer/?q=%3Cscript%3E",
        ],
    }
    shown = set()
    for user, paths in pages.items():
        client.force_login(user)
        for path in paths:
            html, _ = get(client, path)
            assert_inert(html, path)
            if "&lt;script&gt;alert(1)&lt;/script&gt;" in html or "&lt;img src=x" in html:
                shown.add(path)
    # The hostile text is shown (escaped) where answers are shown, not just left out; the
    # use-case page shows the generator model as a segment (issue 40). (The overview and the
    # calibration page show figures, no text of an answer; they are checked above all the same.)
    assert shown == {
        "/answers/", f"/answers/{answer.pk}/", f"/use-cases/{slug}/", f"/use-cases/{slug}/judge/",
        "/review/",
        f"/review/items/{items[answer.pk].pk}/", "/admin/monitoring/answer/",
        f"/admin/monitoring/answer/{answer.pk}/change/", "/admin/monitoring/answer/?q=%3Cscript%3E",
        "/admin/monitoring/judgerun/", f"/admin/monitoring/judgerun/{run.pk}/change/",
    }, "|".join(sorted(shown))

    # The detail page shows every field as sent, escaped.
    client.force_login(w.users["lead"])
    html, _ = get(client, f"/answers/{answer.pk}/")
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and RLO in html
    assert "Aussage &lt;script&gt;alert(1)&lt;/script&gt;." in html
    long_html, _ = get(client, f"/answers/{long_answer.pk}/")
    assert "A" * 100_000 in long_html and "C" * 100_000 in long_html
    client.force_login(admin)
    admin_html, _ = get(client, f"/admin/monitoring/answer/{long_answer.pk}/change/")
    assert MB_WORD in admin_html


@pytest.mark.timing
@pytest.mark.django_db
def test_the_csv_export_neutralises_formulas(hostile_world, client):
    client.force_login(hostile_world["world"].users["lead"])
    text, response = get(client, "/answers/export.csv")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    by_id = {int(r["id"]): r for r in rows}
    row = by_id[hostile_world["answer"].pk]
    for column in ("external_id", "question", "answer", "model"):
        assert not row[column].startswith(("=", "+", "-", "@")), (column, row[column])
        assert row[column].startswith("'"), column
    assert row["external_id"] == "'" + hostile_world["answer"].external_id
    assert row["question"] == "'" + hostile_world["answer"].question
    assert row["answer"] == "'" + hostile_world["answer"].text
    assert row["model"] == "'" + hostile_world["answer"].model
    for cells in rows:
        for column, value in cells.items():
            assert not value.startswith(("=", "+", "@")), (column, value[:80])
            if value.startswith("-"):  # a negative number is a number, not a formula
                float(value)
    assert by_id[hostile_world["long"].pk]["answer"] == "A" * 100_000


@pytest.mark.django_db
@pytest.mark.parametrize("path", [
    "/answers/?week=%00", "/answers/?use_case=%00", "/answers/?date_from=%00&sort=%00",
    "/answers/?score_min=%00", "/answers/export.csv?week=%00", "/answers/?page=%00",
    "/use-cases/recht/judge/?week=%00", "/admin/monitoring/answer/?q=%00",
    "/admin/monitoring/judgerun/?q=a%00b", "/review/?week=%00",
])
def test_nul_bytes_in_query_strings_are_never_a_500(request, client, path):
    request.getfixturevalue("review_world")
    admin = User.objects.create_superuser("root", "root@example.org", "pw-root-31c")
    client.force_login(admin)
    client.raise_request_exception = False
    response = client.get(path)
    assert response.status_code < 500, (path, response.status_code)
