"""Celery tasks of the dashboard: the hourly action alarm check. Its name stays the one it
had in monitoring/tasks.py (the beat schedule and messages in a queue name it)."""

from celery import shared_task

from dashboard.services import action


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no type hints
    name="monitoring.tasks.check_action_alarms", ignore_result=True
)
def check_action_alarms() -> int:
    """The action signal, hourly: raise (and mail once) or clear each use case's alarms."""
    return action.action_alarms_check_all()
