"""An expert's submit leaves the review alarms (the drift CUSUM, its mail) to a worker: the
request publishes one task after its commit, and that task checks the use case."""

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import pytest

from monitoring.models import UseCase
from review import services, tasks
from review.models import ReviewBatch
from tests.review.conftest import ReviewWorld, batch_for

G, U = "GEDECKT", "UNGEDECKT"


@pytest.fixture
def batch(review_world: ReviewWorld) -> ReviewBatch:
    w = review_world
    w.answer("a1", week="2026-W48", claims=[("Aussage 1.", G), ("Aussage 2.", U)])
    return batch_for(use_case=w.use_case, week="2026-W49")


def test_submit_publishes_the_alarm_check_after_commit_and_does_not_run_it(
    review_world: ReviewWorld, batch: ReviewBatch, monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    published: list[tuple[str, list[Any]]] = []

    def publish_each(name: str, items: Iterable[Any], **_: Any) -> int:
        published.append((name, list(items)))
        return 1

    monkeypatch.setattr(services.jobs, "publish_each", publish_each)

    def in_the_request(**_: Any) -> list[Any]:
        raise AssertionError("the drift check ran inside the expert's request")

    monkeypatch.setattr(services, "review_alarms_check", in_the_request)
    expert = review_world.users["expert"]
    item = batch.items.get()
    services.review_item_save(item=item, user=expert,
                              data=services.ItemInput(labels={1: G, 2: G}))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.review_item_submit(item=item, user=expert)
    assert published == []  # nothing before the commit
    for callback in callbacks:
        callback()
    assert published == [(services.REVIEW_ALARMS_TASK, [review_world.use_case.pk])]
    assert tasks.check_use_case_review_alarms.name == services.REVIEW_ALARMS_TASK


def test_the_task_checks_that_use_case_and_nothing_for_one_gone_or_inactive(
    review_world: ReviewWorld, monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked: list[int] = []

    def review_alarms_check(*, use_case: UseCase, now: datetime | None = None) -> list[Any]:
        checked.append(use_case.pk)
        return []

    monkeypatch.setattr(services, "review_alarms_check", review_alarms_check)
    use_case = review_world.use_case
    assert tasks.check_use_case_review_alarms(use_case.pk) == 0
    assert checked == [use_case.pk]
    assert tasks.check_use_case_review_alarms(use_case.pk + 1000) == 0
    use_case.active = False
    use_case.save(update_fields=["active"])
    assert tasks.check_use_case_review_alarms(use_case.pk) == 0
    assert checked == [use_case.pk]
