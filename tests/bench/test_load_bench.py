"""bench/load.py end to end on a short run: it creates its database, starts gunicorn, posts a
mix of valid, invalid and duplicate answers, accounts for every one of them in PostgreSQL and
drops its database again."""

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _count(out: str, label: str) -> int:
    match = re.search(rf"^ {{2}}{re.escape(label)} +([\d,]+)$", out, re.MULTILINE)
    assert match, (label, out)
    return int(match.group(1).replace(",", ""))


@pytest.mark.postgres
def test_short_load_run_accounts_for_every_answer() -> None:
    name = f"treue_bench_load_smoke_{os.getpid()}"
    server = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "load.py"), "--clients", "4", "--duration", "3",
         "--pool", "40", "--warmup", "4", "--workers", "2", "--pg", server, "--db", name,
         "--time-limit", "120"],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
    )
    out = result.stdout
    assert result.returncode == 0, out[-4000:] + result.stderr[-3000:]
    assert "TREUE_API_RATE_LIMIT=0 (rate limiting off)" in out

    sent = _count(out, "valid answers sent (distinct external_id)")
    assert sent > 0
    assert _count(out, "valid answers stored") == sent
    for label in ("lost", "stored twice", "created (201) twice", "rows never sent",
                  "stored content not the one acknowledged", "stored without exactly 5 chunks",
                  "answers with wrong number of judge runs", "invalid answered otherwise",
                  "invalid stored", "repeats answered otherwise",
                  "sends with other content answered otherwise", "5xx", "transport errors",
                  "unreadable batch answers", "429 rate limited requests"):
        assert _count(out, label) == 0, (label, out)
    assert _count(out, "invalid rejected with expected status") == _count(out, "invalid sent")
    assert _count(out, "repeats answered 200") == _count(out, "repeats of stored content")
    assert (_count(out, "sends with other content answered 409")
            == _count(out, "sends with other content"))
    # Both endpoints were timed.
    assert re.search(r"^ {2}single latency p50 / p99 ms [\d,.]+ / [\d,.]+$", out, re.MULTILINE)
    assert re.search(r"^ {2}requests/s +[\d,.]+$", out, re.MULTILINE)
    for line in re.findall(r"^(?:PASS|MISS)  .*$", out, re.MULTILINE):
        assert line.startswith("PASS") or "answers/s >=" in line, line

    # Without --keep the database is gone.
    with psycopg.connect(f"{server}/postgres") as conn:
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                            [name]).fetchone() is None
