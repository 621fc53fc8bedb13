"""The weekly rollups (issue 22) stay equal to a recount of the raw rows through everything that
changes what they count: ingest (single, batch, duplicates, replays, refusals), a judge run's
success and failure, a rescore that changes score and claims; `rebuild_rollups` recomputes them
and its --check finds a difference.

Answers come in through the ingest API, runs are executed in-process against the local
OpenAI-compatible server (as tests/monitoring/test_judging_service.py does).
"""

from datetime import datetime, time, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from dashboard.selectors import rollup_reads
from ingest import services
from judging import tasks
from judging.selectors.costs import (
    COST_WINDOW_DAYS,
    USAGE_DAYS,
    judge_run_counts,
    judge_usage_by_day,
    use_case_judge_means,
    use_case_weekly_cost,
)
from judging.services import runs as judging
from judging.services.execution import judge_run_execute, judge_run_give_up, judge_runs_reconcile
from monitoring.models import (
    Answer,
    JudgeRun,
    RollupDay,
    RollupMoments,
    RollupScore,
    RollupState,
    UseCase,
)
from monitoring.models.rollups import day_of, week_of
from monitoring.services.rollup_rebuild import rollups_check
from monitoring.services.use_cases import use_case_create
from tests.support.openai_server import ScriptedJudge

C1 = "Der Behälter wird alle 5 Jahre geprüft."
C2 = "Die Prüfung macht die Sicherheitsfachkraft."
C3 = "Die Prüfung kostet 1.250 €."


@pytest.fixture
def use_case(db: None) -> UseCase:
    return use_case_create(
        slug="kundenservice", name="Kundenservice", language="de", sample_rate=1.0
    )


@pytest.fixture(autouse=True)
def no_broker(monkeypatch) -> None:
    """Runs are executed by the test, not published."""
    def nothing(args=None, kwargs=None, **options: Any) -> None:
        return None

    monkeypatch.setattr(tasks.score_answer, "apply_async", nothing)
    monkeypatch.setattr(tasks.score_answers, "apply_async", nothing)


@pytest.fixture
def judge(openai_server, settings):
    settings.TREUE_JUDGE_BASE_URL = openai_server.base_url
    settings.TREUE_JUDGE_API_KEY = "test-key"
    settings.TREUE_JUDGE_MODEL = "judge-x"
    settings.TREUE_JUDGE_TIMEOUT_SECONDS = 5.0
    openai_server.responder = ScriptedJudge(claims=[C1, C2, C3])
    return openai_server


def ingest(api, make_answer, **overrides: Any) -> Answer:
    response = api.post("/api/v1/answers", make_answer(**overrides))
    assert response.status_code in (200, 201), response.content
    return Answer.objects.get(pk=response.json()["id"])


def execute(run: JudgeRun) -> str:
    return judge_run_execute(run_id=run.pk)


def day_total(**filters: Any) -> int:
    return sum(RollupDay.objects.filter(**filters).values_list("answers", flat=True))


def score_rows() -> dict[tuple, int]:
    return {
        (r.flagged, r.in_random_sample, r.abstention, r.score, r.points2, r.claims): r.answers
        for r in RollupScore.objects.all() if r.answers
    }


def test_ingest_counts_each_stored_answer_once(api, make_answer, use_case):
    ingest(api, make_answer, external_id="one")
    ingest(api, make_answer, external_id="one")  # a replay: nothing new
    earlier = (timezone.now() - timedelta(days=9)).isoformat()
    response = api.post("/api/v1/answers/batch", {"answers": [
        make_answer(external_id="b-1"),
        make_answer(external_id="b-2", created_at=earlier),
        make_answer(external_id="b-1"),  # the same id twice in one batch
        make_answer(external_id="one"),  # already stored
        {"external_id": "broken"},  # refused
        make_answer(external_id="one", answer="anders"),  # conflicting content: refused
    ]})
    assert response.status_code == 200, response.content
    assert Answer.objects.count() == 3
    assert day_total() == 3
    assert day_total(day=day_of(Answer.objects.get(external_id="b-2").created_at)) == 1
    assert rollups_check() == []


