#!/usr/bin/env bash
# Sets up everything and starts Treue on embedded defaults: SQLite, an SQLite-backed Celery
# broker, a background worker (with beat) and the web server, with three demo use cases, 14
# weeks of demo answers (RAGTruth QA), the experts' reviews of the past weeks and a demo login.
# Stop with Ctrl-C. PORT (default 8000) picks the web port.
#
# The judge (tier 2): with TREUE_JUDGE_BASE_URL unset, a local demo judge starts on loopback
# (port DEMO_JUDGE_PORT, default 8790, or any free one) whose verdicts are RAGTruth's human
# labels replayed, not a model's (a little lenient: it passes over the spans the annotators
# called subtle, which the demo's experts count). With TREUE_JUDGE_BASE_URL set, that endpoint
# is the judge and TREUE_JUDGE_MODEL names its model (TREUE_JUDGE_API_KEY as the endpoint needs).
#
# The generator (self-consistency investigations): with TREUE_GENERATOR_BASE_URL unset, the same
# local server replays the demo answers for their own model names, the human-labelled spans
# varied on a script (not a model), so that an investigation finds inconsistency where people
# found invented content. With it set, that endpoint is re-asked (TREUE_GENERATOR_API_KEY).
set -euo pipefail
cd "$(dirname "$0")/.."
# The embedded demo runs with DEBUG on (a fixed demo SECRET_KEY, plain HTTP on localhost); a
# production setting of DEBUG=False left in the shell would refuse to start without a key.
export DEBUG=True
# The demo is an app of its own (treue_demo: the seed_demo command, the demo judge/generator
# server), installed only when this is set. Runs of its judge model (a name no real model has)
# are marked on the pages as replayed human labels, whichever judge this start uses.
demo_model=treue-demo-judge
export TREUE_DEMO=True TREUE_DEMO_JUDGE_MODEL=$demo_model

python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
# The lock (scripts/lock.sh) pins every package, dependencies included, with its hashes.
.venv/bin/python -m pip install -q --disable-pip-version-check --require-hashes -r requirements.lock

