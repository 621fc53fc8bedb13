"""The settings of a test run: Treue's own (treue_site/settings.py), with a var/ folder of the
tests' own and one per pytest-xdist worker.

The folder is $TREUE_VAR_DIR (scripts/test.sh sets var/test), else var/test, never the demo's
var/. Under pytest-xdist each worker process (PYTEST_XDIST_WORKER=gw0, gw1, ...) gets its own
sub-folder: the embedded broker file, collected static files and screenshots of two workers
never meet. Databases need nothing here: pytest-django names each worker's PostgreSQL test
database test_<name>_gw0, ..., and settings.py puts each process's SQLite test database in a
file of its own. Ports are all picked free at run time (port 0), none is fixed.

A process that a test starts (a celery worker, gunicorn) inherits these settings and its own
TREUE_VAR_DIR from the test; it gets a worker sub-folder inside that, which does no harm.
"""

import os
from pathlib import Path

_BASE = Path(__file__).resolve().parent.parent
_var = Path(os.environ.get("TREUE_VAR_DIR") or _BASE / "var" / "test")
_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker and _var.name != _worker:
    _var = _var / _worker
# treue_site.settings reads the folder from the environment when it is imported, below.
os.environ["TREUE_VAR_DIR"] = str(_var)

from treue_site.settings import *  # noqa: E402, F403

# WhiteNoise finds a static file when it is asked for, as under `runserver`, instead of walking
# every static folder (plotly's package data included) whenever a middleware chain is built:
# the test client builds one for every `Client()`, and that walk was 27 ms each, an eighth of
# the page tests' time. The files served and their headers are the same.
WHITENOISE_AUTOREFRESH = True

# Each transactional test ends with a flush of every table; on PostgreSQL the tests' backend
# flushes with DELETE instead of TRUNCATE (tests/support/postgresql_fast_flush), 0.5 s less per
# test. Everything else is Django's PostgreSQL backend.
for _database in DATABASES.values():  # noqa: F405
    if _database["ENGINE"] == "django.db.backends.postgresql":
        _database["ENGINE"] = "tests.support.postgresql_fast_flush"