def test_judging_and_rescoring_move_the_answer_between_score_rows(
    judge, api, make_answer, use_case
):
    judge.responder = ScriptedJudge(claims=[C1, C2], verdicts={C2: "UNGEDECKT"})
    answer = ingest(api, make_answer, external_id="r")
    (first,) = JudgeRun.objects.filter(answer=answer)
    assert score_rows() == {}
    assert execute(first) == "scored"
    answer.refresh_from_db()
    key = (answer.flagged, answer.in_random_sample, False)
    # Two readable claims, one supported: points2 = 2.
    assert score_rows() == {(*key, 0.5, 2, 2): 1}
    assert rollups_check() == []

    # A rescore that finds three claims, one partly supported.
    judge.responder = ScriptedJudge(claims=[C1, C2, C3], verdicts={C3: "TEILWEISE"})
    (second,) = judging.judge_runs_create(
        answers=[answer], trigger=JudgeRun.Trigger.RESCORE, judge_model="judge-y"
    )
    assert execute(second) == "scored"
    answer.refresh_from_db()
    assert answer.score == pytest.approx(2.5 / 3)
    assert score_rows() == {(*key, answer.score, 5, 3): 1}  # the old state subtracted
    assert rollups_check() == []

    # A failed rescore changes nothing.
    judge.responder = ScriptedJudge(decomposition="kein JSON")
    (third,) = judging.judge_runs_create(
        answers=[answer], trigger=JudgeRun.Trigger.RESCORE, judge_model="judge-y"
    )
    execute(third)
    assert JudgeRun.objects.get(pk=third.pk).status == JudgeRun.Status.FAILED
    assert score_rows() == {(*key, answer.score, 5, 3): 1}
    assert rollups_check() == []


def test_a_failed_first_run_counts_nothing_judged(judge, api, make_answer, use_case):
    judge.responder = ScriptedJudge(decomposition="kein JSON")
    answer = ingest(api, make_answer, external_id="f")
    execute(JudgeRun.objects.get(answer=answer))
    assert Answer.objects.get(pk=answer.pk).status == Answer.Status.FAILED
    assert score_rows() == {}
    assert rollups_check() == []


def test_rebuild_recomputes_and_check_finds_a_difference(judge, api, make_answer, use_case):
    for i in range(3):
        answer = ingest(api, make_answer, external_id=f"x-{i}")
        execute(JudgeRun.objects.get(answer=answer))
    assert rollups_check() == []
    assert not rollup_reads.rollups_ready()
    RollupDay.objects.update(answers=7)
    RollupScore.objects.all().delete()
    differences = rollups_check()
    assert len(differences) == 2 and "counted 3, stored 7" in differences[0]
    out = StringIO()
    with pytest.raises(CommandError, match="differ from a recount"):
        call_command("rebuild_rollups", "--check", stdout=out)

    call_command("rebuild_rollups", stdout=out)
    assert "the pages read the rollups from now on" in out.getvalue()
    assert rollups_check() == [] and rollup_reads.rollups_ready()
    assert day_total() == 3 and sum(score_rows().values()) == 3
    before = sorted(RollupDay.objects.values_list("use_case_id", "day", "flagged", "answers"))
    call_command("rebuild_rollups", stdout=out)  # idempotent
    after = sorted(RollupDay.objects.values_list("use_case_id", "day", "flagged", "answers"))
    assert before == after
    call_command("rebuild_rollups", "--check", stdout=out)
    assert "the rollups agree with a recount" in out.getvalue()


def test_rebuild_of_some_weeks_or_one_use_case(api, make_answer, use_case, other_use_case):
    old = (timezone.now() - timedelta(weeks=3)).isoformat()
    ingest(api, make_answer, external_id="old", created_at=old)
    ingest(api, make_answer, external_id="new")
    RollupDay.objects.update(answers=5)
    call_command("rebuild_rollups", "--weeks", "1", "--use-case", "kundenservice",
                 stdout=StringIO())
    # This week's row is right again; the old week's is left alone.
    this_week = week_of(timezone.now())
    assert day_total(day__gte=this_week) == 1
    assert day_total(day__lt=this_week) == 5
    assert len(rollups_check()) == 1
    assert not RollupState.objects.exists()  # a partial rebuild makes nothing whole
    assert rollups_check(weeks=1) == []


