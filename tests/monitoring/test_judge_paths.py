"""The judge page's ways of the verdicts (issue 37, point 3) and the evidence switch (point 4).

Per ISO week, the share of the finished runs by the way their verdicts came (batched, after a
correction, asked again claim by claim, per claim, in one call) and what each way cost per
answer; a warning when the latest week asked again too often (a judge model that does not keep
to the format); whether the endpoint takes structured output from the use case's judge model;
and the switch for the judge's evidence, recorded as a setting change.

Answers come in through the real ingest, which queues their runs; the runs' outcomes (way,
calls, tokens, cost, finish time) are then written onto them as the worker would leave them,
so that every figure on the page can be computed by hand from the rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal
from html import unescape
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from judging.selectors.paths import PATH_WEEKS, judge_evidence_tokens, judge_paths_by_week
from monitoring.models import (
    Claim,
    JudgeEndpoint,
    JudgePrice,
    JudgeRun,
    Service,
    SettingChange,
    UseCase,
)
from tests.support.world import WorldBuilder

JUDGE = "judge-x"
UNPRICED_JUDGE = "judge-z"
ENDPOINT = "http://judge.test/v1"
PAGE = "/use-cases/wege/judge/"


@dataclass
class World:
    use_case: UseCase
    service: Service
    users: dict[str, User | None]
    builder: WorldBuilder
    count: int = 0

    def run(
        self, *, finished: datetime, path: str, calls: int, prompt: int, completion: int,
        cost: str | None, judge_model: str = JUDGE, status: str = "succeeded",
    ) -> JudgeRun:
        """An answer ingested (its run queued by the ingest) and its run finished as given."""
        self.count += 1
        answer = self.builder.answer(
            self.service, self.use_case, f"w-{self.count}", f"Antwort {self.count}."
        )
        run = answer.judge_runs.get()
        JudgeRun.objects.filter(pk=run.pk).update(
            status=status, finished_at=finished, verify_path=path, calls=calls,
            prompt_tokens=prompt, completion_tokens=completion,
            cost=None if cost is None else Decimal(cost), judge_model=judge_model,
        )
        return JudgeRun.objects.get(pk=run.pk)


@pytest.fixture
def world(world_builder: WorldBuilder, settings: Any, db: None) -> World:
    settings.TREUE_JUDGE_BASE_URL = ENDPOINT
    settings.TREUE_JUDGE_AZURE_ENDPOINT = ""
    settings.TREUE_JUDGE_MODEL = JUDGE
    use_case = world_builder.use_case("wege", "Wege", sample_rate=1.0, judge_mode="batched")
    other = world_builder.use_case("andere", "Andere", sample_rate=1.0)
    service, _ = world_builder.service("wege-bot", use_case)
    user = world_builder.user
    return World(use_case, service, {
        "anonymous": None,
        "expert": user("expertin", expert_of=[use_case]),
        "lead": user("teamleitung", lead_of=[use_case]),
        "other_lead": user("fremdleitung", lead_of=[other]),
        "unassigned": user("niemand"),
        "staff": user("verwaltung", is_staff=True),
    }, world_builder)


def client_for(world: World, who: str) -> Client:
    client = Client()
    user = world.users[who]
    if user is not None:
        client.force_login(user)
    return client


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()


def german(value: Decimal | float, places: int, *, grouped: bool = False) -> str:
    """As the German page writes a number: rounded half up (like floatformat), "1.234,5"."""
    rounded = Decimal(str(value)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    text = f"{rounded:,.{places}f}" if grouped else f"{rounded:.{places}f}"
    return text.replace(",", "_").replace(".", ",").replace("_", ".")


def week_start(weeks_back: int) -> datetime:
    """Monday 00:00 (site time) of the week `weeks_back` weeks before the current one."""
    today = timezone.localdate()
    monday = today - timedelta(days=today.weekday(), weeks=weeks_back)
    return datetime.combine(monday, time.min, tzinfo=timezone.get_current_timezone())


def week_label(weeks_back: int) -> str:
    year, week, _ = week_start(weeks_back).date().isocalendar()
    return f"{year}-W{week:02d}"


def path_rows(html: str) -> dict[tuple[str, str], list[str]]:
    """(week, way) -> the row's cells after the week: way, runs, share, calls, prompt and
    completion tokens per answer, cost, cost per answer."""
    table = re.search(r'<table class="paths numbers">.*?</table>', html, re.DOTALL)
    assert table is not None
    rows = {}
    for week, path, row in re.findall(
        r'<tr data-week="([^"]+)" data-path="([^"]+)">(.*?)</tr>', table.group(0), re.DOTALL
    ):
        cells = [text_of(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
        rows[(week, path)] = cells
    return rows


def week_heads(html: str) -> dict[str, str]:
    """The text of each week's first cell (label, "(laufend)", runs without a way)."""
    table = re.search(r'<table class="paths numbers">.*?</table>', html, re.DOTALL)
    assert table is not None
    return {
        week: text_of(head) for week, head in re.findall(
            r'<tr data-week="([^"]+)"[^>]*>\s*<th[^>]*>(.*?)</th>', table.group(0), re.DOTALL)
    }


