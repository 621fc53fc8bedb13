"""Retention: answers older than a use case's retention_days lose their content and keep their
figures. Built through the real ingest, judge service and weekly review; the figures compared
are the dashboard selectors' and the estimates API's, before and after.
"""

import io
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.test import Client
from django.utils import timezone

from dashboard.selectors.overview import overview_rows
from dashboard.selectors.page import use_case_page
from ingest import services
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from investigations.models import Investigation, Question
from judging.services import rescoring
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, Chunk, Claim, JudgePrice, JudgeRun, Service, UseCase
from monitoring.services import retention
from monitoring.tasks import apply_retention
from review import services as review_services
from review.models import ReviewBatch, ReviewItem, ReviewSubmission, ReviewVerdict
from review.selectors.calibration import calibration_data
from tests.support.judged import JUDGE, Judge, external_id, ingest, judged
from tests.support.openai_server import FakeOpenAIServer
from tests.support.shared_world import built_once, read_again
from tests.support.world import WorldBuilder
from treue_site.celery import app as celery_app

RETENTION_DAYS = 30


def _wednesday(weeks_ago: int) -> datetime:
    today = timezone.localdate()
    day = today - timedelta(days=today.weekday() + 7 * weeks_ago - 2)
    return datetime.combine(day, time(12), tzinfo=timezone.get_current_timezone())


def _week(moment: datetime | date) -> str:
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


def _next_week(moment: datetime) -> str:
    return _week(moment + timedelta(days=7))


@dataclass
class World:
    use_case: UseCase
    other: UseCase
    service: Service
    key: str
    lead: User
    expert: User
    answers: dict[str, Answer]
    finished: ReviewBatch
    unfinished: ReviewBatch


@pytest.fixture
def judge(world_builder: WorldBuilder) -> Judge:
    return world_builder.judge(Judge())


def _ingest_full(service: Service, use_case: UseCase, ext: str, created_at: datetime) -> Answer:
    """An unsampled answer with everything a RAG service can send: messages, metadata and
    log-probabilities (one uncertain word, so it is flagged... and then judged: sample it)."""
    body: dict[str, Any] = {
        "external_id": ext,
        "use_case": use_case.slug,
        "question": "Meine Kundennummer ist 4711, wann kommt Herr Müller?",
        "answer": "Herr Müller kommt am Montag.",
        "model": "gpt-4o-mini",
        "chunks": [{"text": "Termin Müller: Montag, 9 Uhr.", "id": "crm#1", "score": 0.7,
                    "source": "crm"}],
        "messages": [{"role": "user", "content": "Meine Kundennummer ist 4711"}],
        "metadata": {"customer": "4711"},
        "logprobs": {"content": [
            {"token": "Herr", "logprob": 0.0, "bytes": list(b"Herr")},
            {"token": " Müller", "logprob": -3.0, "bytes": list(" Müller".encode())},
            {"token": " kommt", "logprob": 0.0, "bytes": list(b" kommt")},
            {"token": " am", "logprob": 0.0, "bytes": list(b" am")},
            {"token": " Montag.", "logprob": 0.0, "bytes": list(b" Montag.")},
        ]},
        "created_at": created_at.isoformat(),
    }
    result = services.answer_ingest(service=service, payload=AnswerIn.model_validate(body),
                                    raw=body)
    assert result.outcome == IngestOutcome.CREATED, result.errors
    assert result.answer is not None
    return result.answer


def _submit_all(batch: ReviewBatch, expert: User, *, comment: str = "") -> None:
    for item in batch.items.order_by("position"):
        verdicts = review_services.review_item_open(item=item)
        review_services.review_item_save(item=item, user=expert, data=review_services.ItemInput(
            labels={v.position: "GEDECKT" for v in verdicts},
            comment=comment or None, new_claim="Eine vergessene Aussage über Herrn Müller.",
        ))
        added = item.verdicts.filter(claim__isnull=True).get()
        review_services.review_item_save(
            item=item, user=expert,
            data=review_services.ItemInput(labels={added.position: "UNGEDECKT"}),
        )
        review_services.review_item_submit(item=item, user=expert)


@pytest.fixture(scope="module")
def built(
    django_db_setup: None, django_db_blocker: Any,
    _openai_server_of_this_process: FakeOpenAIServer,
) -> Iterator[World]:
    """The world, built once for the module (tests/support/shared_world.py)."""

    def build_world() -> World:
        builder = WorldBuilder(settings, lambda: _openai_server_of_this_process)
        return build(builder, builder.judge(Judge()))

    with built_once(django_db_blocker, build_world) as world:
        yield world


