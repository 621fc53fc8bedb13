"""Tier 2 on the pages: the answer's verdicts, runs and errors; rescoring an answer, a failed
run or a week (who may, what the confirmation promises, what it creates); the use case's judge
page (usage per day, counts, expected weekly cost) and the admin's cost estimate.

Answers come in through the real ingest; their runs are executed by the real judge service
against the local OpenAI-compatible server, whose replies the tests script. Expected figures are
computed by hand from the runs that produced them.
"""

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from html import unescape
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from ingest import services
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from judging.domain.judge_prompt import PROMPT_VERSION
from judging.selectors.costs import rescore_estimate_for_answer
from judging.services import rescoring
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, JudgePrice, JudgeRun, Service, UseCase
from monitoring.services.use_cases import service_create, use_case_create
from tests.support.judged import Judge as ScriptedJudge
from tests.support.judged import current_run
from tests.support.shared_world import built_once, no_server, read_again
from tests.support.world import WorldBuilder

GENERATOR = "gpt-4o-mini"
JUDGE = "judge-x"
OTHER_JUDGE = "judge-y"

# --- building answers and runs through the product ------------------------------------------


@pytest.fixture
def judge(world_builder: WorldBuilder) -> ScriptedJudge:
    return world_builder.judge(ScriptedJudge())


def low_logprobs(text: str) -> dict[str, Any]:
    """Logprobs spelling `text` one word per token; the word "5" is uncertain (flags it)."""
    content = []
    for piece in re.findall(r"\s*\S+", text):
        p = 0.1 if piece.strip() == "5" else 1.0
        content.append({"token": piece, "logprob": math.log(p), "bytes": list(piece.encode())})
    return {"content": content}


def ingest(
    service: Service, use_case: UseCase, external_id: str, text: str, *,
    model: str = GENERATOR, created_at: datetime | None = None, flagged: bool = False,
) -> Answer:
    body: dict[str, Any] = {
        "external_id": external_id,
        "use_case": use_case.slug,
        "question": "Wie oft muss der Behälter geprüft werden?",
        "answer": text,
        "model": model,
        "chunks": [
            {"text": "Prüfintervall: 5 Jahre für Behälter über 1.000 Liter.", "score": 0.8},
            {"text": "Kleine Behälter werden jährlich geprüft.", "score": 0.6},
        ],
        "logprobs": low_logprobs(text) if flagged else None,
    }
    if created_at is not None:
        body["created_at"] = created_at.isoformat()
    result = services.answer_ingest(
        service=service, payload=AnswerIn.model_validate(body), raw=body
    )
    assert result.outcome == IngestOutcome.CREATED, result.errors
    answer = result.answer
    assert answer is not None
    assert answer.flagged == flagged
    return answer


def execute_pending(answer: Answer) -> JudgeRun:
    """Run the answer's waiting run as a worker would; return it as stored."""
    run = answer.judge_runs.get(status=JudgeRun.Status.PENDING)
    judge_run_execute(run_id=run.pk)
    return JudgeRun.objects.get(pk=run.pk)


def judged(
    judge: ScriptedJudge, service: Service, use_case: UseCase, external_id: str,
    verdicts: list[tuple[str, str]], **kwargs: Any,
) -> Answer:
    text = kwargs.pop("text", f"Antwort {external_id}: Der Behälter wird alle 5 Jahre geprüft.")
    judge.script(text, verdicts)
    answer = ingest(service, use_case, external_id, text, **kwargs)
    execute_pending(answer)
    answer.refresh_from_db()
    return answer


@dataclass
class World:
    use_case: UseCase
    other: UseCase
    service: Service
    other_service: Service
    users: dict[str, User | None]

    def user(self, who: str) -> User:
        """A signed-in user (not "anonymous")."""
        user = self.users[who]
        assert user is not None, who
        return user


@pytest.fixture(scope="module")
def built(django_db_setup: None, django_db_blocker: Any) -> Iterator[World]:
    """The world, built once for the module (tests/support/shared_world.py)."""
    with built_once(django_db_blocker, lambda: build(WorldBuilder(settings, no_server))) as world:
        yield world


@pytest.fixture(autouse=True)
def world(built: World, judge: ScriptedJudge, db: None) -> World:
    """Every test here runs on the module's world, read again for it."""
    return read_again(built)


def build(world_builder: WorldBuilder) -> World:
    """Use case A samples every answer; B is someone else's. Users of every kind."""
    use_case = world_builder.use_case("pruefung", "Prüfung", sample_rate=1.0)
    other = world_builder.use_case("fremd", "Fremd", sample_rate=1.0)
    service, _ = world_builder.service("pruef-bot", use_case)
    other_service, _ = world_builder.service("fremd-bot", other)

    user = world_builder.user  # password PASSWORD of tests/support/world.py
    expert = user("expertin", expert_of=[use_case])
    lead = user("teamleitung", lead_of=[use_case])
    other_lead = user("fremdleitung", lead_of=[other])
    return World(use_case, other, service, other_service, {
        "anonymous": None,
        "expert": expert,
        "lead": lead,
        "other_lead": other_lead,
        "unassigned": user("niemand"),
        "staff": user("verwaltung", is_staff=True),
    })


def client_for(world: World, who: str) -> Client:
    client = Client()
    user = world.users[who]
    if user is not None:
        client.force_login(user)
    return client


def text_of(html: str) -> str:
    """The visible text of an HTML fragment, whitespace collapsed."""
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()
    return re.sub(r" ([.,;:)])", r"\1", text)


def judging_section(html: str) -> str:
    match = re.search(r'<section class="card judging".*?</section>', html, re.DOTALL)
    assert match is not None, "the answer page has a judging section"
    return match.group(0)


def badges(html: str) -> list[tuple[str, str]]:
    """(css class, text) of every verdict badge, in page order."""
    return [
        (m.group(1), text_of(m.group(2)))
        for m in re.finditer(
            r'<span class="badge verdict (v-[a-z]+)"[^>]*>(.*?)</span>', html, re.DOTALL
        )
    ]


SIX = [
    ("Der Behälter wird alle 5 Jahre geprüft.", "GEDECKT"),
    ("Das gilt für Behälter über 1.000 Liter.", "GEDECKT"),
    ("Kleine Behälter werden jährlich geprüft.", "gedeckt."),
    ("Die Prüfung macht der TÜV.", "TEILWEISE"),
    ("Die Prüfung kostet 250 Euro.", "UNGEDECKT"),
    ("Der Betreiber muss die Prüfung melden.", "vielleicht"),
]


# --- the answer page -------------------------------------------------------------------------


