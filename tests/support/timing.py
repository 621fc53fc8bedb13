"""Tests marked `timing` assert on the wall clock (a timeout applied, a page fast enough).
Under pytest-xdist they would share two cores with each other and read each other's load as
their own slowness, so they take turns: each holds an exclusive lock on one file for the
whole test run (all xdist workers of a run share the file). Other tests go on beside them.

Both tests/conftest.py and tests/domain/conftest.py (which runs without Django) import the
fixture; the nearer definition wins, so a test takes the lock once.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _lock_path() -> Path:
    # One file per xdist run (its id is shared by the workers of a run); one per process
    # without xdist, where nothing runs beside the test anyway.
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    return Path(tempfile.gettempdir()) / f"treue-timing-{run}.lock"


@pytest.fixture(autouse=True)
def _timing_tests_take_turns(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("timing") is None:
        yield
        return
    with open(_lock_path(), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
