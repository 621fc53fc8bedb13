"""Answers and their chunks partitioned by month on PostgreSQL (issue 22, point 2).

`monitoring_answer` is partitioned by RANGE of `created_at`, `monitoring_chunk` by its answer's
`created_at` (`answer_created_at`), one partition per local month (Europe/Berlin: a month starts
at local midnight on the 1st), named `<table>_pYYYY_MM`, and a DEFAULT partition
(`<table>_default`) for what no month holds: answers from before the first monthly partition
(history older than HISTORY_MONTHS when the table was converted) or, if the beat stopped for
months, after the last. The migration `0024_partition_answers` converts the tables; the beat
job `ensure-partitions` creates the months ahead (`partitions_ensure`); retention drops a whole
month where every use case in it allows (`services/retention.py`).

SQLite keeps plain tables: everything here is a no-op there.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, time
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from monitoring.models.rollups import next_month as next_month  # the months' one rule

logger = logging.getLogger(__name__)

# (table, partition key): the chunks follow their answers' months.
PARTITIONED = (("monitoring_answer", "created_at"), ("monitoring_chunk", "answer_created_at"))
AHEAD = 3  # months created ahead of the current one
HISTORY_MONTHS = 36  # when converting: older answers go to the default partition
DEFAULT = "default"


def month_of(moment: datetime | date) -> date:
    """The first day of a moment's local month."""
    day = timezone.localtime(moment).date() if isinstance(moment, datetime) else moment
    return day.replace(day=1)


def month_start(month: date) -> datetime:
    """Local midnight on the month's first day: a partition's lower bound."""
    return datetime.combine(month, time(0), tzinfo=ZoneInfo(settings.TIME_ZONE))


def partition_name(table: str, month: date) -> str:
    return f"{table}_p{month:%Y_%m}"


def enabled() -> bool:
    """Answers are partitioned here (PostgreSQL after migration 0024)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table "
            "WHERE partrelid = to_regclass('monitoring_answer'))"
        )
        return bool(cursor.fetchone()[0])


@dataclass(frozen=True, slots=True)
class Partition:
    table: str
    name: str
    month: date | None  # None: the default partition


def partitions(table: str) -> list[Partition]:
    """A partitioned table's partitions, months in order, the default last."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass(%s)",
            [table],
        )
        names = [row[0] for row in cursor.fetchall()]
    out = []
    for name in names:
        suffix = name[len(table) + 1:]
        if suffix == DEFAULT:
            out.append(Partition(table, name, None))
        elif suffix.startswith("p") and len(suffix) == 8:
            out.append(Partition(table, name, date(int(suffix[1:5]), int(suffix[6:8]), 1)))
    return sorted(out, key=lambda p: (p.month is None, p.month or date.min))


def partitions_ensure(*, now: datetime | None = None, ahead: int = AHEAD) -> list[str]:
    """Create the monthly partitions from this month to `ahead` months on (those missing).
    Rows of such a month already in the default partition move into it. Returns the names
    created; nothing where answers are not partitioned."""
    if not enabled():
        return []
    month = month_of(now or timezone.now())
    months = [month]
    for _ in range(ahead):
        months.append(next_month(months[-1]))
    created = []
    for table, key in PARTITIONED:
        have = {p.month for p in partitions(table)}
        for m in months:
            if m not in have:
                _create(table, key, m)
                created.append(partition_name(table, m))
    if created:
        with connection.cursor() as cursor:
            for table, _ in PARTITIONED:
                # Autovacuum analyses partitions, never their parent: the planner's estimates
                # across months come from here.
                cursor.execute(f"ANALYZE {connection.ops.quote_name(table)}")
        logger.info("created partitions %s", ", ".join(created))
    return created


def _create(table: str, key: str, month: date) -> None:
    q = connection.ops.quote_name
    lower, upper = month_start(month), month_start(next_month(month))
    name, default = partition_name(table, month), f"{table}_{DEFAULT}"
    bounds = f"FROM ('{lower.isoformat()}') TO ('{upper.isoformat()}')"
    with transaction.atomic(), connection.cursor() as cursor:
        # DDL waits for the table's lock; a long query must not make every ingest queue
        # behind the waiting DDL: give up and let tomorrow's run try again.
        cursor.execute("SET LOCAL lock_timeout = '5s'")
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {q(default)} WHERE {q(key)} >= %s AND {q(key)} < %s)",
            [lower, upper],
        )
        if not cursor.fetchone()[0]:
            cursor.execute(f"CREATE TABLE {q(name)} PARTITION OF {q(table)} FOR VALUES {bounds}")
            return
        # The month's rows arrived before its partition: out of the default, into the month.
        cursor.execute(f"ALTER TABLE {q(table)} DETACH PARTITION {q(default)}")
        cursor.execute(f"CREATE TABLE {q(name)} PARTITION OF {q(table)} FOR VALUES {bounds}")
        cursor.execute(
            f"WITH moved AS (DELETE FROM {q(default)} WHERE {q(key)} >= %s AND {q(key)} < %s "
            f"RETURNING *) INSERT INTO {q(table)} SELECT * FROM moved",
            [lower, upper],
        )
        cursor.execute(f"ALTER TABLE {q(table)} ATTACH PARTITION {q(default)} DEFAULT")
