"""The judge tier's service (judging.services.runs), run in-process against the local
OpenAI-compatible server through the real `openai` client.

Answers come in through the ingest API (the stable interface), so their runs are created the way
production creates them; a run is then executed with `judge_run_execute`, as the Celery task
does. Enqueueing is recorded instead of published, so no message reaches a broker from here
(tests/integration runs a real worker).
"""

import hashlib
import json
import re
import threading
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone

from ingest.domain import sampling
from jobs import framework as jobs
from judging import tasks
from judging.client import JudgeClient, JudgeUnavailable
from judging.domain.batched import BATCHED_PROMPT_VERSION, claim_ids
from judging.domain.judge_prompt import (
    DECOMPOSE_SYSTEM_EN,
    PROMPT_VERSION,
    VERIFY_RETRY_DE,
    VERIFY_SYSTEM_DE,
    VERIFY_SYSTEM_EN,
)
from judging.domain.single import SINGLE_PROMPT_VERSION
from judging.services import execution, rescoring
from judging.services import runs as judging
from judging.services.execution import (
    BATCH_LINE_TOKENS,
    judge_run_execute,
    judge_run_give_up,
    judge_runs_reconcile,
)
from monitoring.models import (
    Answer,
    Claim,
    JudgeEndpoint,
    JudgeMode,
    JudgePrice,
    JudgeProgress,
    JudgeRun,
    UseCase,
    VerifyPath,
)
from monitoring.services.use_cases import use_case_create
from tests.support.openai_server import ScriptedJudge
from tests.support.text import found
from treue_site import settings as project

C1 = "Der Behälter wird alle 5 Jahre geprüft."
C2 = "Die Prüfung macht die Sicherheitsfachkraft."
C3 = "Die Prüfung kostet 1.250 €."
C4 = "Kleine Behälter sind ausgenommen."


@pytest.fixture
def use_case(db: None) -> UseCase:
    # Overrides the shared fixture: every answer is in the sample, so every answer is judged.
    return use_case_create(
        slug="kundenservice", name="Kundenservice", language="de", sample_rate=1.0
    )


@pytest.fixture
def fanned_out(monkeypatch) -> list[list[int]]:
    """The id lists sent as one fan-out message (score_answers); the fan-out runs at once, as
    a worker would run it, so its runs reach `enqueued`."""
    sent: list[list[int]] = []

    def fan_out(args=None, kwargs=None, **options: Any) -> None:
        sent.append(list(args[0]))
        tasks.score_answers(*args)

    monkeypatch.setattr(tasks.score_answers, "apply_async", fan_out)
    return sent


@pytest.fixture(autouse=True)
def enqueued(monkeypatch, fanned_out) -> list[int]:
    """Run ids the code asked Celery to score (recorded, not published)."""
    sent: list[int] = []

    def record(args=None, kwargs=None, **options: Any) -> None:
        sent.append(args[0])

    monkeypatch.setattr(tasks.score_answer, "apply_async", record)
    return sent


@pytest.fixture
def judge(openai_server, settings):
    """The local server playing the judge, configured as the judge endpoint."""
    settings.TREUE_JUDGE_BASE_URL = openai_server.base_url
    settings.TREUE_JUDGE_API_KEY = "test-key"
    settings.TREUE_JUDGE_MODEL = "judge-x"
    settings.TREUE_JUDGE_TIMEOUT_SECONDS = 5.0
    settings.TREUE_JUDGE_CONCURRENCY = 8
    settings.TREUE_JUDGE_BACKOFF_MAX_SECONDS = 600
    settings.TREUE_JUDGE_RECONCILE_AFTER_SECONDS = 600
    settings.TREUE_JUDGE_LEASE_SECONDS = 420
    openai_server.responder = ScriptedJudge(claims=[C1, C2, C3])
    return openai_server


def ingest(api, make_answer, **overrides: Any) -> Answer:
    response = api.post("/api/v1/answers", make_answer(**overrides))
    assert response.status_code == 201, response.content
    return Answer.objects.get(pk=response.json()["id"])


def only_run(answer: Answer) -> JudgeRun:
    (run,) = JudgeRun.objects.filter(answer=answer)
    return run


def execute(answer_or_run: Answer | JudgeRun) -> str:
    run = answer_or_run if isinstance(answer_or_run, JudgeRun) else only_run(answer_or_run)
    return judge_run_execute(run_id=run.pk)


def fresh(obj):
    obj.refresh_from_db()
    return obj


def verify_requests(server) -> list[dict[str, Any]]:
    return [
        r for r in server.requests
        if "Aussage:" in r["messages"][1]["content"] or "Claim:" in r["messages"][1]["content"]
    ]


# --- Runs are created at ingest --------------------------------------------------------------