def test_detail_shows_claims_badges_score_and_run_facts(world: World, judge: Any) -> None:
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=Decimal("0.5"),
                              completion_per_1k=Decimal("2"))
    answer = judged(judge, world.service, world.use_case, "sechs", SIX)
    run = current_run(answer)
    # 1 decomposition + 6 verifications + 1 retry of the unreadable "vielleicht"
    assert (run.status, run.calls, run.unparseable) == ("succeeded", 8, 1)
    # (1 + 1 + 1 + 0.5 + 0) / 5 readable verdicts = 0.7; the unreadable one does not count
    assert answer.score == pytest.approx(0.7)

    html = client_for(world, "lead").get(f"/answers/{answer.pk}/").content.decode()
    section = judging_section(html)
    text = text_of(section)
    assert "Prüfung durch das Modell" in text
    assert "Treue 0,70" in text
    assert "aus 6 Aussagen, 1 Urteil unlesbar (zählt nicht mit)" in text
    assert "nicht die Wahrheit" in text, "the page says what the score measures"
    assert badges(section) == [
        ("v-gedeckt", "GEDECKT"), ("v-gedeckt", "GEDECKT"), ("v-gedeckt", "GEDECKT"),
        ("v-teilweise", "TEILWEISE"), ("v-ungedeckt", "UNGEDECKT"),
        ("v-unparseable", "unlesbar"),
    ]
    claims = [text_of(c) for c in re.findall(r'<span class="claim-text">(.*?)</span>', section)]
    assert claims == [claim for claim, _ in SIX]
    assert "Antwort des Prüfers: vielleicht" in text
    assert "im zweiten Versuch" in text

    facts = dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", section, re.DOTALL))
    facts = {text_of(k): text_of(v) for k, v in facts.items()}
    assert facts["Prüfmodell"] == JUDGE
    assert facts["Prompt-Version"] == PROMPT_VERSION
    assert facts["Anlass"] == "Zufallsstichprobe"  # how the answer came into the sample
    assert facts["Aufrufe"] == "8"
    assert facts["Token"] == f"{run.prompt_tokens:,} Prompt · {run.completion_tokens} Antwort" \
        .replace(",", ".")
    cost = (Decimal(run.prompt_tokens) * Decimal("0.5")
            + Decimal(run.completion_tokens) * 2) / 1000
    assert run.cost == cost
    assert facts["Kosten"] == money(cost)
    assert re.fullmatch(r"\d+,\d s", facts["Dauer"])
    assert facts["fertig"] != "–"
    # The score also heads the answer's facts.
    assert re.search(r"<dt>Treue</dt><dd>\s*<span class=\"score\">Treue 0,70</span>", html)
    assert "Demo:" not in html
    assert "nicht direkt vergleichbar" not in html, "one run, nothing to compare"


def test_abstention_is_shown_as_such(world: World, judge: Any) -> None:
    answer = judged(judge, world.service, world.use_case, "weiss-nicht", [],
                    text="Dazu habe ich keine Informationen.")
    assert (answer.score, answer.abstention) == (1.0, True)
    html = client_for(world, "expert").get(f"/answers/{answer.pk}/").content.decode()
    text = text_of(judging_section(html))
    assert "keine Aussagen – Enthaltung, zählt als 1,0" in text
    assert "Treue 1,00" not in text
    assert badges(html) == []
    assert "kein Preis hinterlegt" in text


def test_same_model_refusal_is_shown_with_its_reason(world: World, judge: Any) -> None:
    answer = judged(judge, world.service, world.use_case, "selbst",
                    [("Der Behälter wird alle 5 Jahre geprüft.", "GEDECKT")], model=JUDGE)
    run = answer.judge_runs.get()
    assert (run.status, run.calls, answer.status, answer.score) == ("failed", 0, "failed", None)
    html = client_for(world, "lead").get(f"/answers/{answer.pk}/").content.decode()
    text = text_of(judging_section(html))
    assert "Die Prüfung ist fehlgeschlagen." in text
    assert "Das Prüfmodell „judge-x“ ist das Modell, das die Antwort erzeugt hat" in text
    assert "Ein Modell beurteilt sich selbst zu milde" in text
    assert f"Grund: {run.error}" in text
    assert "own generator" in run.error
    # Retrying with the same model would be refused again: no retry button.
    assert "/retry/" not in html


def test_a_run_failed_for_want_of_a_judge_model_is_retried_with_the_one_set_now(
    world: World, judge: Any, settings: Any
) -> None:
    settings.TREUE_JUDGE_MODEL = ""
    answer = ingest(world.service, world.use_case, "ohne-modell",
                    "Der Behälter wird alle 5 Jahre geprüft.")
    run = execute_pending(answer)
    assert (run.status, run.judge_model) == ("failed", "")
    lead = client_for(world, "lead")
    retry_url = f"/answers/{answer.pk}/runs/{run.pk}/retry/"

    # Still none set: refused with the reason, nothing queued.
    refused = lead.post(retry_url, {"confirm": "1"}, follow=True)
    assert "kein Prüfmodell eingestellt" in refused.content.decode()
    assert answer.judge_runs.count() == 1

    settings.TREUE_JUDGE_MODEL = JUDGE
    assert f"„{JUDGE}“" in text_of(lead.post(retry_url).content.decode())
    assert lead.post(retry_url, {"confirm": "1"}).status_code == 302
    retried = answer.judge_runs.exclude(pk=run.pk).get()
    assert (retried.status, retried.judge_model) == ("pending", JUDGE)


