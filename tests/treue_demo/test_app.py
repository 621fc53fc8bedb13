"""The demo is an app installed only when the demo runs, and no product module needs it."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from django.core.management import call_command, get_commands
from django.core.management.base import CommandError
from django.test import override_settings

from treue_demo.data import DEMO_JUDGE_MODEL

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ["monitoring", "alarms", "review", "investigations", "treue_site"]


def test_absent_by_default_and_seed_demo_unknown() -> None:
    assert settings.TREUE_DEMO is False
    assert "treue_demo" not in settings.INSTALLED_APPS
    assert not apps.is_installed("treue_demo")
    assert settings.TREUE_DEMO_JUDGE_MODEL == ""
    assert "seed_demo" not in get_commands()
    with pytest.raises(CommandError, match="Unknown command: 'seed_demo'"):
        call_command("seed_demo")


def test_installed_for_the_demo_with_its_command() -> None:
    # Not the module-wide demo_app fixture: the test above must see the app absent.
    with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, "treue_demo"]):
        assert apps.is_installed("treue_demo")
        assert get_commands()["seed_demo"] == "treue_demo"
    assert "seed_demo" not in get_commands()


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TREUE_DEMO")}
    # The product's settings, as `manage.py` reads them by default: under the tests' settings
    # module (which imports them) Django's `help` answered "Unknown command" instead of the
    # refusal whenever CELERY_BROKER_URL was unset, as on a fresh machine (CI sets it).
    environ["DJANGO_SETTINGS_MODULE"] = "treue_site.settings"
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=environ | env,
                          capture_output=True, text=True, timeout=60)


# Starts `manage.py` three times (settings are read once per process): outside the fast part.
@pytest.mark.integration
def test_the_environment_installs_it() -> None:
    shown = _manage("help", "seed_demo", TREUE_DEMO="True")
    assert shown.returncode == 0 and "--expert-labels" in shown.stdout, shown.stderr
    unknown = _manage("help", "seed_demo")
    assert unknown.returncode != 0 and "Unknown command: 'seed_demo'" in unknown.stderr
    # A typo refuses to start rather than quietly leaving the demo out (envbool).
    typo = _manage("help", "seed_demo", TREUE_DEMO="yes")
    assert typo.returncode != 0 and "TREUE_DEMO must be True or False" in typo.stderr


def _imports(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return found


def test_no_product_module_imports_the_demo_or_names_its_judge() -> None:
    files = [path for app in PRODUCT for path in (ROOT / app).rglob("*.py")]
    assert len(files) > 50
    importing, naming = [], []
    for path in files:
        source = path.read_text(encoding="utf-8")
        if any(m.split(".")[0] == "treue_demo" for m in _imports(source)):
            importing.append(str(path.relative_to(ROOT)))
        if DEMO_JUDGE_MODEL in source:
            naming.append(str(path.relative_to(ROOT)))
    assert (importing, naming) == ([], [])


def test_the_demo_script_names_the_demo_judge_and_installs_the_app() -> None:
    script = (ROOT / "scripts" / "demo.sh").read_text(encoding="utf-8")
    assert re.search(rf"^demo_model={re.escape(DEMO_JUDGE_MODEL)}$", script, re.MULTILINE)
    assert re.search(r"^export TREUE_DEMO=True TREUE_DEMO_JUDGE_MODEL=\$demo_model$", script,
                     re.MULTILINE)
    assert "-m treue_demo.server" in script


def test_the_demo_script_keeps_and_exports_a_metrics_token(tmp_path: Path) -> None:
    """scripts/demo.sh gives /metrics a token of its own (kept in var/, the same on every
    start, TREUE_METRICS_TOKEN wins), which seed_demo prints: its lines, run on their own."""
    script = (ROOT / "scripts" / "demo.sh").read_text(encoding="utf-8")
    start = script.index('if [ -z "${TREUE_METRICS_TOKEN:-}" ]; then')
    end = script.index("export TREUE_METRICS_TOKEN", start)
    part = script[start:end] + 'export TREUE_METRICS_TOKEN\necho "$TREUE_METRICS_TOKEN"\n'
    (tmp_path / "var").mkdir()
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)

    def run(**env: str) -> str:
        done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + part], cwd=tmp_path,
                              env={"PATH": os.environ["PATH"], **env}, capture_output=True,
                              text=True, check=True)
        return done.stdout.strip()

    first = run()
    assert len(first) >= 40
    assert (tmp_path / "var" / "metrics-token").stat().st_mode & 0o077 == 0
    assert run() == first
    assert run(TREUE_METRICS_TOKEN="eigenes-token") == "eigenes-token"

