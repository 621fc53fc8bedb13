"""Issue 22, point 2: answers and their chunks partitioned by month on PostgreSQL.

Each table is rebuilt as a partitioned table of the same name, columns and indexes: one
partition per local month (Europe/Berlin) from the oldest answer (at most HISTORY_MONTHS back)
to three months ahead, and a DEFAULT partition for older rows. The primary key becomes (id,
partition key); ids keep coming from the same kind of sequence, owned by the column. Foreign
keys into the tables have been dropped before (0022 and the review and investigations apps'
migrations); any left are dropped here, with a warning.

Offline on a filled database: stop ingest, workers and beat first. It copies every row once
and builds the indexes afterwards; tests/integration/test_partition_migration.py measures it
(seconds per 100,000 answers are printed and noted in bench/README.md). SQLite: nothing.
"""

import logging
import time as clock
from datetime import date, datetime, time
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import migrations

logger = logging.getLogger("monitoring.migrations")

TABLES = (("monitoring_answer", "created_at"), ("monitoring_chunk", "answer_created_at"))
HISTORY_MONTHS = 36
AHEAD = 3


def _next(month):
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def _start(month):
    return datetime.combine(month, time(0), tzinfo=ZoneInfo(settings.TIME_ZONE))


def _months(oldest, now):
    zone = ZoneInfo(settings.TIME_ZONE)
    current = now.astimezone(zone).date().replace(day=1)
    first = current
    for _ in range(HISTORY_MONTHS):
        first = date(first.year - (first.month == 1), (first.month - 2) % 12 + 1, 1)
    if oldest is not None:
        first = max(first, min(current, oldest.astimezone(zone).date().replace(day=1)))
    last = current
    for _ in range(AHEAD):
        last = _next(last)
    months, month = [], first
    while month <= last:
        months.append(month)
        month = _next(month)
    return months


def _rebuild(cursor, table, key, *, partition=True):
    """Rebuild one table as partitioned by `key` (or, undoing it, as a plain table); returns
    (rows, seconds)."""
    began = clock.monotonic()
    old = f"{table}_old"
    cursor.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
    cursor.execute(
        "SELECT conrelid::regclass::text, conname FROM pg_constraint "
        "WHERE confrelid = %s::regclass AND contype = 'f'", [table]
    )
    for referrer, name in cursor.fetchall():
        logger.warning("dropping the foreign key %s of %s into %s", name, referrer, table)
        cursor.execute(f'ALTER TABLE {referrer} DROP CONSTRAINT "{name}"')
    # What the new table must have again: its constraints (foreign keys, checks, unique ones
    # with the partition key) and its other indexes, as PostgreSQL writes them.
    cursor.execute(
        "SELECT conname, contype, pg_get_constraintdef(oid), conindid FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND contype IN ('f', 'c', 'u')", [table]
    )
    constraints = cursor.fetchall()
    owned = {indid for _, _, _, indid in constraints if indid}
    cursor.execute(
        "SELECT i.indexrelid, pg_get_indexdef(i.indexrelid), i.indisunique FROM pg_index i "
        "WHERE i.indrelid = %s::regclass AND NOT i.indisprimary", [table]
    )
    indexes = [(d, unique) for oid, d, unique in cursor.fetchall() if oid not in owned]
    for definition, unique in indexes:
        if unique and key not in definition:
            raise RuntimeError(f"{table}: a unique index without {key} cannot be partitioned: "
                               f"{definition}")
    cursor.execute(f"SELECT min({key}), max(id) FROM {table}")
    oldest, max_id = cursor.fetchone()
    cursor.execute(f"SELECT last_value, is_called FROM {_sequence(cursor, table)}")
    last_id, called = cursor.fetchone()
    # The next id as the old sequence would have given it.
    next_id = max(max_id or 0, last_id if called else last_id - 1) + 1

    cursor.execute(f"ALTER TABLE {table} RENAME TO {old}")
    cursor.execute(
        "SELECT attidentity FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'id'",
        [old],
    )
    if not cursor.fetchone()[0]:
        # A sequence of ours (not Django's identity): the copy must not take its default, or
        # the old table could not be dropped with it. A new one is made below.
        cursor.execute(f"ALTER TABLE {old} ALTER id DROP DEFAULT")
    if partition:
        cursor.execute(
            f"CREATE TABLE {table} (LIKE {old} INCLUDING DEFAULTS) PARTITION BY RANGE ({key})"
        )
        for month in _months(oldest, datetime.now(ZoneInfo("UTC"))):
            cursor.execute(
                f"CREATE TABLE {table}_p{month:%Y_%m} PARTITION OF {table} FOR VALUES FROM "
                f"('{_start(month).isoformat()}') TO ('{_start(_next(month)).isoformat()}')"
            )
        cursor.execute(f"CREATE TABLE {table}_default PARTITION OF {table} DEFAULT")
    else:
        cursor.execute(f"CREATE TABLE {table} (LIKE {old} INCLUDING DEFAULTS)")
    cursor.execute(f"INSERT INTO {table} SELECT * FROM {old}")
    rows = cursor.rowcount
    cursor.execute(f"DROP TABLE {old}")
    cursor.execute(f"DROP SEQUENCE IF EXISTS {table}_id_seq")
    cursor.execute(f"CREATE SEQUENCE {table}_id_seq OWNED BY {table}.id")
    cursor.execute(f"SELECT setval('{table}_id_seq', %s, false)", [next_id])
    cursor.execute(f"ALTER TABLE {table} ALTER id SET DEFAULT nextval('{table}_id_seq')")
    primary = f"id, {key}" if partition else "id"
    cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY ({primary})")
    for definition, _ in indexes:
        cursor.execute(definition)
    for name, _, definition, _ in constraints:
        cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
    cursor.execute(f"ANALYZE {table}")
    return rows, clock.monotonic() - began


def _sequence(cursor, table):
    cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
    return cursor.fetchone()[0]


def _partitioned(cursor):
    cursor.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table "
        "WHERE partrelid = to_regclass('monitoring_answer'))"
    )
    return cursor.fetchone()[0]


def partition(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        if _partitioned(cursor):
            return
        answers = None
        for table, key in TABLES:
            rows, seconds = _rebuild(cursor, table, key)
            answers = rows if answers is None else answers
            per = (f", {seconds / answers * 100_000:.1f} s per 100,000 answers"
                   if answers >= 1000 else "")
            logger.warning("partitioned %s: %d rows in %.1f s%s", table, rows, seconds, per)


def unpartition(apps, schema_editor):
    """Back to plain tables (for migrating backwards: tests that go back to earlier states)."""
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        if not _partitioned(cursor):
            return
        for table, key in TABLES:
            _rebuild(cursor, table, key, partition=False)


class Migration(migrations.Migration):

    dependencies = [
        ("monitoring", "0023_retention_by_month"),
    ]

    operations = [
        migrations.RunPython(partition, unpartition, elidable=False),
    ]