@pytest.fixture(autouse=True)
def world(built: World, judge: Judge, db: None) -> World:
    """Every test here runs on the module's world, read again for it."""
    return read_again(built)


def build(world_builder: WorldBuilder, judge: Judge) -> World:
    """Six weeks ago (old): judged answers, all in a review batch that was finished, a full
    answer with messages and metadata, an unsampled one, one still queued for the judge. Five
    weeks ago (old): a judged answer in a batch nobody finished. Last week (recent): judged
    answers. Another use case without retention has an old answer too."""
    use_case = world_builder.use_case("pruefung", "Prüfung", sample_rate=0.5)
    use_case.retention_days = RETENTION_DAYS
    use_case.save()
    other = world_builder.use_case("fremd", "Fremd", sample_rate=0.5)
    service, key = world_builder.service("pruef-bot", use_case, other)
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=Decimal("0.5"),
                              completion_per_1k=Decimal("2"), currency="EUR")
    lead = world_builder.user("leitung", lead_of=[use_case], password="pw-31f")
    expert = world_builder.user("expertin", expert_of=[use_case], password="pw-31f")
    old, old2, recent = _wednesday(6), _wednesday(5), _wednesday(1)

    def ext(prefix: str, in_random: bool) -> str:
        return external_id(service, use_case, prefix, in_random=in_random)

    judge.script("Herr Müller kommt am Montag.", [("Müller kommt Montag.", "GEDECKT")])
    full = _ingest_full(service, use_case, "full-1", old)
    assert full.flagged
    judge_run_execute(run_id=full.judge_runs.get().pk)
    answers = {
        "full": full,
        "flagged_a": judged(judge, service, use_case, ext("fa", False), [
            ("A1 ist belegt.", "GEDECKT"), ("A2 ist erfunden.", "UNGEDECKT"),
        ], flagged=True, created_at=old),
        "random_c": judged(judge, service, use_case, ext("rc", True), [
            ("C1 ist belegt.", "GEDECKT"), ("C2 ist halb belegt.", "TEILWEISE"),
        ], created_at=old),
        "plain_e": ingest(service, use_case, ext("pe", False), "Antwort E.", created_at=old),
        "queued_q": ingest(service, use_case, ext("qq", True), "Antwort Q.", created_at=old),
        "open_review": judged(judge, service, use_case, ext("or", True), [
            ("O1 ist belegt.", "GEDECKT"),
        ], created_at=old2),
        "recent_r": judged(judge, service, use_case, ext("rr", True), [
            ("R1 ist belegt.", "GEDECKT"),
        ], created_at=recent),
        "recent_f": judged(judge, service, use_case, ext("rf", False), [
            ("F1 ist erfunden.", "UNGEDECKT"),
        ], flagged=True, created_at=recent),
        "other_old": ingest(service, other, "other-1", "Antwort X.", created_at=old),
    }
    assert answers["queued_q"].status == Answer.Status.QUEUED
    finished = review_services.review_batch_create(use_case=use_case, week=_next_week(old)).batch
    unfinished = review_services.review_batch_create(
        use_case=use_case, week=_next_week(old2)
    ).batch
    assert finished is not None and unfinished is not None
    assert finished.items.count() == 3  # full, flagged_a, random_c
    _submit_all(finished, expert, comment="Kunde 4711 hat angerufen.")
    finished.refresh_from_db()
    assert finished.finished_at is not None and unfinished.finished_at is None
    for answer in answers.values():
        answer.refresh_from_db()
    return World(use_case, other, service, key, lead, expert, answers, finished, unfinished)


def _figures(world: World, client: Client) -> dict[str, Any]:
    """Everything the dashboards and the estimates API compute, comparable with ==."""
    first = _week(_wednesday(7))
    response = client.get(
        f"/api/v1/use-cases/{world.use_case.slug}/estimates?from={first}",
        HTTP_AUTHORIZATION=f"Bearer {world.key}",
    )
    assert response.status_code == 200, response.content
    page = use_case_page(use_case=world.use_case)
    rows = overview_rows(user=world.lead)
    calibration = calibration_data(use_case=world.use_case)
    assert calibration.points  # the finished batch's answers are old ones
    return {
        "calibration": repr(calibration),
        "api": response.json()["weeks"],
        # repr: the figures are frozen dataclasses of floats (and NaN != NaN).
        "page_weeks": repr(page.weeks),
        "diagnosis": repr(page.diagnosis),
        "overview": repr([(row.use_case.slug, row.weeks, row.light) for row in rows]),
    }


