"""The demo's tests install the demo app, as ``TREUE_DEMO=True`` does for ``scripts/demo.sh``.

Outside these tests (and outside the demo) ``treue_demo`` is not installed: see test_app.py.
"""

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import override_settings

from treue_demo.data import DEMO_JUDGE_MODEL


@pytest.fixture(scope="module")
def demo_app() -> Iterator[None]:
    """The demo app installed (its ``seed_demo`` command known) and its judge named, as the
    demo sets them, for a whole test module."""
    with override_settings(
        INSTALLED_APPS=[*settings.INSTALLED_APPS, "treue_demo"],
        TREUE_DEMO=True,
        TREUE_DEMO_JUDGE_MODEL=DEMO_JUDGE_MODEL,
    ):
        yield
