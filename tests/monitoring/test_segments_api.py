"""Segments (issue 40) through the product: what ingest keeps of them (prompt version, the
first chunk's source, declared metadata keys and their bounds), the breakdown endpoint, the
estimates restricted to segments, the changes found from the data, and the 400s that name
what is allowed."""

import io
from datetime import datetime, time, timedelta
from typing import Any

import pytest
from django.http import StreamingHttpResponse
from django.test import Client
from django.utils import timezone

from dashboard.selectors.segments import team_changes
from dashboard.selectors.weeks import iso_weeks
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, JudgeRun
from tests.support.http import bearer
from tests.support.judged import Judge
from tests.support.world import WorldBuilder

ANSWERS = "/api/v1/answers"


def _last_week_at(hour: int = 12) -> datetime:
    today = timezone.localdate()
    wednesday = today - timedelta(days=today.weekday() + 5)
    return datetime.combine(wednesday, time(hour), tzinfo=timezone.get_current_timezone())


def _week(day: datetime) -> str:
    year, week, _ = day.date().isocalendar()
    return f"{year}-W{week:02d}"


@pytest.fixture
def world(world_builder: WorldBuilder, db: None) -> dict[str, Any]:
    judge = world_builder.judge(Judge())
    use_case = world_builder.use_case("segmente", "Segmente", sample_rate=1.0)
    use_case.segment_keys = ["kanal"]
    use_case.save(update_fields=["segment_keys"])
    service, key = world_builder.service("seg-bot", use_case)
    lead = world_builder.user("leitung", lead_of=[use_case])
    when = _last_week_at()
    # Twelve answers of each model, all judged: "alt" fully supported, "neu" invented.
    for i in range(24):
        model = "alt" if i < 12 else "neu"
        text = f"Antwort {i}: Der Behälter wird alle 5 Jahre geprüft."
        claim = f"Aussage {i}."
        judge.script(text, [(claim, "GEDECKT" if model == "alt" else "UNGEDECKT")])
        answer = world_builder.answer(
            service, use_case, f"s-{i}", text, model=model, created_at=when,
            prompt_version="v1" if i % 2 else "v2",
            metadata={"kanal": "chat" if i % 3 else "mail", "frei": {"tief": [1]}},
            chunks=[{"text": "Prüfintervall: 5 Jahre.", "score": 0.8,
                     "source": "wiki" if i % 2 else "handbuch.pdf"},
                    {"text": "Anderes.", "source": "anders"}],
        )
        for run in answer.judge_runs.filter(status=JudgeRun.Status.PENDING):
            judge_run_execute(run_id=run.pk)
    return {"use_case": use_case, "service": service, "key": key, "lead": lead,
            "week": _week(when)}


def _lead(world: dict[str, Any]) -> Client:
    client = Client()
    client.force_login(world["lead"])
    return client


def test_ingest_keeps_the_prompt_version_and_the_first_chunks_source(world: dict) -> None:
    answer = Answer.objects.get(external_id="s-1")
    assert (answer.prompt_version, answer.source, answer.model) == ("v1", "wiki", "alt")
    assert answer.metadata["kanal"] == "chat"


def test_the_completions_system_fingerprint_is_the_prompt_version_where_none_is_given(
    world: dict, client: Client,
) -> None:
    completion = {
        "id": "c-1", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Alle 5 Jahre."},
                     "finish_reason": "stop", "logprobs": None}],
    }
    body = {"external_id": "fp-1", "use_case": "segmente", "question": "Wie oft?",
            "completion": completion}
    response = client.post(ANSWERS, body, content_type="application/json",
                           **bearer(world["key"]))
    assert response.status_code == 201, response.content
    assert Answer.objects.get(external_id="fp-1").prompt_version == "fp_44709d6fcb"
    body = {**body, "external_id": "fp-2", "prompt_version": "rag-7"}
    response = client.post(ANSWERS, body, content_type="application/json",
                           **bearer(world["key"]))
    assert response.status_code == 201, response.content
    assert Answer.objects.get(external_id="fp-2").prompt_version == "rag-7"
    detail = client.get(f"{ANSWERS}/{response.json()['id']}", **bearer(world["key"])).json()
    assert detail["prompt_version"] == "rag-7"


