"""The migration that partitions answers and chunks by month (0024), on a filled database as an
operator would run it: migrated to just before it, filled through the real ingest (answers over
fifteen months and one from years back, with chunks, token data and judge runs), then `migrate`.
Afterwards every row is where it was (per month, ids, chunks, keys), ingest goes on with the
next id, a replay is still a replay, and the indexes are there. The duration is printed per
100,000 answers (run with -s to see it; bench/README.md notes the figure).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.postgres import admin_connection, database_url

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = int(os.environ.get("TREUE_PARTITION_TEST_ANSWERS", "20000"))


@pytest.fixture
def database(tmp_path: Path) -> Iterator[str]:
    name = f"treue_partition_{os.getpid()}"
    with admin_connection() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(name)
    finally:
        with admin_connection() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run(url: str, tmp_path: Path, *args: str, script: str | None = None) -> str:
    env = dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="treue_site.settings",
               TREUE_VAR_DIR=str(tmp_path), DEBUG="False", SECRET_KEY="x" * 50,
               PYTHONPATH=str(ROOT))
    command = [sys.executable, "manage.py", *args] if script is None else [
        sys.executable, "-c", script]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


FILL = textwrap.dedent("""
    import django, json, math
    django.setup()
    from datetime import timedelta
    from django.utils import timezone
    from ingest import services
    from monitoring.services.use_cases import service_create, use_case_create
    from monitoring.models import Answer
    from django.db import connection
    # Today's code writes the runs' use case and answer time (0025), the calls of unknown
    # usage (0026), the way the verdicts came and the use case's evidence switch (0027), which
    # 0023's tables lack: the columns while filling, dropped after, so that 0025 fills them
    # from the answers; the segments' columns (0032) and the segments' rollup of answers and
    # the keys it holds (0033).
    with connection.cursor() as c:
        c.execute("ALTER TABLE monitoring_judgerun ADD COLUMN use_case_id bigint,"
                  " ADD COLUMN answer_created_at timestamptz,"
                  " ADD COLUMN usage_unknown_calls integer NOT NULL DEFAULT 0,"
                  " ADD COLUMN verify_path varchar(12) NOT NULL DEFAULT ''")
        c.execute("ALTER TABLE monitoring_usecase"
                  " ADD COLUMN judge_evidence boolean NOT NULL DEFAULT true,"
                  " ADD COLUMN segment_keys jsonb NOT NULL DEFAULT '[]',"
                  " ADD COLUMN segment_keys_rolled jsonb NOT NULL DEFAULT '[]'")
        c.execute("CREATE TABLE monitoring_rollupsegment (id bigserial PRIMARY KEY,"
                  " use_case_id bigint NOT NULL, week date NOT NULL, flagged boolean NOT NULL,"
                  " dimension varchar(80) NOT NULL, value text NOT NULL,"
                  " answers bigint NOT NULL DEFAULT 0,"
                  " UNIQUE (use_case_id, week, flagged, dimension, value))")
        c.execute("ALTER TABLE monitoring_answer"
                  " ADD COLUMN prompt_version varchar(100) NOT NULL DEFAULT '',"
                  " ADD COLUMN source varchar(500) NOT NULL DEFAULT ''")
    use_case = use_case_create(slug="fall", name="Fall", language="de", sample_rate=0.2)
    service, _ = service_create(name="bot", use_cases=[use_case])
    now = timezone.now()
    text = "Der Behälter wird alle 5 Jahre von einer Fachkraft geprüft."
    tokens = {"content": [{"token": t, "logprob": math.log(0.3 if t.strip() == "5" else 0.97),
                           "bytes": list(t.encode())}
                          for t in text.replace(" ", "\\0 ").split("\\0")]}
    N = %(n)d
    for first in range(0, N, 500):
        items = [{
            "external_id": f"a{i}", "use_case": "fall", "question": "Wie oft?", "answer": text,
            "model": "gpt-4o-mini", "logprobs": tokens if i %% 3 == 0 else None,
            "chunks": [{"text": f"Abschnitt {k}: " + "Prüfung " * 40, "score": 0.5 + k / 20}
                       for k in range(5)],
            "created_at": (now - (timedelta(days=365 * 5) if i == 0 else
                                  timedelta(minutes=(i * 7919) %% (60 * 24 * 450)))).isoformat(),
        } for i in range(first, min(N, first + 500))]
        results = services.answer_ingest_batch(service=service, items=items)
        assert all(r.answer is not None for r in results), results[0].errors
    with connection.cursor() as c:
        c.execute("ALTER TABLE monitoring_judgerun DROP COLUMN use_case_id,"
                  " DROP COLUMN answer_created_at, DROP COLUMN usage_unknown_calls,"
                  " DROP COLUMN verify_path")
        c.execute("ALTER TABLE monitoring_usecase DROP COLUMN judge_evidence,"
                  " DROP COLUMN segment_keys, DROP COLUMN segment_keys_rolled")
        c.execute("DROP TABLE monitoring_rollupsegment")
        c.execute("ALTER TABLE monitoring_answer DROP COLUMN prompt_version, DROP COLUMN source")
    print(json.dumps({"answers": Answer.objects.count()}))
