"""bench/otlp.py end to end on small requests: it creates its database, starts gunicorn, posts a
flood, a request over the span limit and another sender's trace, runs the sweeps and drops its
database again."""

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.postgres
def test_small_flood_is_cheap_refused_over_the_limit_and_fair() -> None:
    name = f"treue_bench_otlp_smoke_{os.getpid()}"
    server = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "otlp.py"), "--spans", "500",
         "--phases", "flood,over,fairness", "--pg", server, "--db", name,
         "--time-limit", "240"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    out = result.stdout
    assert result.returncode == 0, out[-4000:] + result.stderr[-3000:]
    row = re.compile(r"^(?P<name>.+?) +(?P<spans>[\d,]+) +[\d.]+ +(?P<status>-?\d+) +"
                     r"(?P<wall>[\d.]+) +(?P<web>[\d.]+) +(?P<pg>[\d.]+)", re.MULTILINE)
    rows = {m["name"]: m for m in row.finditer(out)}
    assert rows["flood, protobuf"]["status"] == "200"
    assert rows["flood, protobuf"]["spans"] == "500"
    assert float(rows["flood, protobuf"]["web"]) > 0  # gunicorn's CPU was measured
    assert rows["flood, JSON"]["status"] == "200"
    assert rows["over"]["status"] == "413"
    assert rows["other sender's trace"]["status"] == "200"
    assert re.search(r"^ +sweep 1: \d+ traces in [\d.]+ s .*: done$", out, re.MULTILINE), out
    assert "fairness: the other sender's trace in the first sweep: PASS" in out
    with psycopg.connect(f"{server}/postgres") as conn:
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                            [name]).fetchone() is None
