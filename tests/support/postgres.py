"""The PostgreSQL server the tests run on, for what a test database cannot do itself: create
and drop other databases."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import psycopg
from django.db import connection

# A fresh database is migrated with a monthly partition of answers and chunks for each of the
# last 36 months (monitoring/migrations/0024_partition_answers.py). Each costs the planner time
# in every query on answers that names no month (a lookup by id: 2.5 ms with 41 partitions, 1 ms
# with 16), a quarter of many page tests' time. The tests keep the months of the last seven
# (the oldest that the partitioning's and retention's own tests use is six months back), the
# months ahead and the default partition; older answers that a test makes land in the default
# partition, as in a database whose history began later.
HISTORY_KEPT = timedelta(days=214)


def admin_connection() -> psycopg.Connection:
    """An autocommit connection to the server's `postgres` database (DATABASE_URL's server)."""
    parts = urlsplit(os.environ["DATABASE_URL"])
    return psycopg.connect(
        host=parts.hostname or "127.0.0.1", port=parts.port or 5432,
        user=parts.username or "postgres", password=parts.password or None,
        dbname="postgres", autocommit=True,
    )


def database_url(name: str) -> str:
    """DATABASE_URL with another database name."""
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + name))


def drop_empty_history_partitions(*, older_than: datetime) -> list[str]:
    """Drop the monthly partitions of answers and chunks that end before `older_than`'s month
    and hold no row (on PostgreSQL; nothing on SQLite). Returns their names."""
    from monitoring.services import partitions

    if not partitions.enabled():
        return []
    keep_from = partitions.month_of(older_than)
    dropped = []
    with connection.cursor() as cursor:
        # Chunks first: their partitions refer to the answers'.
        for table, _ in reversed(partitions.PARTITIONED):
            for partition in partitions.partitions(table):
                if partition.month is None or partition.month >= keep_from:
                    continue
                name = connection.ops.quote_name(partition.name)
                cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {name})")
                if not cursor.fetchone()[0]:
                    cursor.execute(f"DROP TABLE {name}")
                    dropped.append(partition.name)
    return dropped
