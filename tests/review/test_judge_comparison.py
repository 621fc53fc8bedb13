"""Judge comparison (issue 18 point 4): a candidate judge verifies, as a shadow, the claims the
experts labelled; the page sets it against the current judge on the same answers; one click
makes it the use case's judge. Shadow runs change no score and no estimate."""

import json
import re
from decimal import Decimal
from html import unescape
from typing import Any

import pytest

from judging.domain.batched import BATCHED_PROMPT_VERSION
from judging.domain.single import SINGLE_SYSTEM_DE
from monitoring.models import Answer, JudgeMode, JudgePrice, JudgeRun, UseCase
from review import services
from review.domain.kappa import weighted_kappa
from review.models import JudgeComparison, ShadowRun
from review.shadow.services import shadow_run_execute
from tests.review.conftest import ReviewWorld, shift_week
from tests.review.test_alarms import batch_of, review
from tests.support.judged import current_run
from tests.support.text import found
from tests.support.world import WorldBuilder

G, T, U = "GEDECKT", "TEILWEISE", "UNGEDECKT"
CANDIDATE = "kandidat-1"
# Per answer: the judge's two labels (GEDECKT for all), the expert's, the candidate's.
EXPERT = [(G, G), (G, U), (U, U), (G, T), (G, G)]
CANDIDATE_LABELS = [(G, G), (G, U), (U, G), (G, T), (G, G)]


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()


@pytest.fixture
def reviewed(review_world: ReviewWorld, world_builder: WorldBuilder) -> list[Any]:
    """Five answers judged (two claims each, both GEDECKT) and reviewed by the expert; every
    verification reports 400 prompt and 2 completion tokens."""
    world_builder.server.usage_for = lambda request, content: (400, 2)
    week = services.current_week()
    items = batch_of(review_world, [(G, G)] * 5, week=week, prefix="v")
    for item, labels in zip(items, EXPERT, strict=True):
        review(item, labels, user=review_world.users["expert"])
    return items


def claim_texts(items: list[Any]) -> list[list[str]]:
    return [[c.text for c in item.judge_run.claims.order_by("position")] for item in items]


def estimates(client: Any, slug: str = "recht") -> Any:
    response = client.get(f"/api/v1/use-cases/{slug}/estimates?weeks=4")
    assert response.status_code == 200, response.content
    return response.json()


def start(client: Any, **fields: Any) -> Any:
    body = {"judge_model": CANDIDATE, "judge_mode": "batched", "answers": 100, **fields}
    return client.post("/review/calibration/recht/judges/", body)


def test_cost_shown_before_starting_then_shadow_runs_change_no_score_or_estimate(
    review_world: ReviewWorld, reviewed: list[Any], login: Any
) -> None:
    JudgePrice.objects.create(judge_model=CANDIDATE, prompt_per_1k=Decimal("1"),
                              completion_per_1k=Decimal("2"))
    client = login(review_world.users["lead"])
    before = estimates(client)
    scores = dict(Answer.objects.values_list("pk", "score"))
    runs = JudgeRun.objects.count()

    # The first post shows the expected cost and starts nothing. Batched: one call per answer,
    # the context (400 - 25 tokens, as the judge's verifications measured it) once and each
    # claim's 25: 375 + 50 = 425 prompt and 2 × 30 completion tokens; five answers:
    # (2,125 × 1 + 300 × 2) / 1000 = 2.725.
    confirm = start(client)
    assert confirm.status_code == 200
    text = text_of(confirm.content.decode())
    assert "prüft im Schatten 10 Aussagen von 5 zuletzt von Fachleuten geprüften Antworten" \
        in text
    assert "Erwartete Aufrufe 5" in text and "≈ 2,7250 EUR" in text
    assert not JudgeComparison.objects.exists()

    response = start(client, confirm="1")
    comparison = JudgeComparison.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/review/calibration/recht/judges/{comparison.pk}/"
    assert (comparison.judge_model, comparison.judge_mode) == (CANDIDATE, "batched")
    shadow = list(ShadowRun.objects.filter(comparison=comparison))
    assert len(shadow) == 5

    review_world.judge.verdicts.update({
        claim: label for texts, labels in zip(claim_texts(reviewed), CANDIDATE_LABELS, strict=True)
        for claim, label in zip(texts, labels, strict=True)
    })
    assert [shadow_run_execute(run_id=r.pk) for r in shadow] == ["scored"] * 5

    assert estimates(client) == before
    assert dict(Answer.objects.values_list("pk", "score")) == scores
    assert JudgeRun.objects.count() == runs
    assert all(current_run(a).judge_model != CANDIDATE for a in Answer.objects.all())
    run = ShadowRun.objects.get(pk=shadow[2].pk)
    assert (run.status, run.calls, run.score) == ("succeeded", 1, 0.5)
    assert [v["label"] for v in run.verdicts] == [U, G]