def test_a_flagged_answers_run_names_tier_1_as_its_reason(world: World, judge: Any) -> None:
    text = "Der Behälter wird alle 5 Jahre geprüft."
    answer = ingest(world.service, world.use_case, "markiert", text, flagged=True)
    assert answer.sample_reason == "flagged"
    judge.script(text, [(text, "GEDECKT")])
    execute_pending(answer)
    lead = client_for(world, "lead")
    section = judging_section(lead.get(f"/answers/{answer.pk}/").content.decode())
    facts = {text_of(k): text_of(v)
             for k, v in re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", section, re.DOTALL)}
    assert facts["Anlass"] == "markiert (Stufe 1)"
    page = text_of(lead.get(f"/use-cases/{world.use_case.slug}/judge/").content.decode())
    assert "markiert (Stufe 1)" in page


def test_a_lead_retries_every_failed_run_of_a_use_case_at_once(
    world: World, judge: Any, settings: Any
) -> None:
    settings.TREUE_JUDGE_MODEL = ""  # every run fails, as after an outage
    answers = [ingest(world.service, world.use_case, f"aus-{i}", f"Antwort {i}: 5 Jahre.")
               for i in range(3)]
    runs = [execute_pending(a) for a in answers]
    assert {r.status for r in runs} == {"failed"}
    # One of them was retried already and failed again: only its newest run counts.
    settings.TREUE_JUDGE_MODEL = JUDGE
    lead = client_for(world, "lead")
    lead.post(f"/answers/{answers[0].pk}/runs/{runs[0].pk}/retry/", {"confirm": "1"})
    JudgeRun.objects.filter(answer=answers[0], status="pending").update(
        status="failed", error="judge unreachable")
    Answer.objects.filter(pk=answers[0].pk).update(status="failed")
    # A refusal to judge an answer with its own model is not offered: a retry fails the same way.
    own = ingest(world.service, world.use_case, "eigenes-modell", "Alle 5 Jahre.", model=JUDGE)
    assert execute_pending(own).status == "failed"

    page = lead.get(f"/use-cases/{world.use_case.slug}/judge/").content.decode()
    assert "Bei 3 Antworten ist der letzte Prüflauf fehlgeschlagen" in text_of(page)
    assert "Fehlgeschlagene Prüfläufe" not in client_for(world, "expert").get(
        f"/use-cases/{world.use_case.slug}/judge/").content.decode()

    response = lead.post(f"/use-cases/{world.use_case.slug}/judge/retry-failed/", follow=True)
    assert "3 fehlgeschlagene Prüfläufe werden wiederholt" in response.content.decode()
    for answer in answers:
        newest = answer.judge_runs.order_by("-created_at", "-id").first()
        assert newest is not None
        assert (newest.status, newest.judge_model) == ("pending", JUDGE)
        answer.refresh_from_db()
        assert answer.status == "queued"
    assert JudgeRun.objects.filter(answer__in=answers).count() == 7
    assert own.judge_runs.count() == 1
    assert "Fehlgeschlagene Prüfläufe" not in lead.get(
        f"/use-cases/{world.use_case.slug}/judge/").content.decode()
    nothing = lead.post(f"/use-cases/{world.use_case.slug}/judge/retry-failed/", follow=True)
    assert "Kein fehlgeschlagener Prüflauf zu wiederholen." in nothing.content.decode()


def test_failed_decomposition_shows_the_error_and_offers_a_retry(
    world: World, judge: Any, openai_server: Any
) -> None:
    text = "Antwort kaputt: Der Behälter wird alle 5 Jahre geprüft."
    answer = ingest(world.service, world.use_case, "kaputt", text)
    openai_server.responder = lambda request: "Das kann ich so nicht sagen."
    run = execute_pending(answer)
    assert run.status == "failed" and "decomposition unparseable" in run.error

    lead = client_for(world, "lead")
    html = lead.get(f"/answers/{answer.pk}/").content.decode()
    assert "decomposition unparseable" in text_of(judging_section(html))
    retry_url = f"/answers/{answer.pk}/runs/{run.pk}/retry/"
    assert f'action="{retry_url}"' in html
    # An expert sees the error but no retry button.
    assert retry_url not in client_for(world, "expert").get(f"/answers/{answer.pk}/") \
        .content.decode()

    confirm = lead.post(retry_url)
    assert confirm.status_code == 200
    assert "wird mit dem Prüfmodell „judge-x“ wiederholt" in text_of(confirm.content.decode())
    response = lead.post(retry_url, {"confirm": "1"})
    assert response.status_code == 302
    retried = answer.judge_runs.exclude(pk=run.pk).get()
    assert (retried.status, retried.judge_model, retried.trigger) == ("pending", JUDGE, "sample")
    answer.refresh_from_db()
    assert answer.status == "queued"
    page = lead.get(response["Location"]).content.decode()
    assert "Der Prüflauf mit „judge-x“ wird wiederholt" in page
    assert "wartet auf den Prüfer" in text_of(judging_section(page))

    # The retry runs; the old failure stays in the history.
    openai_server.responder = judge
    judge.script(text, [("Der Behälter wird alle 5 Jahre geprüft.", "GEDECKT")])
    execute_pending(answer)
    page = lead.get(f"/answers/{answer.pk}/").content.decode()
    section = text_of(judging_section(page))
    assert "Treue 1,00" in section
    assert "1 weiterer Prüflauf" in section
    # A second retry of the old run is refused: it is no longer the newest.
    again = lead.post(retry_url, {"confirm": "1"}, follow=True)
    assert "Nur der neueste, fehlgeschlagene Prüflauf" in again.content.decode()
    assert answer.judge_runs.count() == 2


def test_pending_run_waits_for_the_judge(world: World, judge: Any) -> None:
    answer = ingest(world.service, world.use_case, "wartet", "Der Behälter hält 5 Jahre.")
    html = client_for(world, "lead").get(f"/answers/{answer.pk}/").content.decode()
    text = text_of(judging_section(html))
    assert "wartet auf den Prüfer" in text
    assert badges(html) == []
    # No second run while one waits.
    assert f'action="/answers/{answer.pk}/rescore/"' not in html
    assert "Ein Prüflauf wartet noch oder läuft" in text


def test_unsampled_answer_says_it_is_not_judged(world: World, judge: Any) -> None:
    rare = use_case_create(slug="selten", name="Selten", sample_rate=1e-9)
    rare.team_leads.add(world.user("lead"))
    service, _ = service_create(name="selten-bot", use_cases=[rare])
    answer = ingest(service, rare, "nicht-gezogen", "Der Behälter hält lange.")
    assert not answer.sampled
    lead = client_for(world, "lead")
    html = lead.get(f"/answers/{answer.pk}/").content.decode()
    # Issue 41 (12): a lead may have it judged on demand (tests/monitoring/test_on_demand.py),
    # never rescored into the sample.
    assert ("Nicht in der Stichprobe: Diese Antwort wird nur auf Anforderung vom Modell geprüft, "
            "und ihr Urteil zählt nicht in den Schätzungen.") in html
    assert f"/answers/{answer.pk}/judge/" in html
    assert "/rescore/" not in html
    response = lead.post(f"/answers/{answer.pk}/rescore/",
                         {"judge_model": OTHER_JUDGE, "confirm": "1"}, follow=True)
    assert response.redirect_chain == [(f"/answers/{answer.pk}/", 302)]
    assert "Nur Antworten der Stichprobe werden vom Modell geprüft." in \
        response.content.decode()
    assert not answer.judge_runs.exists()


def test_history_lists_earlier_runs_and_warns_that_models_differ(
    world: World, judge: Any
) -> None:
    claims = [("Der Behälter wird alle 5 Jahre geprüft.", "GEDECKT"),
              ("Die Prüfung kostet 250 Euro.", "UNGEDECKT")]
    answer = judged(judge, world.service, world.use_case, "zweimal", claims)
    first = current_run(answer)
    assert answer.score == 0.5
    rescoring.answer_rescore(answer=answer, judge_model=OTHER_JUDGE, user=world.user("lead"))
    judge.verdicts["Die Prüfung kostet 250 Euro."] = "TEILWEISE"

    lead = client_for(world, "lead")
    # While the rescore waits, the page shows the current score and the waiting run.
    section = text_of(judging_section(lead.get(f"/answers/{answer.pk}/").content.decode()))
    assert "Neubewertung mit „judge-y“" in section and "wartet auf den Prüfer" in section
    assert "Treue 0,50" in section

    second = execute_pending(answer)
    answer.refresh_from_db()
    assert (answer.current_run_id, answer.score) == (second.pk, 0.75)
    html = lead.get(f"/answers/{answer.pk}/").content.decode()
    section = judging_section(html)
    text = text_of(section)
    assert "Treue 0,75" in text
    assert re.search(r"<dt>Prüfmodell</dt><dd><code>judge-y</code>", section)
    assert "angefordert von teamleitung" in text
    history = re.search(r'<details class="history">(.*?)</details>', section, re.DOTALL)
    assert history is not None and "<details class=\"history\" open" not in section
    rows = [text_of(r) for r in re.findall(r"<tr>(.*?)</tr>", history.group(1), re.DOTALL)[1:]]
    assert len(rows) == 1
    assert f"{JUDGE} {PROMPT_VERSION} Zufallsstichprobe fertig 0,50" in rows[0]
    assert first.pk != second.pk
    assert "1 weiterer Prüflauf" in text
    assert "Werte verschiedener Prüfmodelle/Prompt-Versionen sind nicht direkt vergleichbar." \
        in text


# The demo names its judge in TREUE_DEMO_JUDGE_MODEL (scripts/demo.sh); the product knows no
# demo name of its own.
DEMO_JUDGE_MODEL = "treue-demo-judge"


def test_demo_judge_runs_say_they_are_replayed_human_labels(
    world: World, judge: Any, settings: Any
) -> None:
    settings.TREUE_JUDGE_MODEL = settings.TREUE_DEMO_JUDGE_MODEL = DEMO_JUDGE_MODEL
    answer = judged(judge, world.service, world.use_case, "demo",
                    [("Der Behälter wird alle 5 Jahre geprüft.", "GEDECKT")])
    assert current_run(answer).judge_model == DEMO_JUDGE_MODEL
    html = client_for(world, "expert").get(f"/answers/{answer.pk}/").content.decode()
    assert ("Demo: Die Urteile des Demo-Prüfers sind wiedergegebene menschliche Labels "
            "(RAGTruth) und, für Antworten ohne Label (etwa selbst gesendete), ein Wortvergleich "
            "– kein Modell.") in text_of(judging_section(html))
    page = text_of(client_for(world, "expert").get("/use-cases/pruefung/judge/")
                   .content.decode())
    assert (f"Demo: Die Urteile von „{DEMO_JUDGE_MODEL}“ sind wiedergegebene menschliche Labels "
            "(RAGTruth) und, für Antworten ohne Label (etwa selbst gesendete), ein Wortvergleich "
            "– kein Modell.") in page


def test_no_demo_note_for_a_real_judge(world: World, scored: Answer, settings: Any) -> None:
    settings.TREUE_DEMO_JUDGE_MODEL = DEMO_JUDGE_MODEL
    lead = client_for(world, "lead")
    assert "Demo:" not in lead.get(f"/answers/{scored.pk}/").content.decode()
    assert "Demo:" not in lead.get("/use-cases/pruefung/judge/").content.decode()


def test_no_demo_note_outside_the_demo(world: World, judge: Any, settings: Any) -> None:
    # A run under the demo judge's name, but no demo judge named in the settings (the default).
    settings.TREUE_JUDGE_MODEL = DEMO_JUDGE_MODEL
    assert settings.TREUE_DEMO_JUDGE_MODEL == ""
    answer = judged(judge, world.service, world.use_case, "kein-demo",
                    [("Der Behälter wird alle 5 Jahre geprüft.", "GEDECKT")])
    expert = client_for(world, "expert")
    assert "Demo:" not in text_of(judging_section(
        expert.get(f"/answers/{answer.pk}/").content.decode()))
    page = expert.get("/use-cases/pruefung/judge/").content.decode()
    assert "Demo:" not in page and '<span class="badge muted">Demo</span>' not in page


def test_english_page_translates_the_judging_section(world: World, judge: Any) -> None:
    answer = judged(judge, world.service, world.use_case, "englisch", SIX[:2])
    client = client_for(world, "lead")
    client.cookies["django_language"] = "en"
    html = client.get(f"/answers/{answer.pk}/").content.decode()
    text = text_of(judging_section(html))
    assert "Check by the model" in text
    assert "Faithfulness 1.00" in text
    assert "not truth" in text
    # The three labels are the judge's vocabulary in both languages.
    assert [t for _, t in badges(html)] == ["GEDECKT", "GEDECKT"]
    page = text_of(client.get("/use-cases/pruefung/judge/").content.decode())
    assert "Expected judge cost per week" in page
    assert "Expected per week: judged answers ≈ 1 · judge calls ≈ 3" in page
    assert "Calls, tokens and cost of the last 14 days" in page
    confirm = text_of(client.post(f"/answers/{answer.pk}/rescore/",
                                  {"judge_model": OTHER_JUDGE}).content.decode())
    assert "Expected calls 3 1 decomposition plus 1 call per claim" in confirm


# --- rescoring one answer: permissions, refusal, confirmation --------------------------------


@pytest.fixture
def scored(world: World, judge: Any) -> Answer:
    return judged(judge, world.service, world.use_case, "bewertet", SIX)


@pytest.mark.parametrize(("who", "status"), [
    ("anonymous", 302), ("expert", 403), ("unassigned", 404), ("other_lead", 404),
    ("lead", 200), ("staff", 200),
])
def test_who_may_ask_for_a_rescore(
    world: World, scored: Answer, who: str, status: int
) -> None:
    client = client_for(world, who)
    url = f"/answers/{scored.pk}/rescore/"
    response = client.post(url, {"judge_model": OTHER_JUDGE})
    assert response.status_code == status
    if who == "anonymous":
        assert response["Location"] == f"/login/?next={url}"
    if status == 200:
        assert "Neubewertung bestätigen" in response.content.decode()
    assert scored.judge_runs.count() == 1, "the first POST only asks for confirmation"

    confirmed = client.post(url, {"judge_model": OTHER_JUDGE, "confirm": "1"})
    assert confirmed.status_code == (302 if status == 200 else status)
    runs = scored.judge_runs.order_by("created_at", "id")
    if status == 200:
        assert confirmed["Location"] == f"/answers/{scored.pk}/#pruefung"
        assert runs.count() == 2
        new = runs.last()
        assert new is not None
        assert (new.status, new.trigger, new.judge_model, new.requested_by) == (
            "pending", "rescore", OTHER_JUDGE, world.users[who])
        page = client.get(f"/answers/{scored.pk}/").content.decode()
        assert "Neubewertung mit „judge-y“ angefordert" in page
    else:
        assert runs.count() == 1


@pytest.mark.parametrize(("who", "sees_form"), [
    ("expert", False), ("lead", True), ("staff", True),
])
def test_only_those_who_may_rescore_see_the_form(
    world: World, scored: Answer, who: str, sees_form: bool
) -> None:
    html = client_for(world, who).get(f"/answers/{scored.pk}/").content.decode()
    assert (f'action="/answers/{scored.pk}/rescore/"' in html) == sees_form
    if sees_form:
        assert re.search(rf'<input[^>]*name="judge_model"[^>]*value="{JUDGE}"', html)


def test_rescore_endpoints_refuse_get(world: World, scored: Answer) -> None:
    lead = client_for(world, "lead")
    assert lead.get(f"/answers/{scored.pk}/rescore/").status_code == 405
    run = current_run(scored)
    assert lead.get(f"/answers/{scored.pk}/runs/{run.pk}/retry/").status_code == 405
    assert lead.get("/use-cases/pruefung/judge/rescore/").status_code == 405


def test_rescore_needs_the_csrf_token(world: World, scored: Answer) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.user("lead"))
    response = client.post(f"/answers/{scored.pk}/rescore/",
                           {"judge_model": OTHER_JUDGE, "confirm": "1"})
    assert response.status_code == 403
    assert scored.judge_runs.count() == 1