def test_ingest_creates_one_pending_run_per_sampled_answer(
    judge, api, make_answer, service_and_key, enqueued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        answers = [ingest(api, make_answer, external_id=f"a-{i}") for i in range(3)]
        batch = api.post("/api/v1/answers/batch", {
            "answers": [make_answer(external_id=f"b-{i}") for i in range(2)]
        })
    assert batch.status_code == 200 and batch.json()["created"] == 2

    runs = JudgeRun.objects.order_by("pk")
    assert runs.count() == 5
    assert {r.answer.external_id for r in runs} == {"a-0", "a-1", "a-2", "b-0", "b-1"}
    for run in runs:
        assert run.status == JudgeRun.Status.PENDING
        assert run.trigger == JudgeRun.Trigger.SAMPLE
        assert run.judge_model == "judge-x"
        assert run.prompt_version == PROMPT_VERSION
        assert (run.calls, run.score, run.attempts, run.cost) == (0, None, 0, None)
    for answer in answers:
        assert answer.status == Answer.Status.QUEUED
        assert answer.current_run is None and answer.score is None
    # Each run is enqueued once, after the commit that made it visible.
    assert sorted(enqueued) == [r.pk for r in runs]
    assert judge.requests == []  # ingest never calls the judge itself

    # Replaying an answer creates no second run.
    with django_capture_on_commit_callbacks(execute=True):
        replay = api.post("/api/v1/answers", make_answer(external_id="a-0"))
    assert replay.status_code == 200
    assert JudgeRun.objects.count() == 5 and len(enqueued) == 5


def test_a_batch_with_many_sampled_answers_sends_one_message_that_a_worker_fans_out(
    judge, api, make_answer, enqueued, fanned_out, django_capture_on_commit_callbacks
):
    few = judging.FAN_OUT_ABOVE
    with django_capture_on_commit_callbacks(execute=True):
        api.post("/api/v1/answers/batch", {
            "answers": [make_answer(external_id=f"few-{i}") for i in range(few)]
        })
    assert fanned_out == [] and len(enqueued) == few  # a few: published one by one
    enqueued.clear()
    with django_capture_on_commit_callbacks(execute=True):
        batch = api.post("/api/v1/answers/batch", {
            "answers": [make_answer(external_id=f"many-{i}") for i in range(few + 3)]
        })
    assert batch.json()["created"] == few + 3
    runs = list(JudgeRun.objects.filter(answer__external_id__startswith="many-")
                .order_by("pk").values_list("pk", flat=True))
    assert fanned_out == [runs]  # one message for all of them
    assert enqueued == runs  # and from it, a task per run


def test_a_fan_out_the_broker_refuses_leaves_the_runs_to_the_reconciler(
    judge, api, make_answer, monkeypatch, settings, enqueued
):
    answers = [ingest(api, make_answer, external_id=f"down-{i}") for i in range(6)]
    ids = list(JudgeRun.objects.filter(answer__in=answers).values_list("pk", flat=True))

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr(tasks.score_answers, "apply_async", refuse)
    enqueued.clear()
    assert judging.judge_runs_enqueue(run_ids=ids) == 0
    assert enqueued == []
    assert JudgeRun.objects.filter(pk__in=ids, status=JudgeRun.Status.PENDING).count() == 6
    # The broker back, the reconciler finds the runs and sends them (fanned out, as six).
    monkeypatch.setattr(tasks.score_answers, "apply_async",
                        lambda args=None, **options: tasks.score_answers(*args))
    settings.TREUE_JUDGE_RECONCILE_AFTER_SECONDS = 0
    assert judge_runs_reconcile() == 6
    assert sorted(enqueued) == sorted(ids)


def test_unsampled_answers_get_no_run(judge, api, make_answer, service_and_key, enqueued):
    service, _ = service_and_key
    rare = use_case_create(slug="selten", name="Selten", sample_rate=0.001)
    service.use_cases.add(rare)
    external_id = next(
        f"u-{i}" for i in range(100)
        if sampling.random_draw(str(service.pk), f"u-{i}") >= 0.001
    )

    answer = ingest(api, make_answer, external_id=external_id, use_case="selten")

    assert answer.sampled is False
    assert answer.status == Answer.Status.NOT_SAMPLED
    assert not JudgeRun.objects.exists()
    assert enqueued == []
    # Nor does a rescore give it one, whoever asks: judged, it would count in the unflagged
    # stratum without having been drawn.
    lead = User.objects.create_user("lead-rescore")
    with pytest.raises(rescoring.RescoreRefused, match="Stichprobe"):
        rescoring.answer_rescore(answer=answer, judge_model="judge-y", user=lead)
    assert not JudgeRun.objects.exists()


# --- Executing a run ----------------------------------------------------------------------


def test_execute_stores_claims_verdicts_and_the_score(judge, api, make_answer):
    judge.responder = ScriptedJudge(
        claims=[C1, C2, C3], verdicts={C1: "GEDECKT", C2: "teilweise.", C3: "UNGEDECKT"}
    )
    judge.usage_for = lambda request, content: (100, 5)
    judge.delay_for = lambda index, request: 0.03
    answer = ingest(api, make_answer)
    run = only_run(answer)
    before = timezone.now()

    assert execute(run) == "scored"

    run = fresh(run)
    assert run.status == JudgeRun.Status.SUCCEEDED
    assert run.score == 0.5
    assert run.abstention is False and run.unparseable == 0
    assert (run.calls, run.prompt_tokens, run.completion_tokens) == (4, 400, 20)
    assert run.cost is None  # no price configured for judge-x
    assert run.error == "" and run.retryable is False
    assert run.lease_token is None and run.lease_expires_at is None
    assert run.attempts == 1
    assert before <= run.started_at <= run.finished_at <= timezone.now()
    assert json.loads(run.decomposition_raw) == [C1, C2, C3]
    assert [(c["purpose"], c["position"], c["attempt"]) for c in run.call_log] == [
        ("decompose", None, 1), ("verify", 0, 1), ("verify", 1, 1), ("verify", 2, 1),
    ]

    claims = list(run.claims.order_by("position"))
    assert [(c.position, c.text, c.label) for c in claims] == [
        (0, C1, Claim.Label.GEDECKT),
        (1, C2, Claim.Label.TEILWEISE),
        (2, C3, Claim.Label.UNGEDECKT),
    ]
    assert [c.raw_reply for c in claims] == ["GEDECKT", "teilweise.", "UNGEDECKT"]
    for claim in claims:
        assert claim.judge_model == "judge-x"
        assert claim.prompt_version == PROMPT_VERSION
        assert (claim.prompt_tokens, claim.completion_tokens) == (100, 5)
        assert claim.latency_ms >= 30
        assert claim.attempts == 1 and claim.cached is False

    answer = fresh(answer)
    assert answer.status == Answer.Status.JUDGED
    assert answer.score == 0.5
    assert answer.current_run_id == run.pk
    assert answer.abstention is False
    # One decomposition and one call per claim, all at temperature 0 for the configured model.
    assert len(judge.requests) == 4
    for request in judge.requests:
        assert request["temperature"] == 0
        assert request["model"] == "judge-x"
        assert request["max_tokens"] > 0


@pytest.mark.parametrize(
    ("prompt_price", "completion_price", "usage", "expected"),
    [
        # 3 calls of 1,000 + 10 tokens: 0.15 × 3 + 0.60 × 0.03 = 0.468
        ("0.150000", "0.600000", (1000, 10), Decimal("0.468000")),
        # 3 calls of 1,234 + 7 tokens: 0.00015 × 3.702 + 0.0006 × 0.021 = 0.0005679 → 0.000568
        ("0.000150", "0.000600", (1234, 7), Decimal("0.000568")),
    ],
)
def test_cost_from_the_judge_models_price(
    judge, api, make_answer, prompt_price, completion_price, usage, expected
):
    JudgePrice.objects.create(
        judge_model="judge-x",
        prompt_per_1k=Decimal(prompt_price),
        completion_per_1k=Decimal(completion_price),
    )
    JudgePrice.objects.create(judge_model="other", prompt_per_1k=Decimal("99"))
    judge.responder = ScriptedJudge(claims=[C1, C2])
    judge.usage_for = lambda request, content: usage
    answer = ingest(api, make_answer)

    assert execute(answer) == "scored"

    run = only_run(answer)
    assert run.calls == 3
    assert (run.prompt_tokens, run.completion_tokens) == (3 * usage[0], 3 * usage[1])
    assert run.cost == expected


def test_cached_prompt_tokens_are_counted_and_priced(judge, api, make_answer):
    # The price is found by the one rule (case and blanks aside) and has a cached price.
    JudgePrice.objects.create(
        judge_model=" Judge-X", prompt_per_1k=Decimal("0.5"),
        completion_per_1k=Decimal("2"), cached_prompt_per_1k=Decimal("0.05"),
    )
    judge.responder = ScriptedJudge(claims=[C1, C2])
    # Each call: 2,000 prompt tokens of which 1,536 from the provider's cache, 10 completion.
    judge.usage_for = lambda request, content: (2000, 10, 1536)
    answer = ingest(api, make_answer)

    assert execute(answer) == "scored"

    run = only_run(answer)
    assert (run.calls, run.prompt_tokens, run.cached_tokens) == (3, 6000, 4608)
    # (1,392 × 0.5 + 4,608 × 0.05 + 30 × 2) / 1000 = (696 + 230.4 + 60) / 1000 = 0.9864
    assert run.cost == Decimal("0.986400")
    assert [r["cached_tokens"] for r in run.call_log] == [1536] * 3


def test_no_cached_price_bills_cached_tokens_as_prompt_tokens(judge, api, make_answer):
    JudgePrice.objects.create(judge_model="judge-x", prompt_per_1k=Decimal("0.5"),
                              completion_per_1k=Decimal("2"))
    judge.responder = ScriptedJudge(claims=[C1])
    judge.usage_for = lambda request, content: (2000, 10, 1536)
    answer = ingest(api, make_answer)

    assert execute(answer) == "scored"

    # 2 calls: (4,000 × 0.5 + 20 × 2) / 1000 = 2.04
    assert only_run(answer).cost == Decimal("2.040000")


def test_a_second_execution_of_the_same_run_does_nothing(judge, api, make_answer):
    answer = ingest(api, make_answer)
    assert execute(answer) == "scored"
    requests = len(judge.requests)
    finished = only_run(answer).finished_at

    assert execute(answer) == "skipped"

    run = only_run(answer)
    assert run.claims.count() == 3
    assert Claim.objects.count() == 3
    assert run.attempts == 1 and run.finished_at == finished
    assert len(judge.requests) == requests


def test_the_generators_own_model_is_refused_without_a_call(judge, api, make_answer, settings):
    settings.TREUE_JUDGE_MODEL = " GPT-4o-mini"  # the answer's generator, written differently
    answer = ingest(api, make_answer, model="gpt-4o-mini")

    assert execute(answer) == "refused"

    run = only_run(answer)
    assert run.status == JudgeRun.Status.FAILED
    assert "generator" in run.error and "GPT-4o-mini" in run.error
    assert run.retryable is False
    assert run.score is None and run.calls == 0
    assert not run.claims.exists()
    assert judge.requests == []
    answer = fresh(answer)
    assert answer.status == Answer.Status.FAILED
    assert answer.score is None and answer.current_run is None


def test_an_unreadable_verdict_is_retried_once_and_never_scored_0(judge, api, make_answer):
    judge.responder = script = ScriptedJudge(
        claims=[C1, C2, C3],
        verdicts={
            C1: ["Vielleicht gedeckt, vielleicht nicht", "GEDECKT"],  # readable on the retry
            C2: ["???", "Das kann ich nicht sagen."],  # unreadable twice
            C3: "GEDECKT",
        },
    )
    answer = ingest(api, make_answer)

    assert execute(answer) == "scored"

    run = only_run(answer)
    claims = {c.text: c for c in run.claims.all()}
    assert claims[C1].label == Claim.Label.GEDECKT and claims[C1].attempts == 2
    assert claims[C2].label == Claim.Label.UNPARSEABLE and claims[C2].attempts == 2
    assert claims[C2].raw_reply == "Das kann ich nicht sagen."
    assert claims[C3].attempts == 1
    # The unreadable claim is left out of the mean, not counted as UNGEDECKT (0.0).
    assert run.score == 1.0
    assert run.unparseable == 1
    assert run.calls == 6
    assert sorted(a for kind, claim, a in script.seen if claim == C2) == [1, 2]
    retries = [r for r in judge.requests if r["messages"][-1]["content"] == VERIFY_RETRY_DE]
    assert len(retries) == 2
    assert fresh(answer).score == 1.0
    # Every raw reply, also the ones a retry replaced, stays in the run's call log.
    assert "???" in [c["text"] for c in run.call_log]


def test_more_than_half_unreadable_fails_visibly_without_a_score(judge, api, make_answer):
    judge.responder = ScriptedJudge(
        claims=[C1, C2, C3], verdicts={C1: "vielleicht", C2: "keine Ahnung", C3: "GEDECKT"}
    )
    answer = ingest(api, make_answer)

    assert execute(answer) == "scored"  # executed to the end; the result is a failure

    run = only_run(answer)
    assert run.status == JudgeRun.Status.FAILED
    assert run.error == "2 of 3 verdicts unparseable"
    assert run.score is None and run.unparseable == 2
    assert run.retryable is False
    assert run.calls == 1 + 2 + 2 + 1
    # The verdicts stay for inspection, including the unreadable ones.
    assert sorted(run.claims.values_list("label", flat=True)) == [
        "GEDECKT", "UNPARSEABLE", "UNPARSEABLE",
    ]
    answer = fresh(answer)
    assert answer.status == Answer.Status.FAILED
    assert answer.score is None and answer.current_run is None


def test_exactly_half_unreadable_is_still_scored(judge, api, make_answer):
    judge.responder = ScriptedJudge(
        claims=[C1, C2, C3, C4], verdicts={C1: "??", C2: "??", C3: "GEDECKT", C4: "TEILWEISE"}
    )
    answer = ingest(api, make_answer)

    execute(answer)

    run = only_run(answer)
    assert run.status == JudgeRun.Status.SUCCEEDED
    assert run.score == 0.75 and run.unparseable == 2


def test_an_unreadable_decomposition_fails_the_run(judge, api, make_answer):
    judge.responder = ScriptedJudge(
        decomposition=["Hier sind die Aussagen:", "Leider kann ich das nicht zerlegen."]
    )
    answer = ingest(api, make_answer)

    execute(answer)

    run = only_run(answer)
    assert run.status == JudgeRun.Status.FAILED
    assert run.error == "decomposition unparseable"
    assert run.calls == 2  # the decomposition and its one retry
    assert run.decomposition_raw == "Leider kann ich das nicht zerlegen."
    assert not run.claims.exists()
    assert fresh(answer).status == Answer.Status.FAILED
    assert fresh(answer).score is None


def test_a_decomposition_readable_on_the_retry_is_used(judge, api, make_answer):
    judge.responder = ScriptedJudge(decomposition=["Aussagen folgen.", json.dumps([C1, C2])])
    answer = ingest(api, make_answer)

    assert execute(answer) == "scored"

    run = only_run(answer)
    assert run.calls == 4
    assert list(run.claims.values_list("text", flat=True)) == [C1, C2]


def test_no_claims_is_an_abstention_scored_1(judge, api, make_answer):
    judge.responder = ScriptedJudge(claims=[])
    answer = ingest(api, make_answer, answer="Dazu liegen mir keine Informationen vor.")

    assert execute(answer) == "scored"

    run = only_run(answer)
    assert run.status == JudgeRun.Status.SUCCEEDED
    assert (run.score, run.abstention, run.calls) == (1.0, True, 1)
    answer = fresh(answer)
    assert (answer.score, answer.abstention, answer.status) == (1.0, True, Answer.Status.JUDGED)


def test_claims_are_verified_concurrently(judge, api, make_answer, settings):
    claims = [f"Aussage Nummer {i} stimmt." for i in range(8)]
    judge.responder = ScriptedJudge(claims=claims)
    judge.delay_for = lambda index, request: 0.5
    answer = ingest(api, make_answer)
    started = time.monotonic()

    execute(answer)

    # Decomposition, then 8 verifications at once: about 2 call latencies (1 s), not 9 (4.5 s).
    assert time.monotonic() - started < 3.0
    assert judge.max_in_flight == 8
    assert only_run(answer).score == 1.0


def test_concurrency_is_bounded_by_the_setting(judge, api, make_answer, settings):
    settings.TREUE_JUDGE_CONCURRENCY = 2
    judge.responder = ScriptedJudge(claims=[f"Aussage {i}." for i in range(6)])
    judge.delay_for = lambda index, request: 0.05
    answer = ingest(api, make_answer)

    execute(answer)

    assert judge.max_in_flight == 2
    assert only_run(answer).claims.count() == 6


def test_the_context_is_the_answers_chunks_in_rank_order(judge, api, make_answer):
    judge.responder = ScriptedJudge(claims=[C1])
    answer = ingest(api, make_answer, chunks=[
        {"text": "Erster Treffer: Prüfintervall 5 Jahre.", "score": 0.9},
        {"text": "   ", "score": 0.5},
        {"text": "Dritter Treffer: kleine Behälter jährlich.", "score": 0.4},
    ])
    # Store the chunks again in reverse, so that insertion order is not rank order.
    chunks = list(answer.chunks.order_by("-rank"))
    answer.chunks.all().delete()
    for chunk in chunks:
        chunk.pk = None
        chunk.save()

    execute(answer)

    (verify,) = verify_requests(judge)
    user = verify["messages"][1]["content"]
    assert (
        "Kontext:\n[1] Erster Treffer: Prüfintervall 5 Jahre.\n\n"
        "[3] Dritter Treffer: kleine Behälter jährlich.\n\nAussage: " + C1
    ) in user


def test_an_english_use_case_gets_the_english_prompts(
    judge, api, make_answer, service_and_key, other_use_case
):
    service_and_key[0].use_cases.add(other_use_case)
    other_use_case.sample_rate = 1.0
    other_use_case.save()
    answer = ingest(api, make_answer, use_case="vertrieb")

    execute(answer)

    assert judge.requests[0]["messages"][0]["content"] == DECOMPOSE_SYSTEM_EN
    assert "Claim: " in verify_requests(judge)[0]["messages"][1]["content"]


# --- Transient and permanent failures of the endpoint ------------------------------------


def test_an_unavailable_judge_gives_the_run_back_and_raises(judge, api, make_answer):
    judge.fail_next(503)
    answer = ingest(api, make_answer)
    before = timezone.now()

    with pytest.raises(JudgeUnavailable, match="503"):
        execute(answer)

    run = only_run(answer)
    assert run.status == JudgeRun.Status.PENDING
    assert run.error == "judge error 503" and run.retryable is True
    assert run.lease_token is None and run.lease_expires_at is None
    assert run.not_before is not None
    assert before <= run.not_before <= timezone.now()
    assert run.attempts == 1
    assert not run.claims.exists() and run.score is None
    assert fresh(answer).status == Answer.Status.JUDGING

    # The retry finds the run pending and finishes it.
    assert execute(answer) == "scored"
    run = fresh(run)
    assert run.status == JudgeRun.Status.SUCCEEDED and run.attempts == 2
    assert run.not_before is None
    assert fresh(answer).status == Answer.Status.JUDGED


def test_a_proxy_page_with_status_200_is_retried_like_a_5xx(judge, api, make_answer):
    # Seen in an attack: an HTML page served with 200 failed the run at once, with an
    # internal AttributeError as its reason.
    judge.fail_next(200, body="<html>Gateway</html>", headers={"Content-Type": "text/html"})
    answer = ingest(api, make_answer)

    with pytest.raises(JudgeUnavailable, match="not a chat completion"):
        execute(answer)

    run = only_run(answer)
    assert run.status == JudgeRun.Status.PENDING and run.retryable is True
    assert run.error == "judge reply is not a chat completion (text)"
    assert execute(answer) == "scored"


def test_retry_after_sets_when_the_run_may_go_again(judge, api, make_answer):
    judge.fail_next(429, headers={"Retry-After": "30"})
    answer = ingest(api, make_answer)

    with pytest.raises(JudgeUnavailable) as caught:
        execute(answer)

    assert caught.value.retry_after == 30
    run = only_run(answer)
    expected = timezone.now() + timedelta(seconds=30)
    assert run.not_before is not None
    assert abs((run.not_before - expected).total_seconds()) < 5
    assert run.error == "judge rate limit (429)"


@pytest.mark.parametrize("value", ["99999999999", "1e300"])
def test_a_huge_retry_after_is_capped_not_a_crash(judge, api, make_answer, settings, value):
    settings.TREUE_JUDGE_BACKOFF_MAX_SECONDS = 60
    judge.fail_next(429, headers={"Retry-After": value})
    answer = ingest(api, make_answer)

    with pytest.raises(JudgeUnavailable):
        execute(answer)

    run = only_run(answer)
    assert run.status == JudgeRun.Status.PENDING
    assert run.not_before is not None
    assert run.not_before <= timezone.now() + timedelta(seconds=61)


def test_a_failure_midway_keeps_the_verdicts_received_and_counts_the_billed_calls(
    judge, api, make_answer, settings
):
    # One claim at a time, so the order is fixed: the decomposition and the first verification
    # pass, the second verification gets a 500, the third is never asked.
    settings.TREUE_JUDGE_CONCURRENCY = 1
    JudgePrice.objects.create(
        judge_model="judge-x", prompt_per_1k=Decimal("1"), completion_per_1k=Decimal("2")
    )
    judge.usage_for = lambda request, content: (100, 10)
    script = ScriptedJudge(claims=[C1, C2, C3])
    fail_on = {C2}

    def flaky(request):
        if any(claim in request["messages"][1]["content"] for claim in fail_on):
            raise RuntimeError("upstream exploded")  # the server answers 500
        return script(request)

    judge.responder = flaky
    answer = ingest(api, make_answer)

    with pytest.raises(JudgeUnavailable, match="500"):
        execute(answer)
    run = only_run(answer)
    assert run.status == JudgeRun.Status.PENDING
    # No claims or score until the run is finished; what the two calls brought is kept.
    assert not Claim.objects.exists() and run.score is None
    assert run.progress.count() == 2
    # The two calls that returned were billed: they show on the waiting run.
    assert (run.calls, run.prompt_tokens, run.completion_tokens) == (2, 200, 20)
    assert run.cost == Decimal("0.24")

    fail_on.clear()
    assert execute(answer) == "scored"
    run = fresh(run)
    assert Claim.objects.count() == 3
    # The retry asked for C2 and C3 only: its log holds those two calls.
    assert [r["purpose"] for r in run.call_log] == ["verify", "verify"]
    assert (run.calls, run.prompt_tokens, run.completion_tokens) == (4, 400, 40)
    assert run.cost == Decimal("0.48")  # 1 × 0.4 + 2 × 0.04


def test_a_refusal_midway_fails_the_run_and_counts_the_billed_calls(judge, api, make_answer):
    judge.usage_for = lambda request, content: (50, 5)
    script = ScriptedJudge(claims=[C1, C2])

    def then_refuse(request):
        judge.fail_next(401, times=2)  # every request after the decomposition
        return script(request)

    judge.responder = then_refuse
    answer = ingest(api, make_answer)

    assert execute(answer) == "failed"

    run = only_run(answer)
    assert run.status == JudgeRun.Status.FAILED and "(401)" in run.error
    assert (run.calls, run.prompt_tokens, run.completion_tokens) == (1, 50, 5)


@pytest.mark.parametrize("status", [400, 401, 404])
def test_a_refused_request_fails_the_run_without_retry(judge, api, make_answer, status):
    judge.fail_next(status)
    answer = ingest(api, make_answer)

    assert execute(answer) == "failed"

    run = only_run(answer)
    assert run.status == JudgeRun.Status.FAILED
    assert f"({status})" in run.error and run.retryable is False
    assert len(judge.requests) == 1
    assert fresh(answer).status == Answer.Status.FAILED


def test_no_endpoint_configured_fails_visibly(judge, api, make_answer, settings):
    settings.TREUE_JUDGE_BASE_URL = ""
    answer = ingest(api, make_answer)

    assert execute(answer) == "failed"

    run = only_run(answer)
    assert run.status == JudgeRun.Status.FAILED
    assert "TREUE_JUDGE_BASE_URL" in run.error and run.retryable is True


def test_a_soft_time_limit_gives_the_run_back(judge, api, make_answer, monkeypatch):
    def out_of_time(self, messages, *, max_tokens):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(JudgeClient, "call", out_of_time)
    answer = ingest(api, make_answer)

    with pytest.raises(JudgeUnavailable, match="time limit"):
        execute(answer)

    run = only_run(answer)
    assert run.status == JudgeRun.Status.PENDING and run.error == "time limit exceeded"


def test_give_up_marks_a_pending_run_failed_and_retryable(judge, api, make_answer):
    answer = ingest(api, make_answer)
    run = only_run(answer)

    judge_run_give_up(run_id=run.pk, reason="gave up after 3 attempts: judge error 503")

    run = fresh(run)
    assert run.status == JudgeRun.Status.FAILED
    assert run.retryable is True
    assert run.error == "gave up after 3 attempts: judge error 503"
    assert run.finished_at is not None
    assert fresh(answer).status == Answer.Status.FAILED
    # A failed run is not picked up again.
    assert execute(run) == "skipped"


def test_give_up_leaves_a_finished_run_alone(judge, api, make_answer):
    answer = ingest(api, make_answer)
    execute(answer)

    judge_run_give_up(run_id=only_run(answer).pk, reason="too late")

    run = only_run(answer)
    assert run.status == JudgeRun.Status.SUCCEEDED and run.error == ""
    assert fresh(answer).status == Answer.Status.JUDGED


# --- The task around the service ---------------------------------------------------------


def test_the_task_gives_up_after_the_configured_attempts(judge, api, make_answer, settings):
    settings.TREUE_JUDGE_MAX_ATTEMPTS = 3
    settings.TREUE_JUDGE_BACKOFF_MAX_SECONDS = 1
    judge.fail_next(503, times=100)
    answer = ingest(api, make_answer)
    run = only_run(answer)

    # apply() runs the task and its retries eagerly, in this process.
    result = tasks.score_answer.apply(args=[run.pk])

    assert result.get() == "gave up"
    run = fresh(run)
    assert run.status == JudgeRun.Status.FAILED and run.retryable is True
    assert run.error == "gave up after 3 attempts: judge error 503"
    assert run.attempts == 3
    assert len(judge.requests) == 3
    assert fresh(answer).status == Answer.Status.FAILED


@pytest.mark.parametrize(
    ("retries", "retry_after", "low", "high"),
    [
        (0, None, 1, 2),  # first retry: 1-2 s
        (3, None, 8, 16),
        (20, None, 300, 600),  # capped
        (0, 30.0, 30, 30),  # Retry-After is a floor
        (0, 5000.0, 600, 600),  # but capped too
    ],
)
def test_backoff_is_jittered_capped_and_honours_retry_after(
    settings, retries, retry_after, low, high
):
    settings.TREUE_JUDGE_BACKOFF_MAX_SECONDS = 600
    delays = [jobs.backoff_seconds(retries, retry_after) for _ in range(200)]
    assert all(low <= d <= high for d in delays)
    if retry_after is None:
        assert len(set(delays)) > 100  # jitter, so retries of many runs do not line up


def test_a_judge_that_is_down_is_retried_for_about_an_hour_with_the_defaults(settings):
    # The operator's promise (settings.py, README): a run fails only after its endpoint has
    # been down for about an hour, and /health says "degraded" before that.
    settings.TREUE_JUDGE_BACKOFF_MAX_SECONDS = project.TREUE_JUDGE_BACKOFF_MAX_SECONDS
    retries = range(project.TREUE_JUDGE_MAX_ATTEMPTS - 1)  # the last attempt gives up
    steps = [min(project.TREUE_JUDGE_BACKOFF_MAX_SECONDS, 2 ** (n + 1)) for n in retries]
    shortest, longest = sum(s / 2 for s in steps), sum(steps)
    assert 30 * 60 <= shortest and longest <= 70 * 60, (shortest / 60, longest / 60)
    assert project.TREUE_HEALTH_BACKLOG_SECONDS < shortest
    waited = sum(jobs.backoff_seconds(n, None) for n in retries)
    assert shortest <= waited <= longest


# --- Reconciler ---------------------------------------------------------------------------


def test_the_reconciler_enqueues_lost_and_abandoned_runs_only(
    judge, api, make_answer, settings, enqueued
):
    settings.TREUE_JUDGE_RECONCILE_AFTER_SECONDS = 60
    now = timezone.now()
    old = now - timedelta(seconds=120)
    runs = {
        name: only_run(ingest(api, make_answer, external_id=name))
        for name in (
            "old-pending", "fresh-pending", "expired-lease", "live-lease", "waiting-retry",
            "released-long-ago", "succeeded", "failed",
        )
    }
    JudgeRun.objects.update(created_at=old)
    JudgeRun.objects.filter(pk=runs["fresh-pending"].pk).update(created_at=now)
    JudgeRun.objects.filter(pk=runs["expired-lease"].pk).update(
        status="running", lease_token=uuid.uuid4(), lease_expires_at=now - timedelta(seconds=1)
    )
    JudgeRun.objects.filter(pk=runs["live-lease"].pk).update(
        status="running", lease_token=uuid.uuid4(), lease_expires_at=now + timedelta(seconds=60)
    )
    JudgeRun.objects.filter(pk=runs["waiting-retry"].pk).update(
        not_before=now + timedelta(seconds=5)
    )
    JudgeRun.objects.filter(pk=runs["released-long-ago"].pk).update(not_before=old)
    JudgeRun.objects.filter(pk=runs["succeeded"].pk).update(status="succeeded")
    JudgeRun.objects.filter(pk=runs["failed"].pk).update(status="failed")
    enqueued.clear()

    assert judge_runs_reconcile() == 3

    assert sorted(enqueued) == sorted(
        runs[name].pk for name in ("old-pending", "expired-lease", "released-long-ago")
    )
    # The celery beat task does the same.
    enqueued.clear()
    assert tasks.reconcile_judge_runs() == 3


def test_a_run_whose_workers_keep_dying_fails_instead_of_looping(
    judge, api, make_answer, settings, enqueued
):
    """An answer that kills its worker each time (out of memory, past the hard time limit)
    must not be taken up every reconciler cycle for ever, paying its calls each time."""
    settings.TREUE_JUDGE_MAX_ATTEMPTS = 3
    dying, once = (only_run(ingest(api, make_answer, external_id=x)) for x in ("dying", "once"))
    expired = timezone.now() - timedelta(seconds=1)
    JudgeRun.objects.filter(pk=dying.pk).update(
        status="running", lease_token=uuid.uuid4(), lease_expires_at=expired, attempts=3
    )
    JudgeRun.objects.filter(pk=once.pk).update(
        status="running", lease_token=uuid.uuid4(), lease_expires_at=expired, attempts=2
    )
    enqueued.clear()

    assert judge_runs_reconcile() == 1

    assert enqueued == [once.pk]
    dying = fresh(dying)
    assert dying.status == JudgeRun.Status.FAILED and dying.retryable is True
    assert dying.error.startswith("gave up after 3 attempts: the worker was lost")
    assert dying.lease_token is None
    assert fresh(dying.answer).status == Answer.Status.FAILED
    assert execute(dying) == "skipped"
    assert fresh(once).status == JudgeRun.Status.RUNNING


def test_a_run_whose_worker_died_is_taken_over(judge, api, make_answer):
    answer = ingest(api, make_answer)
    run = only_run(answer)
    JudgeRun.objects.filter(pk=run.pk).update(
        status="running", lease_token=uuid.uuid4(), attempts=1,
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )

    assert execute(run) == "scored"

    run = fresh(run)
    assert run.status == JudgeRun.Status.SUCCEEDED and run.attempts == 2
    assert run.claims.count() == 3


def test_a_run_with_a_live_lease_is_not_taken(judge, api, make_answer):
    answer = ingest(api, make_answer)
    run = only_run(answer)
    JudgeRun.objects.filter(pk=run.pk).update(
        status="running", lease_token=uuid.uuid4(),
        lease_expires_at=timezone.now() + timedelta(seconds=60),
    )

    assert execute(run) == "skipped"
    assert judge.requests == []


@pytest.mark.django_db(transaction=True)
def test_the_first_holder_of_an_expired_lease_is_superseded(judge, api, make_answer):
    """Worker A claims the run and hangs in its first call past its lease; worker B takes the
    run over and scores it; when A's call returns, A's result is discarded."""
    judge.delay_for = lambda index, request: 30.0 if index == 0 else 0.0
    answer = ingest(api, make_answer)
    run = only_run(answer)
    outcome: dict[str, Any] = {}

    def holder_a() -> None:
        try:
            outcome["a"] = judge_run_execute(run_id=run.pk)
        except BaseException as e:  # reported by the assertion below
            outcome["a"] = e
        finally:
            connection.close()

    thread = threading.Thread(target=holder_a)
    thread.start()
    deadline = time.monotonic() + 10
    while not judge.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert judge.requests, "holder A never called the judge"
    token_a = fresh(run).lease_token
    assert token_a is not None
    JudgeRun.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now())

    assert judge_run_execute(run_id=run.pk) == "scored"
    judge.wake()  # A's held decomposition returns now
    thread.join(timeout=20)

    assert outcome["a"] == "superseded"
    run = fresh(run)
    assert run.status == JudgeRun.Status.SUCCEEDED and run.attempts == 2
    assert run.lease_token is None
    assert run.claims.count() == 3 and Claim.objects.count() == 3
    answer = fresh(answer)
    assert answer.current_run_id == run.pk and answer.score == 1.0
    assert len(judge.requests) == 8  # A's four calls and B's four; only B's count


