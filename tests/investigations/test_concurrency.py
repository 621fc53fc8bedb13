"""Two questions of one investigation ending at the same moment, each in its own transaction
(two worker processes): the investigation must end finished, not stay running for ever because
each saw the other still running."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from investigations import selectors, services
from investigations.models import Investigation, Question
from tests.investigations.conftest import World

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_two_questions_ending_at_once_finish_the_investigation(
    world: World, enqueued: list[int]
) -> None:
    world.answer("a1", "Erste Frage?")
    world.answer("a2", "Zweite Frage?")
    plan = selectors.investigation_plan(
        use_case=world.use_case, selection="latest", n=10, samples=3, temperature=0.7
    )
    investigation = services.investigation_start(plan=plan, user=world.users["lead"])
    first, second = investigation.questions.order_by("position")
    Question.objects.filter(investigation=investigation).update(status=Question.Status.RUNNING)
    both_updated = threading.Barrier(2, timeout=10)
    errors: list[BaseException] = []

    def end(question: Question) -> None:
        try:
            with transaction.atomic():
                Question.objects.filter(pk=question.pk).update(status=Question.Status.DONE)
                both_updated.wait()  # neither has committed: each sees the other running
                services._finish_investigation(question.investigation_id)
        except BaseException as e:  # reported below, in the test's thread
            errors.append(e)
        finally:
            connection.close()

    threads = [threading.Thread(target=end, args=(q,)) for q in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    investigation.refresh_from_db()
    assert investigation.status == Investigation.Status.FINISHED