@pytest.mark.parametrize(("args", "message"), [
    (["--use-case", "gibt-es-nicht"], "no use case 'gibt-es-nicht'"),
    (["--weeks", "0"], "--weeks must be at least 1"),
])
def test_rebuild_refuses_what_it_cannot_do(args, message, use_case):
    with pytest.raises(CommandError, match=message):
        call_command("rebuild_rollups", *args, stdout=StringIO())


def test_the_nightly_check_rebuilds_once_then_repairs_and_says_so(
    api, make_answer, use_case, caplog
):
    from monitoring.tasks import check_rollups

    ingest(api, make_answer, external_id="n")
    assert not rollup_reads.rollups_ready()
    assert check_rollups() == 1  # never made whole: rebuilt in full
    assert rollup_reads.rollups_ready()
    assert check_rollups() == 0
    RollupDay.objects.all().delete()
    assert check_rollups() == 1
    assert "rollups of kundenservice differ from a recount" in caplog.text
    assert rollups_check() == []


# --- two paths, the same figures -------------------------------------------------------------


def _figures_everywhere(use_case: UseCase, lead_client: Any, key: str) -> dict[str, Any]:
    """Everything the pages, the API and /metrics show of the use case's weeks."""
    from dashboard.selectors.figures import use_case_weeks
    from dashboard.selectors.overview import overview_rows
    from dashboard.selectors.page import use_case_page

    lead = lead_client.user
    page = use_case_page(use_case=use_case, weeks=26)
    out: dict[str, Any] = {
        "weeks": use_case_weeks(use_case=use_case, weeks=12),
        "weeks_lean": use_case_weeks(use_case=use_case, weeks=4, claims=False),
        "weeks_pooled_13": use_case_weeks(use_case=use_case, weeks=6, pooled_weeks=13),
        "overview": [row.weeks for row in overview_rows(user=lead)],
        "page_weeks": page.weeks,
        "page_causes": page.diagnosis.causes,
        "page_worth": page.diagnosis.worth,
        "page_tuner": page.diagnosis.tuner,
    }
    response = lead_client.client.get(f"/api/v1/use-cases/{use_case.slug}/estimates",
                                      HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 200, response.content
    out["api"] = response.json()
    metrics = lead_client.metrics()
    out["metrics"] = [
        line for line in metrics.splitlines()
        if line.startswith(("treue_week_", "treue_judge_runs", "treue_judge_calls"))
    ]
    assert any(line.startswith("treue_judge_calls") for line in out["metrics"]), metrics[-3000:]
    assert any(line.startswith("treue_week_answers{") for line in out["metrics"])
    return out


@pytest.mark.django_db
def test_pages_api_and_metrics_read_the_same_figures_from_the_rollups(world_builder, settings):
    from decimal import Decimal

    from django.test import Client

    from monitoring.models import JudgePrice
    from tests.support.judged import JUDGE, Judge, external_id, judged
    from tests.support.judged import ingest as ingest_answer

    judge = world_builder.judge(Judge())
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=Decimal("0.5"),
                              completion_per_1k=Decimal("2"), currency="EUR")
    use_case = world_builder.use_case("pruefung", "Prüfung", sample_rate=0.5,
                                      action_threshold=0.8)
    service, key = world_builder.service("pruef-bot", use_case)
    lead = world_builder.user("leitung", lead_of=[use_case], is_staff=True)
    now = timezone.localtime()
    verdicts = [
        [("A ist belegt.", "GEDECKT"), ("B ist erfunden.", "UNGEDECKT")],
        [("C ist halb belegt.", "TEILWEISE")],
        [("D ist belegt.", "GEDECKT"), ("E ist belegt.", "GEDECKT"),
         ("F ist belegt.", "GEDECKT")],
        [("G ist erfunden.", "UNGEDECKT")],
    ]
    n = 0
    for back in range(9):  # nine weeks, the current one last
        when = now - timedelta(weeks=back, hours=back)
        for k in range(3 + back % 3):
            n += 1
            flagged = (n % 4 == 0)
            ext = external_id(service, use_case, f"w{back}-{k}", in_random=(n % 3 != 0))
            if flagged or n % 3 != 0:
                judged(judge, service, use_case, ext, verdicts[n % len(verdicts)],
                       flagged=flagged, created_at=when)
            else:
                ingest_answer(service, use_case, ext, f"Antwort {ext}.", created_at=when)

    # Flagged answers still waiting for the judge: open runs, read raw on both paths.
    for k in range(2):
        ingest_answer(service, use_case, f"offen-{k}", "Der Behälter wird alle 5 Jahre geprüft.",
                      flagged=True)
    # A run that failed for good.
    failed = ingest_answer(service, use_case, "aufgegeben", "Der Behälter wird alle 5 Jahre "
                           "geprüft, sagt man.", flagged=True)
    judge_run_give_up(run_id=failed.judge_runs.get().pk, reason="test")

    client = Client()
    client.force_login(lead)

    class Lead:
        user = lead

        def __init__(self) -> None:
            self.client = client

        def metrics(self) -> str:
            response = client.get("/metrics")
            assert response.status_code == 200, response.content
            return response.content.decode()

    raw = _figures_everywhere(use_case, Lead(), key)
    assert any(w.judged for w in raw["weeks"]) and any(w.claims for w in raw["weeks"])
    assert raw["weeks"][-1].cost > 0 and raw["weeks"][-1].runs > raw["weeks"][-1].judged
    assert JudgeRun.objects.filter(status="pending").count() == 2
    assert rollups_check() == []
    call_command("rebuild_rollups", stdout=StringIO())
    assert rollup_reads.rollups_ready()
    from_rollups = _figures_everywhere(use_case, Lead(), key)
    for name, value in raw.items():
        assert from_rollups[name] == value, name

    # The action threshold changes: both paths apply it at read time, no rebuild needed.
    use_case.action_threshold = 0.95
    use_case.save()
    changed = _figures_everywhere(use_case, Lead(), key)
    RollupState.objects.all().delete()  # the pages read the raw rows again
    assert _figures_everywhere(use_case, Lead(), key) == changed


