"""Fixtures of the investigation tests: answers ingested through the real ingest service, with
and without their messages, users of every role, and a scripted generator + judge served by
the local OpenAI-compatible server (tests/support/openai_server.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from ingest import services
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from monitoring.models import Answer, Service, UseCase
from tests.support.openai_server import FakeOpenAIServer
from tests.support.world import WorldBuilder

GENERATOR = "gpt-4o-mini"
JUDGE = "judge-x"
PASSWORD = "pw-only-for-tests-31c"
SYSTEM = "Beantworte die Frage nur aus dem Kontext."


def messages_for(question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Kontext: Prüfintervall laut Ordnung.\n\nFrage: {question}"},
    ]


class ScriptedModels:
    """Plays the generator and the judge. The generator answers each question (found in the
    last user message) with its script's replies in turn; the judge (recognised by its model)
    answers `judge_reply`. Requests are kept per role for the assertions."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[str]] = {}
        self.judge_reply = "KONSISTENT\nDie Antworten sagen dasselbe."
        self.generator_requests: list[dict[str, Any]] = []
        self.judge_requests: list[dict[str, Any]] = []
        self._asked: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> str:
        with self._lock:
            if request.get("model") == JUDGE:
                self.judge_requests.append(request)
                return self.judge_reply
            self.generator_requests.append(request)
            user = request["messages"][-1]["content"]
            question = user.rsplit("Frage: ", 1)[-1]
            replies = self.scripts.get(question, ["Dazu steht nichts im Kontext."])
            n = self._asked.get(question, 0)
            self._asked[question] = n + 1
            return replies[n % len(replies)]


@dataclass
class World:
    use_case: UseCase
    other: UseCase
    service: Service
    users: dict[str, User]
    models: ScriptedModels
    server: FakeOpenAIServer
    answers: list[Answer] = field(default_factory=list)

    def answer(
        self, external_id: str, question: str, *, messages: bool = True,
        flagged: bool = False, use_case: UseCase | None = None,
    ) -> Answer:
        use_case = use_case or self.use_case
        text = "Der Behälter wird alle 5 Jahre geprüft."
        body: dict[str, Any] = {
            "external_id": external_id, "use_case": use_case.slug, "question": question,
            "answer": text, "model": GENERATOR,
            "chunks": [{"text": "Prüfintervall: 5 Jahre.", "score": 0.8}],
            "logprobs": None,
        }
        if messages:
            body["messages"] = messages_for(question)
        result = services.answer_ingest(
            service=self.service, payload=AnswerIn.model_validate(body), raw=body
        )
        assert result.outcome == IngestOutcome.CREATED, result.errors
        answer = result.answer
        assert answer is not None
        if flagged:
            Answer.objects.filter(pk=answer.pk).update(flagged=True)
            answer.refresh_from_db()
        self.answers.append(answer)
        return answer


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Question ids the code asked Celery to run (recorded, not published; tests/integration
    runs a real worker)."""
    from investigations import tasks

    sent: list[int] = []

    def record(args: Any = None, kwargs: Any = None, **options: Any) -> None:
        sent.append(args[0])

    monkeypatch.setattr(tasks.investigate_question, "apply_async", record)
    return sent


@pytest.fixture
def world(
    world_builder: WorldBuilder, db: None, openai_server: FakeOpenAIServer
) -> Iterator[World]:
    use_case = world_builder.use_case(
        "behaelter", "Behälterprüfung", language="de", sample_rate=0.01
    )
    other = world_builder.use_case("vertrieb", "Vertrieb", language="en")
    service, _key = world_builder.service("rag-bot", use_case, other)
    roles: dict[str, dict[str, Any]] = {
        "lead": {"lead_of": [use_case]}, "expert": {"expert_of": [use_case]},
        "staff": {"is_staff": True}, "stranger": {}, "other_lead": {"lead_of": [other]},
    }
    users = {
        name: world_builder.user(name, password=PASSWORD, **extra)
        for name, extra in roles.items()
    }
    models = ScriptedModels()
    openai_server.responder = models
    with override_settings(
        TREUE_GENERATOR_BASE_URL=openai_server.base_url,
        TREUE_JUDGE_BASE_URL=openai_server.base_url,
        TREUE_JUDGE_MODEL=JUDGE,
        TREUE_JUDGE_API_KEY="test-key",
        TREUE_GENERATOR_API_KEY="test-key",
    ):
        yield World(use_case, other, service, users, models, openai_server)


# Sample scripts: the article's guessed answer, and one the model knows.
GUESSED = [
    "Das Prüfintervall beträgt 5 Jahre.",
    "Die Prüfung ist alle zwei Jahre fällig.",
    "Das ist je nach Behältergröße verschieden.",
]
KNOWN = [
    "Der Behälter wird alle 5 Jahre geprüft.",
    "Alle 5 Jahre muss der Behälter geprüft werden.",
    "Die Prüfung erfolgt alle 5 Jahre.",
]
