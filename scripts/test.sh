#!/usr/bin/env bash
# Sets up everything the tests need and runs them all: ruff, the migration check, pytest
# (domain, API, pages, integration, browser) on four processes. Embedded defaults unless
# DATABASE_URL / CELERY_BROKER_URL are set (CI sets them to PostgreSQL and Redis, see .ci/run).
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# Python keeps its compiled bytecode for the many processes the tests start (tests/conftest.py).
unset PYTHONDONTWRITEBYTECODE

python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --require-hashes \
  -r requirements-dev.lock
# The Python client's own dependencies (httpx, openai) are in the lock already.
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps ./clients/python

# Browser tests drive Debian's chromium; Playwright never downloads a browser of its own.
# The Prometheus alerting rules (deploy/prometheus/) are checked and unit-tested with promtool,
# from Debian's prometheus package (its server is not started here).
missing=""
[ -x /usr/bin/chromium ] || missing="$missing chromium"
[ -x /usr/bin/promtool ] || missing="$missing prometheus"
if [ -n "$missing" ]; then
  as_root=""
  [ "$(id -u)" = 0 ] || as_root="sudo"
  $as_root apt-get update -qq
  # shellcheck disable=SC2086  # one word a package
  DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq \
    $missing >/dev/null
fi

# The tests' own var/ (embedded broker file and the like), apart from the demo's.
export TREUE_VAR_DIR=${TREUE_VAR_DIR:-$PWD/var/test}

.venv/bin/ruff check .
# The architecture's rules (pyproject.toml [tool.importlinter]: plain-Python domain modules,
# views/API/tasks above services/selectors above models, monitoring without review and
# investigations, no product module importing the demo).
.venv/bin/lint-imports --no-cache
# The types of every product module and of the tests, under one configuration (pyproject.toml
# [tool.mypy]: django-stubs, the pydantic plugin, check_untyped_defs); zero errors, and a
# `# type: ignore[code]` only with the reason beside it (tests/test_type_ignores.py).
.venv/bin/mypy
# DATABASE_URL emptied: the check needs no server (the test database does not exist yet).
DATABASE_URL= .venv/bin/python manage.py makemigrations --check --dry-run >/dev/null
# Four processes (pytest-xdist), each with its own test database, var/ folder and free ports
# (tests/settings.py): much of the suite waits on the network, subprocesses and the browser, so
# four keep two cores busy. A module that starts processes or a browser stays on one of them
# (--dist loadgroup, tests/conftest.py). `-n 0` among the arguments runs it in one process.
.venv/bin/python -m pytest -n "${TEST_PROCESSES:-4}" --dist loadgroup "$@"