def test_every_way_a_run_ends_counts_it_once(judge, api, make_answer, use_case, settings):
    from monitoring.models import RollupUsage, RollupUsageDay

    # Given up after the last retry.
    a = ingest(api, make_answer, external_id="given-up")
    judge_run_give_up(run_id=JudgeRun.objects.get(answer=a).pk, reason="test")
    # Abandoned by the reconciler: its worker died with it too often.
    b = ingest(api, make_answer, external_id="abandoned")
    JudgeRun.objects.filter(answer=b).update(
        status=JudgeRun.Status.RUNNING, attempts=settings.TREUE_JUDGE_MAX_ATTEMPTS,
        lease_expires_at=timezone.now() - timedelta(minutes=1), calls=2,
    )
    judge_runs_reconcile()
    # Succeeded, and failed on an unreadable decomposition.
    c = ingest(api, make_answer, external_id="scored")
    execute(JudgeRun.objects.get(answer=c))
    judge.responder = ScriptedJudge(decomposition="kein JSON")
    d = ingest(api, make_answer, external_id="unreadable")
    execute(JudgeRun.objects.get(answer=d))
    # Still open: not counted until it ends.
    ingest(api, make_answer, external_id="open")

    statuses = sorted(JudgeRun.objects.values_list("status", flat=True))
    assert statuses == ["failed", "failed", "failed", "pending", "succeeded"]
    total = {name: sum(RollupUsage.objects.values_list(name, flat=True))
             for name in ("runs", "succeeded_runs", "failed_runs", "calls")}
    ended = JudgeRun.objects.exclude(status="pending")
    assert total == {"runs": 4, "succeeded_runs": 1, "failed_runs": 3,
                     "calls": sum(ended.values_list("calls", flat=True))}
    assert total["calls"] >= 2 + 4  # the abandoned run's 2 and the scored run's (1 + 3)
    by_status = {
        status: sum(RollupUsageDay.objects.filter(status=status).values_list("runs", flat=True))
        for status in ("succeeded", "failed")
    }
    assert by_status == {"succeeded": 1, "failed": 3}
    assert set(RollupUsageDay.objects.values_list("day", flat=True)) == {timezone.localdate()}
    assert rollups_check() == []


