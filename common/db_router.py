"""An optional read replica for the dashboards (DATABASE_REPLICA_URL).

The dashboards are what a busy installation reads most: every page recounts weeks of answers.
With a replica configured, the selectors behind the overview, the use-case page, the estimates
API and /metrics read from it (`reads_from_replica`); everything else reads and writes the
primary: logins and sessions, ingest, the judge, the review queue, the answer explorer (where a
person looks for the answer just sent). A replica lags its primary by a moment, so a dashboard
may show an answer a second later than the explorer; nothing is written from what it read.

The choice is a context variable, so it holds for one request's (or task's) selector call and
no longer, thread by thread; a query set handed out of the selector and evaluated later reads
the primary again. The replica is never migrated (it copies the primary's schema).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

from django.conf import settings

REPLICA = "replica"

_dashboard: ContextVar[bool] = ContextVar("treue_dashboard_reads", default=False)

P = ParamSpec("P")
R = TypeVar("R")


def replica_configured() -> bool:
    return REPLICA in settings.DATABASES


@contextmanager
def dashboard_reads() -> Iterator[None]:
    """Within this block reads go to the replica, where one is configured."""
    token = _dashboard.set(True)
    try:
        yield
    finally:
        _dashboard.reset(token)


def reads_from_replica(func: Callable[P, R]) -> Callable[P, R]:
    """A selector whose reads go to the replica, where one is configured."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with dashboard_reads():
            return func(*args, **kwargs)

    return wrapper


class ReplicaRouter:
    """Dashboard reads to the replica; the rest to the primary (None: Django's default)."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        return REPLICA if _dashboard.get() and replica_configured() else None

    def db_for_write(self, model: type[Any], **hints: Any) -> str | None:
        # Always the primary, also for an object that was read from the replica.
        return "default"

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        # The replica holds the primary's rows: an object read from one relates to the other's.
        aliases = {"default", REPLICA}
        return True if {obj1._state.db, obj2._state.db} <= aliases else None

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db == REPLICA else None
