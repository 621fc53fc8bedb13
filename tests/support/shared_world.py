"""A world built once for a module and shared by its tests, each test in a savepoint of its own:
Django's `TestCase.setUpTestData` for pytest fixtures.

Building a world through the real ingest and judge costs 30-50 ms an answer; a module whose
tests each build the same 70 answers spends seconds a test on it. Built once instead, inside a
transaction that stays open for the module and is rolled back at its end, every test still
starts from the same rows: pytest-django's `db` fixture opens the test's atomic block inside it
(a savepoint) and rolls it back after the test, so what a test writes is gone for the next.

    @pytest.fixture(scope="module")
    def built(django_db_setup, django_db_blocker):
        with built_once(django_db_blocker, build_the_world) as world:
            yield world

    @pytest.fixture
    def world(built, db):
        return read_again(built)  # model instances read again: a test's changes die with it

What lives in memory is not rolled back: a test must get model instances read again
(`read_again`) and its own copy of anything else it changes. A test on `transactional_db` or a
live server must not run while such a transaction is open (it would commit nothing):
tests/conftest.py fails such a test instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from django.db import connection, transaction
from django.db.models import Model
from django.test.utils import override_settings

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
W = TypeVar("W", bound="DataclassInstance")
FAST_HASHER = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@contextmanager
def built_once(django_db_blocker: Any, build: Callable[[], T], **overrides: Any) -> Iterator[T]:
    """`build()`'s world in a transaction left open while the block runs and rolled back at its
    end. The settings `overrides` (and the tests' fast password hasher) hold while it builds."""
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        # Marked like Django's own TestCase blocks: durable blocks may open inside it.
        setattr(outer, "_from_testcase", True)  # noqa: B010 (Django's private flag, untyped)
        outer.__enter__()
        try:
            with override_settings(PASSWORD_HASHERS=FAST_HASHER, **overrides):
                world = build()
        except BaseException:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
            raise
    try:
        yield world
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


def read_again(world: W, **changes: Any) -> W:
    """`world` (a dataclass) as a test gets it: every model instance among its fields (also in
    a dict or list) read again from the database, so that what the test changes in memory dies
    with it as its rows do; `changes` replace fields (a copy of the judge, say)."""

    def again(value: Any) -> Any:
        if isinstance(value, Model):
            return type(value)._default_manager.get(pk=value.pk)
        if isinstance(value, dict):
            return {key: again(item) for key, item in value.items()}
        if isinstance(value, list):
            return [again(item) for item in value]
        return value

    kept = {
        field.name: again(getattr(world, field.name))
        for field in dataclasses.fields(world)
        if field.init and field.name not in changes
    }
    return dataclasses.replace(world, **kept, **changes)


def shared_world_open() -> bool:
    """Whether a module's shared world holds its transaction open (asked between tests)."""
    return bool(connection.in_atomic_block)


def no_server() -> NoReturn:
    """The server of a `WorldBuilder` for a shared world that needs no judge."""
    raise AssertionError("this shared world has no judge; build it with the OpenAI server")