def _held_ids(world: World) -> set[int]:
    return {world.answers[n].pk for n in ("queued_q", "open_review", "recent_r", "recent_f",
                                          "other_old")}


def test_figures_are_unchanged_and_the_content_is_gone(world: World, client: Client) -> None:
    before = _figures(world, client)
    assert sum(w["volume"] for w in before["api"]) == 8  # the old answers are in the figures

    [result] = retention.retention_apply_all()
    assert (result.use_case, result.retention_days) == ("pruefung", RETENTION_DAYS)
    # Old: full, flagged_a, random_c, plain_e, queued_q (6 weeks), open_review (5 weeks).
    assert (result.due, result.anonymised) == (6, 4)
    assert (result.held_in_review, result.held_for_judge) == (1, 1)

    assert _figures(world, client) == before

    gone = {world.answers[n].pk for n in ("full", "flagged_a", "random_c", "plain_e")}
    for answer in Answer.objects.all():
        if answer.pk not in gone:
            assert answer.anonymised_at is None, answer.external_id
            assert answer.question and answer.text
            continue
        assert answer.anonymised_at is not None
        assert (answer.question, answer.text) == ("", "")
        assert (answer.messages, answer.metadata, answer.token_data) == (None, {}, None)
        assert answer.uncertain_tokens == []
        assert set(answer.chunks.values_list("text", flat=True)) == {""}
        assert answer.chunks.count() == answer.chunk_count == 1
        for run in answer.judge_runs.all():
            assert run.decomposition_raw == ""
            assert run.call_log and all("text" not in call for call in run.call_log)
            assert all(call["prompt_tokens"] >= 0 for call in run.call_log)
            assert set(run.claims.values_list("text", "raw_reply").distinct()) <= {("", "")}
            assert run.claims.exists() == (not run.abstention)

    full_before = world.answers["full"]
    full = Answer.objects.get(pk=full_before.pk)
    # The figures of the answer itself stay.
    for field in ("flagged", "sampled", "in_random_sample", "sample_reason",
                  "inclusion_probability", "status", "score", "abstention", "chunk_count",
                  "best_chunk_score", "min_content_probability", "multi_part", "created_at",
                  "received_at", "model", "external_id", "content_hash", "current_run_id",
                  "logprobs_status", "logprob_threshold"):
        assert getattr(full, field) == getattr(full_before, field), field
    chunk = Chunk.objects.get(answer=full)
    assert (chunk.rank, chunk.score, chunk.source, chunk.source_chunk_id) == (1, 0.7, "crm",
                                                                               "crm#1")
    # Claims keep their labels.
    assert list(Claim.objects.filter(run__answer=full).values_list("label", flat=True)) == [
        "GEDECKT"
    ]
    # The expert's words are gone, the labels and scores stay.
    items = ReviewItem.objects.filter(batch=world.finished)
    assert set(items.values_list("comment", flat=True)) == {""}
    assert all(i.manual_score is not None for i in items)
    assert set(ReviewVerdict.objects.filter(item__in=items).values_list("added_text", flat=True)
               ) == {""}
    assert set(ReviewVerdict.objects.filter(item__in=items).values_list("label", flat=True)) == {
        "GEDECKT", "UNGEDECKT"
    }
    for submission in ReviewSubmission.objects.filter(item__in=items):
        assert submission.comment == ""
        assert submission.verdicts and all(v["text"] == "" for v in submission.verdicts)
        assert {v["label"] for v in submission.verdicts} == {"GEDECKT", "UNGEDECKT"}
        assert submission.manual_score is not None and submission.automatic_score is not None
    # The item of the unfinished batch keeps everything.
    held = world.answers["open_review"]
    assert Claim.objects.filter(run__answer=held).exclude(text="").exists()


def test_running_again_changes_nothing(world: World) -> None:
    retention.retention_apply_all()
    stamps = dict(Answer.objects.values_list("pk", "anonymised_at"))
    [again] = retention.retention_apply_all()
    assert again.anonymised == 0
    assert again.due == 2  # only the held ones are still looked at
    assert dict(Answer.objects.values_list("pk", "anonymised_at")) == stamps


def test_held_answers_go_once_released(world: World, judge: Judge) -> None:
    retention.retention_apply_all()
    # The judge catches up with the queued answer; the expert finishes the batch.
    queued = world.answers["queued_q"]
    judge.script("Antwort Q.", [("Q1 ist belegt.", "GEDECKT")])
    judge_run_execute(run_id=queued.judge_runs.get().pk)
    _submit_all(world.unfinished, world.expert)
    [result] = retention.retention_apply_all()
    assert (result.due, result.anonymised, result.held_in_review, result.held_for_judge) == (
        2, 2, 0, 0
    )
    assert Answer.objects.filter(anonymised_at__isnull=True).count() == 3  # 2 recent, other


