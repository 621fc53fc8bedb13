"""Fixtures of the review tests: judged answers built through the real ingest and the real judge
service (against the local OpenAI-compatible server), and users of every role."""

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from common.domain.weeks import shift_week, week_monday
from ingest import services
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, JudgeRun, Service, UseCase
from review import services as review_services
from review import tasks as review_tasks
from review.models import ReviewBatch
from tests.support.openai_server import ScriptedJudge
from tests.support.world import WorldBuilder

GENERATOR = "gpt-4o-mini"
JUDGE = "judge-x"
PASSWORD = "pw-only-for-tests-31c"


def week_time(week: str, day: int = 2, hour: int = 10) -> datetime:
    """A moment inside an ISO week (site time zone): by default Tuesday 10:00, or now if that
    is still to come (early in the current week, such as on Monday night, when CI may run)."""
    monday = week_monday(week)
    zone = timezone.get_current_timezone()
    moment = datetime.combine(monday + timedelta(days=day - 1), time(hour), tzinfo=zone)
    start = datetime.combine(monday, time(0), tzinfo=zone)
    return max(start, min(moment, timezone.now() - timedelta(seconds=1)))


def batch_for(use_case: UseCase, week: str) -> ReviewBatch:
    """The use case's review batch of the week, made now or before."""
    batch = review_services.review_batch_create(use_case=use_case, week=week).batch
    assert batch is not None, f"no batch for {use_case.slug} in {week}"
    return batch


def uncertain_logprobs(text: str) -> dict[str, Any]:
    """One token per word; the first capitalised word after the first is improbable (flags)."""
    content, flagged = [], False
    for i, piece in enumerate(re.findall(r"\s*\S+", text)):
        p = 1.0
        if i and not flagged and piece.strip()[:1].isupper():
            p, flagged = 0.05, True
        content.append({"token": piece, "logprob": math.log(p), "bytes": list(piece.encode())})
    return {"content": content}


@dataclass
class ReviewWorld:
    use_case: UseCase
    other: UseCase
    service: Service
    judge: ScriptedJudge
    users: dict[str, User]

    def answer(
        self, external_id: str, *, week: str, claims: list[tuple[str, str]] | None = None,
        flagged: bool = False, use_case: UseCase | None = None, text: str | None = None,
        question: str = "Wie oft muss der Behälter geprüft werden?",
        chunks: list[dict[str, Any]] | None = None, model: str = GENERATOR,
    ) -> Answer:
        """Ingest one answer created in `week` and, if sampled, judge it with `claims`
        ((claim, verdict) pairs; default one GEDECKT claim)."""
        use_case = use_case or self.use_case
        claims = claims if claims is not None else [(f"Aussage von {external_id}.", "GEDECKT")]
        text = text or f"Antwort {external_id}: Der Behälter wird alle 5 Jahre geprüft."
        body: dict[str, Any] = {
            "external_id": external_id, "use_case": use_case.slug, "question": question,
            "answer": text, "model": model,
            "chunks": chunks if chunks is not None else [
                {"text": "Prüfintervall: 5 Jahre.", "score": 0.81, "source": "Ordnung.pdf"}
            ],
            "logprobs": uncertain_logprobs(text) if flagged else None,
            "created_at": week_time(week).isoformat(),
        }
        service = self.service
        result = services.answer_ingest(
            service=service, payload=AnswerIn.model_validate(body), raw=body
        )
        assert result.outcome == IngestOutcome.CREATED, result.errors
        answer = result.answer
        assert answer is not None
        assert answer.flagged == flagged
        run = answer.judge_runs.filter(status=JudgeRun.Status.PENDING).first()
        if run is not None:
            self.judge.claims = [c for c, _ in claims]
            self.judge.verdicts.update(dict(claims))
            judge_run_execute(run_id=run.pk)
        answer.refresh_from_db()
        return answer

    def unjudged(self, prefix: str, count: int, *, week: str) -> list[Answer]:
        """`count` unflagged answers of `week` that the sample left out: no judge run, so
        cheap, yet part of the week's answers (the stratum sizes)."""
        use_case = self.use_case
        rate = use_case.sample_rate
        # Below any hash draw that occurs among a few hundred ids; not a valid rate for the
        # API, set on the row for these answers only.
        UseCase.objects.filter(pk=use_case.pk).update(sample_rate=1e-9)
        use_case.refresh_from_db()
        try:
            answers = [self.answer(f"{prefix}{i}", week=week) for i in range(count)]
        finally:
            UseCase.objects.filter(pk=use_case.pk).update(sample_rate=rate)
            use_case.refresh_from_db()
        assert not any(a.sampled for a in answers)
        return answers


@pytest.fixture
def review_world(world_builder: WorldBuilder, db: None) -> ReviewWorld:
    return build_review_world(world_builder)


def build_review_world(world_builder: WorldBuilder) -> ReviewWorld:
    """Two use cases that sample every answer, a service for both, and users of every role."""
    judge = world_builder.judge(ScriptedJudge())
    use_case = world_builder.use_case("recht", "Rechtsauskunft", sample_rate=1.0)
    other = world_builder.use_case("fremd", "Fremd", sample_rate=1.0)
    service, _ = world_builder.service("recht-bot", use_case, other)

    def user(name: str, **extra: Any) -> User:
        return world_builder.user(name, email=f"{name}@example.org", password=PASSWORD, **extra)

    users = {
        "expert": user("expertin", expert_of=[use_case]),
        "expert2": user("experte", expert_of=[use_case]),
        "lead": user("leitung", lead_of=[use_case]),
        "other_expert": user("fremdexpertin", expert_of=[other]),
        "other_lead": user("fremdleitung", lead_of=[other]),
        "staff": user("admin", is_staff=True),
        "nobody": user("niemand"),
    }
    return ReviewWorld(use_case, other, service, judge, users)


@pytest.fixture
def login(client: Any) -> Callable[[User], Any]:
    def do(user: User) -> Any:
        client.force_login(user)
        return client
    return do


__all__ = ["ReviewWorld", "shift_week", "week_time"]


@pytest.fixture
def alarm_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker that takes the alarm check a submit publishes after its commit, here at once
    and in-process: what review.tasks.check_use_case_review_alarms does on a worker."""
    def publish_each(name: str, items: Any, **_: Any) -> int:
        assert name == review_services.REVIEW_ALARMS_TASK
        for use_case_id in items:
            review_tasks.check_use_case_review_alarms(use_case_id)
        return 1

    monkeypatch.setattr(review_services.jobs, "publish_each", publish_each)
