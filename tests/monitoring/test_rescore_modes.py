"""Issue 41 (7): the rescore confirmation counts the calls of the use case's judge mode, and the
judge page's introduction describes the mode that is set, not always the per-claim mode.

The world and its helpers are test_judge_pages.py's: answers through the real ingest, runs
through the real judge service against the local OpenAI-compatible server.
"""

from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client

from tests.monitoring import test_judge_pages as pages
from tests.monitoring.test_judge_pages import (
    BERLIN_W10,
    OTHER_JUDGE,
    SIX,
    World,
    client_for,
    execute_pending,
    ingest,
    judged,
    text_of,
)

# The fixtures of test_judge_pages.py, its world built once for this module too.
built, world, judge = pages.built, pages.world, pages.judge


def set_mode(lead: Client, world: World, mode: str) -> None:
    """The mode switched as a lead switches it, on the judge page."""
    if world.use_case.judge_mode != mode:
        response = lead.post(f"/use-cases/{world.use_case.slug}/judge/mode/", {"judge_mode": mode})
        assert response.status_code == 302


# mode: (the figure, what it rests on), for an answer whose current run has six claims
ANSWER_PREVIEW = {
    "per-claim": ("Erwartete Aufrufe 7 1 Zerlegung plus 1 Aufruf je Aussage des aktuellen "
                  "Prüflaufs"),
    "batched": ("Erwartete Aufrufe mindestens 2 1 Zerlegung plus 1 gebündelter Aufruf für die "
                "Aussagen; lässt das Prüfmodell Aussagen offen, wird nachgefragt"),
    "single": ("Erwartete Aufrufe mindestens 1 Zerlegung und Urteile in einem Aufruf; "
               "unlesbare Urteile werden nachgefragt"),
}


@pytest.mark.parametrize("mode", list(ANSWER_PREVIEW))
def test_answer_preview_counts_the_calls_of_the_judge_mode(
    world: World, judge: Any, mode: str
) -> None:
    scored = judged(judge, world.service, world.use_case, "bewertet", SIX)
    lead = client_for(world, "lead")
    set_mode(lead, world, mode)
    text = text_of(lead.post(f"/answers/{scored.pk}/rescore/",
                             {"judge_model": OTHER_JUDGE}).content.decode())
    assert ANSWER_PREVIEW[mode] in text, text
    others = [t for m, t in ANSWER_PREVIEW.items() if m != mode]
    assert not any(t in text for t in others)


WEEK_PREVIEW = {
    "per-claim": "Erwartete Aufrufe 2 je Antwort 1 Zerlegung plus 1 Aufruf je Aussage",
    "batched": "Erwartete Aufrufe mindestens 2 je Antwort 1 Zerlegung plus 1 gebündelter Aufruf",
    "single": "Erwartete Aufrufe mindestens 1 je Antwort 1 Aufruf für Zerlegung und Urteile",
}


@pytest.mark.parametrize("mode", list(WEEK_PREVIEW))
def test_week_preview_counts_the_calls_of_the_judge_mode(
    world: World, judge: Any, mode: str
) -> None:
    # One judged answer of the week, with one claim.
    judged(judge, world.service, world.use_case, "eine", SIX[:1],
           created_at=datetime(2025, 3, 5, 12, tzinfo=UTC))
    lead = client_for(world, "lead")
    set_mode(lead, world, mode)
    text = text_of(lead.post("/use-cases/pruefung/judge/rescore/",
                             {"week": BERLIN_W10, "judge_model": OTHER_JUDGE}).content.decode())
    assert WEEK_PREVIEW[mode] in text, text


ASSUMED_PREVIEW = {
    "per-claim": "Erwartete Aufrufe ≈ 6,0 Schätzung: noch keine geprüfte Antwort in diesem "
                 "Anwendungsfall, angenommen 1 Zerlegung plus 5 Aussagen",
    "batched": "Erwartete Aufrufe mindestens 2 Schätzung: noch keine geprüfte Antwort in diesem "
               "Anwendungsfall, angenommen 1 Zerlegung plus 1 gebündelter Aufruf",
    "single": "Erwartete Aufrufe mindestens 1 Schätzung: noch keine geprüfte Antwort in diesem "
              "Anwendungsfall, angenommen 1 Aufruf für Zerlegung und Urteile",
}


@pytest.mark.parametrize("mode", list(ASSUMED_PREVIEW))
def test_assumed_preview_follows_the_judge_mode(
    world: World, judge: Any, openai_server: Any, mode: str
) -> None:
    lead = client_for(world, "lead")
    set_mode(lead, world, mode)
    broken = ingest(world.service, world.use_case, "offen",
                    "Antwort offen: Der Behälter wird alle 5 Jahre geprüft.")
    openai_server.responder = lambda request: "kein JSON"
    execute_pending(broken)
    openai_server.responder = judge
    broken.refresh_from_db()
    assert broken.current_run is None
    text = text_of(lead.post(f"/answers/{broken.pk}/rescore/",
                             {"judge_model": OTHER_JUDGE}).content.decode())
    assert ASSUMED_PREVIEW[mode] in text, text


INTRODUCTION = {
    "per-claim": "Jede Prüfung kostet einen Aufruf für die Zerlegung in Aussagen und einen je "
                 "Aussage.",
    "batched": "Jede Prüfung kostet einen Aufruf für die Zerlegung in Aussagen und einen "
               "gebündelten Aufruf für alle Aussagen, mehr nur, wenn das Prüfmodell Aussagen "
               "offen lässt.",
    "single": "Jede Prüfung kostet einen Aufruf für Zerlegung und Urteile zusammen, mehr nur, "
              "wenn das Prüfmodell kein lesbares Urteil liefert.",
}


@pytest.mark.parametrize("mode", list(INTRODUCTION))
def test_judge_page_introduction_describes_the_mode_set(world: World, mode: str) -> None:
    lead = client_for(world, "lead")
    set_mode(lead, world, mode)
    html = lead.get(f"/use-cases/{world.use_case.slug}/judge/").content.decode()
    intro = text_of(html.split('<section class="card" id="mode">')[0])
    assert INTRODUCTION[mode] in intro, intro
    assert not any(t in intro for m, t in INTRODUCTION.items() if m != mode)