# --- the ways per week -----------------------------------------------------------------------


@pytest.fixture
def two_weeks(world: World) -> dict[str, list[JudgeRun]]:
    """Two weeks ago: 3 batched runs and 1 per claim. Last week: 5 batched, 2 after a
    correction, 2 asked again (one of a judge model without a price), 1 in one call, and one
    finished run without a way. Runs of the current week: none. Older than the table: one."""
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=Decimal("0.01"),
                              completion_per_1k=Decimal("0.03"), currency="EUR")
    older, last = week_start(2) + timedelta(days=2, hours=12), week_start(1) + timedelta(hours=9)
    r = world.run
    return {
        "older_batched": [r(finished=older, path="batched", calls=2, prompt=1000,
                            completion=100, cost="0.0100") for _ in range(3)],
        "older_per_claim": [r(finished=older, path="per-claim", calls=6, prompt=4500,
                              completion=20, cost="0.0300")],
        "batched": [r(finished=last + timedelta(hours=i), path="batched", calls=2,
                      prompt=1200 + 100 * i, completion=150, cost=f"0.01{i}0")
                    for i in range(5)],
        "corrected": [r(finished=last, path="corrected", calls=3, prompt=2600,
                        completion=260, cost="0.0260"),
                      r(finished=last, path="corrected", calls=3, prompt=2700,
                        completion=271, cost="0.0271")],
        "fallback": [r(finished=last, path="fallback", calls=5, prompt=3000, completion=200,
                       cost="0.0320"),
                     r(finished=last, path="fallback", calls=4, prompt=2800, completion=180,
                       cost=None, judge_model=UNPRICED_JUDGE)],
        "single": [r(finished=last, path="single", calls=1, prompt=900, completion=300,
                     cost="0.0150")],
        "no_way": [r(finished=last, path="", calls=0, prompt=0, completion=0, cost=None,
                     status="failed")],
        "too_old": [r(finished=week_start(9), path="fallback", calls=9, prompt=9000,
                      completion=900, cost="0.0900")],
    }