@pytest.mark.parametrize("model", [GENERATOR, " GPT-4o-Mini ", "gpt-4o-mini\t"])
def test_the_generator_model_is_refused_with_the_reason(
    world: World, scored: Answer, model: str
) -> None:
    lead = client_for(world, "lead")
    for data in ({"judge_model": model}, {"judge_model": model, "confirm": "1"}):
        response = lead.post(f"/answers/{scored.pk}/rescore/", data)
        assert response.status_code == 200
        html = response.content.decode()
        assert "Neubewertung bestätigen" not in html
        form = re.search(r'<form method="post" action="/answers/\d+/rescore/".*?</form>', html,
                         re.DOTALL)
        assert form is not None
        assert "ist das Modell, das die Antwort erzeugt hat. Ein Modell beurteilt sich selbst " \
               "zu milde" in text_of(form.group(0))
    assert scored.judge_runs.count() == 1


@pytest.mark.parametrize("data", [
    {}, {"judge_model": ""}, {"judge_model": "   "}, {"judge_model": "x" * 201},
    {"judge_model": "judge\x00y"}, {"confirm": "1"},
])
def test_bad_judge_models_are_form_errors(world: World, scored: Answer, data: Any) -> None:
    response = client_for(world, "lead").post(f"/answers/{scored.pk}/rescore/", data)
    assert response.status_code == 200
    assert 'class="form-error"' in response.content.decode()
    assert scored.judge_runs.count() == 1


