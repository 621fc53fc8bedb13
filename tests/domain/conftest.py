"""The domain tests need no Django: run on their own (`pytest tests/domain`), pytest.ini here
turns pytest-django off, and this conftest, not tests/conftest.py, is the one they load. In the
whole suite they run beside the rest with tests/conftest.py as well.

The local OpenAI-compatible server and the turns of the `timing` tests come from
tests/support, which imports nothing of Django either."""

from tests.support.openai_server import (  # noqa: F401  (fixtures)
    _openai_server_of_this_process,
    openai_server,
)
from tests.support.timing import _timing_tests_take_turns  # noqa: F401  (an autouse fixture)