def test_a_comparison_under_way_is_shown_not_started_again(
    review_world: ReviewWorld, reviewed: list[Any], login: Any
) -> None:
    # Five identical confirmed starts made five comparisons, each paying its calls.
    client = login(review_world.users["lead"])
    first = start(client, confirm="1")
    comparison = JudgeComparison.objects.get()
    again = [start(client, confirm="1", judge_model=f" {CANDIDATE.upper()}") for _ in range(4)]

    assert JudgeComparison.objects.count() == 1
    assert ShadowRun.objects.count() == 5
    assert {r["Location"] for r in [first, *again]} == {
        f"/review/calibration/recht/judges/{comparison.pk}/"
    }
    page = text_of(client.get(again[-1]["Location"]).content.decode())
    assert "Dieser Vergleich läuft schon; er wurde nicht noch einmal gestartet" in page
    confirm = text_of(start(client).content.decode())
    assert f"„{CANDIDATE}“ (gebündelt) wird schon verglichen." in confirm
    assert "Ja, vergleichen" not in confirm

    # Another mode is another candidate; once the runs are done, a new start is a new one.
    start(client, confirm="1", judge_mode="per-claim")
    assert JudgeComparison.objects.count() == 2
    for run in ShadowRun.objects.filter(comparison=comparison):
        shadow_run_execute(run_id=run.pk)
    start(client, confirm="1")
    assert JudgeComparison.objects.filter(judge_mode="batched").count() == 2


def test_the_comparison_page_by_hand(
    review_world: ReviewWorld, reviewed: list[Any], login: Any
) -> None:
    client = login(review_world.users["lead"])
    start(client, confirm="1")
    review_world.judge.verdicts.update({
        claim: label for texts, labels in zip(claim_texts(reviewed), CANDIDATE_LABELS, strict=True)
        for claim, label in zip(texts, labels, strict=True)
    })
    for run in ShadowRun.objects.all():
        shadow_run_execute(run_id=run.pk)
    comparison = JudgeComparison.objects.get()

    html = client.get(f"/review/calibration/recht/judges/{comparison.pk}/").content.decode()
    cells = {
        name: [text_of(c) for c in re.findall(rf'<td data-figure="{name}">(.*?)</td>', html, re.S)]
        for name in ("kappa", "bias", "mae", "disagreement", "calls", "tokens", "cost")
    }
    # Scores (GEDECKT 1, TEILWEISE 0.5, UNGEDECKT 0): experts 1, 0.5, 0, 0.75, 1; the judge 1
    # throughout; the candidate 1, 0.5, 0.5, 0.75, 1.
    # Judge: differences 0, -0.5, -1, -0.25, 0: bias -0.35, MAE 0.35; on the other side of
    # 0.85 for answers 2, 3 and 4: 60 %. Candidate: 0, 0, -0.5, 0, 0: bias -0.1, MAE 0.1, 0 %.
    assert [c.split(" ")[0] for c in cells["bias"]] == ["-0,350", "-0,100"]
    assert cells["mae"] == ["0,350", "0,100"]
    assert cells["disagreement"] == ["60 %", "0 %"]
    # Ten claim pairs: too few for an interval, the kappa itself is shown.
    judge_pairs = [(e, G) for labels in EXPERT for e in labels]
    candidate_pairs = [
        (e, c) for labels, cand in zip(EXPERT, CANDIDATE_LABELS, strict=True)
        for e, c in zip(labels, cand, strict=True)
    ]
    for cell, pairs in zip(cells["kappa"], [judge_pairs, candidate_pairs], strict=True):
        kappa = weighted_kappa(pairs)
        shown = "–" if kappa is None else f"κ = {kappa:.2f}".replace(".", ",")
        assert cell.startswith(shown) and "n = 10" in cell
    # Verification only: the judge made 2 calls an answer (per claim), the candidate 1
    # (batched); 400 prompt and 2 completion tokens each.
    assert cells["calls"] == ["2", "1"]
    assert cells["tokens"] == ["800 · 4", "400 · 2"]
    assert cells["cost"] == ["kein Preis hinterlegt"] * 2
    assert "Auf denselben 5 von 5 zuletzt von Fachleuten geprüften Antworten" in text_of(html)
    # The list of comparisons gives each candidate's figures beside the current judge's, so
    # candidates read side by side.
    listed = client.get("/review/calibration/recht/judges/").content.decode()
    bias = re.findall(r'<td class="nowrap" data-figure="bias">(.*?)</td>', listed, re.S)
    assert [text_of(b) for b in bias] == ["-0,350 → -0,100"]
    kappas = re.findall(r'<td class="nowrap" data-figure="kappa">(.*?)</td>', listed, re.S)
    assert [k.split("→")[0].strip() for k in kappas] == [cells["kappa"][0].split(" ")[2]]