def test_confirmation_states_calls_and_cost_of_the_current_run(
    world: World, scored: Answer
) -> None:
    JudgePrice.objects.create(judge_model=OTHER_JUDGE, prompt_per_1k=Decimal("1"),
                              completion_per_1k=Decimal("4"), currency="EUR")
    run = current_run(scored)
    html = client_for(world, "lead").post(
        f"/answers/{scored.pk}/rescore/", {"judge_model": OTHER_JUDGE}
    ).content.decode()
    text = text_of(html)
    # 1 decomposition + 6 claims = 7 calls (the retry of the old run is not expected again)
    assert "Erwartete Aufrufe 7 1 Zerlegung plus 1 Aufruf je Aussage" in text
    # at the old run's tokens per call: 8 calls made, 7 expected
    expected = (run.prompt_tokens / 8 * 7 * 1 + run.completion_tokens / 8 * 7 * 4) / 1000
    shown = re.search(r"Kosten ≈ ([0-9]+,[0-9]{4}) EUR", text)
    assert shown is not None, text
    # To the fourth decimal, as rounded (a float here, decimals there: half a unit apart).
    assert float(shown.group(1).replace(",", ".")) == pytest.approx(expected, abs=0.00006)
    assert re.search(r'<input type="hidden" name="judge_model" value="judge-y">', html)
    assert '<input type="hidden" name="confirm" value="1">' in html


def test_confirmation_without_a_price_says_so(world: World, scored: Answer) -> None:
    text = text_of(client_for(world, "staff").post(
        f"/answers/{scored.pk}/rescore/", {"judge_model": "ohne-preis"}
    ).content.decode())
    assert "Erwartete Aufrufe 7" in text
    assert "kein Preis hinterlegt für „ohne-preis“" in text


def test_confirmation_for_an_unscored_answer_uses_the_use_case_mean(
    world: World, judge: Any, openai_server: Any
) -> None:
    lead = client_for(world, "lead")
    text = "Antwort offen: Der Behälter wird alle 5 Jahre geprüft."
    broken = ingest(world.service, world.use_case, "offen", text)
    openai_server.responder = lambda request: "kein JSON"
    execute_pending(broken)
    openai_server.responder = judge
    broken.refresh_from_db()
    assert broken.current_run is None

    # Nothing judged in the use case yet: the assumption, said as such.
    page = text_of(lead.post(f"/answers/{broken.pk}/rescore/",
                             {"judge_model": OTHER_JUDGE}).content.decode())
    assert "Erwartete Aufrufe ≈ 6,0 Schätzung: noch keine geprüfte Antwort" in page

    # Two judged answers: 1 + 2 claims = 3 calls, 1 + 3 claims = 4 calls; mean 3.5.
    judged(judge, world.service, world.use_case, "zwei", SIX[:2])
    judged(judge, world.service, world.use_case, "drei", SIX[:3])
    page = text_of(lead.post(f"/answers/{broken.pk}/rescore/",
                             {"judge_model": OTHER_JUDGE}).content.decode())
    assert "Erwartete Aufrufe ≈ 3,5 Schätzung: mittlere Aufrufe je geprüfter Antwort" in page


def test_a_second_rescore_waits_for_the_first(world: World, scored: Answer) -> None:
    lead = client_for(world, "lead")
    url = f"/answers/{scored.pk}/rescore/"
    assert lead.post(url, {"judge_model": OTHER_JUDGE, "confirm": "1"}).status_code == 302
    # A double click on the confirmation: the second is refused, with the reason.
    again = lead.post(url, {"judge_model": "judge-z", "confirm": "1"}, follow=True)
    assert again.redirect_chain == [(f"/answers/{scored.pk}/#pruefung", 302)]
    assert "wartet schon ein Prüflauf" in again.content.decode()
    assert scored.judge_runs.count() == 2


# --- rescoring a week ------------------------------------------------------------------------

BERLIN_W10 = "2025-W10"  # Monday 3 March to Sunday 9 March 2025, Berlin (UTC+1)


@pytest.fixture
def week_world(world: World, judge: Any) -> dict[str, Answer]:
    def at(external_id: str, when: str, **kwargs: Any) -> Answer:
        return judged(judge, world.service, world.use_case, external_id,
                      [(f"{external_id}: Behälter 5 Jahre.", "GEDECKT"),
                       (f"{external_id}: Behälter 1.000 Liter.", "TEILWEISE")][
                          : kwargs.pop("claims", 2)],
                      created_at=datetime.fromisoformat(when), **kwargs)

    answers = {
        # Monday 00:30 in Berlin, still Sunday in UTC: in week 10.
        "monday_early": at("monday-early", "2025-03-02T23:30:00+00:00", claims=1),
        "wednesday": at("wednesday", "2025-03-05T12:00:00+00:00"),
        # Sunday 23:30 in Berlin: the last half hour of week 10.
        "sunday_late": at("sunday-late", "2025-03-09T22:30:00+00:00"),
        # Generated by the model a lead will choose as judge: left out and counted.
        "own_model": at("own-model", "2025-03-06T09:00:00+00:00", model=OTHER_JUDGE),
        # Outside week 10: Sunday 23:30 before (week 9) and Monday 00:30 after (week 11).
        "week9": at("week9", "2025-03-02T22:30:00+00:00"),
        "week11": at("week11", "2025-03-09T23:30:00+00:00"),
        # In week 10 but not judged: its run still waits.
        "waiting": ingest(world.service, world.use_case, "waiting", "Noch offen.",
                          created_at=datetime(2025, 3, 4, 9, tzinfo=UTC)),
    }
    # In week 10 but another use case.
    judge.script("Fremde Antwort.", [("Fremd: 5 Jahre.", "GEDECKT")])
    answers["other_use_case"] = ingest(world.other_service, world.other, "fremd", "Fremde Antwort.",
                                       created_at=datetime(2025, 3, 5, 9, tzinfo=UTC))
    execute_pending(answers["other_use_case"])
    return answers


def test_week_rescore_creates_one_run_per_judged_answer_of_the_week(
    world: World, week_world: dict[str, Answer]
) -> None:
    JudgePrice.objects.create(judge_model=OTHER_JUDGE, prompt_per_1k=Decimal("2"),
                              completion_per_1k=Decimal("8"))
    lead = client_for(world, "lead")
    url = "/use-cases/pruefung/judge/rescore/"
    data = {"week": BERLIN_W10, "judge_model": OTHER_JUDGE}
    confirm = lead.post(url, data)
    assert confirm.status_code == 200
    text = text_of(confirm.content.decode())
    # monday_early (1 claim), wednesday and sunday_late (2 claims each): 3 answers,
    # (1 + 1) + (1 + 2) + (1 + 2) = 8 calls
    assert ("3 geprüfte Antworten von „Prüfung“ aus der Woche 2025-W10 werden mit dem "
            "Prüfmodell „judge-y“ neu bewertet.") in text
    assert "Erwartete Aufrufe 8 je Antwort 1 Zerlegung" in text
    assert "1 Antwort stammt von „judge-y“ selbst" in text
    included = [week_world[n] for n in ("monday_early", "wednesday", "sunday_late")]
    runs = [current_run(a) for a in included]
    expected_cost = sum(
        (r.prompt_tokens / r.calls * (1 + r.claims.count()) * 2
         + r.completion_tokens / r.calls * (1 + r.claims.count()) * 8) / 1000
        for r in runs
    )
    assert f"≈ {expected_cost:.4f} EUR".replace(".", ",") in text
    assert JudgeRun.objects.filter(trigger="rescore").count() == 0

    done = lead.post(url, data | {"confirm": "1"})
    assert done.status_code == 302 and done["Location"] == "/use-cases/pruefung/judge/"
    rescores = JudgeRun.objects.filter(trigger="rescore")
    assert sorted(r.answer_id for r in rescores) == sorted(a.pk for a in included)
    assert {(r.judge_model, r.status, r.requested_by_id) for r in rescores} == {
        (OTHER_JUDGE, "pending", world.user("lead").pk)}
    page = text_of(lead.get(done["Location"]).content.decode())
    assert "3 Antworten der Woche 2025-W10 werden mit „judge-y“ neu bewertet." in page

    # A second confirmation (double click) adds nothing: those answers have runs waiting,
    # and the form says that nothing is left to rescore.
    for again in (lead.post(url, data | {"confirm": "1"}), lead.post(url, data)):
        assert again.status_code == 200
        assert "keine geprüften Antworten, die mit „judge-y“ neu bewertet werden können" in \
            text_of(again.content.decode())
    assert JudgeRun.objects.filter(trigger="rescore").count() == 3


