"""The PostgreSQL server the tests run on, for what a test database cannot do itself: create
and drop other databases."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import psycopg


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
