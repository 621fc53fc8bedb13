"""Two team leads confirming a rescore of the same answer at once: one run is queued, the other
request is refused. Committed for real (two threads), so not on the judge pages' shared world
(test_judge_pages.py)."""

import threading

import pytest
from django.contrib.auth.models import User

from judging.services import rescoring
from monitoring.services.use_cases import service_create, use_case_create
from tests.monitoring.test_judge_pages import OTHER_JUDGE, SIX, judged
from tests.support.judged import Judge as ScriptedJudge
from tests.support.world import WorldBuilder


@pytest.fixture
def judge(world_builder: WorldBuilder) -> ScriptedJudge:
    return world_builder.judge(ScriptedJudge())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_leads_confirming_at_once_queue_one_run(
    judge: ScriptedJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both requests lock the answer; the second sees the first one's waiting run."""
    from django.db import connection

    from judging.services import runs as judging

    monkeypatch.setattr(judging, "judge_runs_enqueue", lambda *, run_ids: 0)
    use_case = use_case_create(slug="gleichzeitig", name="Gleichzeitig", sample_rate=1.0)
    service, _ = service_create(name="gleich-bot", use_cases=[use_case])
    answer = judged(judge, service, use_case, "gleich", SIX[:1])
    leads = [User.objects.create_user(f"lead-{i}") for i in range(2)]
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def confirm(user: User) -> None:
        try:
            barrier.wait()
            rescoring.answer_rescore(answer=answer, judge_model=OTHER_JUDGE, user=user)
            outcomes.append("queued")
        except rescoring.RescoreRefused:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=confirm, args=(lead,)) for lead in leads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == ["queued", "refused"]
    assert answer.judge_runs.filter(trigger="rescore").count() == 1