@pytest.fixture
def one_in_week(world: World, judge: Any) -> Answer:
    return judged(judge, world.service, world.use_case, "eine", SIX[:1],
                  created_at=datetime(2025, 3, 5, 12, tzinfo=UTC))


@pytest.mark.parametrize(("who", "status"), [
    ("anonymous", 302), ("expert", 403), ("unassigned", 404), ("other_lead", 404),
    ("lead", 302), ("staff", 302),
])
def test_who_may_rescore_a_week(world: World, one_in_week: Answer, who: str, status: int) -> None:
    url = "/use-cases/pruefung/judge/rescore/"
    data = {"week": BERLIN_W10, "judge_model": OTHER_JUDGE}
    client = client_for(world, who)
    first = client.post(url, data)
    assert first.status_code == {"lead": 200, "staff": 200}.get(who, status)
    if who == "anonymous":
        assert first["Location"] == f"/login/?next={url}"
    assert client.post(url, data | {"confirm": "1"}).status_code == status
    created = JudgeRun.objects.filter(trigger="rescore")
    assert [r.answer_id for r in created] == ([one_in_week.pk] if status == 302 and
                                              who != "anonymous" else [])


@pytest.mark.parametrize(("week", "message"), [
    ("", "Dieses Feld ist zwingend erforderlich."),
    ("2025-10", "Format JJJJ-Www"),
    ("2025-W1", "Format JJJJ-Www"),
    ("2025W10", "Format JJJJ-Www"),
    ("25-W10", "Format JJJJ-Www"),
    ("2025-W100", "Format JJJJ-Www"),
    ("２０２５-W10", "Format JJJJ-Www"),
    ("2025-W10; DROP TABLE", "Format JJJJ-Www"),
    ("2025-W10" * 20, "höchstens 50 Zeichen"),
    ("2025-W00", "keine Kalenderwoche 0"),
    ("2025-W54", "keine Kalenderwoche 54"),
    ("2021-W53", "Das Jahr 2021 hat keine Kalenderwoche 53."),
    ("0000-W01", "Jahr zwischen 2000 und 2999"),
    ("9999-W52", "Jahr zwischen 2000 und 2999"),
    ("1999-W52", "Jahr zwischen 2000 und 2999"),
    ("2030-W10", "keine geprüften Antworten"),
    ("2025-W09", "keine geprüften Antworten"),
])
def test_bad_week_strings_are_form_errors(
    world: World, one_in_week: Answer, week: str, message: str
) -> None:
    response = client_for(world, "lead").post(
        "/use-cases/pruefung/judge/rescore/",
        {"week": week, "judge_model": OTHER_JUDGE, "confirm": "1"},
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Neubewertung bestätigen" not in html
    errors = " ".join(text_of(e) for e in re.findall(
        r'<div class="form-error"[^>]*>(.*?)</div>', html, re.DOTALL))
    assert message in errors
    # The form keeps what was typed, escaped.
    assert 'name="week"' in html and "<script" not in errors
    assert not JudgeRun.objects.filter(trigger="rescore").exists()


@pytest.mark.parametrize("week", ["2025-W10", "2025-w10", " 2025-W10\n"])
def test_week_is_read_with_case_and_blanks_forgiven(
    world: World, one_in_week: Answer, week: str
) -> None:
    response = client_for(world, "lead").post(
        "/use-cases/pruefung/judge/rescore/", {"week": week, "judge_model": OTHER_JUDGE}
    )
    assert "Neubewertung bestätigen" in response.content.decode()
    assert "aus der Woche 2025-W10" in text_of(response.content.decode())


def test_week_53_of_a_long_year_is_a_week(world: World) -> None:
    response = client_for(world, "lead").post(
        "/use-cases/pruefung/judge/rescore/", {"week": "2026-W53", "judge_model": OTHER_JUDGE}
    )
    assert "keine geprüften Antworten" in text_of(response.content.decode())


def test_week_rescore_without_model_is_a_form_error(world: World, one_in_week: Any) -> None:
    response = client_for(world, "lead").post(
        "/use-cases/pruefung/judge/rescore/", {"week": BERLIN_W10, "judge_model": " "}
    )
    assert response.status_code == 200
    assert "Dieses Feld ist zwingend erforderlich." in response.content.decode()


# --- the use case's judge page ---------------------------------------------------------------


@pytest.fixture
def fixed_now(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[datetime], None]]:
    """Lets a run finish at a chosen moment: django.utils.timezone.now, patched while the
    worker code runs."""
    real = timezone.now

    def set_now(moment: datetime | None) -> None:
        monkeypatch.setattr(timezone, "now", (lambda: moment) if moment else real)

    yield set_now


def usage_rows(html: str) -> dict[str, list[str]]:
    table = re.search(r'<table class="usage numbers">.*?</table>', html, re.DOTALL)
    assert table is not None
    return {
        day: [text_of(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.DOTALL)][1:]
        for day, row in re.findall(r'<tr data-day="([^"]+)"[^>]*>(.*?)</tr>', table.group(0),
                                   re.DOTALL)
    }


def german(value: Decimal | float, places: int) -> str:
    """As the German page writes a number: rounded half up (like floatformat), "1.234,5"."""
    rounded = Decimal(str(value)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return f"{rounded:,.{places}f}".replace(",", "_").replace(".", ",").replace("_", ".")


def money(value: Decimal | float, currency: str = "EUR") -> str:
    """An amount as the pages write it: with its currency, two decimals from 1 up, two
    significant digits below (monitoring.domain.prices.amount_places)."""
    value = Decimal(str(value))
    places = 2 if value == 0 or abs(value) >= 1 else min(6, max(2, -value.adjusted() + 1))
    return f"{german(value, places)} {currency}"


def test_usage_table_sums_calls_tokens_and_cost_per_day(
    world: World, judge: Any, fixed_now: Callable[[datetime | None], None]
) -> None:
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=Decimal("3"),
                              completion_per_1k=Decimal("6"))
    zone = timezone.get_current_timezone()
    today = timezone.localdate()
    morning = datetime.combine(today, datetime.min.time(), tzinfo=zone) + timedelta(hours=9)
    # Two days ago, 23:30 in Berlin: already the next day in no time zone east of it, but the
    # day before in UTC. It counts on the Berlin day.
    late = datetime.combine(today - timedelta(days=2), datetime.min.time(), tzinfo=zone) \
        + timedelta(hours=23, minutes=30)
    long_ago = morning - timedelta(days=20)

    runs: dict[str, list[JudgeRun]] = {"today": [], "late": [], "old": []}
    for i, (slot, moment, claims) in enumerate([
        ("today", morning, SIX[:2]), ("today", morning, SIX[:3]), ("late", late, SIX[:1]),
        ("old", long_ago, SIX[:2]),
    ]):
        text = f"Antwort {i}: Der Behälter wird alle 5 Jahre geprüft."
        judge.script(text, claims)
        answer = ingest(world.service, world.use_case, f"tag-{i}", text)
        fixed_now(moment)
        runs[slot].append(execute_pending(answer))
        fixed_now(None)
    # A failed run without calls (the generator as judge) counts as a run with nothing spent.
    refused = ingest(world.service, world.use_case, "selbst", "Selbst.", model=JUDGE)
    fixed_now(morning)
    runs["today"].append(execute_pending(refused))
    fixed_now(None)
    # Runs of another use case stay out.
    judge.script("Fremd.", SIX[:1])
    execute_pending(ingest(world.other_service, world.other, "fremd", "Fremd."))

    html = client_for(world, "lead").get("/use-cases/pruefung/judge/").content.decode()
    rows = usage_rows(html)
    assert len(rows) == 15, "14 days and the total"

    def expected(slot_runs: list[JudgeRun]) -> list[str]:
        calls = sum(r.calls for r in slot_runs)
        prompt = sum(r.prompt_tokens for r in slot_runs)
        completion = sum(r.completion_tokens for r in slot_runs)
        cost = sum((Decimal(r.prompt_tokens) * 3 + Decimal(r.completion_tokens) * 6) / 1000
                   for r in slot_runs)
        return [str(len(slot_runs)), german(calls, 0), german(prompt, 0),
                german(completion, 0), money(cost),
                german(calls / len(slot_runs), 1), money(cost / len(slot_runs))]

    # today: 3 runs; (1 + 2) + (1 + 3) + 0 = 7 calls
    assert sum(r.calls for r in runs["today"]) == 7
    assert rows[today.isoformat()] == expected(runs["today"])
    assert rows[(today - timedelta(days=2)).isoformat()] == expected(runs["late"])
    assert rows[(today - timedelta(days=1)).isoformat()] == ["0", "0", "0", "0", "–", "–", "–"]
    # The total is the two days in the window; the run of 20 days ago is outside.
    assert rows["total"] == expected(runs["today"] + runs["late"])
    assert (today - timedelta(days=20)).isoformat() not in rows

    counts = dict(re.findall(r'data-count="(\w+)">(\d+)<', html))
    assert counts == {"pending": "0", "running": "0", "failed": "1"}


