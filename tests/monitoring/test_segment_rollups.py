"""The segments in the rollups (issue 40, point 4): ingest (one answer, a batch), judging and a
rescore keep `RollupSegment` / `RollupSegmentScore` equal to a recount; the pages, the
breakdown API and /metrics read the same figures from them as from the raw answers; a key
declared later is counted by its task (and read raw until then), a key undeclared loses its
rows; retention's emptied metadata moves to "none"; a renamed service keeps its answers.
"""

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from dashboard.selectors import rollup_reads
from dashboard.selectors.segment_reads import read_many
from dashboard.selectors.segments import breakdown, segments_view, team_changes
from dashboard.selectors.weeks import iso_weeks
from monitoring import tasks as monitoring_tasks
from monitoring.models import Answer, RollupSegment, RollupSegmentScore, RollupState, UseCase
from monitoring.models.rollups import week_of
from monitoring.services.retention import answers_anonymise
from monitoring.services.rollup_rebuild import rollups_check, rollups_repair
from monitoring.services.segment_rollups import segment_keys_roll
from monitoring.services.use_cases import use_case_declare_segment_keys
from tests.support.judged import Judge, external_id, judged
from tests.support.judged import ingest as ingest_answer

VERDICTS = [
    [("A ist belegt.", "GEDECKT"), ("B ist erfunden.", "UNGEDECKT")],
    [("C ist halb belegt.", "TEILWEISE")],
    [("D ist belegt.", "GEDECKT"), ("E ist belegt.", "GEDECKT")],
    [("G ist erfunden.", "UNGEDECKT")],
]


def _world(world_builder: Any) -> tuple[UseCase, Any, Any, Any]:
    """Nine weeks of a use case that switches its generator model and prompt version in week
    6 and sends a declared `kanal`; a second service; some answers judged."""
    judge = world_builder.judge(Judge())
    use_case = world_builder.use_case("pruefung", "Prüfung", sample_rate=0.5,
                                      action_threshold=0.8)
    use_case_declare_segment_keys(use_case=use_case, keys=["kanal", "sprache"])
    use_case.refresh_from_db()
    service, _ = world_builder.service("pruef-bot", use_case)
    other, _ = world_builder.service("zweit-bot", use_case)
    lead = world_builder.user("leitung", lead_of=[use_case], is_staff=True)
    now = timezone.localtime()
    n = 0
    for back in range(9):
        when = now - timedelta(weeks=back, hours=back)
        new = back < 4
        for k in range(6):
            n += 1
            sender = other if k == 5 else service
            more: dict[str, Any] = {
                "model": "llama-2-7b-chat" if new else "gpt-4o-mini",
                "prompt_version": "v2" if new else "v1",
                "metadata": {"kanal": ["chat", "mail", "telefon"][n % 3],
                             "sprache": [1, True, "de", None][n % 4], "frei": {"x": 1}},
            }
            flagged = n % 4 == 0
            ext = external_id(sender, use_case, f"w{back}-{k}", in_random=n % 3 != 0)
            if flagged or n % 3 != 0:
                judged(judge, sender, use_case, ext, VERDICTS[n % len(VERDICTS)],
                       flagged=flagged, created_at=when, **more)
            else:
                ingest_answer(sender, use_case, ext, f"Antwort {ext}.", created_at=when, **more)
    client = Client()
    client.force_login(lead)
    return use_case, judge, service, client


def _everything(use_case: UseCase, client: Client) -> dict[str, Any]:
    use_case.refresh_from_db()
    weeks = iso_weeks(weeks=9)
    dimensions = ["model", "service", "prompt_version", "source", "metadata.kanal",
                  "metadata.sprache"]
    out: dict[str, Any] = {
        "tallies": {d: (t.segments, t.whole) for d, t in
                    read_many(use_case, weeks, dimensions).items()},
        "view": segments_view(use_case=use_case, weeks=weeks, dimension="metadata.kanal",
                              until_weeks=len(weeks)),
        "breakdown": breakdown(use_case=use_case, dimension="service"),
        "changes": team_changes(use_case=use_case, weeks=weeks),
    }
    for dimension in ("model", "metadata.sprache"):
        response = client.get(f"/api/v1/use-cases/{use_case.slug}/segments",
                              {"dimension": dimension})
        assert response.status_code == 200, response.content
        out[f"api {dimension}"] = response.json()
    metrics = client.get("/metrics")
    assert metrics.status_code == 200
    out["metrics"] = sorted(line for line in metrics.content.decode().splitlines()
                            if line.startswith("treue_week_segment_answers"))
    return out


@pytest.mark.django_db
def test_the_segments_read_the_same_from_the_rollups_as_from_the_answers(world_builder):
    use_case, _, _, client = _world(world_builder)
    assert rollups_check() == []  # the writers kept them
    raw = _everything(use_case, client)
    assert {t.value for t in raw["view"].figures} == {"chat", "mail", "telefon"}
    assert [(c.change.dimension, c.change.after) for c in raw["changes"]] == [
        ("model", "llama-2-7b-chat"), ("prompt_version", "v2")]
    assert {f.value for f in raw["breakdown"]} == {"pruef-bot", "zweit-bot"}
    sprache = {s["value"] for s in raw["api metadata.sprache"]["segments"]}
    assert sprache == {"1", "true", "de", ""}
    assert any('value="llama-2-7b-chat"' in line for line in raw["metrics"])

    call_command("rebuild_rollups", stdout=StringIO())
    assert rollup_reads.rollups_ready()
    assert rollups_check() == []
    from_rollups = _everything(use_case, client)
    for name, value in raw.items():
        assert from_rollups[name] == value, name

    # A changed threshold is applied at reading, on both paths alike.
    use_case.action_threshold = 0.45  # 0.5 is no longer below
    use_case.save()
    changed = _everything(use_case, client)
    assert changed["view"] != from_rollups["view"]
    RollupState.objects.all().delete()
    assert _everything(use_case, client) == changed


