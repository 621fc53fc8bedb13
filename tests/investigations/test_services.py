"""The investigation services in-process against the local OpenAI-compatible server, through
the real `openai` client. Enqueueing is recorded instead of published (tests/integration runs a
real worker)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from investigations import selectors, services
from investigations.models import Investigation, Question
from judging.client import JudgeUnavailable
from monitoring.models import JudgePrice
from tests.investigations.conftest import GENERATOR, GUESSED, JUDGE, KNOWN, World, messages_for

Q_GUESSED = "Wie oft muss der Behälter geprüft werden?"
Q_KNOWN = "Wie lange gilt die Prüfung?"


@pytest.fixture(autouse=True)
def _recorded(enqueued: list[int]) -> None:
    """Nothing is published from these tests."""


def start(world: World, selection: str = "latest", n: int = 10, **kwargs: Any) -> Investigation:
    plan = selectors.investigation_plan(
        use_case=world.use_case, selection=selection, n=n,
        samples=kwargs.pop("samples", 3), temperature=kwargs.pop("temperature", 0.7), **kwargs,
    )
    return services.investigation_start(plan=plan, user=world.users["lead"])


def question_for(investigation: Investigation, question: str) -> Question:
    return investigation.questions.get(answer__question=question)


def test_the_plan_counts_calls_skips_answers_without_messages_and_prices_them(
    world: World,
) -> None:
    world.answer("a1", Q_GUESSED)
    world.answer("a2", Q_KNOWN)
    without = world.answer("a3", "Ohne Nachrichten?", messages=False)
    plan = selectors.investigation_plan(
        use_case=world.use_case, selection="latest", n=10, samples=3, temperature=0.7
    )
    assert len(plan.answers) == 2
    assert [(a.pk, reason) for a, reason in plan.skipped] == [
        (without.pk, selectors.SKIP_NO_MESSAGES)
    ]
    assert plan.generator_calls == 6 and plan.judge_calls == 2 and plan.calls == 8
    assert plan.estimated_cost is None  # no prices known
    # The generator's list price (migration monitoring.0030) replaced by the test's own.
    JudgePrice.objects.filter(judge_model=GENERATOR).delete()
    JudgePrice.objects.create(
        judge_model=GENERATOR, prompt_per_1k=Decimal("1"), completion_per_1k=Decimal("2")
    )
    JudgePrice.objects.create(
        judge_model=JUDGE, prompt_per_1k=Decimal("0.5"), completion_per_1k=Decimal("1")
    )
    priced = selectors.investigation_plan(
        use_case=world.use_case, selection="latest", n=10, samples=3, temperature=0.7
    )
    assert priced.estimated_cost is not None and priced.estimated_cost > 0
    five = selectors.investigation_plan(
        use_case=world.use_case, selection="latest", n=10, samples=5, temperature=0.7
    )
    # More samples cost more generator calls, in proportion.
    assert five.generator_calls == 10
    assert five.estimated_cost is not None and five.estimated_cost > priced.estimated_cost


def test_selections_pick_the_right_answers(world: World) -> None:
    plain = world.answer("a1", "Erste Frage?")
    flagged = world.answer("a2", "Zweite Frage?", flagged=True)
    world.answer("x1", "Fremde Frage?", use_case=world.other)
    latest = selectors.investigation_plan(
        use_case=world.use_case, selection="latest", n=1, samples=3, temperature=0.7
    )
    assert [a.pk for a in latest.answers] == [flagged.pk]
    only_flagged = selectors.investigation_plan(
        use_case=world.use_case, selection="flagged", n=10, samples=3, temperature=0.7
    )
    assert [a.pk for a in only_flagged.answers] == [flagged.pk]
    chosen = selectors.investigation_plan(
        use_case=world.use_case, selection="chosen", n=0, samples=3, temperature=0.7,
        answer_ids=[plain.pk],
    )
    assert [a.pk for a in chosen.answers] == [plain.pk]
    other = world.answers[-1]
    with pytest.raises(selectors.SelectionError):
        selectors.investigation_plan(
            use_case=world.use_case, selection="chosen", n=0, samples=3, temperature=0.7,
            answer_ids=[plain.pk, other.pk],
        )


def test_start_creates_questions_and_enqueues_only_those_that_can_be_asked(
    world: World, enqueued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    world.answer("a1", Q_GUESSED)
    world.answer("a2", "Ohne?", messages=False)
    with django_capture_on_commit_callbacks(execute=True):
        investigation = start(world)
    questions = list(investigation.questions.order_by("position"))
    assert [q.status for q in questions] == [Question.Status.PENDING, Question.Status.SKIPPED]
    assert questions[1].skip_reason == selectors.SKIP_NO_MESSAGES
    assert enqueued == [questions[0].pk]
    assert investigation.estimated_calls == 4
    assert questions[0].generator_model == GENERATOR


def test_contradicting_numbers_make_a_question_inconsistent_without_asking_the_judge(
    world: World,
) -> None:
    world.models.scripts[Q_GUESSED] = GUESSED
    answer = world.answer("a1", Q_GUESSED)
    investigation = start(world, temperature=0.9)
    question = question_for(investigation, Q_GUESSED)
    assert services.question_execute(question_id=question.pk) == "done"
    question.refresh_from_db()
    assert question.status == Question.Status.DONE
    assert question.consistent is False
    assert question.reason == (
        "Zahlen widersprechen sich: 5 Jahre / alle zwei Jahre / je nach Behältergröße"
    )
    assert question.decided_by == "values"
    assert [s["text"] for s in question.sample_data] == GUESSED
    # The generator got the stored messages, the chosen temperature, log-probabilities on.
    requests = world.models.generator_requests
    assert len(requests) == 3
    for request in requests:
        assert request["messages"] == messages_for(Q_GUESSED) == answer.messages
        assert request["temperature"] == 0.9
        assert request["logprobs"] is True
        assert request["model"] == GENERATOR
    assert all(s["logprobs"] and s["logprobs"]["content"] for s in question.sample_data)
    assert world.models.judge_requests == []
    assert question.generator_calls == 3 and question.judge_calls == 0
    # Differing spans point at the values.
    for sample, spans in zip(question.sample_data, question.comparison["differing"], strict=True):
        assert spans
        for start_, end in spans:
            assert sample["text"][start_:end] in ("5 Jahre", "alle zwei Jahre",
                                                  "je nach Behältergröße")
    investigation.refresh_from_db()
    assert investigation.status == Investigation.Status.FINISHED


def test_agreeing_values_are_checked_by_the_judge_at_temperature_zero(world: World) -> None:
    world.models.scripts[Q_KNOWN] = KNOWN
    world.answer("a1", Q_KNOWN)
    investigation = start(world)
    question = question_for(investigation, Q_KNOWN)
    services.question_execute(question_id=question.pk)
    question.refresh_from_db()
    assert question.consistent is True
    assert question.decided_by == "judge"
    assert len(world.models.judge_requests) == 1
    judge_request = world.models.judge_requests[0]
    assert judge_request["temperature"] == 0
    assert judge_request["model"] == JUDGE
    prompt = "\n".join(m["content"] for m in judge_request["messages"])
    assert Q_KNOWN in prompt and all(text in prompt for text in KNOWN)
    assert question.judge_calls == 1 and question.generator_calls == 3


def test_a_judge_contradiction_makes_a_question_inconsistent(world: World) -> None:
    world.models.scripts[Q_KNOWN] = KNOWN
    world.models.judge_reply = "WIDERSPRUCH\nAntwort 2 nennt einen anderen Prüfer."
    world.answer("a1", Q_KNOWN)
    investigation = start(world)
    question = question_for(investigation, Q_KNOWN)
    services.question_execute(question_id=question.pk)
    question.refresh_from_db()
    assert question.consistent is False
    assert question.decided_by == "judge"
    assert "anderen Prüfer" in question.reason


def test_an_unparseable_judge_is_asked_twice_then_the_question_is_undecided(
    world: World,
) -> None:
    world.models.scripts[Q_KNOWN] = KNOWN
    world.models.judge_reply = "Ich bin mir nicht sicher."
    world.answer("a1", Q_KNOWN)
    investigation = start(world)
    question = question_for(investigation, Q_KNOWN)
    services.question_execute(question_id=question.pk)
    question.refresh_from_db()
    assert question.status == Question.Status.DONE
    assert question.consistent is None  # never silently "consistent"
    assert len(world.models.judge_requests) == 2
    assert question.judge_raw.count("Ich bin mir nicht sicher.") == 2


def test_a_failed_call_keeps_the_samples_and_the_retry_asks_only_for_the_missing_ones(
    world: World,
) -> None:
    world.models.scripts[Q_GUESSED] = GUESSED
    world.answer("a1", Q_GUESSED)
    investigation = start(world)
    question = question_for(investigation, Q_GUESSED)
    calls_before = len(world.server.requests)
    original = world.server.responder
    count = {"n": 0}

    def once_then_fail(request: dict[str, Any]) -> str:
        count["n"] += 1
        if count["n"] == 2:
            raise RuntimeError("simulated generator crash")  # the server answers 500
        return original(request)

    world.server.responder = once_then_fail
    with pytest.raises(JudgeUnavailable):
        services.question_execute(question_id=question.pk)
    question.refresh_from_db()
    assert question.status == Question.Status.PENDING
    assert len(question.sample_data) == 1
    assert "500" in question.error
    assert question.not_before is not None
    Question.objects.filter(pk=question.pk).update(not_before=None)
    assert services.question_execute(question_id=question.pk) == "done"
    question.refresh_from_db()
    assert len(question.sample_data) == 3
    # 1 stored + 1 failed + 2 on the retry; the first sample was not asked again.
    assert len(world.server.requests) - calls_before == 4
    assert question.generator_calls == 3
    assert question.attempts == 2


def test_a_judge_that_is_the_generator_is_refused(world: World) -> None:
    world.answer("a1", Q_GUESSED)
    investigation = start(world, generator_model=JUDGE)
    question = question_for(investigation, Q_GUESSED)
    assert services.question_execute(question_id=question.pk) == "failed"
    question.refresh_from_db()
    assert question.status == Question.Status.FAILED
    assert "judges itself" in question.error
    assert world.server.requests == []
    investigation.refresh_from_db()
    assert investigation.status == Investigation.Status.FINISHED


def test_cancelling_stops_questions_not_yet_asked(world: World) -> None:
    world.models.scripts[Q_GUESSED] = GUESSED
    world.answer("a1", Q_GUESSED)
    world.answer("a2", Q_KNOWN)
    investigation = start(world)
    first, second = investigation.questions.order_by("position")
    services.question_execute(question_id=first.pk)
    assert services.investigation_cancel(investigation=investigation) is True
    assert services.investigation_cancel(investigation=investigation) is False
    assert services.question_execute(question_id=second.pk) == "skipped"
    second.refresh_from_db()
    first.refresh_from_db()
    investigation.refresh_from_db()
    assert second.status == Question.Status.CANCELLED
    assert first.status == Question.Status.DONE  # what was asked stays in the report
    assert investigation.status == Investigation.Status.CANCELLED
    report = selectors.investigation_report(investigation=investigation)
    assert report.progress.finished == 2 and report.progress.total == 2


def test_the_cost_is_counted_per_call_at_each_models_price(world: World) -> None:
    # The generator's list price (migration monitoring.0030) replaced by the test's own.
    JudgePrice.objects.filter(judge_model=GENERATOR).delete()
    JudgePrice.objects.create(
        judge_model=GENERATOR, prompt_per_1k=Decimal("1"), completion_per_1k=Decimal("2")
    )
    JudgePrice.objects.create(
        judge_model=JUDGE, prompt_per_1k=Decimal("0.5"), completion_per_1k=Decimal("1")
    )
    world.server.usage_for = lambda request, content: (1000, 100)
    world.models.scripts[Q_KNOWN] = KNOWN
    world.answer("a1", Q_KNOWN)
    investigation = start(world)
    question = question_for(investigation, Q_KNOWN)
    services.question_execute(question_id=question.pk)
    question.refresh_from_db()
    # 3 generator calls at 1.2 and one judge call at 0.6.
    assert question.cost == Decimal("4.2")
    assert question.prompt_tokens == 4000 and question.completion_tokens == 400
    report = selectors.investigation_report(investigation=investigation)
    assert report.cost == Decimal("4.2") and report.cost_known


def test_the_report_puts_inconsistent_questions_first_with_the_rate_and_2x2_tables(
    world: World,
) -> None:
    world.models.scripts[Q_GUESSED] = GUESSED
    world.models.scripts[Q_KNOWN] = KNOWN
    known = world.answer("a1", Q_KNOWN)
    world.answer("a2", Q_GUESSED, flagged=True)
    from monitoring.models import Answer

    Answer.objects.filter(pk=known.pk).update(score=1.0)
    investigation = start(world)
    for q in investigation.questions.all():
        services.question_execute(question_id=q.pk)
    report = selectors.investigation_report(investigation=investigation)
    assert [q.answer.question for q in report.questions] == [Q_GUESSED, Q_KNOWN]
    assert report.rate.consistent == 1 and report.rate.n == 2
    assert report.rate.low is not None and report.rate.high is not None
    assert 0 < report.rate.low < 0.5 < report.rate.high < 1
    assert report.by_flag.cells == ((1, 0), (0, 1))
    assert report.by_score.cells == ((0, 0), (0, 1))  # the guessed answer has no score
    assert report.unscored == 1
    # samples_view: set on each question by investigation_report for the template (not a field).
    samples = report.questions[0].samples_view  # type: ignore[attr-defined]  # see above
    marked = [s.text for s in samples[1] if s.probability is not None]
    assert marked == ["alle zwei Jahre"]


def test_the_reconciler_re_enqueues_lost_questions(world: World, enqueued: list[int]) -> None:
    from datetime import timedelta

    from django.utils import timezone

    world.answer("a1", Q_GUESSED)
    investigation = start(world)
    question = investigation.questions.get()
    enqueued.clear()
    Question.objects.filter(pk=question.pk).update(
        created_at=timezone.now() - timedelta(hours=1)
    )
    assert services.questions_reconcile() == 1
    assert enqueued == [question.pk]
    services.investigation_cancel(investigation=investigation)
    enqueued.clear()
    assert services.questions_reconcile() == 0


def test_anonymised_answers_are_skipped_with_their_own_reason(world: World) -> None:
    from django.utils import timezone

    from monitoring.models import Answer

    kept = world.answer("a1", Q_GUESSED)
    gone = world.answer("a2", Q_KNOWN)
    Answer.objects.filter(pk=gone.pk).update(anonymised_at=timezone.now(), messages=None)
    plan = selectors.investigation_plan(
        use_case=world.use_case, selection="latest", n=10, samples=3, temperature=0.7
    )
    assert [a.pk for a in plan.answers] == [kept.pk]
    assert [(a.pk, r) for a, r in plan.skipped] == [(gone.pk, selectors.SKIP_ANONYMISED)]


def test_a_sample_with_nul_and_a_lone_surrogate_is_stored_without_them(world: World) -> None:
    # The samples and their log-probabilities (a token may be a NUL or half of a pair) are
    # stored as JSON, which PostgreSQL refuses with either in it: the question failed.
    world.models.scripts[Q_KNOWN] = ["Die Prüfung\x00 gilt 5 Jahre \ud83d.", *KNOWN[1:]]
    world.answer("a1", Q_KNOWN)
    question = question_for(start(world), Q_KNOWN)

    assert services.question_execute(question_id=question.pk) == "done"

    question.refresh_from_db()
    first = question.sample_data[0]
    assert first["text"] == "Die Prüfung gilt 5 Jahre \ufffd."
    stored = json.dumps(question.sample_data)
    assert "\\u0000" not in stored and "\\ud83d" not in stored
    assert "".join(t["token"] for t in first["logprobs"]["content"]).startswith("Die")


def test_calls_with_absurd_usage_count_with_unknown_tokens(world: World, client: Any) -> None:
    # -5 and 10^30 tokens broke the end of a run ("integer out of range"); here the calls
    # count, their tokens are unknown and the report says how many.
    # The generator's list price (migration monitoring.0030) replaced by the test's own.
    JudgePrice.objects.filter(judge_model=GENERATOR).delete()
    JudgePrice.objects.create(
        judge_model=GENERATOR, prompt_per_1k=Decimal("1"), completion_per_1k=Decimal("2")
    )
    JudgePrice.objects.create(
        judge_model=JUDGE, prompt_per_1k=Decimal("0.5"), completion_per_1k=Decimal("1")
    )
    world.server.usage_for = lambda request, content: (
        (10**30, -5) if request["model"] == GENERATOR else (1000, 100)
    )
    world.models.scripts[Q_KNOWN] = KNOWN
    world.answer("a1", Q_KNOWN)
    investigation = start(world)
    question = question_for(investigation, Q_KNOWN)

    assert services.question_execute(question_id=question.pk) == "done"

    question.refresh_from_db()
    assert (question.generator_calls, question.judge_calls) == (3, 1)
    assert question.usage_unknown_calls == 3
    assert (question.prompt_tokens, question.completion_tokens) == (1000, 100)
    assert question.cost == Decimal("0.6")  # the judge call; the others' tokens are unknown
    report = selectors.investigation_report(investigation=investigation)
    assert report.usage_unknown_calls == 3
    client.force_login(world.users["lead"])
    page = client.get(f"/investigations/{investigation.pk}/").content.decode()
    assert "ohne 3 Aufrufe, deren Token-Angaben nicht stimmen können" in page