def test_usage_marks_runs_without_a_price(world: World, judge: Any, settings: Any) -> None:
    judged(judge, world.service, world.use_case, "ohne-preis", SIX[:2])
    lead = client_for(world, "lead")
    today = timezone.localdate().isoformat()
    row = usage_rows(lead.get("/use-cases/pruefung/judge/").content.decode())[today]
    assert row[:2] == ["1", "3"]
    assert row[4] == "kein Preis hinterlegt (1 Lauf)"
    assert row[6] == "–", "no cost per run without a price"

    # A priced run the same day: its cost, and the unpriced run said beside it.
    JudgePrice.objects.create(judge_model="judge-p", prompt_per_1k=Decimal("1"),
                              completion_per_1k=Decimal("1"))
    settings.TREUE_JUDGE_MODEL = "judge-p"
    priced = current_run(judged(judge, world.service, world.use_case, "mit-preis", SIX[:1]))
    row = usage_rows(lead.get("/use-cases/pruefung/judge/").content.decode())[today]
    cost = Decimal(priced.prompt_tokens + priced.completion_tokens) / 1000
    assert row[:2] == ["2", "5"]
    assert row[4] == f"{money(cost)} dazu 1 Lauf ohne Preis"
    assert row[6] == money(cost), "cost per priced run"


def test_judge_page_counts_waiting_runs_and_lists_recent_runs(
    world: World, judge: Any
) -> None:
    answer = judged(judge, world.service, world.use_case, "fertig", SIX[:2])
    ingest(world.service, world.use_case, "offen-1", "Offen eins.")
    ingest(world.service, world.use_case, "offen-2", "Offen zwei.")
    html = client_for(world, "expert").get("/use-cases/pruefung/judge/").content.decode()
    assert dict(re.findall(r'data-count="(\w+)">(\d+)<', html)) == {
        "pending": "2", "running": "0", "failed": "0"}
    assert f'href="/answers/{answer.pk}/#pruefung"' in html
    # Experts see the figures but not the week form.
    assert "/use-cases/pruefung/judge/rescore/" not in html


@pytest.mark.parametrize(("who", "status"), [
    ("anonymous", 302), ("expert", 200), ("lead", 200), ("staff", 200),
    ("unassigned", 404), ("other_lead", 404),
])
def test_who_sees_the_judge_page(world: World, who: str, status: int) -> None:
    response = client_for(world, who).get("/use-cases/pruefung/judge/")
    assert response.status_code == status
    if status == 302:
        assert response["Location"] == "/login/?next=/use-cases/pruefung/judge/"


def test_judge_page_of_an_unknown_use_case_is_404(world: World) -> None:
    assert client_for(world, "staff").get("/use-cases/gibt-es-nicht/judge/").status_code == 404


def test_week_form_defaults_to_last_week_and_the_configured_model(world: World) -> None:
    html = client_for(world, "lead").get("/use-cases/pruefung/judge/").content.decode()
    year, week, _ = (timezone.localdate() - timedelta(days=7)).isocalendar()
    assert re.search(rf'<input[^>]*name="week"[^>]*value="{year}-W{week:02d}"', html)
    assert re.search(rf'<input[^>]*name="judge_model"[^>]*value="{JUDGE}"', html)


# --- expected weekly cost: judge page and admin ----------------------------------------------


@pytest.fixture
def cost_world(world: World, judge: Any) -> list[JudgeRun]:
    """Five answers of the last three days, two flagged; claims 1, 2, 3, 1, 2: 14 calls."""
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=Decimal("10"),
                              completion_per_1k=Decimal("20"))
    now = timezone.now()
    runs = []
    for i, (claims, flagged, days) in enumerate([
        (1, True, 3), (2, False, 2.5), (3, True, 2), (1, False, 1), (2, False, 0.5),
    ]):
        verdicts = [(f"Antwort {i}, Aussage {k}.", "GEDECKT") for k in range(claims)]
        answer = judged(judge, world.service, world.use_case, f"kosten-{i}", verdicts,
                        flagged=flagged, created_at=now - timedelta(days=days),
                        text=f"Antwort {i}: Der Behälter wird alle 5 Jahre geprüft.")
        runs.append(current_run(answer))
    # Older than four weeks: not part of the estimate.
    ingest(world.service, world.use_case, "alt", "Alt.", created_at=now - timedelta(days=40))
    return runs


def expected_weekly_text(runs: list[JudgeRun]) -> tuple[str, str]:
    # One week of history (first answer 3 days ago): 5 answers a week, 2 flagged (40 %).
    # At the use case's rate of 100 %: 5 × (0.4 + 0.6 × 1) = 5 judged, × 14 / 5 = 14 calls;
    # the cost is then the five runs' tokens at the price.
    cost = sum(r.prompt_tokens * 10 + r.completion_tokens * 20 for r in runs) / 1000
    return (
        f"Pro Woche erwartet: geprüfte Antworten ≈ 5 · Aufrufe des Prüfmodells ≈ 14 · "
        f"Kosten ≈ {german(cost, 2)} EUR",
        "Annahmen aus der letzten Woche: 5,0 Antworten pro Woche, davon 40,0 % markiert "
        "(immer geprüft); von den übrigen wird die Stichprobenrate von 100 % geprüft. "
        "Je geprüfter Antwort 2,8 Aufrufe (Mittel aus 5 Prüfläufen).",
    )


def compare_rows(html: str) -> list[list[str]]:
    table = re.search(r'<table class="compare">.*?</table>', html, re.DOTALL)
    assert table is not None
    return [
        [text_of(c) for c in re.findall(r"<td>(.*?)</td>", row, re.DOTALL)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(0), re.DOTALL)[1:]
    ]