@pytest.mark.django_db
def test_the_writers_count_segments_by_id_and_a_rename_keeps_them(world_builder):
    use_case, _, service, client = _world(world_builder)
    week = week_of(timezone.now())
    rows = dict(RollupSegment.objects.filter(use_case=use_case, week=week, flagged=False,
                                             dimension="service").values_list("value",
                                                                              "answers"))
    assert str(service.pk) in rows  # by id, not by name
    assert RollupSegmentScore.objects.filter(dimension="metadata.kanal").exists()
    # An undeclared key's value is no segment; an object under a declared key would be "".
    assert not RollupSegment.objects.filter(dimension="metadata.frei").exists()
    call_command("rebuild_rollups", stdout=StringIO())
    service.name = "pruef-bot-neu"
    service.save()
    names = {f.value for f in breakdown(use_case=use_case, dimension="service")}
    assert names == {"pruef-bot-neu", "zweit-bot"}
    assert rollups_check() == []


@pytest.mark.django_db
def test_a_key_declared_later_is_read_raw_until_its_task_counted_it(world_builder, monkeypatch):
    use_case, _, _, client = _world(world_builder)
    call_command("rebuild_rollups", stdout=StringIO())
    use_case.refresh_from_db()
    assert use_case.segment_keys_rolled == ["kanal", "sprache"]
    published: list[Any] = []
    monkeypatch.setattr("jobs.framework.publish_each",
                        lambda task, items, **kw: published.append((task, list(items))))
    with_raw = _everything(use_case, client)

    # Undeclared: its rows go at once. Declared again: read raw until the task ran.
    use_case_declare_segment_keys(use_case=use_case, keys=["kanal"])
    assert not RollupSegment.objects.filter(dimension="metadata.sprache").exists()
    assert rollups_check() == []
    with django_on_commit():
        use_case_declare_segment_keys(use_case=use_case, keys=["kanal", "sprache"])
    assert published == [("monitoring.tasks.roll_segment_keys", [use_case.pk])]
    use_case.refresh_from_db()
    assert use_case.segment_keys_rolled == ["kanal"]
    assert rollups_check() == []  # the pending key is its task's to count
    assert _everything(use_case, client) == with_raw  # read raw meanwhile

    assert monitoring_tasks.roll_segment_keys(use_case.pk) == ["sprache"]
    use_case.refresh_from_db()
    assert use_case.segment_keys_rolled == ["kanal", "sprache"]
    assert RollupSegment.objects.filter(dimension="metadata.sprache").exists()
    assert rollups_check() == []
    assert _everything(use_case, client) == with_raw
    assert segment_keys_roll(use_case_id=use_case.pk) == []  # nothing left

    # A lost task: the nightly check rolls the key.
    use_case_declare_segment_keys(use_case=use_case, keys=["kanal"])
    use_case_declare_segment_keys(use_case=use_case, keys=["kanal", "sprache"])
    assert rollups_repair() == 0
    use_case.refresh_from_db()
    assert use_case.segment_keys_rolled == ["kanal", "sprache"]
    assert rollups_check() == []


class django_on_commit:
    """Run the on-commit callbacks of the block (the test's transaction never commits)."""

    def __enter__(self) -> None:
        from django.test import TestCase

        self._context = TestCase.captureOnCommitCallbacks(execute=True)
        self._context.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._context.__exit__(*exc)


@pytest.mark.django_db
def test_retention_moves_emptied_metadata_to_none(world_builder):
    use_case, _, _, _ = _world(world_builder)
    call_command("rebuild_rollups", stdout=StringIO())
    old = list(Answer.objects.filter(created_at__lt=timezone.now() - timedelta(weeks=6))
               .values_list("pk", flat=True))
    assert old
    assert answers_anonymise(answer_ids=old) == len(old)
    assert rollups_check() == []
    kanal = {f.value: f.volume for f in breakdown(use_case=use_case, dimension="metadata.kanal",
                                                   weeks=iso_weeks(weeks=9))}
    assert kanal[""] == len(old)


@pytest.mark.django_db
def test_a_score_in_millionths_rounds_as_the_database_does():
    """The writers' `score_micros` and the raw reads' cast to numeric(10, 6) agree on every
    score a judge gives (k of 2n points, n up to 12) and on random ones."""
    import random

    from django.db import connection

    from monitoring.models.segment_rollups import score_micros

    rng = random.Random(7)
    scores = sorted({k / (2 * n) for n in range(1, 13) for k in range(2 * n + 1)}
                    | {rng.random() for _ in range(300)} | {0.0000005, 0.4999995, 1 / 3})
    with connection.cursor() as cursor:
        cursor.execute("SELECT (s::float8::numeric(10, 6) * 1000000)::bigint "
                       "FROM unnest(%s::float8[]) AS s", [scores])
        database = [row[0] for row in cursor.fetchall()]
    assert [score_micros(s) for s in scores] == database