def _diagnosis_world(world_builder: Any) -> tuple[UseCase, Any, list[Answer]]:
    """Answers of the last ten weeks that differ in everything the diagnosis groups by:
    similarity, number of chunks, one or two questions, the lowest content-word probability
    (flagged below 0.5, none without log-probabilities), and judged scores; half of the
    unflagged ones drawn at random."""
    import math
    import random

    from ingest.schemas import AnswerIn
    from tests.support.judged import GENERATOR, Judge

    judge = world_builder.judge(Judge())
    use_case = world_builder.use_case("diagnose", "Diagnose", sample_rate=0.5,
                                      action_threshold=0.8)
    service, _ = world_builder.service("diagnose-bot", use_case)
    rng = random.Random(22)
    now = timezone.localtime()
    verdicts = ["GEDECKT", "GEDECKT", "GEDECKT", "TEILWEISE", "UNGEDECKT"]
    answers = []
    for i in range(90):
        text = f"Antwort {i}: Der Behälter wird alle 5 Jahre geprüft."
        judge.script(text, [(f"Aussage {i}.{k}", rng.choice(verdicts))
                            for k in range(rng.choice([1, 2, 3]))])
        p = rng.choice([0.05, 0.095, 0.15, 0.25, 0.35, 0.45, 0.499, 0.5, 0.55, 0.75, 0.95, None])
        body: dict[str, Any] = {
            "external_id": f"d-{i}",
            "use_case": use_case.slug,
            "question": rng.choice(["Wie oft muss der Behälter geprüft werden?",
                                    "Wie oft wird geprüft und wer prüft?"]),
            "answer": text,
            "model": GENERATOR,
            "chunks": [{"text": f"Abschnitt {k}", "score": round(rng.uniform(0.3, 0.98), 3)}
                       for k in range(rng.choice([1, 2, 4, 8, 12]))],
            "logprobs": None if p is None else {"content": [
                {"token": piece, "logprob": math.log(p if piece.strip() == "5" else 1.0),
                 "bytes": list(piece.encode())}
                for piece in text.replace(" ", "\0 ").split("\0")
            ]},
            "created_at": (now - timedelta(days=rng.randrange(0, 70), hours=i % 5)).isoformat(),
        }
        result = services.answer_ingest(service=service, payload=AnswerIn.model_validate(body),
                                        raw=body)
        assert result.answer is not None, result.errors
        for run in result.answer.judge_runs.filter(status=JudgeRun.Status.PENDING):
            assert execute(run) == "scored"
        answers.append(result.answer)
    return use_case, judge, answers


def _diagnosis(use_case: UseCase) -> Any:
    from dashboard.selectors.diagnosis import use_case_diagnosis
    from dashboard.selectors.page import use_case_page

    page = use_case_page(use_case=use_case, weeks=26).diagnosis
    alone = use_case_diagnosis(use_case=use_case)
    # The same figures; the regression's to rounding (the two reads sum its moments in
    # another order, and CI once met a difference in the 14th digit).
    _assert_same_diagnosis(page, alone)
    return page


def _assert_same_diagnosis(raw: Any, from_rollups: Any) -> None:
    import dataclasses

    assert from_rollups.tuner == raw.tuner
    assert from_rollups.worth == raw.worth
    assert dataclasses.replace(from_rollups.causes, adjusted=None) == dataclasses.replace(
        raw.causes, adjusted=None
    )
    a, b = raw.causes.adjusted, from_rollups.causes.adjusted
    assert (b.n, b.too_few, b.similarity_buckets) == (a.n, a.too_few, a.similarity_buckets)
    for x, y in zip(a.effects, b.effects, strict=True):
        assert (y.name, y.holds) == (x.name, x.holds)
        for field in ("estimate", "low", "high", "p_value", "p_adjusted"):
            if getattr(x, field) is None:
                assert getattr(y, field) is None, (x.name, field)
                continue
            assert getattr(y, field) == pytest.approx(getattr(x, field), rel=1e-7, abs=1e-9)