@pytest.mark.parametrize(("metadata", "field"), [
    ({"kanal": {"nested": 1}}, "metadata.kanal"),
    ({"kanal": "x" * 201}, "metadata.kanal"),
    ({f"k{i}": i for i in range(51)}, "metadata"),
    ({"k" * 101: 1}, "metadata"),
])
def test_bad_metadata_is_a_400_naming_it_and_nothing_is_stored(
    world: dict, client: Client, metadata: dict, field: str,
) -> None:
    body = {"external_id": "bad-1", "use_case": "segmente", "question": "Wie oft?",
            "answer": "Alle 5 Jahre.", "model": "m", "metadata": metadata}
    response = client.post(ANSWERS, body, content_type="application/json",
                           **bearer(world["key"]))
    assert response.status_code == 400, response.content
    assert [e["field"] for e in response.json()["errors"]] == [field]
    assert not Answer.objects.filter(external_id="bad-1").exists()
    # In a batch only the bad item is refused.
    good = {**body, "external_id": "good-1", "metadata": {"kanal": "chat"}}
    response = client.post(f"{ANSWERS}/batch", {"answers": [body, good]},
                           content_type="application/json", **bearer(world["key"]))
    assert [r["status"] for r in response.json()["results"]] == [400, 201]


def test_a_prompt_version_over_100_characters_is_a_400(world: dict, client: Client) -> None:
    body = {"external_id": "pv-1", "use_case": "segmente", "question": "Wie oft?",
            "answer": "Alle 5 Jahre.", "model": "m", "prompt_version": "v" * 101}
    response = client.post(ANSWERS, body, content_type="application/json",
                           **bearer(world["key"]))
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "prompt_version"


def test_the_breakdown_by_model_shows_each_model_and_the_corrected_difference(
    world: dict,
) -> None:
    url = (f"/api/v1/use-cases/segmente/segments?dimension=model&from={world['week']}"
           f"&to={world['week']}")
    data = _lead(world).get(url).json()
    assert data["dimension"] == "model" and data["weeks"] == [world["week"]]
    assert data["dimensions"] == ["model", "service", "prompt_version", "source",
                                  "metadata.kanal"]
    by = {s["value"]: s for s in data["segments"]}
    assert set(by) == {"alt", "neu"}
    assert (by["alt"]["volume"], by["neu"]["volume"]) == (12, 12)
    assert by["alt"]["estimate"]["value"] == pytest.approx(1.0)
    assert by["neu"]["estimate"]["value"] == pytest.approx(0.0)
    assert by["neu"]["share_below_threshold"]["value"] == pytest.approx(1.0)
    difference = by["neu"]["difference"]
    assert difference["value"] == pytest.approx(-1.0)
    assert difference["holds"] is True and difference["compared"] == 1
    assert difference["high"] < 0
    # The other dimensions: services, prompt versions, the first chunk's source, a key.
    for dimension, values in (("service", {"seg-bot"}), ("prompt_version", {"v1", "v2"}),
                              ("source", {"wiki", "handbuch.pdf"}),
                              ("metadata.kanal", {"chat", "mail"})):
        data = _lead(world).get(url.replace("dimension=model", f"dimension={dimension}")).json()
        assert {s["value"] for s in data["segments"]} == values, dimension
        assert sum(s["volume"] for s in data["segments"]) == 24