def test_the_ways_per_week_with_shares_and_costs_per_answer(
    world: World, two_weeks: dict[str, list[JudgeRun]], django_assert_max_num_queries: Any
) -> None:
    html = client_for(world, "lead").get(PAGE).content.decode()
    rows = path_rows(html)
    w1, w2 = week_label(1), week_label(2)

    # Two weeks ago: 4 runs with a way, 3 batched (75 %) and 1 per claim (25 %).
    assert rows[(w2, "batched")] == [
        "gebündelt", "3", "75,0 %", "2,0", "1.000", "100", "0,030 EUR", "0,010 EUR"]
    assert rows[(w2, "per-claim")] == [
        "je Aussage", "1", "25,0 %", "6,0", "4.500", "20", "0,030 EUR", "0,030 EUR"]
    # Last week: 10 runs with a way. Batched: 5 (50 %), 2 calls each; prompt tokens
    # 1,200 + 1,300 + 1,400 + 1,500 + 1,600 = 7,000, i.e. 1,400 per answer; completion 150;
    # cost 0.010 + 0.011 + 0.012 + 0.013 + 0.014 = 0.060, 0.012 per answer.
    assert rows[(w1, "batched")] == [
        "gebündelt", "5", "50,0 %", "2,0", "1.400", "150", "0,060 EUR", "0,012 EUR"]
    # After a correction: 2 (20 %), 3 calls each; (2,600 + 2,700) / 2 = 2,650 prompt and
    # (260 + 271) / 2 = 265.5 completion tokens (266 shown); 0.0531, 0.02655 per answer.
    assert rows[(w1, "corrected")] == [
        "gebündelt nach Korrektur", "2", "20,0 %", "3,0", "2.650", "266", "0,053 EUR",
        "0,027 EUR"]
    # Asked again: 2 (20 %), (5 + 4) / 2 = 4.5 calls; (3,000 + 2,800) / 2 = 2,900 and
    # (200 + 180) / 2 = 190 tokens. One of them has no price: the cost is the other's, said so,
    # and per answer divided by the one priced run.
    assert rows[(w1, "fallback")] == [
        "einzeln nachgefragt", "2", "20,0 %", "4,5", "2.900", "190",
        "0,032 EUR dazu 1 Lauf ohne Preis", "0,032 EUR"]
    assert rows[(w1, "single")] == [
        "ein Aufruf", "1", "10,0 %", "1,0", "900", "300", "0,015 EUR", "0,015 EUR"]
    # The ways in the page's order, newest week first; the week's run without a way beside it.
    assert list(rows) == [
        (w1, "batched"), (w1, "corrected"), (w1, "fallback"), (w1, "single"),
        (w2, "batched"), (w2, "per-claim"),
    ]
    heads = week_heads(html)
    assert heads[w1] == f"{w1} + 1 Lauf ohne Angabe"
    assert heads[week_label(0)] == f"{week_label(0)} (laufend)"
    assert len(heads) == PATH_WEEKS == 8
    assert week_label(9) not in heads, "the run of nine weeks ago is outside the table"

    # Last week asked again for 20 % of its runs: more than 10 %, so the page says that the
    # judge models do not keep to the format.
    warning = re.search(r'<p class="path-warning" role="alert" data-warning="fallback">(.*?)</p>',
                        html, re.DOTALL)
    assert warning is not None
    assert text_of(warning.group(1)) == (
        f"In der Woche {w1} wurden 20 % der Prüfläufe einzeln nachgefragt (mehr als 10 %): "
        "Die Prüfmodelle „judge-x“, „judge-z“ halten das Antwortformat oft nicht ein, und jede "
        "einzeln nachgefragte Aussage kostet einen eigenen Aufruf. Ein anderes Prüfmodell "
        "vergleichen oder je Aussage prüfen."
    )

    # The table is one grouped read of the runs and one of the prices.
    with django_assert_max_num_queries(2):
        judge_paths_by_week(use_case=world.use_case)


def test_the_warning_needs_more_than_a_tenth_in_the_latest_week(world: World) -> None:
    last, older = week_start(1) + timedelta(hours=9), week_start(3) + timedelta(hours=9)
    # Three weeks ago half the runs were asked again; last week 1 of 10: no warning.
    for path in ("fallback", "batched"):
        world.run(finished=older, path=path, calls=2, prompt=100, completion=10, cost=None)
    for path in ["fallback"] + ["batched"] * 9:
        world.run(finished=last, path=path, calls=2, prompt=100, completion=10, cost=None)
    html = client_for(world, "lead").get(PAGE).content.decode()
    assert 'data-warning="fallback"' not in html
    assert path_rows(html)[(week_label(1), "fallback")][2] == "10,0 %"
    # Without a price, the cost says so and there is none per answer.
    assert path_rows(html)[(week_label(1), "batched")][6:] == [
        "kein Preis hinterlegt (9 Läufe)", "–"]

    # A second one asked again this week: 2 of 2, the newest week with runs decides.
    now = timezone.now()
    world.run(finished=now, path="fallback", calls=4, prompt=100, completion=10, cost=None)
    paths = judge_paths_by_week(use_case=world.use_case)
    assert paths.latest is not None and paths.latest.label == week_label(0)
    assert paths.fallback_warning
    html = client_for(world, "lead").get(PAGE).content.decode()
    assert (
        f"In der Woche {week_label(0)} wurden 100 % der Prüfläufe einzeln nachgefragt (mehr als "
        "10 %): Das Prüfmodell „judge-x“ hält das Antwortformat oft nicht ein"
    ) in text_of(html)


def test_no_runs_no_ways_and_no_warning(world: World) -> None:
    html = client_for(world, "lead").get(PAGE).content.decode()
    assert path_rows(html) == {}
    assert 'data-warning="fallback"' not in html
    assert len(week_heads(html)) == 8