# --- Progress survives a retry (issue 18 point 5) ----------------------------------------


def verify_of(request: dict[str, Any]) -> str | None:
    """The claim a per-claim verification asks about."""
    user = request["messages"][1]["content"]
    match = re.search(r"^(?:Aussage|Claim): (.+)$", user, re.MULTILINE)
    return match.group(1) if match and request["messages"][0]["content"] in (
        VERIFY_SYSTEM_DE, VERIFY_SYSTEM_EN) else None


def test_a_retried_run_asks_only_for_what_is_missing(judge, api, make_answer, settings):
    settings.TREUE_JUDGE_CONCURRENCY = 1  # one claim after the other: C3 is never asked
    judge.responder = ScriptedJudge(claims=[C1, C2, C3], verdicts={C3: "UNGEDECKT"})
    failed: list[int] = []

    def fail_c2_once(index: int, request: dict[str, Any]) -> int | None:
        if verify_of(request) == C2 and not failed:
            failed.append(index)
            return 503
        return None

    judge.fail_for = fail_c2_once
    answer = ingest(api, make_answer)

    with pytest.raises(JudgeUnavailable):
        execute(answer)
    run = only_run(answer)
    # What the attempt received is stored: the decomposition and C1's verdict.
    assert sorted(run.progress.values_list("claim", flat=True)) == ["", C1]

    assert execute(answer) == "scored"

    asked = [verify_of(r) or "decompose" for r in judge.requests]
    assert asked == ["decompose", C1, C2, C2, C3]  # no second decomposition, no second C1
    run = fresh(run)
    assert [(c.text, c.label, c.cached) for c in run.claims.all()] == [
        (C1, "GEDECKT", True), (C2, "GEDECKT", False), (C3, "UNGEDECKT", False),
    ]
    assert run.calls == 4 and run.attempts == 2  # the failed call was not billed
    assert run.decomposition_raw == json.dumps([C1, C2, C3], ensure_ascii=False)
    assert not run.progress.exists()  # the claims hold it now
    assert fresh(answer).score == pytest.approx(2 / 3)


