"""The one builder of test worlds: use cases, services with keys, users in their roles, answers
ingested and judged, all through the real services (as Zulip builds state through its actions),
never rows made by hand.

Each test module still says which world it needs (its own `World` dataclass and `world`
fixture), but builds it from these pieces: `world_builder` (tests/conftest.py) hands out a
`WorldBuilder` for the test.

    def world(world_builder):
        judge = world_builder.judge(Judge())
        use_case = world_builder.use_case("pruefung", "Prüfung", sample_rate=1.0)
        service, key = world_builder.service("pruef-bot", use_case)
        lead = world_builder.user("leitung", lead_of=[use_case])
        answer = world_builder.judged(judge, service, use_case, "a-1", [("A.", "GEDECKT")])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from django.contrib.auth.models import User

from ingest import services
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from monitoring.models import Answer, Service, UseCase
from monitoring.services.use_cases import service_create, use_case_create
from tests.support import judged as judged_answers

if TYPE_CHECKING:  # imported for real as a pytest plugin (tests/conftest.py), with its asserts
    from tests.support.openai_server import FakeOpenAIServer

PASSWORD = "pw-only-for-tests-31c"
GENERATOR = judged_answers.GENERATOR
JUDGE = judged_answers.JUDGE
QUESTION = "Wie oft muss der Behälter geprüft werden?"
CHUNKS = [{"text": "Prüfintervall: 5 Jahre für Behälter über 1.000 Liter.", "score": 0.8}]

R = TypeVar("R", bound=Callable[[dict[str, Any]], str])


def ingested(service: Service, body: dict[str, Any]) -> Answer:
    """`body` through the real ingest service; it must be stored as a new answer."""
    result = services.answer_ingest(
        service=service, payload=AnswerIn.model_validate(body), raw=body
    )
    assert result.outcome == IngestOutcome.CREATED, result.errors
    assert result.answer is not None
    return result.answer


class WorldBuilder:
    def __init__(self, settings: Any, server: Callable[[], FakeOpenAIServer]) -> None:
        self.settings = settings
        self._server = server

    @property
    def server(self) -> FakeOpenAIServer:
        """The local OpenAI-compatible server, started when a world first needs it."""
        return self._server()

    def judge(self, responder: R, *, model: str = JUDGE) -> R:
        """The local server plays the judge with `responder`; this process is configured to
        call it, as a deployment's would be."""
        self.settings.TREUE_JUDGE_BASE_URL = self.server.base_url
        self.settings.TREUE_JUDGE_MODEL = model
        self.server.responder = responder
        return responder

    def use_case(self, slug: str, name: str, **fields: Any) -> UseCase:
        return use_case_create(slug=slug, name=name, **fields)

    def service(self, name: str, *use_cases: UseCase) -> tuple[Service, str]:
        """A service allowed to send answers for `use_cases`, and its API key."""
        return service_create(name=name, use_cases=list(use_cases))

    def user(
        self, name: str, *, expert_of: Iterable[UseCase] = (), lead_of: Iterable[UseCase] = (),
        superuser: bool = False, password: str = PASSWORD, **fields: Any,
    ) -> User:
        """A user (password `PASSWORD` unless told), expert or team lead of the use cases;
        `fields` are the user's own (email, is_staff, ...)."""
        if superuser:
            user = User.objects.create_superuser(name, password=password, **fields)
        else:
            user = User.objects.create_user(name, password=password, **fields)
        for use_case in expert_of:
            use_case.experts.add(user)
        for use_case in lead_of:
            use_case.team_leads.add(user)
        return user

    def answer(
        self, service: Service, use_case: UseCase, external_id: str, text: str, *,
        flagged: bool = False, created_at: datetime | None = None, model: str = GENERATOR,
        **fields: Any,
    ) -> Answer:
        """An answer ingested; `flagged` sends log-probabilities with one uncertain word ("5"),
        which tier 1 flags. `fields` go into the body as they are (question, chunks, messages,
        metadata, logprobs, ...)."""
        if flagged:
            return judged_answers.ingest(
                service, use_case, external_id, text, flagged=True, created_at=created_at,
                model=model,
            )
        body: dict[str, Any] = {
            "external_id": external_id, "use_case": use_case.slug, "question": QUESTION,
            "answer": text, "model": model, "chunks": CHUNKS, "logprobs": None,
        }
        if created_at is not None:
            body["created_at"] = created_at.isoformat()
        body.update(fields)
        return ingested(service, body)

    def judged(
        self, judge: judged_answers.Judge, service: Service, use_case: UseCase,
        external_id: str, verdicts: list[tuple[str, str]], **kwargs: Any,
    ) -> Answer:
        """An answer ingested and judged with these (claim, verdict) pairs, as stored."""
        return judged_answers.judged(judge, service, use_case, external_id, verdicts, **kwargs)

    def external_id(
        self, service: Service, use_case: UseCase, prefix: str, *, in_random: bool
    ) -> str:
        """The first id `prefix-N` that the random draw puts in (or out of) the sample."""
        return judged_answers.external_id(service, use_case, prefix, in_random=in_random)