def test_the_english_page_names_the_ways(
    world: World, two_weeks: dict[str, list[JudgeRun]]
) -> None:
    client = client_for(world, "lead")
    html = client.get(PAGE, headers={"accept-language": "en"}).content.decode()
    rows = path_rows(html)
    assert [cells[0] for cells in rows.values()][:4] == [
        "batched", "batched after a correction", "asked again claim by claim", "one call"]
    assert rows[(week_label(1), "batched")][2:] == [
        "50.0 %", "2.0", "1,400", "150", "0.060 EUR", "0.012 EUR"]
    text = text_of(html)
    assert f"In week {week_label(1)}, 20 % of the judge runs asked again claim by claim" in text
    assert "Ways of the verdicts per week" in text
    assert "Structured output (JSON schema) of “judge-x” at the configured endpoint: " \
        "not checked yet" in text
    assert "Evidence and reasons: on" in text


# --- structured output -----------------------------------------------------------------------


def structured_line(html: str) -> tuple[str, str]:
    match = re.search(r'<p class="small" data-structured="(\w+)">(.*?)</p>', html, re.DOTALL)
    assert match is not None
    return match.group(1), text_of(match.group(2))


def test_the_page_says_whether_the_endpoint_takes_structured_output(
    world: World, settings: Any
) -> None:
    client = client_for(world, "expert")
    head = "Strukturierte Ausgabe (JSON-Schema) von „judge-x“ am eingestellten Endpunkt:"
    assert structured_line(client.get(PAGE).content.decode()) == (
        "unknown", f"{head} noch nicht geprüft (geprüft wird beim ersten Aufruf gebündelt "
                   "oder in einem Aufruf)")

    # Another model, or the same model at another endpoint, says nothing about this one.
    JudgeEndpoint.objects.create(endpoint=ENDPOINT, model="judge-y", structured_output=True)
    JudgeEndpoint.objects.create(endpoint="http://other.test/v1", model=JUDGE,
                                 structured_output=True)
    assert structured_line(client.get(PAGE).content.decode())[0] == "unknown"

    found = JudgeEndpoint.objects.create(
        endpoint=ENDPOINT, model=JUDGE, structured_output=False,
        detail="400: response_format json_schema is not supported",
    )
    when = timezone.localtime(found.checked_at).strftime("%d.%m.%Y %H:%M")
    assert structured_line(client.get(PAGE).content.decode()) == (
        "no", f"{head} nein (geprüft {when}): 400: response_format json_schema is not "
        "supported")
    JudgeEndpoint.objects.filter(pk=found.pk).update(structured_output=True)
    state, text = structured_line(client.get(PAGE).content.decode())
    assert state == "yes" and text.startswith(f"{head} ja (geprüft ")

    # The use case's own judge model (adopted from a comparison) is the one asked about.
    UseCase.objects.filter(pk=world.use_case.pk).update(judge_model="judge-y")
    state, text = structured_line(client.get(PAGE).content.decode())
    assert state == "yes" and "„judge-y“" in text
    # On Azure the endpoint is the resource's.
    settings.TREUE_JUDGE_BASE_URL = ""
    settings.TREUE_JUDGE_AZURE_ENDPOINT = "https://resource.openai.azure.com"
    assert structured_line(client.get(PAGE).content.decode())[0] == "unknown"
    JudgeEndpoint.objects.create(endpoint="https://resource.openai.azure.com", model="judge-y",
                                 structured_output=False)
    assert structured_line(client.get(PAGE).content.decode())[0] == "no"


# --- the evidence switch ---------------------------------------------------------------------