def test_the_estimates_restricted_to_a_segment(world: dict, client: Client) -> None:
    week = world["week"]
    base = f"/api/v1/use-cases/segmente/estimates?from={week}&to={week}"
    whole = client.get(base, **bearer(world["key"])).json()
    assert whole["segments"] == []
    assert whole["weeks"][0]["estimate"]["population"] == 24
    neu = client.get(base + "&segment=model:neu", **bearer(world["key"])).json()
    assert neu["segments"] == ["model:neu"]
    [figures] = neu["weeks"]
    assert figures["estimate"]["population"] == 12
    assert figures["estimate"]["value"] == pytest.approx(0.0)
    # Two values of one dimension select either; another dimension narrows.
    both = client.get(base + "&segment=model:neu&segment=model:alt",
                      **bearer(world["key"])).json()
    assert both["weeks"][0]["estimate"]["population"] == 24
    narrow = client.get(base + "&segment=model:neu&segment=metadata.kanal:mail",
                        **bearer(world["key"])).json()
    mail_neu = Answer.objects.filter(model="neu", metadata__kanal="mail").count()
    assert narrow["weeks"][0]["estimate"]["population"] == mail_neu == 4
    assert narrow["weeks"][0]["volume"] == 4


@pytest.mark.parametrize(("path", "field"), [
    ("segments?dimension=metadata.sprache", "dimension"),
    ("segments?dimension=modell", "dimension"),
    ("estimates?segment=modell:x", "segment"),
    ("estimates?segment=model", "segment"),
    ("estimates?segment=metadata.sprache:de", "segment"),
])
def test_an_unknown_dimension_is_a_400_that_names_the_allowed(
    world: dict, client: Client, path: str, field: str,
) -> None:
    response = client.get(f"/api/v1/use-cases/segmente/{path}", **bearer(world["key"]))
    assert response.status_code == 400, response.content
    [error] = response.json()["errors"]
    assert error["field"] == field
    assert "metadata.kanal" in error["message"]


def test_the_segments_need_a_reader(world: dict, client: Client) -> None:
    assert client.get("/api/v1/use-cases/segmente/segments?dimension=model").status_code == 401
    response = client.get("/api/v1/use-cases/fremd/segments?dimension=model",
                          **bearer(world["key"]))
    assert response.status_code == 404


def test_a_model_switch_is_found_with_the_figures_before_and_after(
    world_builder: WorldBuilder, world: dict,
) -> None:
    use_case, service = world["use_case"], world["service"]
    now = timezone.localtime()
    weeks = iso_weeks(weeks=4, until=now)
    for w, week in enumerate(weeks[:-1]):
        for i in range(25 if w < 2 else 60):
            world_builder.answer(
                service, use_case, f"w{w}-{i}", f"Antwort {w}/{i}.",
                model="alt" if w < 2 else "llama-2-7b-chat",
                created_at=week.start + timedelta(days=2, hours=i % 10),
            )
    found = team_changes(use_case=use_case, weeks=weeks)
    models = [c for c in found if c.change.dimension == "model"]
    assert [(c.week.label, c.change.before, c.change.after) for c in models] == [
        (weeks[2].label, "alt", "llama-2-7b-chat")]
    # The fixture's 24 answers of last week came from "alt" and "neu".
    assert models[0].change.share == pytest.approx(60 / 84)
    assert models[0].before.population == 50 and models[0].after.population == 84


# --- the use-case page ----------------------------------------------------------------------


def test_the_page_opens_the_causes_with_the_largest_difference_that_holds(world: dict) -> None:
    response = _lead(world).get("/use-cases/segmente/")
    assert response.status_code == 200
    html = response.content.decode()
    segments = html[html.index('id="segments"'):html.index('class="card dash-causes"')]
    assert 'data-segment="alt"' in segments and 'data-segment="neu"' in segments
    assert "hält" in segments
    causes = html[html.index('class="card dash-causes"'):]
    finding = causes[causes.index('data-reading="segment-finding"'):]
    assert finding.index("Generator-Modell neu") < finding.index("Die Ursachen aus dem Artikel")
    assert "Unterschied −1,00" in finding
    assert "Ursachen liegen selten beim Modell" not in html


