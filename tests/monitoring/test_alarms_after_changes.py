"""An alarm check right after a change that can move a use case's alarms, not only at the next
hourly one: a settings change (the use-case page or the admin) and an import of expert labels
publish the use case's action and review alarm checks once their transaction commits, and a
worker (here in-process) raises what they find. The demo's seed does the same
(tests/treue_demo/test_seed_demo.py)."""

import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.sites import site
from django.core.management import call_command
from django.test import RequestFactory

from alarms.models import Alarm
from jobs import framework
from monitoring.models import Answer, UseCase
from tests.monitoring.dashboard_world import DashWorld, client_for
from tests.monitoring.test_dashboard_pages import world  # noqa: F401  (the fixture)

ACTION = "dashboard.tasks.check_use_case_action_alarms"
REVIEW = "review.tasks.check_use_case_review_alarms"


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[Any]]]:
    """What is published, the alarm checks taken at once by an in-process worker."""
    sent: list[tuple[str, list[Any]]] = []

    def publish_each(name: str, items: Iterable[Any], **_: Any) -> int:
        items = list(items)
        sent.append((name, items))
        if name in (ACTION, REVIEW):
            for item in items:
                framework.task_named(name)(item)
        return len(items)

    monkeypatch.setattr(framework, "publish_each", publish_each)
    return sent


def alarms_of(use_case: UseCase) -> list[str]:
    return list(Alarm.objects.filter(use_case=use_case, kind=Alarm.Kind.ACTION)
                .values_list("key", flat=True))


@pytest.fixture
def below(world: DashWorld) -> DashWorld:  # noqa: F811
    """Last week at 0.85 under an action threshold of 0.8: no alarm, until the threshold is
    raised above it."""
    UseCase.objects.filter(pk=world.a.pk).update(action_threshold=0.8)
    world.a.refresh_from_db()
    world.last_week_scenario()
    return world


def test_a_settings_change_on_the_page_checks_the_alarms_after_its_commit(
    below: DashWorld, published: list[tuple[str, list[Any]]],
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client_for(below, "lead_a").post("/use-cases/auskunft/settings/",
                                                     {"action_threshold": "0.9"})
    assert response.status_code == 302
    assert alarms_of(below.a) == [] and published == []  # not inside the request
    for callback in callbacks:
        callback()
    assert {(name, tuple(ids)) for name, ids in published} == {
        (ACTION, (below.a.pk,)), (REVIEW, (below.a.pk,))}
    assert alarms_of(below.a) == [below.last_week.label]


def test_a_settings_change_in_the_admin_checks_the_alarms(
    below: DashWorld, published: list[tuple[str, list[Any]]],
    django_capture_on_commit_callbacks: Any,
) -> None:
    request = RequestFactory().post("/admin/")
    request.user = below.users["staff"]
    a = UseCase.objects.get(pk=below.a.pk)
    a.action_threshold = 0.9
    with django_capture_on_commit_callbacks(execute=True):
        site._registry[UseCase].save_model(request, a, form=None, change=True)
    assert alarms_of(below.a) == [below.last_week.label]


def test_nothing_changed_publishes_nothing(
    below: DashWorld, published: list[tuple[str, list[Any]]],
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        client_for(below, "lead_a").post("/use-cases/auskunft/settings/",
                                         {"action_threshold": "0.8"})
    assert published == []


def test_an_import_of_expert_labels_checks_the_alarms(
    world: DashWorld, published: list[tuple[str, list[Any]]],  # noqa: F811
    django_capture_on_commit_callbacks: Any, tmp_path: Path,
) -> None:
    world.last_week_scenario()  # below the threshold of 0.9, not checked yet
    answer = Answer.objects.filter(use_case=world.a, in_random_sample=True,
                                   current_run__score__isnull=False).first()
    assert answer is not None
    path = tmp_path / "labels.jsonl"
    path.write_text(f'{{"external_id": "{answer.external_id}", "score": 0.5}}\n', "utf-8")
    with django_capture_on_commit_callbacks(execute=True):
        call_command("import_expert_labels", str(path), use_case=world.a.slug,
                     reviewer=world.users["lead_a"].username, stdout=io.StringIO())
    assert {(name, tuple(ids)) for name, ids in published} == {
        (ACTION, (world.a.pk,)), (REVIEW, (world.a.pk,))}
    assert alarms_of(world.a) == [world.last_week.label]

    published.clear()  # the same file again imports nothing: nothing to check
    with django_capture_on_commit_callbacks(execute=True):
        call_command("import_expert_labels", str(path), use_case=world.a.slug,
                     reviewer=world.users["lead_a"].username, stdout=io.StringIO())
    assert published == []