def test_a_run_retried_from_the_page_keeps_what_the_failed_run_received(
    judge, api, make_answer, settings
):
    settings.TREUE_JUDGE_CONCURRENCY = 1
    judge.responder = ScriptedJudge(claims=[C1, C2])
    judge.fail_for = lambda index, request: 503 if verify_of(request) == C2 else None
    answer = ingest(api, make_answer)
    run = only_run(answer)
    with pytest.raises(JudgeUnavailable):
        execute(run)
    judge_run_give_up(run_id=run.pk, reason="judge error 503")
    lead = User.objects.create_user("lead-retry")

    judge.fail_for = None
    retried = rescoring.judge_run_retry(run=fresh(run), user=lead)
    assert execute(retried) == "scored"

    asked = [verify_of(r) or "decompose" for r in judge.requests]
    assert asked == ["decompose", C1, C2, C2]
    assert not JudgeProgress.objects.exists()
    assert [c.cached for c in retried.claims.all()] == [True, False]


@pytest.mark.parametrize("way_out", ["released", "failed", "finished"])
def test_a_superseded_worker_leaves_no_progress_behind(judge, api, make_answer, way_out):
    """A worker whose lease ran out while its call hung stores a verdict that arrives after
    another worker scored the run, then ends - giving the run back after a failed call, failing
    it, or finishing its own judgement: none of these counts, and none leaves a row behind (the
    fault-mix test below found one left by a give-back, under load)."""
    run = only_run(ingest(api, make_answer))
    stale = jobs.claim(judging.JUDGE_RUN, run.pk)
    assert stale is not None
    JudgeRun.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now())
    assert execute(run) == "scored"
    run = fresh(run)
    JudgeProgress.objects.create(run=run, key="spät", claim="Eine Aussage.", label="GEDECKT")
    if way_out == "released":
        execution._release(run, stale, "timeout", retry_in=0, meter=execution.Meter())
    elif way_out == "failed":
        assert not execution._finish_failed(run, stale, "kaputt", retryable=True)
    else:
        judgement = execution.judge_with(
            client=execution.judge_client(model=run.judge_model), meter=execution.Meter(),
            answer=run.answer, mode=run.judge_mode,
        )
        assert not execution._finish(run, stale, judgement)
    assert not JudgeProgress.objects.filter(run=run).exists()
    assert fresh(run).status == JudgeRun.Status.SUCCEEDED and fresh(run).score == 1.0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", [JudgeMode.PER_CLAIM, JudgeMode.BATCHED])