def test_a_lead_switches_the_evidence_and_the_change_is_recorded(world: World) -> None:
    lead = client_for(world, "lead")
    html = lead.get(PAGE).content.decode()
    assert re.search(r'data-setting="judge_evidence">an<', html)
    assert 'name="judge_evidence" value="0"' in html
    # No batched run yet: the assumed cost.
    assert "Die Belege kosten etwa 25 Antwort-Token je Aussage (noch nicht gemessen: kein " \
        "gebündelter Prüflauf der letzten 28 Tage)." in text_of(html)

    response = lead.post(PAGE + "evidence/", {"judge_evidence": "0"})
    assert (response.status_code, response["Location"]) == (302, PAGE + "#mode")
    world.use_case.refresh_from_db()
    assert world.use_case.judge_evidence is False
    [change] = SettingChange.objects.all()
    assert (change.use_case, change.field, change.old_value, change.new_value) == (
        world.use_case, "judge_evidence", 1.0, 0.0)
    assert (change.changed_by, change.source) == (world.users["lead"], "settings")
    page = lead.get(PAGE).content.decode()
    assert re.search(r'data-setting="judge_evidence">aus<', page)
    assert "Belege und Begründungen des Prüfers ab dem nächsten Prüflauf: aus." in page
    assert 'name="judge_evidence" value="1"' in page

    # The same value again is no change; back on is the second.
    lead.post(PAGE + "evidence/", {"judge_evidence": "0"})
    assert SettingChange.objects.count() == 1
    lead.post(PAGE + "evidence/", {"judge_evidence": "1"})
    world.use_case.refresh_from_db()
    assert world.use_case.judge_evidence is True
    assert [(c.old_value, c.new_value) for c in SettingChange.objects.order_by("pk")] == [
        (1.0, 0.0), (0.0, 1.0)]

    # The use case's page lists both in its history of the settings, as on and off.
    history = text_of(lead.get("/use-cases/wege/").content.decode())
    assert "Belege und Begründungen des Prüfers an → aus" in history
    assert "Belege und Begründungen des Prüfers aus → an" in history

    bad = lead.post(PAGE + "evidence/", {"judge_evidence": "ja"})
    assert bad.status_code == 400 and "„1“ (an) oder „0“ (aus)" in bad.content.decode()
    assert SettingChange.objects.count() == 2


@pytest.mark.parametrize(("who", "status"), [
    ("expert", 403), ("other_lead", 404), ("unassigned", 404), ("anonymous", 302),
])
def test_who_may_switch_the_evidence(world: World, who: str, status: int) -> None:
    response = client_for(world, who).post(PAGE + "evidence/", {"judge_evidence": "0"})
    assert response.status_code == status
    if status == 302:
        assert response["Location"].startswith("/login/")
    world.use_case.refresh_from_db()
    assert world.use_case.judge_evidence is True
    assert not SettingChange.objects.exists()
    # Experts see the setting, not the switch.
    if who == "expert":
        html = client_for(world, who).get(PAGE).content.decode()
        assert re.search(r'data-setting="judge_evidence">an<', html)
        assert "/judge/evidence/" not in html


def test_staff_switch_the_evidence_too(world: World) -> None:
    response = client_for(world, "staff").post(PAGE + "evidence/", {"judge_evidence": "0"})
    assert response.status_code == 302
    assert SettingChange.objects.get().changed_by == world.users["staff"]


@pytest.mark.parametrize(("who", "status"), [
    ("anonymous", 302), ("expert", 200), ("lead", 200), ("staff", 200),
    ("unassigned", 404), ("other_lead", 404),
])
def test_who_sees_the_ways(
    world: World, two_weeks: dict[str, list[JudgeRun]], who: str, status: int
) -> None:
    response = client_for(world, who).get(PAGE)
    assert response.status_code == status
    if status == 200:
        assert path_rows(response.content.decode())


def test_the_evidence_cost_is_measured_on_batched_runs(world: World) -> None:
    """Completion tokens per claim of the runs whose verdicts all came from the batched reply:
    claims with chunk ranks or a reason against claims without."""
    last = timezone.now() - timedelta(days=3)
    with_evidence = world.run(finished=last, path="batched", calls=2, prompt=1000,
                              completion=130, cost=None)
    without = world.run(finished=last, path="batched", calls=2, prompt=1000, completion=26,
                        cost=None)
    corrected = world.run(finished=last, path="corrected", calls=3, prompt=1000,
                          completion=500, cost=None)
    old = world.run(finished=timezone.now() - timedelta(days=40), path="batched", calls=2,
                    prompt=1000, completion=500, cost=None)

    def claims(run: JudgeRun, tokens: list[int], *, evidence: bool, cached: bool = False) -> None:
        for i, n in enumerate(tokens):
            Claim.objects.create(
                run=run, position=i, text=f"Aussage {i}.", label="GEDECKT", judge_model=JUDGE,
                prompt_version=run.prompt_version, completion_tokens=n, cached=cached,
                evidence_chunks=[1] if evidence and i % 2 == 0 else [],
                reason="Steht in Abschnitt 1." if evidence and i % 2 else "",
            )

    claims(with_evidence, [30, 31, 32, 35], evidence=True)  # mean 32
    claims(without, [6, 7, 8], evidence=False)  # mean 7
    claims(corrected, [99, 99], evidence=True)  # not from the batched reply alone
    claims(old, [99], evidence=False)  # older than 28 days
    Claim.objects.create(run=without, position=9, text="Wiederverwendet.", label="GEDECKT",
                         judge_model=JUDGE, prompt_version=without.prompt_version,
                         completion_tokens=0, cached=True)

    measured = judge_evidence_tokens(use_case=world.use_case)
    assert (measured.with_evidence_claims, measured.with_evidence_tokens) == (4, 32)
    assert (measured.without_evidence_claims, measured.without_evidence_tokens) == (3, 7)
    assert measured.difference == 25
    # (the page's spans closed before a comma or full stop)
    text = re.sub(r" ([,.])", r"\1", text_of(client_for(world, "lead").get(PAGE).content.decode()))
    assert (
        "Gemessen an den gebündelten Prüfläufen der letzten 28 Tage: mit Belegen 32 "
        "Antwort-Token je Aussage (aus 4 Aussagen), ohne Belege 7 Antwort-Token je Aussage "
        "(aus 3 Aussagen). Die Belege kosten also etwa 25 Antwort-Token je Aussage."
    ) in text


