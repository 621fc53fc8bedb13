"""Celery tasks of the dashboard: the hourly action alarm check (its name stays the one it had
in monitoring/tasks.py: the beat schedule and messages in a queue name it), and one use case's
check after a change."""

from celery import shared_task

from dashboard.services import action


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no type hints
    name="monitoring.tasks.check_action_alarms", ignore_result=True
)
def check_action_alarms() -> int:
    """The action signal, hourly: raise (and mail once) or clear each use case's alarms."""
    return action.action_alarms_check_all()


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no type hints
    name=action.ACTION_ALARMS_TASK, acks_late=True, reject_on_worker_lost=True,
    ignore_result=True,
)
def check_use_case_action_alarms(use_case_id: int) -> int:
    """After a change that can move them (a setting, imported reviews): that use case's action
    alarms."""
    return action.action_alarms_check_for(use_case_id=use_case_id)
