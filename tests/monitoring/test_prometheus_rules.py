"""The Prometheus alerting rules shipped in deploy/prometheus/: valid for `promtool check
rules`, their own unit tests pass (`promtool test rules`), every metric they read is one
/metrics exports, and on a real scrape of a use case below its action line, with a drift alarm
open and answers refused, exactly the alerts for those fire.

promtool is Debian's `prometheus` package (scripts/test.sh installs it). Without it the tests
are skipped on a workstation and fail in CI (CI=true): there a missing tool is a failure.
"""

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from alarms.models import Alarm
from monitoring.models import UseCase
from monitoring.services.use_cases import service_create
from review import services as review_services
from tests.conftest import IN_CI
from tests.review.conftest import ReviewWorld, build_review_world
from tests.review.test_calibration_alarms import imported
from tests.support.world import WorldBuilder

ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = ROOT / "deploy" / "prometheus"
RULES = RULES_DIR / "treue-alerts.yml"
RULES_TESTS = RULES_DIR / "treue-alerts.test.yml"
# What Prometheus adds to each scraped series (the scrape example in docs/operations.md).
TARGET = 'job="treue",instance="treue:8000"'


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool") or (
        "/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None
    )
    if found is None:
        message = "promtool is missing: install Debian's prometheus package (scripts/test.sh)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return found


def run(promtool: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool, *map(str, args)], cwd=RULES_DIR, capture_output=True, text=True, timeout=60,
        check=False,
    )


def test_the_rules_pass_promtool_check(promtool: str) -> None:
    done = run(promtool, "check", "rules", RULES)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_rules_unit_tests_pass(promtool: str) -> None:
    done = run(promtool, "test", "rules", RULES_TESTS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_refuses_a_broken_rule(promtool: str, tmp_path: Path) -> None:
    """The check can fail: a rule reading a label that PromQL cannot parse is refused."""
    broken = tmp_path / "broken.yml"
    broken.write_text(RULES.read_text().replace(
        'treue_alarms_open{kind="drift"} > 0', 'treue_alarms_open{kind=drift} > 0'
    ))
    assert run(promtool, "check", "rules", broken).returncode != 0


# --- against Treue's own /metrics ----------------------------------------------------------


def rule_metrics() -> set[str]:
    """The Treue series the rules read (`up` is Prometheus' own)."""
    return set(re.findall(r"\btreue_[a-z_]+\b", RULES.read_text()))


def scrape(client: Client) -> str:
    response = client.get("/metrics")
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture
def red(world_builder: WorldBuilder, db: None) -> ReviewWorld:
    """A use case below its action line on the experts' scale (last week judged 1.0, reviewed
    at 0.5 by the experts), a drift alarm open on it, and a service of its own."""
    world = build_review_world(world_builder)
    imported(world, review_services.current_week(), [("GEDECKT", 0.5)] * 20, prefix="p")
    Alarm.objects.create(use_case=world.use_case, kind=Alarm.Kind.DRIFT, key="2026-W40",
                         message="Drift")
    return world


def test_every_metric_the_rules_read_is_exported(red: ReviewWorld) -> None:
    client = Client()
    client.force_login(red.users["staff"])
    exported: set[str] = set()
    for family in text_string_to_metric_families(scrape(client)):
        exported.add(family.name)
        if family.type == "counter":
            exported.add(f"{family.name}_total")
        exported.update(sample.name for sample in family.samples)
    missing = rule_metrics() - exported
    assert not missing, f"the rules read series /metrics does not export: {sorted(missing)}"


def test_the_alerts_fire_on_a_real_scrape(
    red: ReviewWorld, promtool: str, tmp_path: Path, settings: Any
) -> None:
    """Two scrapes, 20 minutes apart in Prometheus' time: before and after a key sends to a
    use case it may not. Replayed to promtool with the shipped rules, what fires 5 minutes
    later is the red light and the drift alarm of the use case and the refused answers of
    the service; nothing of the other use case, the judge or the OTLP receiver."""
    settings.TREUE_METRICS_TOKEN = "prom-rules-test-token"
    scraper = Client(HTTP_AUTHORIZATION="Bearer prom-rules-test-token")
    service, key = service_create(name="regel-bot", use_cases=[red.use_case])
    other = UseCase.objects.exclude(pk=red.use_case.pk).get()
    before = scrape(scraper)
    sender = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = sender.post("/api/v1/answers", {
        "external_id": "r-1", "use_case": other.slug, "question": "Wie oft?",
        "answer": "Alle 5 Jahre.", "model": "gpt-4o-mini", "chunks": [{"text": "5 Jahre."}],
    }, content_type="application/json")
    assert response.status_code == 403
    after = scrape(scraper)

    def samples(text: str) -> dict[str, float]:
        found = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = "".join(
                    f',{name}="{value}"' for name, value in sorted(sample.labels.items())
                )
                found[f"{sample.name}{{{TARGET}{labels}}}"] = sample.value
        return found

    # Minutes 0-19 the first scrape, 20-39 the second ("_": no sample at that minute).
    first, second = samples(before), samples(after)
    series = {
        name: " ".join([repr(first[name]) if name in first else "_"] * 20
                       + [repr(second[name]) if name in second else "_"] * 20)
        for name in first.keys() | second.keys()
    }
    series[f"up{{{TARGET}}}"] = "1x39"

    slug = red.use_case.slug
    firing = [
        {"labels": labels, "value": 1}
        for labels in sorted([
            f'{{alertname="TreueBelowActionThreshold",use_case="{slug}"}}',
            f'{{alertname="TreueCalibrationDrift",use_case="{slug}"}}',
            '{alertname="TreueIngestAnswersRefused",service="regel-bot"}',
        ])
    ]
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                {"series": name, "values": values} for name, values in sorted(series.items())
            ],
            "promql_expr_test": [{
                "expr": 'count by (alertname, use_case, service) (ALERTS{alertstate="firing"})',
                "eval_time": "25m",
                "exp_samples": firing,
            }],
        }],
    }
    replay = tmp_path / "replay.test.json"
    replay.write_text(json.dumps(test))
    done = run(promtool, "test", "rules", replay)
    assert done.returncode == 0, done.stdout + done.stderr
