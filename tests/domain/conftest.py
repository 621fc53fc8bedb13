"""Fixtures for the domain tests.

The fake OpenAI server's fixture is imported rather than declared with ``pytest_plugins``:
pytest refuses ``pytest_plugins`` in a conftest below the top level when the whole suite runs.
Once tests/conftest.py loads ``tests.support.openai_server`` as a plugin, this import is
redundant but harmless (the same fixture, found closer).
"""

from tests.support.openai_server import openai_server  # noqa: F401