def test_the_cost_per_answer_names_each_columns_currency_and_its_digits(
    review_world: ReviewWorld, reviewed: list[Any], login: Any
) -> None:
    # Issue 41, point 6: the comparison wrote "0,00025" without a currency. Each column names
    # its own judge's currency, with two significant digits, and the sum for 1,000 answers.
    judge_model = current_run(Answer.objects.all()[0]).judge_model
    JudgePrice.objects.update_or_create(judge_model=judge_model, defaults={
        "prompt_per_1k": Decimal("0.001"), "completion_per_1k": Decimal("0.002"),
        "currency": "EUR"})
    JudgePrice.objects.create(judge_model=CANDIDATE, prompt_per_1k=Decimal("0.001"),
                              completion_per_1k=Decimal("0.002"), currency="USD")
    client = login(review_world.users["lead"])
    start(client, confirm="1")
    for run in ShadowRun.objects.all():
        shadow_run_execute(run_id=run.pk)
    comparison = JudgeComparison.objects.get()
    html = client.get(f"/review/calibration/recht/judges/{comparison.pk}/").content.decode()
    cells = [text_of(c) for c in re.findall(r'<td data-figure="cost">(.*?)</td>', html, re.S)]
    # Per answer: the judge 800 prompt and 4 completion tokens, 0.000808 EUR; the candidate
    # 400 and 2, 0.000404 USD.
    assert cells == ["0,00081 EUR 0,81 EUR je 1.000 Antworten",
                     "0,00040 USD 0,40 USD je 1.000 Antworten"]
    # The list of comparisons likewise.
    listed = client.get("/review/calibration/recht/judges/").content.decode()
    cost = re.findall(r'<td class="nowrap" data-figure="cost">(.*?)</td>', listed, re.S)
    assert [text_of(c) for c in cost] == ["0,00081 EUR → 0,00040 USD"]


def test_adopting_makes_the_candidate_the_use_cases_judge(
    review_world: ReviewWorld, reviewed: list[Any], login: Any
) -> None:
    client = login(review_world.users["lead"])
    start(client, confirm="1")
    comparison = JudgeComparison.objects.get()

    response = client.post(f"/review/calibration/recht/judges/{comparison.pk}/adopt/")
    assert response.status_code == 302

    use_case = UseCase.objects.get(slug="recht")
    assert (use_case.judge_model, use_case.judge_mode) == (CANDIDATE, JudgeMode.BATCHED)
    comparison.refresh_from_db()
    assert comparison.adopted_by == review_world.users["lead"] and comparison.adopted_at
    # The next answer is judged by the candidate, batched.
    answer = review_world.answer("nach-1", week=services.current_week(),
                                 claims=[("Nachher.", G)])
    run = current_run(answer)
    assert (run.judge_model, run.judge_mode, run.prompt_version) == (
        CANDIDATE, JudgeMode.BATCHED, BATCHED_PROMPT_VERSION)
    page = client.get(f"/review/calibration/recht/judges/{comparison.pk}/").content.decode()
    assert "Dieses Prüfmodell prüft den Anwendungsfall." in page


def test_who_may_compare(review_world: ReviewWorld, reviewed: list[Any], login: Any) -> None:
    expert = login(review_world.users["expert"])
    page = expert.get("/review/calibration/recht/judges/")
    assert page.status_code == 200 and 'name="judge_model"' not in page.content.decode()
    assert start(expert, confirm="1").status_code == 403
    assert not JudgeComparison.objects.exists()
    other = login(review_world.users["other_lead"])
    assert other.get("/review/calibration/recht/judges/").status_code == 404


def test_bad_input_is_a_400_with_the_form(
    review_world: ReviewWorld, reviewed: list[Any], login: Any
) -> None:
    client = login(review_world.users["lead"])
    response = start(client, judge_model="   ", answers=0, judge_mode="fast")
    assert response.status_code == 400
    text = text_of(response.content.decode())
    assert "Bitte ein Prüfmodell angeben." in text or "Dieses Feld ist zwingend" in text
    assert not JudgeComparison.objects.exists()


