"""bench/dashboard.py end to end on a small fill: it creates, migrates, fills, times every page
and drops its database again."""

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.postgres
def test_small_fill_times_every_page() -> None:
    name = f"treue_bench_smoke_{os.getpid()}"
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "dashboard.py"), "--answers", "2000",
         "--repeat", "2", "--warmup", "1", "--db", name, "--no-explain"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    rows = dict(re.findall(r"^ {2}(\S[^\n]*?) +([\d,]+)$", out, re.MULTILINE))
    assert rows["answers"] == "2,000"
    assert rows["use cases"] == "10"
    assert int(rows["judge runs"].replace(",", "")) > 0
    assert int(rows["claims"].replace(",", "")) > 0
    for page in ("overview", "use case page", "explorer, first page",
                 "estimates API, 12 weeks", "estimates API, 52 weeks", "metrics"):
        assert re.search(rf"^{re.escape(page)} +\d+ +\d+ .*(PASS|MISS|\(info\))$", out,
                         re.MULTILINE), (page, out)
    assert re.search(r"^fill: \d+ s = generate \+ COPY", out, re.MULTILINE)
    # Without --keep the database is gone.
    server = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(server) as conn:
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                            [name]).fetchone() is None
