#!/usr/bin/env bash
# Runs a command and starts it again whenever it fails (ends with a status other than 0, or is
# killed), until this script gets TERM or INT; then it passes the signal on, waits for the
# command and ends with it. The restart loop of the demo's worker (scripts/demo.sh), and of a
# machine without systemd (with systemd, the units in docs/operations.md use Restart=always):
#
#     bash scripts/supervise.sh celery -A treue_site worker --pool=threads --concurrency=16 ...
#
# Why: a Celery worker can exit after a broker outage instead of reconnecting (an error inside
# kombu while its consumer restarts, docs/operations.md), and then nothing is judged until
# someone starts it by hand. A command that keeps failing at once is started again after a
# growing pause (1, 2, 4 ... 30 s), so that a wrong setting does not spin; after a run of a
# minute or more the pause is 1 s again. Each restart is logged to stderr with the status.
set -uo pipefail

if [ $# -eq 0 ]; then
  echo "usage: supervise.sh COMMAND [ARGS...]" >&2
  exit 2
fi

child="" stopping=""
on_signal() {
  stopping=$1
  [ -n "$child" ] && kill "-$1" "$child" 2>/dev/null
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT

pause=1 status=0
while [ -z "$stopping" ]; do
  started=$SECONDS
  "$@" &
  child=$!
  while :; do
    wait "$child"
    status=$?
    kill -0 "$child" 2>/dev/null && continue  # a trapped signal ended `wait`: wait again
    # The signal may have come just before the command ended: its status is then still due.
    wait "$child" 2>/dev/null
    again=$?
    [ "$again" -ne 127 ] && status=$again
    break
  done
  child=""
  [ -n "$stopping" ] && break
  # Status 0 is a shutdown someone asked for (Ctrl-C reaches the command directly: a background
  # script ignores INT), not a crash: a Celery worker ends with 1 after an unrecoverable error.
  [ "$status" -eq 0 ] && break
  [ $((SECONDS - started)) -ge 60 ] && pause=1
  echo "supervise.sh: '$1' ended with status $status; starting it again in $pause s" >&2
  sleep "$pause" &
  sleeper=$!
  wait "$sleeper" 2>/dev/null
  kill "$sleeper" 2>/dev/null
  pause=$((pause * 2 > 30 ? 30 : pause * 2))
done
exit "$status"
