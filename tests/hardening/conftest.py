"""Hardening tests: every domain function that reads text a client or a model sent, on
adversarial input of 100,000 characters, held to a time bound and to linear growth. Plain
Python like tests/domain, but minutes of CPU rather than seconds, so apart from the domain's
fast unit tests (`pytest tests/hardening`, or in the whole suite); bench/adversarial.py prints
the same cases' figures."""

from tests.support.timing import _timing_tests_take_turns  # noqa: F401  (an autouse fixture)
