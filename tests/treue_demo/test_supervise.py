"""The restart loop of the demo's worker (scripts/supervise.sh) and the systemd units of
docs/operations.md. That a real worker killed under the loop comes back and judges, and that
it survives twenty broker cuts under load, is tests/integration/test_broker_cuts.py."""

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

# integration: scripts/supervise.sh and its commands run as real processes.
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SUPERVISE = ROOT / "scripts" / "supervise.sh"
FLAGS = "--without-gossip --without-mingle --without-heartbeat"


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_the_demo_runs_its_worker_under_the_restart_loop() -> None:
    script = (ROOT / "scripts" / "demo.sh").read_text(encoding="utf-8")
    command = " ".join(script.replace("\\\n", " ").split())
    assert "bash scripts/supervise.sh .venv/bin/celery -A treue_site worker --beat" in command
    assert FLAGS in command
    # Not a second, unsupervised worker.
    assert command.count("celery -A treue_site worker") == 1


def test_a_failing_command_is_started_again_until_term_which_it_gets(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    # Fails twice at once (status 3), then runs until it is stopped.
    command = (
        f'echo run >> {runs}; [ "$(wc -l < {runs})" -ge 3 ] && exec sleep 60; exit 3'
    )
    process = subprocess.Popen(
        ["bash", str(SUPERVISE), "bash", "-c", command],
        stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 15  # pauses of 1 s and 2 s
        while _lines(runs) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _lines(runs) == 3
        time.sleep(0.3)
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    stderr = process.stderr.read().decode() if process.stderr else ""
    assert re.findall(r"ended with status (\d+); starting it again in (\d+) s", stderr) == [
        ("3", "1"), ("3", "2"),
    ]
    # TERM went on to the command (sleep ends with 128 + 15), and the supervisor ended with it
    # instead of starting it a fourth time.
    assert status == 143
    assert _lines(runs) == 3


def test_a_command_that_ends_with_0_is_not_started_again(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    result = subprocess.run(
        ["bash", str(SUPERVISE), "bash", "-c", f"echo run >> {runs}"],
        capture_output=True, timeout=10,
    )
    assert result.returncode == 0
    assert _lines(runs) == 1
    assert b"starting it again" not in result.stderr


def test_the_systemd_units_restart_every_process() -> None:
    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    units = re.findall(r"```ini\n(.*?)```", doc, flags=re.S)
    starts = []
    for unit in units:
        lines = unit.splitlines()
        assert "Restart=always" in lines, unit
        (start,) = [line for line in lines if line.startswith("ExecStart=")]
        starts.append(start)
    assert len(starts) == 3
    assert any(" treue_site.wsgi " in start for start in starts)
    (worker,) = [start for start in starts if " worker " in start]
    assert FLAGS in worker
    assert any(start.split()[1:4] == ["-A", "treue_site", "beat"] for start in starts)
