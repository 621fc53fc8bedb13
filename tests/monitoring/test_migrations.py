"""Migrations that change how stored data is held keep every stored value (on the database
the run uses: SQLite by default, PostgreSQL in CI)."""

import importlib
import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from monitoring.models import Answer

# It migrates the whole schema back and forth: seconds, so the fast part leaves it to CI.
pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

BEFORE = ("monitoring", "0006_retention_heartbeat")
PACKED = ("monitoring", "0007_answer_token_data_packed")
PACKED_MODULE = "monitoring.migrations.0007_answer_token_data_packed"
COMPACT = {"v": 1, "t": ["Alle", " 5", " Jahre"], "lp": [-0.1, -1.6, -1e-07],
           "s": [0, 4, 6], "e": [4, 6, 12]}


def migrate(target: tuple[str, str] | None) -> MigrationExecutor:
    """To `target`; None: forward to every app's last migration (going back unapplies the
    other apps' migrations that depend on a later one, and the next tests need them)."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target] if target else executor.loader.graph.leaf_nodes())
    return executor


@pytest.fixture
def at_0006():
    executor = migrate(BEFORE)
    yield executor.loader.project_state([BEFORE]).apps
    migrate(None)


def _answer(apps, external_id: str, token_data):
    use_case = apps.get_model("monitoring", "UseCase").objects.get_or_create(
        slug="kundenservice", defaults={"name": "Kundenservice"}
    )[0]
    service = apps.get_model("monitoring", "Service").objects.get_or_create(
        name="rag-bot", defaults={"key_prefix": "abcd1234", "key_hash": "0" * 64}
    )[0]
    return apps.get_model("monitoring", "Answer").objects.create(
        use_case=use_case, service=service, external_id=external_id, content_hash="h",
        question="Wie oft?", text="Alle 5 Jahre", model="m", logprobs_status="ok",
        token_data=token_data, logprob_threshold=0.5, inclusion_probability=1.0,
    ).pk


def test_token_copies_stored_as_json_survive_packing_and_its_reversal(at_0006, monkeypatch):
    # Rolling back reads the table in slices; one answer a slice walks them all.
    monkeypatch.setattr(importlib.import_module(PACKED_MODULE), "BACKWARDS_SLICE", 1)
    with_tokens = _answer(at_0006, "a-1", COMPACT)
    without = _answer(at_0006, "a-2", None)

    migrate(PACKED)
    # Only the column at stake: today's model has columns (issue 40's) that 0007 lacks.
    answers = Answer.objects.only("id", "token_data")
    assert answers.get(pk=with_tokens).token_data == COMPACT
    assert answers.get(pk=without).token_data is None
    # A new answer is stored packed, beside the converted one.
    Answer.objects.filter(pk=without).update(token_data={**COMPACT, "lp": [-0.2, -0.3, -0.4]})
    token_data = answers.get(pk=without).token_data
    assert token_data is not None and token_data["lp"] == [-0.2, -0.3, -0.4]

    migrate(BEFORE)
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, token_data FROM monitoring_answer ORDER BY id")
        rows = dict(cursor.fetchall())
    back = {pk: json.loads(v) if isinstance(v, str) else v for pk, v in rows.items()}
    assert back[with_tokens] == COMPACT
    assert back[without]["lp"] == [-0.2, -0.3, -0.4]


BEFORE_BUCKETS = ("monitoring", "0028_setting_change_judge_evidence")


@pytest.fixture
def at_0028():
    executor = migrate(BEFORE_BUCKETS)
    yield executor.loader.project_state([BEFORE_BUCKETS]).apps
    migrate(None)


def test_regression_sums_without_a_similarity_bucket_are_dropped_and_rebuilt(at_0028):
    # Sums kept per (use case, week, stratum) cannot be split by similarity bucket: the
    # migration drops them, the rollups' definition moved on (the pages read the raw rows), and
    # the nightly repair rebuilds every week under the new definition.
    from datetime import UTC, date, datetime

    from django.conf import settings

    from monitoring.models.rollups import rollups_ready
    from monitoring.services.rollup_rebuild import rollups_repair

    use_case = at_0028.get_model("monitoring", "UseCase").objects.create(
        slug="kundenservice", name="Kundenservice")
    at_0028.get_model("monitoring", "RollupMoments").objects.create(
        use_case=use_case, week=date(2026, 11, 30), flagged=False, n=3, s_min=6.0, s_max=9.0,
        c_min=0.1, c_max=0.3, m_sum=1, sums=[1.0] * 10)
    state = at_0028.get_model("monitoring", "RollupState")
    state.objects.create(definition=f"4:{settings.TIME_ZONE}",
                         ready_at=datetime(2026, 12, 1, tzinfo=UTC))

    migrate(None)

    from monitoring.models import RollupMoments

    assert not RollupMoments.objects.exists()
    assert not rollups_ready()
    assert rollups_repair() == 1  # rebuilt in full
    assert rollups_ready()