def test_under_a_fault_mix_calls_stay_within_1_5_times_a_fault_free_run(
    judge, api, make_answer, use_case, mode
):
    """The endpoint answers 20 % of calls with 500 and 10 % with 429 (decided per prompt and
    its n-th sending, so the count does not depend on thread timing), and one worker dies in
    the middle of a run. Every run is executed again until it is scored, as the task's retries
    and the reconciler do. The calls the endpoint received stay within 1.5 times those of a
    fault-free run: a prompt is sent again only when its own call failed (1 / 0.7 = 1.43 times
    on average)."""
    UseCase.objects.filter(pk=use_case.pk).update(judge_mode=mode)
    claims = {f"faults-{i}": [f"Antwort {i}, Aussage {k}." for k in range(3 + i % 4)]
              for i in range(30)}

    def script(request: dict[str, Any]) -> str:
        text = request["messages"][1]["content"]
        answer_id = found(r"Antwort (\d+)", text).group(1)
        return ScriptedJudge(claims=claims[f"faults-{answer_id}"])(request)

    judge.responder = script
    answers = [
        ingest(api, make_answer, external_id=key,
               answer=f"Antwort {key.split('-')[1]}: Der Behälter wird alle 5 Jahre geprüft.")
        for key in claims
    ]
    fault_free = sum(
        1 + (len(c) if mode == JudgeMode.PER_CLAIM else 1) for c in claims.values()
    )
    sent: dict[str, int] = {}
    lock = threading.Lock()

    def faults(index: int, request: dict[str, Any]) -> int | None:
        key = json.dumps(request["messages"], sort_keys=True)
        with lock:
            n = sent[key] = sent.get(key, 0) + 1
        draw = int(hashlib.sha256(f"{key}#{n}".encode()).hexdigest()[:8], 16) / 16**8
        return 500 if draw < 0.2 else 429 if draw < 0.3 else None

    judge.fail_for = faults

    # A worker dies while its call for the first answer's third verification... hangs: the
    # lease runs out, another worker takes the run over.
    first = only_run(answers[0])
    judge.delay_for = lambda index, request: 30.0 if index == 2 else 0.0
    died = threading.Thread(target=_attempt_quietly, args=(first.pk,))
    died.start()
    deadline = time.monotonic() + 10
    while len(judge.requests) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    JudgeRun.objects.filter(pk=first.pk).update(lease_expires_at=timezone.now())
    judge.delay_for = None

    for answer in answers:
        run = only_run(answer)
        for _ in range(50):
            try:
                if execute(run) in ("scored", "skipped"):
                    break
            except JudgeUnavailable:
                continue
        assert fresh(run).status == JudgeRun.Status.SUCCEEDED, fresh(run).error
    judge.wake()
    died.join(timeout=20)

    received = len(judge.requests)
    assert received <= 1.5 * fault_free, f"{received} calls for {fault_free} needed"
    assert not JudgeProgress.objects.filter(run__status=JudgeRun.Status.SUCCEEDED).exists()
    for answer in answers:
        answer = fresh(answer)
        assert answer.score == 1.0
        assert answer.current_run.claims.count() == len(claims[answer.external_id])


