"""The tests' PostgreSQL databases made from a migrated template, kept between runs.

Migrating a new test database takes each test process 5-8 s (51 tables, 2 x 41 partitions, 880
indexes). The first process that migrates one keeps a copy as a template database named by a
digest of every migration file, Django's version and the current month (migration 0024 lays out
partitions around the month it runs in); later processes, and later runs, create their test
database from it (`CREATE DATABASE ... WITH TEMPLATE`, where Django puts TEST["TEMPLATE"]) in
about a second, and `migrate` then finds nothing to do. A new migration, a new Django or a new
month makes a new digest, so a template never stands for a schema other than the code's;
templates of other digests are dropped when a new one is made.
"""

from __future__ import annotations

import contextlib
import hashlib
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import django
from django.conf import settings
from django.db import DatabaseError
from django.db.backends.postgresql.creation import DatabaseCreation as Creation

ROOT = Path(__file__).resolve().parents[3]
PREFIX = "treue_test_template_"


def template_name() -> str:
    """The template's name for today's code: a digest of the migrations, Django's version and
    the local month."""
    digest = hashlib.sha256()
    for path in sorted(ROOT.glob("*/migrations/*.py")):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    digest.update(django.get_version().encode())
    digest.update(f"{datetime.now(ZoneInfo(settings.TIME_ZONE)):%Y-%m}".encode())
    return PREFIX + digest.hexdigest()[:16]


def _exists(connection: Any, name: str) -> bool:
    with connection._nodb_cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone() is not None


class DatabaseCreation(Creation):
    def sql_table_creation_suffix(self) -> str:
        """`CREATE DATABASE <test database>` ends in this: a copy of today's template where
        there is one (tests/conftest.py keeps the first migrated database as it)."""
        template = template_name()
        if self.connection.settings_dict["TEST"].get("TEMPLATE") or not _exists(
            self.connection, template
        ):
            return str(super().sql_table_creation_suffix())
        return f"WITH TEMPLATE {self.connection.ops.quote_name(template)}"


def keep_as_template(connection: Any) -> None:
    """Copy the migrated test database of `connection` as today's template, unless it exists;
    another process that makes it first, or a session still connected to the source, leaves it
    to a later run. Templates of other digests are dropped."""
    if connection.vendor != "postgresql":
        return
    template = template_name()
    if _exists(connection, template):
        return
    quote = connection.ops.quote_name
    name = connection.settings_dict["NAME"]
    connection.close()
    with connection._nodb_cursor() as cursor:
        try:
            cursor.execute(f"CREATE DATABASE {quote(template)} TEMPLATE {quote(name)}")
        except DatabaseError:  # made by another process, or the source still in use
            return
        cursor.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s AND datname <> %s",
            [PREFIX + "%", template],
        )
        for (old,) in cursor.fetchall():
            # One that another run is copying from stays until a later run drops it.
            with contextlib.suppress(DatabaseError):
                cursor.execute(f"DROP DATABASE IF EXISTS {quote(old)}")