""")

STATE = textwrap.dedent("""
    import django, json
    django.setup()
    from django.db import connection
    with connection.cursor() as c:
        c.execute("SELECT to_char(created_at AT TIME ZONE 'Europe/Berlin', 'YYYY-MM'), "
                  "count(*), sum(id) FROM monitoring_answer GROUP BY 1 ORDER BY 1")
        months = c.fetchall()
        c.execute("SELECT count(*), sum(answer_id), max(id) FROM monitoring_chunk")
        chunks = c.fetchone()
        c.execute("SELECT count(*), count(*) FILTER (WHERE status = 'pending') "
                  "FROM monitoring_judgerun")
        runs = c.fetchone()
        c.execute("SELECT count(*) FROM monitoring_answerkey")
        keys = c.fetchone()[0]

        c.execute("SELECT max(id) FROM monitoring_answer")
        max_id = c.fetchone()[0]
    print(json.dumps({"months": months, "chunks": chunks, "runs": runs, "keys": keys,
                      "max_id": max_id}, default=str))
""")

AFTER = textwrap.dedent("""
    import django, json
    django.setup()
    from django.db import connection
    from ingest import services
    from monitoring.services.use_cases import service_create, use_case_create
    from monitoring.models import Answer, Service
    from ingest.schemas import AnswerIn
    from monitoring.services import partitions
    service = Service.objects.get(name="bot")
    new = {"external_id": "neu", "use_case": "fall", "question": "Wie oft?",
           "answer": "Alle 5 Jahre.",
           "model": "gpt-4o-mini", "chunks": [{"text": "Abschnitt", "score": 0.9}]}
    created = services.answer_ingest(service=service, payload=AnswerIn.model_validate(new), raw=new)
    old = Answer.objects.get(external_id="a1")
    replay = services.answer_ingest_batch(service=service, items=[{
        "external_id": "a1", "use_case": "fall", "question": old.question, "answer": old.text,
        "model": old.model, "created_at": old.created_at.isoformat(),
        "logprobs": None,
        "chunks": [{"text": c.text, "score": c.score} for c in old.chunks.all()]}])
    with connection.cursor() as c:
        c.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'monitoring_answer'")
        indexes = sorted(r[0] for r in c.fetchall())
        c.execute("SELECT tableoid::regclass::text FROM monitoring_answer WHERE external_id = 'a0'")
        oldest = c.fetchone()[0]
        # 0025 filled each run's use case from its answer.
        c.execute("SELECT count(*), count(*) FILTER (WHERE r.use_case_id = a.use_case_id"
                  " AND r.answer_created_at = a.created_at)"
                  " FROM monitoring_judgerun r JOIN monitoring_answer a ON a.id = r.answer_id")
        runs = c.fetchone()
    print(json.dumps({
        "partitioned": partitions.enabled(), "created": created.outcome.value,
        "created_id": created.answer.pk, "replay": replay[0].outcome.value,
        "replay_id": replay[0].answer.pk if replay[0].answer else None, "old_id": old.pk,
        "indexes": indexes, "oldest_in": oldest,
        "months": len(partitions.partitions("monitoring_answer")), "runs": runs,
    }))
""")


def last_json(output: str) -> dict:
    return json.loads([line for line in output.splitlines() if line.startswith("{")][-1])


def test_the_migration_partitions_a_filled_database_and_keeps_every_row(database, tmp_path):
    # (auth first: its permission names grow to 255 characters only in a later migration)
    run(database, tmp_path, "migrate", "auth", "-v", "0")
    # Just before the partitioning (the fill writes through today's models).
    run(database, tmp_path, "migrate", "monitoring", "0023", "-v", "0")
    run(database, tmp_path, "migrate", "review", "0004", "-v", "0")
    filled = last_json(run(database, tmp_path, script=FILL % {"n": ANSWERS}))
    assert filled["answers"] == ANSWERS
    before = last_json(run(database, tmp_path, script=STATE))
    assert len(before["months"]) >= 15 and before["runs"][1] > 0

    log = run(database, tmp_path, "migrate", "-v", "1")
    report = [line for line in log.splitlines() if "partitioned monitoring_" in line]
    assert len(report) == 2, log[-3000:]
    print("\n" + "\n".join(report))

    after = last_json(run(database, tmp_path, script=STATE))
    assert after == before  # every answer in its month, same ids; chunks, runs, keys
    checked = last_json(run(database, tmp_path, script=AFTER))
    assert checked["partitioned"] is True
    assert checked["created"] == "created" and checked["created_id"] == before["max_id"] + 1
    assert checked["replay"] != "created" and checked["replay_id"] == checked["old_id"]
    assert checked["oldest_in"] == "monitoring_answer_default"
    assert checked["months"] >= 15 + 3
    assert checked["runs"][0] >= before["runs"][0] > 0  # each with its answer's use case:
    assert checked["runs"][1] == checked["runs"][0]
    for name in ("monitoring_answer_pkey", "answer_use_case_time", "answer_dash_judged",
                 "answer_external_id", "answer_retention_due"):
        assert name in checked["indexes"]