def _attempt_quietly(run_id: int) -> None:
    """A worker's attempt whose fate the test decides (it is superseded)."""
    try:
        judge_run_execute(run_id=run_id)
    except JudgeUnavailable:
        pass
    finally:
        connection.close()


# --- Rescoring ----------------------------------------------------------------------------


def test_a_rescore_adds_a_run_and_switches_the_answer_on_success(
    judge, api, make_answer, enqueued, django_capture_on_commit_callbacks
):
    judge.responder = ScriptedJudge(claims=[C1, C2], verdicts={C2: "UNGEDECKT"})
    answer = ingest(api, make_answer)
    first = only_run(answer)
    execute(first)
    assert fresh(answer).score == 0.5

    judge.responder = ScriptedJudge(claims=[C1, C2])
    enqueued.clear()
    with django_capture_on_commit_callbacks(execute=True):
        (second,) = judging.judge_runs_create(
            answers=[answer], trigger=JudgeRun.Trigger.RESCORE, judge_model="judge-y"
        )
    assert enqueued == [second.pk]
    # Until the rescore finishes, the answer keeps its score.
    answer = fresh(answer)
    assert (answer.current_run_id, answer.score) == (first.pk, 0.5)

    assert execute(second) == "scored"

    answer = fresh(answer)
    assert answer.current_run_id == second.pk and answer.score == 1.0
    assert answer.status == Answer.Status.JUDGED
    second = fresh(second)
    assert second.judge_model == "judge-y" and second.trigger == JudgeRun.Trigger.RESCORE
    assert set(second.claims.values_list("judge_model", flat=True)) == {"judge-y"}
    assert {r["model"] for r in judge.requests[-3:]} == {"judge-y"}
    # History stays: the first run with its own claims and score.
    first = fresh(first)
    assert first.status == JudgeRun.Status.SUCCEEDED and first.score == 0.5
    assert list(first.claims.values_list("label", flat=True)) == ["GEDECKT", "UNGEDECKT"]
    assert JudgeRun.objects.filter(answer=answer).count() == 2


def test_a_failed_rescore_keeps_the_current_score(judge, api, make_answer):
    answer = ingest(api, make_answer)
    execute(answer)
    first = only_run(answer)

    judge.responder = ScriptedJudge(decomposition="kein JSON")
    (second,) = judging.judge_runs_create(
        answers=[answer], trigger=JudgeRun.Trigger.RESCORE, judge_model="judge-y"
    )
    execute(second)

    assert fresh(second).status == JudgeRun.Status.FAILED
    answer = fresh(answer)
    assert answer.status == Answer.Status.JUDGED
    assert answer.current_run_id == first.pk and answer.score == 1.0