def test_an_answer_with_a_rescore_waiting_is_held(world: World) -> None:
    answer = world.answers["random_c"]
    rescoring.answer_rescore(answer=answer, judge_model="judge-y", user=world.lead)
    [result] = retention.retention_apply_all()
    assert result.held_for_judge == 2
    answer.refresh_from_db()
    assert answer.anonymised_at is None


def test_batches_are_separate_transactions(world: World, monkeypatch: Any) -> None:
    """A failure in the second batch keeps what the first one did: no giant transaction."""
    calls = []
    real = retention.answers_anonymise

    def failing_second(**kwargs: Any) -> int:
        calls.append(kwargs["answer_ids"])
        if len(calls) == 2:
            raise RuntimeError("database went away")
        return real(**kwargs)

    monkeypatch.setattr(retention, "answers_anonymise", failing_second)
    with pytest.raises(RuntimeError):
        retention.use_case_retention_apply(use_case=world.use_case, batch_size=2)
    assert len(calls[0]) == 2
    assert Answer.objects.filter(pk__in=calls[0], anonymised_at__isnull=False).count() == 2
    assert not Answer.objects.filter(pk__in=calls[1], anonymised_at__isnull=False).exists()


def test_small_batches_do_the_same_work(world: World) -> None:
    result = retention.use_case_retention_apply(use_case=world.use_case, batch_size=1)
    assert (result.due, result.anonymised) == (6, 4)
    assert set(Answer.objects.filter(anonymised_at__isnull=True).values_list("pk", flat=True)) \
        == _held_ids(world)


def test_use_cases_without_retention_keep_everything(world: World) -> None:
    world.use_case.retention_days = None
    world.use_case.save()
    assert retention.retention_apply_all() == []
    result = retention.use_case_retention_apply(use_case=world.use_case)
    assert (result.due, result.anonymised, result.cutoff) == (0, 0, None)
    assert not Answer.objects.filter(anonymised_at__isnull=False).exists()


def test_a_longer_retention_keeps_more(world: World) -> None:
    world.use_case.retention_days = 40  # six weeks ago on Wednesday is 37 to 43 days
    world.use_case.save()
    [result] = retention.retention_apply_all(now=_wednesday(0) + timedelta(days=1))
    # Thursday of this week: 6 weeks back is 43 days old, 5 weeks back 36 days: only the first.
    assert (result.due, result.anonymised, result.held_for_judge) == (5, 4, 1)
    assert result.held_in_review == 0


# --- the setting -------------------------------------------------------------------------------


@pytest.mark.parametrize(("days", "valid"), [(None, True), (28, True), (365, True),
                                             (27, False), (7, False), (0, False)])
def test_retention_is_at_least_four_weeks(db: None, days: int | None, valid: bool) -> None:
    use_case = UseCase(slug="x", name="X", retention_days=days)
    if valid:
        use_case.full_clean()
    else:
        with pytest.raises(ValidationError) as e:
            use_case.full_clean()
        assert "retention_days" in e.value.message_dict


def test_the_database_refuses_a_short_retention(use_case: UseCase) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        UseCase.objects.filter(pk=use_case.pk).update(retention_days=27)


# --- what still uses the text ------------------------------------------------------------------


def test_an_anonymised_answer_cannot_be_rescored(world: World) -> None:
    retention.retention_apply_all()
    answer = world.answers["random_c"]
    with pytest.raises(rescoring.RescoreRefused, match="anonymisiert"):
        rescoring.answer_rescore(answer=answer, judge_model="judge-y", user=world.lead)
    old = _wednesday(6).isocalendar()
    week = rescoring.use_case_week_rescore(
        use_case=world.use_case, year=old[0], week=old[1], judge_model="judge-y", user=world.lead
    )
    assert week.created == 0
    assert not JudgeRun.objects.filter(trigger=JudgeRun.Trigger.RESCORE).exists()


def test_a_late_review_batch_takes_no_anonymised_answer(world: World) -> None:
    ReviewBatch.objects.all().delete()
    retention.retention_apply_all()
    result = review_services.review_batch_create(
        use_case=world.use_case, week=_next_week(_wednesday(6))
    )
    assert result.batch is None  # every judged answer of that week is anonymised


