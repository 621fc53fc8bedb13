"""Answers and chunks partitioned by month on PostgreSQL (issue 22, point 2): the migrated test
database has a partition per local month around now and a default one; ingest routes each
answer (and its chunks) to its month; ids and idempotency work as before; the beat job creates
the months ahead and moves rows that reached the default partition into their month."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from ingest import services
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from judging.selectors.costs import judge_usage_by_day
from monitoring.models import Answer, AnswerKey, Chunk, UseCase
from monitoring.services import partitions
from monitoring.services.rollup_rebuild import rollups_check, rollups_rebuild

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def world(world_builder) -> Any:
    use_case = world_builder.use_case("monat", "Monat", sample_rate=0.01)
    service, _ = world_builder.service("monat-bot", use_case)
    return service, use_case


def ingest(world: Any, ext: str, created_at: datetime) -> Any:
    service, use_case = world
    body = {
        "external_id": ext, "use_case": use_case.slug, "question": "Wie oft?",
        "answer": "Alle 5 Jahre.", "model": "gpt-4o-mini",
        "chunks": [{"text": "Prüfintervall: 5 Jahre.", "score": 0.8},
                   {"text": "Prüfer: Sachkundige.", "score": 0.6}],
        "created_at": created_at.isoformat(),
    }
    return services.answer_ingest(service=service, payload=AnswerIn.model_validate(body), raw=body)


def partition_of(table: str, pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text FROM {table} WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def chunk_partitions(answer_id: int) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT tableoid::regclass::text FROM monitoring_chunk WHERE answer_id = %s",
            [answer_id],
        )
        return {row[0] for row in cursor.fetchall()}


def test_the_tables_are_partitioned_by_local_month_with_a_default():
    assert partitions.enabled()
    now = timezone.now()
    month = partitions.month_of(now)
    for table, _ in partitions.PARTITIONED:
        have = partitions.partitions(table)
        months = [p.month for p in have if p.month]
        assert have[-1].month is None and have[-1].name == f"{table}_default"
        assert month in months
        ahead = month
        for _ in range(partitions.AHEAD):
            ahead = partitions.next_month(ahead)
        assert ahead in months
    # Bounds at local midnight: a month starts on the 1st, 00:00 in Berlin.
    assert partitions.month_start(month).utcoffset() in (timedelta(hours=1), timedelta(hours=2))


def test_ingest_routes_answers_and_chunks_to_their_month(world):
    zone = timezone.get_current_timezone()
    # Half an hour into a month, Berlin time: still the previous month in UTC.
    start = partitions.month_start(partitions.month_of(timezone.now()))
    early = start + timedelta(minutes=30)
    assert early.astimezone(zone).day == 1 and early.astimezone(UTC).day != 1
    late = start - timedelta(minutes=30)
    first, before = ingest(world, "frueh", early), ingest(world, "spaet", late)
    assert first.outcome == before.outcome == IngestOutcome.CREATED
    this = partitions.partition_name("monitoring_answer", partitions.month_of(early))
    previous = partitions.partition_name("monitoring_answer", partitions.month_of(late))
    assert this != previous
    assert partition_of("monitoring_answer", first.answer.pk) == this
    assert partition_of("monitoring_answer", before.answer.pk) == previous
    assert chunk_partitions(first.answer.pk) == {this.replace("answer", "chunk")}
    # Ids keep rising; the answer reads back with its chunks.
    assert before.answer.pk > first.answer.pk
    answer = Answer.objects.prefetch_related("chunks").get(pk=first.answer.pk)
    assert [c.rank for c in answer.chunks.all()] == [1, 2]

    # Older than any month: the default partition; a replay is still a replay.
    five_years = timezone.now() - timedelta(days=365 * 5)
    old = ingest(world, "alt", five_years)
    assert partition_of("monitoring_answer", old.answer.pk) == "monitoring_answer_default"
    again = ingest(world, "alt", five_years)
    assert again.outcome != IngestOutcome.CREATED
    assert again.answer.pk == old.answer.pk
    assert AnswerKey.objects.filter(external_id="alt").count() == 1


def test_the_batch_path_routes_by_month_too(world):
    service, use_case = world
    now = timezone.now()
    items = [
        {"external_id": f"b{i}", "use_case": use_case.slug, "question": "Wie oft?",
         "answer": "Alle 5 Jahre.", "model": "gpt-4o-mini",
         "chunks": [{"text": "Prüfintervall: 5 Jahre.", "score": 0.8}],
         "created_at": (now - timedelta(days=40 * i)).isoformat()}
        for i in range(4)
    ]
    results = services.answer_ingest_batch(service=service, items=items)
    assert [r.outcome for r in results] == [IngestOutcome.CREATED] * 4
    for r in results:
        assert r.answer is not None
        month = partitions.month_of(r.answer.created_at)
        assert partition_of("monitoring_answer", r.answer.pk) == partitions.partition_name(
            "monitoring_answer", month)
        assert Chunk.objects.get(answer=r.answer).answer_created_at == r.answer.created_at
    replayed = services.answer_ingest_batch(service=service, items=items)
    assert all(r.outcome != IngestOutcome.CREATED for r in replayed)
    assert Answer.objects.filter(service=service).count() == 4


def test_the_beat_creates_months_ahead_and_moves_early_arrivals(world):
    # An answer from a month far back: the default partition holds it.
    long_ago = timezone.now() - timedelta(days=365 * 6)
    old = ingest(world, "uralt", long_ago)
    assert partition_of("monitoring_answer", old.answer.pk) == "monitoring_answer_default"
    month = partitions.month_of(long_ago)
    # The beat as it would have run back then: that month's partition is made and the answer
    # and its chunks move into it, the default keeps nothing of that month.
    created = partitions.partitions_ensure(now=long_ago, ahead=1)
    name = partitions.partition_name("monitoring_answer", month)
    assert name in created and name.replace("answer", "chunk") in created
    assert partition_of("monitoring_answer", old.answer.pk) == name
    assert chunk_partitions(old.answer.pk) == {name.replace("answer", "chunk")}
    assert Answer.objects.get(pk=old.answer.pk).external_id == "uralt"
    # Run again: nothing to do.
    assert partitions.partitions_ensure(now=long_ago, ahead=1) == []
    assert partitions.partitions_ensure() == []  # the months ahead exist since the migration


def test_the_command_lists_and_makes_months_back_for_history(world):
    from io import StringIO

    from django.core.management import CommandError, call_command

    from monitoring import tasks

    first = partitions.partitions("monitoring_answer")[0].month
    assert first is not None
    back = first
    for _ in range(2):
        back = partitions.month_of(partitions.month_start(back) - timedelta(days=1))
    out = StringIO()
    call_command("answer_partitions", "--from", f"{back:%Y-%m}", stdout=out)
    made = [line for line in out.getvalue().splitlines() if line.startswith("created")]
    assert made == [f"created {partitions.partition_name(t, m)}"
                    for m in (back, partitions.next_month(back))
                    for t, _ in partitions.PARTITIONED]
    assert "monitoring_answer: " in out.getvalue() and "default partition" in out.getvalue()
    with pytest.raises(CommandError, match="not a month"):
        call_command("answer_partitions", "--from", "2024-13", stdout=StringIO())
    with pytest.raises(CommandError, match="future"):
        call_command("answer_partitions", "--from", "2999-01", stdout=StringIO())
    assert tasks.ensure_partitions() == []  # the beat's job: every month ahead is there


def _months_back(n: int) -> datetime:
    """The middle of the local month n months before this one."""
    month = partitions.month_of(timezone.now())
    for _ in range(n):
        month = partitions.month_of(partitions.month_start(month) - timedelta(days=1))
    return partitions.month_start(month) + timedelta(days=14)


def test_retention_drops_a_month_only_where_every_use_case_allows_it(world_builder, monkeypatch):
    from dashboard.selectors.figures import use_case_weeks
    from monitoring import extensions
    from monitoring.models import Claim, JudgeRun, RollupSealed
    from monitoring.services import retention
    from tests.support.judged import Judge, judged

    judge = world_builder.judge(Judge())
    deletes = world_builder.use_case("loeschen", "Löschen", sample_rate=1.0)
    keeps = world_builder.use_case("behalten", "Behalten", sample_rate=1.0)
    UseCase.objects.filter(pk=deletes.pk).update(retention_days=60, retention_deletes=True)
    UseCase.objects.filter(pk=keeps.pk).update(retention_days=60)
    service, _ = world_builder.service("bot", deletes, keeps)
    only_deleting, shared, held = (_months_back(n) for n in (6, 5, 4))
    recent = timezone.now() - timedelta(hours=1)
    for i in range(3):
        judged(judge, service, deletes, f"alt-{i}", [("A ist belegt.", "GEDECKT")],
               created_at=only_deleting + timedelta(hours=i))
        judged(judge, service, deletes, f"geteilt-{i}", [("B ist erfunden.", "UNGEDECKT")],
               created_at=shared)
        judged(judge, service, deletes, f"gehalten-{i}", [("C ist belegt.", "GEDECKT")],
               created_at=held)
    judged(judge, service, keeps, "anderer", [("D ist belegt.", "GEDECKT")], created_at=shared)
    judged(judge, service, deletes, "neu", [("E ist belegt.", "GEDECKT")], created_at=recent)
    rollups_rebuild()
    before = use_case_weeks(use_case=deletes, weeks=30)
    usage_before = judge_usage_by_day(use_case=deletes)[1]
    assert usage_before.runs == 10
    assert sum(w.volume for w in before) == 10 and sum(w.judged for w in before) == 10

    # An expert review (say) points at an answer of the "held" month: that month stays.
    month_held = partitions.month_of(held)
    monkeypatch.setitem(extensions.registry.retention_keeps, "test", lambda *, start, end: (
        partitions.month_of(start) == month_held))
    plan = retention.months_drop(dry_run=True)
    assert [(m.month, m.answers, m.runs) for m in plan] == [
        (partitions.month_of(only_deleting), 3, 3)]
    assert Answer.objects.count() == 11  # a dry run drops nothing

    dropped = retention.months_drop()
    assert [m.month for m in dropped] == [partitions.month_of(only_deleting)]
    gone = partitions.partition_name("monitoring_answer", partitions.month_of(only_deleting))
    assert gone not in {p.name for p in partitions.partitions("monitoring_answer")}
    assert not Answer.objects.filter(external_id__startswith="alt-").exists()
    assert not JudgeRun.objects.filter(answer__external_id__startswith="alt-").exists()
    assert Claim.objects.count() == JudgeRun.objects.count() == 8
    assert not AnswerKey.objects.filter(external_id__startswith="alt-").exists()
    assert Answer.objects.count() == 8
    # The dashboards keep the month's figures: its weeks are sealed, the rollups agree.
    assert use_case_weeks(use_case=deletes, weeks=30) == before
    assert RollupSealed.objects.filter(use_case=deletes).exists()
    assert rollups_check() == []
    # The judge page still counts the dropped runs' calls, on the days they were made.
    assert judge_usage_by_day(use_case=deletes)[1] == usage_before
    rollups_rebuild()
    assert use_case_weeks(use_case=deletes, weeks=30) == before
    # The explorer's count (from the day rollups) leaves the dropped month out.
    from dashboard.selectors.answers import answer_count, answer_list

    lead = world_builder.user("leitung", lead_of=[deletes, keeps])
    assert answer_count(user=lead) == answer_list(user=lead).count() == 8
    # Nothing more to drop; the months that stay are anonymised as before.
    assert retention.months_drop() == []
    # A replay of a dropped answer is a new answer.
    again = ingest((service, deletes), "alt-0", only_deleting)
    assert again.outcome == IngestOutcome.CREATED