def test_a_rescore_with_the_generators_model_is_refused(judge, api, make_answer):
    answer = ingest(api, make_answer, model="gpt-4o-mini")
    execute(answer)
    (second,) = judging.judge_runs_create(
        answers=[answer], trigger=JudgeRun.Trigger.RESCORE, judge_model="gpt-4o-mini"
    )
    calls = len(judge.requests)

    assert execute(second) == "refused"

    assert "generator" in fresh(second).error
    assert len(judge.requests) == calls
    assert fresh(answer).status == Answer.Status.JUDGED


# --- Batched verification (issue 18) with the judge's evidence (issue 20) ----------------------


def batched_run(answer: Answer) -> JudgeRun:
    """A batched run of the answer, as a use case in batched mode will create it."""
    run = judging.judge_run_new(answer=answer, judge_mode=JudgeMode.BATCHED)
    run.save()
    return run


def test_a_batched_run_verifies_in_one_call_and_keeps_the_evidence(judge, api, make_answer):
    judge.responder = ScriptedJudge(
        claims=[C1, C2, C3], verdicts={C1: "GEDECKT", C2: "TEILWEISE", C3: "UNGEDECKT"},
        evidence={C1: "1", C2: "1, 2"},
        reasons={C1: "Abschnitt 1 nennt 5 Jahre.", C3: "Kein Abschnitt nennt einen Preis."},
        structured=True,
    )
    answer = ingest(api, make_answer)
    JudgeRun.objects.filter(answer=answer).delete()
    run = batched_run(answer)
    assert (run.judge_mode, run.prompt_version) == ("batched", BATCHED_PROMPT_VERSION)

    assert execute(run) == "scored"

    run = fresh(run)
    assert run.status == JudgeRun.Status.SUCCEEDED and run.score == 0.5
    assert run.calls == 2 == len(judge.requests), "a decomposition and one batched call"
    assert [c["purpose"] for c in run.call_log] == ["decompose", "verify_batch"]
    assert run.verify_path == VerifyPath.BATCHED
    # The endpoint took the schema and answered in it: kept.
    schema = judge.requests[1]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["verdicts"]["items"]["required"] == [
        "id", "verdict", "chunks", "reason"]
    assert JudgeEndpoint.objects.get(model="judge-x").structured_output is True
    claims = list(run.claims.order_by("position"))
    assert [(c.label, c.evidence_chunks, c.reason) for c in claims] == [
        (Claim.Label.GEDECKT, [1], "Abschnitt 1 nennt 5 Jahre."),
        (Claim.Label.TEILWEISE, [1, 2], ""),
        (Claim.Label.UNGEDECKT, [], "Kein Abschnitt nennt einen Preis."),
    ]
    assert all(c.prompt_version == BATCHED_PROMPT_VERSION for c in claims)
    # The reply may spend a line per claim: its output cap is the batch's, not a word's.
    assert judge.requests[1]["max_tokens"] == BATCH_LINE_TOKENS * 30
    # The answer page shows the evidence under each verdict, linked to the chunks.
    staff = User.objects.create_user("verwaltung", is_staff=True)
    client = Client()
    client.force_login(staff)
    html = client.get(f"/answers/{answer.pk}/").content.decode()
    # Rank and source of each chunk the verdict rests on (chunk 2 was sent without a source).
    assert ('Beleg: <a href="#chunk-1">#1</a> (Prüfordnung.pdf) – Abschnitt 1 nennt 5 Jahre.'
            ) in html
    assert ('Beleg: <a href="#chunk-1">#1</a> (Prüfordnung.pdf), <a href="#chunk-2">#2</a>'
            '</span>') in html
    assert "Beleg: kein Abschnitt – Kein Abschnitt nennt einen Preis." in html
    assert 'id="chunk-1"' in html


def test_an_endpoint_that_refuses_the_schema_is_asked_once_and_remembered(
    judge, api, make_answer
):
    judge.responder = ScriptedJudge(claims=[C1, C2], verdicts={C2: "UNGEDECKT"})
    runs = []
    for n in range(2):
        answer = ingest(api, make_answer, external_id=f"a-{n}")
        JudgeRun.objects.filter(answer=answer).delete()
        runs.append(batched_run(answer))
    assert execute(runs[0]) == "scored"
    # The first batched call carried the schema and got a 400; the same claims went again as
    # lines. Only the answered calls count (a refused request is not billed).
    assert ["response_format" in r for r in judge.requests] == [False, True, False]
    assert fresh(runs[0]).calls == 2
    endpoint = JudgeEndpoint.objects.get(model="judge-x")
    assert endpoint.structured_output is False and "response_format" in endpoint.detail
    assert execute(runs[1]) == "scored"
    assert ["response_format" in r for r in judge.requests[3:]] == [False, False]
    assert [c.label for c in fresh(runs[1]).claims.order_by("position")] == [
        Claim.Label.GEDECKT, Claim.Label.UNGEDECKT]


def test_a_claim_the_batched_reply_leaves_out_is_corrected_in_the_same_conversation(
    judge, api, make_answer
):
    judge.responder = ScriptedJudge(claims=[C1, C2, C3], skip_in_batch=(C2,),
                                    verdicts={C2: "UNGEDECKT"})
    answer = ingest(api, make_answer)
    JudgeRun.objects.filter(answer=answer).delete()
    run = batched_run(answer)
    assert execute(run) == "scored"
    run = fresh(run)
    assert [c["purpose"] for c in run.call_log] == ["decompose", "verify_batch", "correct_batch"]
    assert run.verify_path == VerifyPath.CORRECTED
    assert [claim for kind, claim, _ in judge.responder.seen if kind == "correct_batch"] == [C2]
    assert [claim for kind, claim, _ in judge.responder.seen if kind == "verify"] == []
    assert [c.label for c in run.claims.order_by("position")] == [
        Claim.Label.GEDECKT, Claim.Label.UNGEDECKT, Claim.Label.GEDECKT]


A1, A2, A3 = claim_ids([C1, C2, C3])
RIGHT = f"{A1}: GEDECKT\n{A2}: UNGEDECKT\n{A3}: GEDECKT"


@pytest.mark.parametrize(("reply", "corrected", "asked_alone"), [
    pytest.param(RIGHT, [], [], id="complete"),
    pytest.param(f"{A3}: GEDECKT\n{A1}: GEDECKT\n{A2}: UNGEDECKT", [], [], id="shuffled"),
    pytest.param(f"{A1}: GEDECKT\n{A3}: GEDECKT", [C2], [], id="partial"),
    pytest.param(f"Hier meine Urteile:\n\n**{A1}: GEDECKT** [1] steht so da\n{A2}: UNGEDECKT\n"
                 f"{A3}: GEDECKT\nIch hoffe, das hilft.", [], [], id="extra text"),
    pytest.param(f"{A1}: VIELLEICHT\n{A2}: UNGEDECKT\n{A3}: GEDECKT", [C1], [], id="unreadable"),
    # The judge skipped claim 2 and numbered on: nothing is tied by position.
    pytest.param("1: GEDECKT\n2: GEDECKT", [C1, C2, C3], [], id="renumbered"),
    pytest.param(f"{A1}: GEDECKT\n{A2}: UNGEDECKT\n{A2}: GEDECKT\n{A3}: GEDECKT", [C2], [],
                 id="answered twice, differently"),
    # The correction does not help either: the rest goes one by one.
    pytest.param(["1: GEDECKT", "2: GEDECKT"], [C1, C2, C3], [C1, C2, C3], id="renumbered twice"),
])
def test_a_batched_reply_through_the_real_client_and_the_claims_asked_again(
    judge, api, make_answer, reply, corrected, asked_alone
):
    """Each kind of batched reply, as the local server sends it to the real openai client:
    exactly the claims without a readable line are corrected once, and what the correction
    leaves open is asked one by one."""
    judge.responder = ScriptedJudge(
        claims=[C1, C2, C3], verdicts={C2: "UNGEDECKT"},
        batch_reply=reply if isinstance(reply, list) else [reply, RIGHT])
    answer = ingest(api, make_answer)
    JudgeRun.objects.filter(answer=answer).delete()
    run = batched_run(answer)

    assert execute(run) == "scored"

    seen = judge.responder.seen
    assert [claim for kind, claim, _ in seen if kind == "correct_batch"] == corrected
    assert sorted(claim for kind, claim, _ in seen if kind == "verify") == sorted(asked_alone)
    answered = [r for r in judge.requests if "response_format" not in r]
    assert len(answered) == 2 + bool(corrected) + len(asked_alone)
    run = fresh(run)
    assert run.verify_path == (
        "fallback" if asked_alone else "corrected" if corrected else "batched")
    assert [c.label for c in run.claims.order_by("position")] == [
        Claim.Label.GEDECKT, Claim.Label.UNGEDECKT, Claim.Label.GEDECKT]
    assert fresh(answer).score == pytest.approx(2 / 3)