mkdir -p var
judge="" worker="" web="" batcher="" reviews=""
stop() {
  # Everything runs in the background, where a non-interactive shell makes it ignore Ctrl-C:
  # stop it here, whichever way the script ends. The worker goes before the judge it calls.
  trap '' INT TERM  # a second Ctrl-C (or TERM) must not cut the clean-up short
  for pid in $reviews $batcher $web $worker $judge; do
    kill "$pid" 2>/dev/null || continue
    # The worker finishes its running tasks first (warm shutdown). Should it hang, force it:
    # an unfinished judge run goes back to the queue (acks_late) or to the reconciler.
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "Prozess $pid beendet sich nicht, wird abgebrochen / killing $pid" >&2
      kill -KILL $(ps -o pid= --ppid "$pid") "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The demo server (treue_demo/server.py) plays the judge and, for self-consistency
# investigations, the generator: it starts when either has no endpoint of its own.
# A real judge: an OpenAI-compatible endpoint or an Azure OpenAI resource.
real_judge=${TREUE_JUDGE_BASE_URL:-${TREUE_JUDGE_AZURE_ENDPOINT:-}}
if [ -z "$real_judge" ] || [ -z "${TREUE_GENERATOR_BASE_URL:-}" ]; then
  port_args=(--port "${DEMO_JUDGE_PORT:-8790}")
  # Only an explicitly chosen port must be that port; the default may move if it is taken.
  [ -n "${DEMO_JUDGE_PORT:-}" ] || port_args+=(--any-port)
  : >var/demo-judge.log
  .venv/bin/python -m treue_demo.server "${port_args[@]}" >>var/demo-judge.log 2>&1 &
  judge=$!
  url=""
  for _ in $(seq 100); do
    url=$(sed -n 's|^URL: \(http://127\.0\.0\.1:[0-9]*/v1\) .*|\1|p' var/demo-judge.log)
    if [ -n "$url" ] && .venv/bin/python -c \
      'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/models", timeout=1)' \
      "$url" 2>/dev/null; then
      break
    fi
    url=""
    kill -0 "$judge" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$url" ]; then
    echo "Der Demo-Prüfer startet nicht / the demo judge did not start:" >&2
    cat var/demo-judge.log >&2
    exit 1
  fi
fi

if [ -z "$real_judge" ]; then
  echo "Demo-Prüfer: Urteile sind wiedergegebene menschliche Labels (RAGTruth), kein Modell."
  echo "Demo judge: verdicts are replayed human labels (RAGTruth), not a model."
  echo "Echter Prüfer / real judge: TREUE_JUDGE_BASE_URL=... TREUE_JUDGE_API_KEY=..." \
    "TREUE_JUDGE_MODEL=... bash scripts/demo.sh"
  export TREUE_JUDGE_BASE_URL=$url TREUE_JUDGE_MODEL=$demo_model TREUE_JUDGE_API_KEY=demo
  echo "Demo-Prüfer läuft auf $url (Log: var/demo-judge.log)."
  scale=${DEMO_SCALE:-1}
else
  if [ -z "${TREUE_JUDGE_MODEL:-}" ]; then
    echo "Ein Prüfer-Endpunkt ist gesetzt, TREUE_JUDGE_MODEL nicht: welches Modell (bei Azure: welche Bereitstellung) soll prüfen?" >&2
    echo "A judge endpoint is set but TREUE_JUDGE_MODEL is not: name the judge model (on Azure: the deployment)." >&2
    exit 2
  fi
  echo "Prüfer / judge: $TREUE_JUDGE_MODEL über $real_judge"
  # Every run of a real judge is paid for: the whole demo is about 4,000 runs (38,000 calls,
  # 20 million prompt tokens). A tenth of it unless DEMO_SCALE asks for more.
  scale=${DEMO_SCALE:-0.1}
  echo "Echter Prüfer: Demo-Umfang DEMO_SCALE=$scale (1 = alles, etwa 4.000 Prüfläufe)."
  echo "Real judge: demo volume DEMO_SCALE=$scale (1 = all of it, about 4,000 judge runs)."
fi

if [ -z "${TREUE_GENERATOR_BASE_URL:-}" ]; then
  echo "Demo-Generator (Konsistenzprüfungen): gibt die Demo-Antworten wieder, mit geskripteter" \
    "Variation der gelabelten Stellen, kein Modell."
  echo "Demo generator (consistency investigations): replays the demo answers with scripted" \
    "variation of the labelled spans, not a model."
  export TREUE_GENERATOR_BASE_URL=$url TREUE_GENERATOR_API_KEY=demo
else
  echo "Generator (Konsistenzprüfungen / consistency investigations): $TREUE_GENERATOR_BASE_URL"
fi

# /metrics for Prometheus (docs/operations.md#prometheus): a bearer token of the demo's own,
# kept in var/ so that it stays the same across restarts, unless TREUE_METRICS_TOKEN is set;
# seed_demo prints it.
if [ -z "${TREUE_METRICS_TOKEN:-}" ]; then
  if [ ! -s var/metrics-token ]; then
    (umask 077 && .venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(32))' \
      >var/metrics-token)
  fi
  TREUE_METRICS_TOKEN=$(cat var/metrics-token)
fi
export TREUE_METRICS_TOKEN

# After the judge settings: the demo answers sampled at ingest get their judge runs now, and
# the worker scores them in the background.
.venv/bin/python manage.py migrate --noinput -v0
.venv/bin/python manage.py seed_demo --scale "$scale"

# The worker fans the seed's 4,000 judge runs out to the embedded broker in a burst, and now and
# then a publish finds the broker locked by the worker's own polling: the rest of that message's
# runs wait for the reconciler (every 5 minutes), which re-sends a run only once it is 10
# minutes old. The demo has it re-send after 2, so its reviews need not wait a quarter of an hour.
export TREUE_JUDGE_RECONCILE_AFTER_SECONDS=${TREUE_JUDGE_RECONCILE_AFTER_SECONDS:-120}
: >var/worker.log  # a new log each start; both writers below append, so neither overwrites
# Under scripts/supervise.sh, which starts the worker again whenever it ends (a worker can exit
# after a broker outage instead of reconnecting: docs/operations.md); TERM from stop() reaches it
# and the worker's warm shutdown. Gossip, mingle and worker events are off: Treue uses none of
# them, and their channels are what Celery fails to close after a lost connection.
bash scripts/supervise.sh .venv/bin/celery -A treue_site worker --beat --loglevel=INFO \
  --pool=threads --concurrency=8 --without-gossip --without-mingle --without-heartbeat \
  --schedule=var/celerybeat-schedule >>var/worker.log 2>&1 &
worker=$!
echo "Worker läuft (Log: var/worker.log). Web: http://127.0.0.1:${PORT:-8000}/"
# This week's review batch for the demo, once the worker has judged last week's answers (beat
# creates batches on Monday mornings; the demo should not wait for one).
.venv/bin/python manage.py create_review_batches --wait 300 >>var/worker.log 2>&1 &
batcher=$!
# The experts' reviews of the weeks before (RAGTruth's labels, as an annotation tool would
# export them), imported with import_expert_labels once the worker has judged those weeks: a
# few minutes for the demo judge's 4,000 runs.
: >var/demo-reviews.log
.venv/bin/python manage.py seed_demo --expert-labels var/demo-expert-labels --wait 1800 \
  >>var/demo-reviews.log 2>&1 &
reviews=$!
echo "Expertenprüfungen der Vorwochen folgen, sobald der Prüfer sie bewertet hat" \
  "(Log: var/demo-reviews.log)."
echo "The experts' reviews of the past weeks follow once the judge has scored them" \
  "(log: var/demo-reviews.log)."
# In the background too, so that a TERM to this script (not only Ctrl-C) reaches the trap.
# Loopback only by default: the demo runs with DEBUG on and a login printed above. HOST=0.0.0.0
# shows it to other machines.
.venv/bin/python manage.py runserver "${HOST:-127.0.0.1}:${PORT:-8000}" &
web=$!
wait "$web"