def test_judge_page_shows_the_expected_weekly_cost(
    world: World, cost_world: list[JudgeRun]
) -> None:
    assert sum(r.calls for r in cost_world) == 14
    html = client_for(world, "lead").get("/use-cases/pruefung/judge/").content.decode()
    text = text_of(html)
    headline, assumptions = expected_weekly_text(cost_world)
    assert headline in text
    assert assumptions in text
    # 2 %: 5 × (0.4 + 0.6 × 0.02) = 2.06 answers, × 2.8 = 5.768 calls; 3 %: 2.09 and 5.852;
    # 5 %: 2.15 and 6.02
    per_call = sum(r.prompt_tokens * 10 + r.completion_tokens * 20 for r in cost_world) \
        / 1000 / 14
    rows = compare_rows(html)
    assert [row[0] for row in rows] == ["2 %", "3 %", "5 %", "100 % (eingestellt)"]
    for row, judged_answers, calls in zip(
        rows, [2.06, 2.09, 2.15, 5.0], [5.768, 5.852, 6.02, 14.0], strict=True
    ):
        # floatformat:"-1": one decimal, none for a whole number
        assert row[1:] == [
            german(judged_answers, 0 if judged_answers.is_integer() else 1),
            german(calls, 0 if calls.is_integer() else 1),
            f"{german(calls * per_call, 2)} EUR",
        ]


def test_cached_tokens_priced_in_the_weekly_cost_and_the_rescore_estimate(
    world: World, cost_world: list[JudgeRun]
) -> None:
    # Half of every run's prompt tokens came from the provider's cache, at a tenth of the price.
    for run in cost_world:
        JudgeRun.objects.filter(pk=run.pk).update(cached_tokens=run.prompt_tokens // 2)
    JudgePrice.objects.filter(judge_model=JUDGE).update(cached_prompt_per_1k=Decimal("1"))
    runs = list(JudgeRun.objects.filter(pk__in=[r.pk for r in cost_world]))
    cost = sum(
        (r.prompt_tokens - r.cached_tokens) * 10 + r.cached_tokens * 1 + r.completion_tokens * 20
        for r in runs
    ) / 1000
    client = client_for(world, "lead")
    text = text_of(client.get("/use-cases/pruefung/judge/").content.decode())
    assert f"Kosten ≈ {german(cost, 2)} EUR" in text
    cached = sum(r.cached_tokens for r in runs)
    assert f"(davon {cached:,} aus dem Cache)".replace(",", ".") in text
    assert "Prompt-Token aus dem Cache: 1 EUR je 1.000." in text
    assert "aus dem Cache des Anbieters" in text
    # A rescore of one answer: 1 + its claims calls at its run's tokens per call.
    run = runs[2]  # 3 claims, 4 calls
    per_call = (
        (run.prompt_tokens - run.cached_tokens) * 10 + run.cached_tokens
        + run.completion_tokens * 20
    ) / 1000 / run.calls
    estimate = rescore_estimate_for_answer(answer=run.answer, judge_model=JUDGE)
    assert estimate.cost == pytest.approx(per_call * 4, rel=1e-9)


def test_admin_use_case_form_shows_the_estimate_next_to_the_rate(
    world: World, cost_world: list[JudgeRun]
) -> None:
    admin = User.objects.create_superuser("admin", password="pw-only-for-tests-31c")
    client = Client()
    client.force_login(admin)
    response = client.get(f"/admin/monitoring/usecase/{world.use_case.pk}/change/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Erwartete Prüfkosten pro Woche" in html
    text = text_of(html)
    headline, assumptions = expected_weekly_text(cost_world)
    assert headline in text and assumptions in text
    assert "Preis von „judge-x“: 10 EUR je 1.000 Prompt-Token, 20 EUR je 1.000 Antwort-Token." \
        in text
    # The estimate sits right after the sample rate.
    assert html.index('name="sample_rate"') < html.index("Erwartete Prüfkosten pro Woche") \
        < html.index('name="logprob_threshold"')
    # The add form has nothing to estimate yet, and says so.
    add = client.get("/admin/monitoring/usecase/add/").content.decode()
    assert "wird nach dem Anlegen aus den Antworten der letzten 4 Wochen geschätzt" in add
    # Retention by month is set here, beside the retention period.
    assert html.index('name="retention_days"') < html.index('name="retention_deletes"')
    assert "Alte Monate löschen" in html


def test_estimate_without_price_or_runs_says_what_is_missing(world: World, judge: Any) -> None:
    html = client_for(world, "lead").get("/use-cases/pruefung/judge/").content.decode()
    text = text_of(html)
    assert "Pro Woche erwartet: geprüfte Antworten ≈ 0 · Aufrufe des Prüfmodells ≈ 0 " in text
    assert "Kosten ≈" not in text
    assert "Kosten unbekannt: kein Preis hinterlegt für „judge-x“" in text
    assert "angenommen 6 Aufrufe (1 Zerlegung und 5 Aussagen)" in text


def test_admin_lists_runs_read_only_with_claims_and_prices(
    world: World, scored: Answer
) -> None:
    admin = User.objects.create_superuser("admin", password="pw-only-for-tests-31c")
    client = Client()
    client.force_login(admin)
    run = current_run(scored)
    assert client.get("/admin/monitoring/judgerun/").status_code == 200
    page = client.get(f"/admin/monitoring/judgerun/{run.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Die Prüfung kostet 250 Euro." in html and "vielleicht" in html
    assert 'name="_save"' not in html, "read-only"
    assert client.get("/admin/monitoring/judgerun/add/").status_code == 403
    assert client.post(f"/admin/monitoring/judgerun/{run.pk}/delete/",
                       {"post": "yes"}).status_code == 403
    assert JudgeRun.objects.filter(pk=run.pk).exists()
    assert client.get("/admin/monitoring/judgeprice/add/").status_code == 200


# --- concurrency (PostgreSQL) ----------------------------------------------------------------


def test_a_lead_switches_the_judge_mode_on_the_judge_page(world: World, judge: Any) -> None:
    url = f"/use-cases/{world.use_case.slug}/judge/"
    lead = client_for(world, "lead")
    html = lead.get(url).content.decode()
    assert "Prüfmodus: je Aussage" in text_of(html)
    assert "Gebündelt: Alle Aussagen einer Antwort gehen in einem Aufruf" in text_of(html)
    response = lead.post(url + "mode/", {"judge_mode": "batched"})
    assert (response.status_code, response["Location"]) == (302, url + "#mode")
    world.use_case.refresh_from_db()
    assert world.use_case.judge_mode == "batched"
    assert "Prüfmodus: gebündelt" in text_of(lead.get(url).content.decode())
    # New answers are judged in the new mode; an unknown mode is a 400, nothing changed.
    bad = lead.post(url + "mode/", {"judge_mode": "bulk"})
    assert bad.status_code == 400 and "Unbekannter Prüfmodus" in bad.content.decode()
    world.use_case.refresh_from_db()
    assert world.use_case.judge_mode == "batched"


@pytest.mark.parametrize(("who", "status"), [
    ("expert", 403), ("other_lead", 404), ("unassigned", 404), ("anonymous", 302),
])
def test_who_may_switch_the_judge_mode(world: World, judge: Any, who: str, status: int) -> None:
    response = client_for(world, who).post(
        f"/use-cases/{world.use_case.slug}/judge/mode/", {"judge_mode": "batched"})
    assert response.status_code == status
    world.use_case.refresh_from_db()
    assert world.use_case.judge_mode == "per-claim"