@pytest.mark.django_db
def test_the_diagnosis_reads_the_same_from_the_rollups(world_builder, monkeypatch):
    """Causes, worth, tuner and the adjusted regression: from the raw rows and from the rollups
    (kept by ingest and the judge, then rebuilt), also after rescores that change scores."""
    from dashboard.domain import adjusted
    from judging.services import rescoring  # noqa: F401  (the rescore trigger)

    # The world's few answers: similarity's difference between two buckets of 8 or more, so
    # that both reads fit it (the product asks for 20).
    monkeypatch.setattr(adjusted, "MIN_FOR_CONTRAST", 8)
    use_case, judge, answers = _diagnosis_world(world_builder)
    assert rollups_check() == []  # the writers kept every table, moments included
    raw = _diagnosis(use_case)
    judged = [a for a in answers if JudgeRun.objects.filter(answer=a).exists()]
    assert raw.causes.adjusted.n >= 30 and not raw.causes.adjusted.too_few, raw.causes.adjusted
    assert all(e.estimate is not None for e in raw.causes.adjusted.effects)
    assert raw.causes.adjusted.similarity_buckets is not None
    assert raw.tuner.random_sample > 5 and raw.worth.flagged_n > 5
    assert {b.estimate.n for b in raw.causes.chunks} != {0}
    assert raw.causes.multi.n and raw.causes.single.n

    # The regression's sums per similarity bucket (similarity enters the fit by bucket).
    assert RollupMoments.objects.filter(use_case=use_case).values("bucket").distinct().count() > 1
    call_command("rebuild_rollups", stdout=StringIO())
    assert rollup_reads.rollups_ready()
    _assert_same_diagnosis(raw, _diagnosis(use_case))

    # Rescores with other verdicts: the writers move scores and moments (a subtraction).
    for answer in judged[::3]:
        text = answer.text
        judge.script(text, [(claim, "UNGEDECKT") for claim in judge.claims[text]])
        (run,) = judging.judge_runs_create(
            answers=[answer], trigger=JudgeRun.Trigger.RESCORE, judge_model="judge-x"
        )
        assert execute(run) == "scored"
    assert rollups_check() == []
    from_rollups = _diagnosis(use_case)
    RollupState.objects.all().delete()  # the raw rows again
    raw_after = _diagnosis(use_case)
    assert raw_after.causes.adjusted != raw.causes.adjusted  # the rescores changed the fit
    _assert_same_diagnosis(raw_after, from_rollups)


@pytest.mark.django_db
def test_a_threshold_off_the_grid_reads_the_tuner_from_the_raw_rows(world_builder):
    """The rollups keep probabilities by hundredths: a use case whose threshold lies between
    two gets its whole diagnosis from the raw rows, the same as before."""
    use_case, _, _ = _diagnosis_world(world_builder)
    use_case.logprob_threshold = 0.555
    use_case.save()
    raw = _diagnosis(use_case)
    assert 0.555 in [row.threshold for row in raw.tuner.rows]
    call_command("rebuild_rollups", stdout=StringIO())
    _assert_same_diagnosis(raw, _diagnosis(use_case))
    use_case.logprob_threshold = 0.55  # on the grid: from the rollups, the same
    use_case.save()
    RollupState.objects.all().delete()
    raw = _diagnosis(use_case)
    call_command("rebuild_rollups", stdout=StringIO())
    _assert_same_diagnosis(raw, _diagnosis(use_case))


def _judge_page_figures(use_case: UseCase, now: Any, lead_client: Any) -> dict[str, Any]:
    from judging.selectors import runs as judge_selectors

    since = now - timedelta(days=COST_WINDOW_DAYS)
    page = lead_client.get(f"/use-cases/{use_case.slug}/judge/")
    assert page.status_code == 200
    html = page.content.decode()
    return {
        "usage": judge_usage_by_day(use_case=use_case),
        "usage_31": judge_usage_by_day(use_case=use_case, days=31),
        "counts": judge_run_counts(use_case=use_case),
        "counts_31": judge_run_counts(use_case=use_case, days=31),
        "means": use_case_judge_means(use_case=use_case, since=since),
        "weekly": use_case_weekly_cost(use_case=use_case, now=now),
        "retry": [r.pk for r in judge_selectors.judge_runs_to_retry(use_case=use_case)],
        "recent": [r.pk for r in judge_selectors.judge_runs_recent(use_case=use_case)],
        # The usage table as shown (the recent runs' times differ from load to load).
        "page": html[html.index('<table class="usage'):html.index("</table>",
                                                                   html.index('class="usage'))],
    }