def test_the_page_breaks_down_by_a_declared_key_and_refuses_an_unknown_one(world: dict) -> None:
    html = _lead(world).get("/use-cases/segmente/?dimension=metadata.kanal").content.decode()
    table = html[html.index('class="compare numbers segment-table"'):]
    table = table[:table.index("</table>")]
    assert 'data-dimension="metadata.kanal"' in table
    assert 'data-segment="chat"' in table and 'data-segment="mail"' in table
    response = _lead(world).get("/use-cases/segmente/?dimension=metadata.sprache")
    assert response.status_code == 400
    assert "metadata.kanal" in response.content.decode()


def test_segment_values_are_text_on_the_page(world_builder: WorldBuilder, world: dict) -> None:
    world_builder.answer(world["service"], world["use_case"], "x-1", "Antwort.",
                         model="<b>fett</b><script>alert(1)</script>")
    html = _lead(world).get("/use-cases/segmente/").content.decode()
    assert "<b>fett</b>" not in html and "<script>alert(1)" not in html
    assert "&lt;b&gt;fett&lt;/b&gt;" in html


def test_the_trend_marks_a_model_switch(world_builder: WorldBuilder, world: dict) -> None:
    use_case, service = world["use_case"], world["service"]
    weeks = iso_weeks(weeks=4)
    for w, week in enumerate(weeks[:-1]):
        for i in range(25 if w < 2 else 60):
            world_builder.answer(service, use_case, f"t{w}-{i}", f"Antwort {w}/{i}.",
                                 model="alt" if w < 2 else "llama-2-7b-chat",
                                 created_at=week.start + timedelta(days=2, hours=i % 10))
    html = _lead(world).get("/use-cases/segmente/").content.decode()
    assert "Generator-Modell gewechselt" in html
    assert f"Seit {weeks[2].label} kommen" in html and "llama-2-7b-chat" in html


def test_a_lead_declares_segment_keys_and_a_bad_list_is_a_400(
    world_builder: WorldBuilder, world: dict,
) -> None:
    url = "/use-cases/segmente/segment-keys/"
    response = _lead(world).post(url, {"segment_keys": "kanal, sprache abteilung"})
    assert response.status_code == 302
    world["use_case"].refresh_from_db()
    assert world["use_case"].segment_keys == ["kanal", "sprache", "abteilung"]
    response = _lead(world).post(url, {"segment_keys": "kanal, sp$rache"})
    assert response.status_code == 400
    assert "sp$rache" in response.content.decode()
    world["use_case"].refresh_from_db()
    assert world["use_case"].segment_keys == ["kanal", "sprache", "abteilung"]
    expert = world_builder.user("expertin", expert_of=[world["use_case"]])
    client = Client()
    client.force_login(expert)
    assert client.post(url, {"segment_keys": "x"}).status_code == 403


# --- the explorer and its exports ------------------------------------------------------------


def test_the_explorer_and_its_exports_filter_by_segment(world: dict) -> None:
    client = _lead(world)
    html = client.get("/answers/?segment=model:neu").content.decode()
    assert "12 Antworten" in html
    html = client.get("/answers/?segment=model:neu&segment=metadata.kanal:mail").content.decode()
    assert "4 Antworten" in html
    exported = client.get("/answers/export.csv?segment=model:neu")
    assert isinstance(exported, StreamingHttpResponse)
    csv = b"".join(exported.streaming_content).decode()
    rows = [line for line in csv.splitlines()[1:] if line]
    assert len(rows) == 12 and all(",neu," in row for row in rows)
    xlsx = client.get("/answers/export.xlsx?use_case=segmente&segment=prompt_version:v1")
    assert xlsx.status_code == 200
    # A dimension the use case does not have: the page drops it and says so, an export is 400.
    html = client.get("/answers/?use_case=segmente&segment=metadata.sprache:de").content.decode()
    assert "ungültig" in html and "metadata.kanal" in html
    refused = client.get("/answers/export.csv?segment=modell:neu")
    assert refused.status_code == 400 and "model" in refused.content.decode()
    # The page's segments link to their answers.
    page = client.get("/use-cases/segmente/").content.decode()
    assert "/answers/?use_case=segmente&amp;segment=model%3Aneu" in page