def test_a_replay_of_an_anonymised_answer_is_still_idempotent(
    world: World, make_answer: Any
) -> None:
    retention.retention_apply_all()
    answer = world.answers["plain_e"]
    body = {
        "external_id": answer.external_id, "use_case": "pruefung",
        "question": "Wie oft muss der Behälter geprüft werden?", "answer": "Antwort E.",
        "model": "gpt-4o-mini",
        "chunks": [{"text": "Prüfintervall: 5 Jahre für Behälter über 1.000 Liter.",
                    "score": 0.8}],
        "logprobs": None, "created_at": _wednesday(6).isoformat(),
    }
    result = services.answer_ingest(service=world.service, payload=AnswerIn.model_validate(body),
                                    raw=body)
    assert result.outcome == IngestOutcome.EXISTING
    assert Answer.objects.filter(external_id=answer.external_id).count() == 1


# --- pages -------------------------------------------------------------------------------------


def test_pages_say_anonymised(world: World, client: Client) -> None:
    retention.retention_apply_all()
    client.force_login(world.lead)
    answer = world.answers["full"]
    html = client.get(f"/answers/{answer.pk}/").content.decode()
    assert "anonymisiert" in html.lower()
    assert "Müller" not in html and "4711" not in html
    assert 'name="judge_model"' not in html  # no rescore form
    listing = client.get("/answers/?use_case=pruefung").content.decode()
    assert listing.count("anonymisiert") >= 4
    assert "4711" not in listing


# --- command, task, schedule -------------------------------------------------------------------


def test_command_dry_run_counts_and_changes_nothing(world: World) -> None:
    out = io.StringIO()
    call_command("apply_retention", "--dry-run", stdout=out)
    assert "pruefung: would anonymise 4 of 6 answers older than 30 days" in out.getvalue()
    assert "1 in an unfinished review, 1 waiting for the judge" in out.getvalue()
    assert not Answer.objects.filter(anonymised_at__isnull=False).exists()


def test_command_for_one_use_case(world: World) -> None:
    out = io.StringIO()
    call_command("apply_retention", "--use-case", "fremd", stdout=out)
    assert out.getvalue().strip() == "fremd: keeps answers forever (no retention_days)"
    call_command("apply_retention", "--use-case", "pruefung", stdout=out)
    assert "pruefung: anonymised 4 of 6" in out.getvalue()
    assert Answer.objects.filter(anonymised_at__isnull=False).count() == 4
    with pytest.raises(CommandError, match="no use case 'nix'"):
        call_command("apply_retention", "--use-case", "nix")


def test_the_daily_task_calls_the_service(world: World) -> None:
    assert apply_retention() == 4
    assert apply_retention() == 0
    entry = celery_app.conf.beat_schedule["apply-retention"]
    assert entry["task"] == "monitoring.tasks.apply_retention"
    assert entry["task"] in celery_app.tasks


# --- self-consistency investigations -----------------------------------------------------------


def test_investigation_samples_lose_their_texts(world: World) -> None:
    # Rows written directly: what matters is what retention leaves of them, not how an
    # investigation fills them (investigations/services.py, tested in its own tests).
    investigation = Investigation.objects.create(
        use_case=world.use_case, created_by=world.lead, selection="chosen", requested=2,
        prompt_version="v1",
    )
    done = Question.objects.create(
        investigation=investigation, answer=world.answers["random_c"], position=1,
        status=Question.Status.DONE, consistent=False, decided_by="judge",
        reason="Einmal 5 Jahre, einmal jährlich für Herrn Müller.", judge_raw="WIDERSPRUCH",
        sample_data=[{"text": "Herr Müller: 5 Jahre.", "logprobs": None, "model": "gen",
                      "latency_ms": 10, "prompt_tokens": 7, "completion_tokens": 3}],
        comparison={"values": [["5 Jahre"], ["jährlich"]]}, generator_calls=1, judge_calls=1,
    )
    pending = Question.objects.create(
        investigation=investigation, answer=world.answers["plain_e"], position=2,
    )
    [result] = retention.retention_apply_all()
    assert result.held_for_judge == 2  # the queued answer and the pending question's
    done.refresh_from_db()
    assert done.sample_data == [{"model": "gen", "latency_ms": 10, "prompt_tokens": 7,
                                 "completion_tokens": 3}]
    assert (done.comparison, done.reason, done.judge_raw) == ({}, "", "")
    assert (done.consistent, done.decided_by, done.generator_calls) == (False, "judge", 1)
    assert Answer.objects.get(pk=pending.answer_id).anonymised_at is None
