#!/usr/bin/env bash
# Sets up everything and starts Treue on embedded defaults: SQLite, an SQLite-backed Celery
# broker, a background worker (with beat) and the web server, with a demo use case, demo answers
# and a demo login. Stop with Ctrl-C. PORT (default 8000) picks the web port.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt

mkdir -p var
.venv/bin/python manage.py migrate --noinput -v0
.venv/bin/python manage.py seed_demo

.venv/bin/celery -A treue_site worker --beat --loglevel=INFO --concurrency=2 \
  --schedule=var/celerybeat-schedule >var/worker.log 2>&1 &
worker=$!
trap 'kill "$worker" 2>/dev/null; wait "$worker" 2>/dev/null' EXIT INT TERM
echo "Worker läuft (Log: var/worker.log). Web: http://127.0.0.1:${PORT:-8000}/"
.venv/bin/python manage.py runserver "0.0.0.0:${PORT:-8000}"
