"""Building judged answers through the product for the estimates and metrics tests.

Answers come in through the real ingest (`answer_ingest`); their runs are executed by the real
judge service against the local OpenAI-compatible server, whose replies a `Judge` scripts: the
claims of each answer text and a verdict word per claim. Which unflagged answers the random
sample takes is the hash draw's decision, so external ids are picked to land where a test needs
them.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from datetime import datetime
from typing import Any

from ingest import services
from ingest.domain import sampling
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from judging.domain.judge_prompt import DECOMPOSE_SYSTEM_DE, DECOMPOSE_SYSTEM_EN
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, JudgeRun, Service, UseCase

GENERATOR = "gpt-4o-mini"
JUDGE = "judge-x"


class Judge:
    """Replies of the local judge server: claims per answer text, a verdict word per claim."""

    def __init__(self) -> None:
        self.claims: dict[str, list[str]] = {}
        self.verdicts: dict[str, str] = {}

    def script(self, answer: str, verdicts: list[tuple[str, str]]) -> None:
        self.claims[answer] = [claim for claim, _ in verdicts]
        self.verdicts.update(dict(verdicts))

    def __call__(self, request: dict[str, Any]) -> str:
        system, user = request["messages"][0]["content"], request["messages"][1]["content"]
        if system in (DECOMPOSE_SYSTEM_DE, DECOMPOSE_SYSTEM_EN):
            answer = re.search(r"(?:Antwort|Answer):\n(.*)\n\n", user, re.DOTALL)
            assert answer is not None
            return json.dumps(self.claims[answer.group(1)], ensure_ascii=False)
        claim = re.search(r"^(?:Aussage|Claim): (.*)$", user, re.MULTILINE)
        assert claim is not None
        return self.verdicts[claim.group(1)]


def external_id(service: Service, use_case: UseCase, prefix: str, *, in_random: bool) -> str:
    """The first id `prefix-N` that the random draw puts in (or out of) the sample."""
    for i in itertools.count():
        candidate = f"{prefix}-{i}"
        drawn = sampling.random_draw(str(service.pk), candidate) < use_case.sample_rate
        if drawn == in_random:
            return candidate
    raise AssertionError("unreachable")


def _flagging_logprobs(text: str) -> dict[str, Any]:
    """Logprobs spelling `text` a word per token; the word "5" is uncertain (flags it)."""
    content = []
    for piece in re.findall(r"\s*\S+", text):
        p = 0.1 if piece.strip() == "5" else 1.0
        content.append({"token": piece, "logprob": math.log(p), "bytes": list(piece.encode())})
    return {"content": content}


def ingest(
    service: Service, use_case: UseCase, ext: str, text: str, *, flagged: bool = False,
    created_at: datetime | None = None, model: str = GENERATOR, **more: Any,
) -> Answer:
    """`more`: further ingest fields (prompt_version, metadata, ...)."""
    body: dict[str, Any] = {
        "external_id": ext,
        "use_case": use_case.slug,
        "question": "Wie oft muss der Behälter geprüft werden?",
        "answer": text,
        "model": model,
        "chunks": [{"text": "Prüfintervall: 5 Jahre für Behälter über 1.000 Liter.",
                    "score": 0.8}],
        "logprobs": _flagging_logprobs(text) if flagged else None,
    }
    if created_at is not None:
        body["created_at"] = created_at.isoformat()
    body.update(more)
    result = services.answer_ingest(
        service=service, payload=AnswerIn.model_validate(body), raw=body
    )
    assert result.outcome == IngestOutcome.CREATED, result.errors
    answer = result.answer
    assert answer is not None
    assert answer.flagged == flagged
    return answer


def judged(
    judge: Judge, service: Service, use_case: UseCase, ext: str,
    verdicts: list[tuple[str, str]], **kwargs: Any,
) -> Answer:
    """An answer ingested and judged with these (claim, verdict) pairs; returned as stored."""
    text = f"Antwort {ext}: Der Behälter wird alle 5 Jahre geprüft."
    judge.script(text, verdicts)
    answer = ingest(service, use_case, ext, text, **kwargs)
    run = answer.judge_runs.get(status=JudgeRun.Status.PENDING)
    judge_run_execute(run_id=run.pk)
    answer.refresh_from_db()
    return answer


def current_run(answer: Answer) -> JudgeRun:
    """The run that scored the answer (a judged answer has one)."""
    run = answer.current_run
    assert run is not None, f"answer {answer.pk} has no current run"
    return run