def test_nothing_reviewed_nothing_to_compare(review_world: ReviewWorld, login: Any) -> None:
    client = login(review_world.users["lead"])
    response = start(client, confirm="1")
    assert response.status_code == 400
    assert "noch keine von Fachleuten geprüften Antworten" in text_of(response.content.decode())
    assert not JudgeComparison.objects.exists()


def test_the_answers_own_model_is_left_out(
    review_world: ReviewWorld, reviewed: list[Any], login: Any
) -> None:
    client = login(review_world.users["lead"])
    text = text_of(start(client, judge_model=" GPT-4o-mini").content.decode())
    assert "5 Antworten stammen von „GPT-4o-mini“ selbst" in text


def test_an_earlier_week_is_taken_too(review_world: ReviewWorld, login: Any) -> None:
    week = shift_week(services.current_week(), -1)
    items = batch_of(review_world, [(G,)] * 2, week=week, prefix="alt")
    for item in items:
        review(item, [U], user=review_world.users["expert"])
    client = login(review_world.users["lead"])
    start(client, confirm="1", answers=1)
    assert ShadowRun.objects.count() == 1


def test_a_candidate_in_one_call_mode_is_offered_compared_and_adopted(
    review_world: ReviewWorld, reviewed: list[Any], login: Any, world_builder: WorldBuilder
) -> None:
    client = login(review_world.users["lead"])
    page = client.get("/review/calibration/recht/judges/").content.decode()
    assert re.search(r'<option value="single"[^>]*>ein Aufruf</option>', page)

    # One call per answer (the estimate as for batched), 2.725 at the first test's price.
    JudgePrice.objects.create(judge_model=CANDIDATE, prompt_per_1k=Decimal("1"),
                              completion_per_1k=Decimal("2"))
    confirm = text_of(start(client, judge_mode="single").content.decode())
    assert f"„{CANDIDATE}“ (ein Aufruf) prüft im Schatten 10 Aussagen von 5" in confirm
    assert "Erwartete Aufrufe 5" in confirm and "≈ 2,7250 EUR" in confirm

    response = start(client, judge_mode="single", confirm="1")
    comparison = JudgeComparison.objects.get()
    assert response.status_code == 302
    assert (comparison.judge_model, comparison.judge_mode) == (CANDIDATE, JudgeMode.SINGLE)
    # The candidate splits each answer itself, in one call, as it would in production: its
    # claims are the experts' (in other case and without the full stop, as models vary them),
    # plus one the experts never saw; its verdicts are tied to the experts' claims by text.
    by_answer = {
        item.answer.text: [(text, label) for text, label in zip(texts, labels, strict=True)]
        for item, texts, labels in zip(reviewed, claim_texts(reviewed), CANDIDATE_LABELS,
                                       strict=True)
    }

    def one_call(request: dict[str, Any]) -> str:
        system, user = (m["content"] for m in request["messages"][:2])
        assert system.startswith(SINGLE_SYSTEM_DE), "the one-call prompt, not a batch"
        answer = found(r"Antwort:\n(.*?)\n\nKontext:", user, re.DOTALL).group(1)
        claims = [{"claim": text.upper().rstrip("."), "verdict": label}
                  for text, label in by_answer[answer]]
        claims.append({"claim": "Eine Aussage, die niemand prüfte.", "verdict": U})
        return json.dumps({"claims": claims}, ensure_ascii=False)

    world_builder.server.responder = one_call
    runs = list(ShadowRun.objects.filter(comparison=comparison).order_by("pk"))
    assert [shadow_run_execute(run_id=r.pk) for r in runs] == ["scored"] * 5
    assert {ShadowRun.objects.get(pk=r.pk).calls for r in runs} == {1}
    expected = {
        item.answer_id: [*zip([c.pk for c in item.judge_run.claims.order_by("position")],
                              labels, strict=True), (None, U)]
        for item, labels in zip(reviewed, CANDIDATE_LABELS, strict=True)
    }
    for run in ShadowRun.objects.filter(comparison=comparison).select_related("submission__item"):
        assert [(v["claim_id"], v["label"]) for v in run.verdicts] == expected[
            run.submission.item.answer_id]
    listed = text_of(client.get("/review/calibration/recht/judges/").content.decode())
    assert "ein Aufruf" in listed

    assert client.post(
        f"/review/calibration/recht/judges/{comparison.pk}/adopt/").status_code == 302
    use_case = UseCase.objects.get(slug="recht")
    assert (use_case.judge_model, use_case.judge_mode) == (CANDIDATE, JudgeMode.SINGLE)
