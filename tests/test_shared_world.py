"""A module's shared world (tests/support/shared_world.py): built once, each test in a savepoint
that takes its changes away; what the block built is gone when it ends."""

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from monitoring.models import UseCase
from monitoring.services.use_cases import use_case_create
from tests.support.shared_world import built_once

# The three tests that change the world run on one worker, one after another.
pytestmark = pytest.mark.xdist_group("shared-world")

BUILDS: list[int] = []


@pytest.fixture(scope="module")
def built(django_db_setup: None, django_db_blocker: Any) -> Iterator[int]:
    def build() -> int:
        BUILDS.append(1)
        return use_case_create(slug="geteilt", name="Gebaut").pk

    with built_once(django_db_blocker, build) as pk:
        yield pk


@pytest.mark.parametrize("n", range(3))
def test_every_test_starts_from_the_world_as_built(built: int, db: None, n: int) -> None:
    assert BUILDS == [1]
    assert list(UseCase.objects.values_list("pk", "name")) == [(built, "Gebaut")]
    UseCase.objects.filter(pk=built).update(name=f"Geändert {n}")
    use_case_create(slug=f"neu-{n}", name="Neu")
    assert UseCase.objects.count() == 2


def test_what_the_block_built_is_gone_when_it_ends(django_db_blocker: Any) -> None:
    with built_once(django_db_blocker, lambda: use_case_create(slug="kurz", name="Kurz").pk) as pk:
        with django_db_blocker.unblock():
            assert UseCase.objects.filter(pk=pk).exists()
    with django_db_blocker.unblock():
        assert not UseCase.objects.filter(slug="kurz").exists()


def test_a_build_that_fails_leaves_no_transaction_open(django_db_blocker: Any) -> None:
    before = connection.in_atomic_block

    def build() -> None:
        use_case_create(slug="halb", name="Halb")
        raise RuntimeError("the build failed")

    with pytest.raises(RuntimeError, match="the build failed"):
        with built_once(django_db_blocker, build):
            pass
    assert connection.in_atomic_block == before
    with django_db_blocker.unblock():
        assert not UseCase.objects.filter(slug="halb").exists()