def test_a_one_call_run(judge, api, make_answer, use_case):
    use_case.judge_mode = JudgeMode.SINGLE
    use_case.save(update_fields=["judge_mode"])
    judge.responder = ScriptedJudge(claims=[C1, C2], verdicts={C2: "UNGEDECKT"},
                                    evidence={C1: "1"}, reasons={C1: "Abschnitt 1."})
    answer = ingest(api, make_answer)
    run = only_run(answer)
    assert (run.judge_mode, run.prompt_version) == ("single", SINGLE_PROMPT_VERSION)
    assert execute(run) == "scored"
    run = fresh(run)
    assert [c["purpose"] for c in run.call_log] == ["single"]
    assert run.calls == 1 and run.verify_path == VerifyPath.SINGLE
    assert [(c.text, c.label, c.evidence_chunks, c.reason)
            for c in run.claims.order_by("position")] == [
        (C1, Claim.Label.GEDECKT, [1], "Abschnitt 1."), (C2, Claim.Label.UNGEDECKT, [], "")]
    assert fresh(answer).score == 0.5


def test_a_use_case_in_batched_mode_gets_batched_runs(judge, api, make_answer, use_case):
    use_case.judge_mode = JudgeMode.BATCHED
    use_case.save(update_fields=["judge_mode"])
    answer = ingest(api, make_answer)
    run = only_run(answer)
    assert (run.judge_mode, run.prompt_version) == ("batched", BATCHED_PROMPT_VERSION)
    assert execute(run) == "scored"
    assert [c["purpose"] for c in fresh(run).call_log] == ["decompose", "verify_batch"]
    # A rescore follows the use case's mode of the moment.
    use_case.judge_mode = JudgeMode.PER_CLAIM
    use_case.save(update_fields=["judge_mode"])
    [again] = judging.judge_runs_create(answers=[answer], trigger=JudgeRun.Trigger.RESCORE)
    assert (again.judge_mode, again.prompt_version) == ("per-claim", PROMPT_VERSION)


# --- A judge's reply never breaks a run it did not cause (hardening, round 2) ---------------


@pytest.mark.parametrize(
    "garbled",
    [
        json.dumps([C1, "Das ist FALSCH."])[:-1] + ", []]",  # a list with an empty list inside
        "Gäbe es keine Aussagen, schriebe ich []. Die Antwort sagt aber einiges.",
        "[" * 5000 + "]" * 5000,
    ],
    ids=["empty list as an item", "preamble mentions []", "nested brackets"],
)
def test_a_garbled_decomposition_is_no_abstention(judge, api, make_answer, garbled):
    # Before, the first "[]" anywhere in the reply read as "no claims": judged, score 1.0.
    judge.responder = ScriptedJudge(decomposition=[garbled, garbled])
    answer = ingest(api, make_answer)

    execute(answer)

    run = only_run(answer)
    assert (run.status, run.error, run.abstention) == (
        JudgeRun.Status.FAILED, "decomposition unparseable", False
    )
    assert run.score is None and fresh(answer).score is None


def test_nul_and_lone_surrogates_in_a_reply_are_stored_without_them(judge, api, make_answer):
    # PostgreSQL refuses NUL in text and JSON, and a lone surrogate cannot be encoded: the run
    # failed as an internal error marked retryable, and every retry met the same reply.
    bad = "Der Behälter\x00 wird alle 5 Jahre geprüft \ud83d."
    judge.responder = ScriptedJudge(
        claims=[bad, C2], verdicts={bad: "GEDECKT", C2: "UNGEDECKT\x00"}
    )
    answer = ingest(api, make_answer)

    assert execute(answer) == "scored"

    run = only_run(answer)
    assert run.status == JudgeRun.Status.SUCCEEDED and run.error == ""
    assert list(run.claims.order_by("position").values_list("text", "label")) == [
        ("Der Behälter wird alle 5 Jahre geprüft \ufffd.", Claim.Label.GEDECKT),
        (C2, Claim.Label.UNGEDECKT),
    ]
    assert "\x00" not in run.decomposition_raw and "\ufffd" in run.decomposition_raw
    assert fresh(answer).score == 0.5


@pytest.mark.parametrize(
    "usage", [(-5, 3), (10**30, 3), (120, -1), (120, 10**7 + 1), (1.5, 3)],
    ids=["negative prompt", "huge prompt", "negative completion", "completion over 10^7",
         "a fraction"],
)
def test_absurd_token_counts_are_unknown_and_the_run_ends_with_its_calls(
    judge, api, make_answer, usage
):
    JudgePrice.objects.create(judge_model="judge-x", prompt_per_1k=Decimal("1"),
                              completion_per_1k=Decimal("1"))
    judge.responder = ScriptedJudge(claims=[C1, C2])
    # The decomposition reports sane figures, the verifications absurd ones.
    judge.usage_for = lambda request, content: (
        usage if "Aussage:" in request["messages"][1]["content"] else (1000, 10)
    )
    answer = ingest(api, make_answer)

    assert execute(answer) == "scored"

    run = only_run(answer)
    assert run.status == JudgeRun.Status.SUCCEEDED
    assert (run.calls, run.usage_unknown_calls) == (3, 2)
    assert (run.prompt_tokens, run.completion_tokens) == (1000, 10)
    assert run.cost == Decimal("1.010000")  # the calls that could be priced
    assert [r["usage_known"] for r in run.call_log] == [True, False, False]
    assert fresh(answer).status == Answer.Status.JUDGED


def test_the_answer_page_says_how_many_calls_had_no_believable_usage(
    judge, api, make_answer, client
):
    judge.responder = ScriptedJudge(claims=[C1])
    judge.usage_for = lambda request, content: (10**30, -5)
    answer = ingest(api, make_answer)
    execute(answer)
    client.force_login(User.objects.create_superuser("chefin", "c@example.org", "pw-123"))

    page = client.get(f"/answers/{answer.pk}/").content.decode()

    assert "ohne 2 Aufrufe, deren Token-Angaben nicht stimmen können" in page


def test_a_refusal_whose_message_holds_nul_fails_the_run_once(judge, api, make_answer):
    # The endpoint's own message becomes the run's error: with a NUL in it PostgreSQL refused
    # the failure itself, and the run, still leased, was claimed and paid for again.
    judge.fail_next(400, body={"error": {"message": "bad\x00 model \ud800", "type": "x"}})
    answer = ingest(api, make_answer)

    assert execute(answer) == "failed"

    run = only_run(answer)
    assert (run.status, run.retryable) == (JudgeRun.Status.FAILED, False)
    assert "bad model \ufffd" in run.error
    assert len(judge.requests) == 1


def test_a_run_on_azure_openai_is_judged_through_the_deployment(
    judge, api, make_answer, settings
):
    settings.TREUE_JUDGE_BASE_URL = ""
    settings.TREUE_JUDGE_AZURE_ENDPOINT = judge.base_url.removesuffix("/v1")
    settings.TREUE_JUDGE_AZURE_API_VERSION = "2024-10-21"
    settings.TREUE_JUDGE_API_KEY = "azure-key"
    settings.TREUE_JUDGE_MODEL = "treue-judge-deployment"
    judge.responder = ScriptedJudge(claims=[C1, C2], verdicts={C1: "GEDECKT", C2: "UNGEDECKT"})
    answer = ingest(api, make_answer)

    assert execute(answer) == "scored"

    run = only_run(answer)
    assert (run.status, run.score, run.calls) == (JudgeRun.Status.SUCCEEDED, 0.5, 3)
    assert run.judge_model == "treue-judge-deployment"
    assert {c["deployment"] for c in judge.azure_calls} == {"treue-judge-deployment"}
    assert len(judge.azure_calls) == 3 and judge.requests[0]["model"] == "treue-judge-deployment"