def test_metrics_label_the_ten_largest_models_and_other(
    world_builder: WorldBuilder, world: dict,
) -> None:
    for m in range(12):
        for i in range(12 - m):  # model m0 the largest, m11 the smallest
            world_builder.answer(world["service"], world["use_case"], f"m{m}-{i}", "Antwort.",
                                 model=f"m{m}", prompt_version="v9")
    staff = world_builder.user("betrieb", is_staff=True)
    client = Client()
    client.force_login(staff)
    text = client.get("/metrics").content.decode()
    lines = [line for line in text.splitlines()
             if line.startswith('treue_week_segment_answers{dimension="model",'
                                'use_case="segmente",')]
    values = {line.split('value="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
              for line in lines}
    assert set(values) == {f"m{m}" for m in range(10)} | {"other"}
    assert values["m0"] == 12 and values["other"] == 2 + 1
    assert ('treue_week_segment_answers{dimension="prompt_version",use_case="segmente",'
            'value="v9"} 78.0') in text


def test_the_use_case_page_restricted_to_a_segment(world: dict) -> None:
    client = _lead(world)
    whole = client.get("/use-cases/segmente/").content.decode()
    neu = client.get("/use-cases/segmente/?segment=model:neu").content.decode()
    assert 'data-segment-filter="model:neu"' in neu and "data-segment-filter" not in whole
    # The weekly table counts the segment's answers alone: 12 of last week's 24.
    assert "Alle Antworten zeigen" in neu
    table = neu[neu.index("Wochen im Einzelnen"):]
    assert ">12<" in table[:table.index("</table>")].replace(" ", "")
    refused = client.get("/use-cases/segmente/?segment=metadata.sprache:de")
    assert refused.status_code == 400 and "metadata.kanal" in refused.content.decode()


def test_a_segment_is_on_the_experts_scale_where_its_answers_were_reviewed(
    world_builder: WorldBuilder, world: dict, tmp_path: Any,
) -> None:
    from django.core.management import call_command

    expert = world_builder.user("expertin", expert_of=[world["use_case"]])
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(f'{{"external_id": "s-{i}", "score": 0.25}}\n'
                              for i in range(12, 24)), encoding="utf-8")
    call_command("import_expert_labels", str(labels), use_case="segmente",
                 reviewer=expert.username, stdout=io.StringIO())
    url = (f"/api/v1/use-cases/segmente/segments?dimension=model&from={world['week']}"
           f"&to={world['week']}")
    by = {s["value"]: s for s in _lead(world).get(url).json()["segments"]}
    assert by["alt"]["expert_scale"] is None
    scale = by["neu"]["expert_scale"]
    assert scale["n_reviews"] == 12
    # The judge called every "neu" answer 0; the experts 0.25: the experts' scale is above.
    assert scale["value"] == pytest.approx(0.25, abs=0.01)
    html = _lead(world).get("/use-cases/segmente/").content.decode()
    assert "Skala der Fachexperten" in html[html.index('id="segments"'):]


def test_an_expert_sees_no_segment_that_could_tell_a_blind_score(
    world_builder: WorldBuilder, world: dict,
) -> None:
    expert = world_builder.user("expertin", expert_of=[world["use_case"]])
    client = Client()
    client.force_login(expert)
    html = client.get("/use-cases/segmente/").content.decode()
    assert 'data-reading="segments-hidden"' in html
    assert 'data-segment="neu"' not in html and "Größter Unterschied" not in html
    lead_html = _lead(world).get("/use-cases/segmente/").content.decode()
    assert 'data-segment="neu"' in lead_html