@pytest.mark.django_db
def test_the_judge_page_reads_the_same_from_the_rollups(world_builder):
    """The judge page's usage per day, failed runs and the cost estimate's means and volume
    are the same from the runs and answers as from the rollups, with runs that ended on
    every day of the windows and on both sides of the cost window's start within its first
    day, rescores, failures, an unpriced run, open runs and another use case's runs."""
    from decimal import Decimal

    from django.test import Client

    from judging.services.runs import judge_runs_create
    from monitoring.models import JudgePrice, RollupUsageDay
    from tests.support.judged import JUDGE, Judge, external_id, judged
    from tests.support.judged import ingest as ingest_answer

    judge = world_builder.judge(Judge())
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=Decimal("0.5"),
                              completion_per_1k=Decimal("2"), currency="EUR")
    use_case = world_builder.use_case("pruefung", "Prüfung", sample_rate=0.5)
    other = world_builder.use_case("andere", "Andere", sample_rate=1.0)
    service, _ = world_builder.service("pruef-bot", use_case, other)
    lead = world_builder.user("leitung", lead_of=[use_case], is_staff=True)
    now = timezone.now()
    since = now - timedelta(days=COST_WINDOW_DAYS)
    verdicts = [[("A ist belegt.", "GEDECKT"), ("B ist erfunden.", "UNGEDECKT")],
                [("C ist belegt.", "GEDECKT")]]
    answers = []
    # Answers over 33 days, some in the cost window's first day on either side of its start.
    moments = [now - timedelta(days=d, hours=d) for d in range(0, 33, 2)]
    moments += [since - timedelta(minutes=30), since + timedelta(minutes=30)]
    for k, when in enumerate(moments):
        ext = external_id(service, use_case, f"a{k}", in_random=True)
        answers.append(judged(judge, service, use_case, ext, verdicts[k % 2],
                              flagged=k % 3 == 0, created_at=when))
        if k % 4 == 0:
            ingest_answer(service, use_case, external_id(service, use_case, f"n{k}",
                                                         in_random=False),
                          f"Nicht gezogen {k}.", created_at=when)
    for answer in answers[:4]:  # rescores
        (run,) = judge_runs_create(answers=[answer], trigger=JudgeRun.Trigger.RESCORE)
        judge_run_execute(run_id=run.pk)
    failed = ingest_answer(service, use_case, "aufgegeben",
                           "Der Behälter wird alle 5 Jahre geprüft, sagt man.", flagged=True)
    judge_run_give_up(run_id=failed.judge_runs.get().pk, reason="test")
    ingest_answer(service, use_case, "offen", "Der Behälter wird alle 5 Jahre geprüft.",
                  flagged=True)
    judged(judge, service, other, external_id(service, other, "x", in_random=True),
           verdicts[0])
    # The writers counted each run on the day it really ended.
    assert RollupUsageDay.objects.filter(use_case=use_case).exists()
    assert rollups_check() == []

    # Move the ends over the windows: every few hours back to 31 days, and around the cost
    # window's start; one run made calls for a model without a price.
    ended = list(JudgeRun.objects.filter(use_case=use_case, finished_at__isnull=False)
                 .order_by("pk"))
    ends = [since - timedelta(minutes=5), since + timedelta(minutes=5)]
    ends += [now - timedelta(hours=13 * i + 1) for i in range(len(ended) - len(ends))]
    for run, end in zip(ended, ends, strict=True):
        JudgeRun.objects.filter(pk=run.pk).update(finished_at=end)
    JudgeRun.objects.filter(pk=next(r.pk for r in reversed(ended) if r.calls)).update(cost=None)
    # The failure on the first day of the judge page's fortnight.
    first_day = timezone.localdate() - timedelta(days=USAGE_DAYS - 1)
    JudgeRun.objects.filter(status="failed", use_case=use_case).update(
        finished_at=timezone.make_aware(datetime.combine(first_day, time(0, 30))))
    call_command("rebuild_rollups", stdout=StringIO())
    client = Client()
    client.force_login(lead)

    from_rollups = _judge_page_figures(use_case, now, client)
    RollupState.objects.all().delete()  # the raw rows again
    raw = _judge_page_figures(use_case, now, client)
    for name, value in raw.items():
        assert from_rollups[name] == value, name
    # The figures are not trivially equal: days with runs, a cut through the first day.
    usage, total = raw["usage_31"]
    assert sum(1 for row in usage if row.runs) >= 10 and total.unpriced_runs == 1
    assert raw["counts"].failed == 1 and raw["counts"].pending == 1
    sample_ok = JudgeRun.objects.filter(use_case=use_case, trigger="sample", status="succeeded")
    assert 0 < raw["means"].runs < sample_ok.count()
    assert 0 < raw["weekly"].answers < Answer.objects.filter(use_case=use_case).count()