def test_the_admin_sets_the_evidence_and_records_it(world: World) -> None:
    admin = User.objects.create_superuser("admin", password="pw-only-for-tests-31c")
    client = Client()
    client.force_login(admin)
    url = f"/admin/monitoring/usecase/{world.use_case.pk}/change/"
    html = client.get(url).content.decode()
    assert html.index('name="judge_mode"') < html.index('name="judge_evidence"')
    assert "Antwort-Token der Belege" in html and "noch nicht gemessen" in html
    u = world.use_case
    response = client.post(url, {
        "name": u.name, "slug": u.slug, "language": u.language, "sample_rate": u.sample_rate,
        "logprob_threshold": u.logprob_threshold, "action_threshold": u.action_threshold,
        "judge_mode": "single", "review_batch_size": u.review_batch_size,
        "retention_days": "", "active": "on",
        # judge_evidence unchecked: off
    })
    assert response.status_code == 302, response.content.decode()[:2000]
    u.refresh_from_db()
    assert (u.judge_mode, u.judge_evidence) == ("single", False)
    [change] = SettingChange.objects.all()
    assert (change.field, change.old_value, change.new_value, change.source) == (
        "judge_evidence", 1.0, 0.0, "admin")


# --- the judge mode: three of them -----------------------------------------------------------


def test_the_judge_page_offers_the_other_two_modes(world: World) -> None:
    lead = client_for(world, "lead")
    html = lead.get(PAGE).content.decode()
    assert "Prüfmodus: gebündelt" in text_of(html)
    buttons = re.findall(r'<button type="submit" name="judge_mode" value="([^"]+)"', html)
    assert buttons == ["per-claim", "single"]
    assert "Ein Aufruf: Zerlegung und Urteile in einem einzigen Aufruf" in text_of(html)
    response = lead.post(PAGE + "mode/", {"judge_mode": "single"})
    assert response.status_code == 302
    world.use_case.refresh_from_db()
    assert world.use_case.judge_mode == "single"
    html = lead.get(PAGE).content.decode()
    assert "Prüfmodus: ein Aufruf" in text_of(html)
    assert re.findall(r'<button type="submit" name="judge_mode" value="([^"]+)"', html) == [
        "per-claim", "batched"]


def test_the_admin_lists_what_is_known_of_the_endpoints(world: World) -> None:
    admin = User.objects.create_superuser("admin", password="pw-only-for-tests-31c")
    client = Client()
    client.force_login(admin)
    found = JudgeEndpoint.objects.create(endpoint=ENDPOINT, model=JUDGE, structured_output=False,
                                         detail="400: response_format")
    listed = client.get("/admin/monitoring/judgeendpoint/").content.decode()
    assert "Prüfmodell-Endpunkte" in listed and "400: response_format" in listed
    page = client.get(f"/admin/monitoring/judgeendpoint/{found.pk}/change/").content.decode()
    assert 'name="_save"' not in page, "read-only"
    assert client.get("/admin/monitoring/judgeendpoint/add/").status_code == 403
    # Deleted, the next batched call finds out again.
    client.post(f"/admin/monitoring/judgeendpoint/{found.pk}/delete/", {"post": "yes"})
    assert not JudgeEndpoint.objects.exists()
