"""`python manage.py import_expert_labels`: expert scores from elsewhere become imported review
submissions that calibration reads like the page's own; bad lines are reported by number and
cost nothing else; a second run imports nothing twice."""

import io
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from monitoring.models import Answer
from review import services
from review.domain.imports import OverlongLine, read_lines
from review.models import ReviewBatch, ReviewItem, ReviewSubmission
from review.selectors import reviews as selectors
from review.selectors.calibration import calibration_data
from tests.review.conftest import GENERATOR, ReviewWorld, shift_week

G, T, U = "GEDECKT", "TEILWEISE", "UNGEDECKT"
WEEK = "2026-W47"  # the answers' week; their review week is the one after


def run(path: Path, *, use_case: str = "recht", reviewer: str = "expertin") -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("import_expert_labels", str(path), use_case=use_case, reviewer=reviewer,
                     stdout=out, stderr=err)
    except CommandError as e:
        err.write(f"CommandError: {e}\n")
    return out.getvalue(), err.getvalue()


def write(tmp_path: Path, lines: list[Any]) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def answers(review_world: ReviewWorld) -> dict[str, Any]:
    w = review_world
    flagged = w.answer("a2", week=WEEK, flagged=True, claims=[("Dritte.", U)])
    # The world samples everything; this one was judged for its flag alone.
    Answer.objects.filter(pk=flagged.pk).update(in_random_sample=False)
    return {
        "a1": w.answer("a1", week=WEEK, claims=[("Erste.", G), ("Zweite.", G)]),
        "a2": flagged,
        "a3": w.answer("a3", week=WEEK, claims=[("Vierte.", G)]),
        "other": w.answer("x1", week=WEEK, use_case=w.other),
    }


def test_scores_and_labels_become_imported_submissions(
    review_world: ReviewWorld, answers: dict[str, Any], tmp_path: Path
) -> None:
    path = write(tmp_path, [
        {"external_id": "a1", "labels": [G, U]},
        {"external_id": "a2", "score": 0.25},
    ])

    out, err = run(path)

    assert err == "" and "recht: 2 imported, 0 already there, 0 refused" in out
    subs = {s.item.answer.external_id: s for s in ReviewSubmission.objects.select_related(
        "item__answer", "item__batch")}
    assert set(subs) == {"a1", "a2"}
    a1, a2 = subs["a1"], subs["a2"]
    assert (a1.manual_score, a1.automatic_score, a1.imported) == (0.5, 1.0, True)
    assert [(v["label"], v["text"]) for v in a1.verdicts] == [(G, "Erste."), (U, "Zweite.")]
    assert (a2.manual_score, a2.automatic_score, a2.verdicts) == (0.25, 0.0, [])
    assert a1.reviewer == review_world.users["expert"]
    review_week = shift_week(WEEK, 1)
    assert {s.item.batch.week for s in subs.values()} == {review_week}
    assert a1.item.stratum == ReviewItem.Stratum.RANDOM
    assert a2.item.stratum == ReviewItem.Stratum.FLAGGED
    batch = a1.item.batch
    assert batch.imported and batch.finished_at is not None

    # Calibration reads them like reviews given on the page (claim labels included).
    data = calibration_data(use_case=review_world.use_case,
                                      now=services._week_start(shift_week(review_week, 1)))
    assert sorted((p.manual, p.automatic) for p in data.points) == [(0.25, 0.0), (0.5, 1.0)]
    assert data.kappa_claims == 2
    # Never in an expert's queue, and the week's own batch is still drawn by beat.
    assert not selectors.batches_for_expert(user=review_world.users["expert"]).filter(
        imported=True).exists()
    own = services.review_batch_create(use_case=review_world.use_case, week=review_week)
    assert own.batch is not None
    assert own.created and not own.batch.imported
    assert ReviewBatch.objects.filter(week=review_week).count() == 2


def test_bad_lines_are_reported_by_number_and_the_rest_is_imported(
    review_world: ReviewWorld, answers: dict[str, Any], tmp_path: Path
) -> None:
    path = write(tmp_path, [
        "{not json",                                      # 1
        {"external_id": "gibt-es-nicht", "score": 1},     # 2
        {"external_id": "x1", "score": 1},                # 3 another use case's answer
        {"external_id": "a1", "score": 1.5},              # 4
        {"external_id": "a1", "score": "hoch"},           # 5
        {"external_id": "a1", "labels": [G]},             # 6 the judge made 2 claims
        {"external_id": "a1", "labels": [G, "JA"]},       # 7
        {"external_id": "a1", "score": 1, "labels": [G, G]},  # 8
        "",                                               # 9 blank: skipped
        {"external_id": "a3", "labels": ["gedeckt"]},     # 10 fine (case is forgiven)
        "[1, 2]",                                         # 11
    ])

    out, err = run(path)

    lines = {int(line.split(":")[0].removeprefix("line ")): line
             for line in err.splitlines() if line.startswith("line ")}
    assert sorted(lines) == [1, 2, 3, 4, 5, 6, 7, 8, 11]
    assert "not valid JSON" in lines[1]
    assert "no answer with external_id 'gibt-es-nicht'" in lines[2]
    assert "another use case" in lines[3]
    assert "1.5 is not between 0 and 1" in lines[4]
    assert "score: a number" in lines[5]
    assert "1 labels for the judge's 2 claims" in lines[6]
    assert "labels[2]: 'JA'" in lines[7]
    assert "either score or labels" in lines[8]
    assert "expected a JSON object" in lines[11]
    assert "1 imported, 0 already there, 9 refused" in out
    assert "CommandError: 9 line(s) refused" in err
    (sub,) = ReviewSubmission.objects.all()
    assert sub.item.answer.external_id == "a3" and sub.manual_score == 1.0


def test_running_the_file_again_imports_nothing_twice(
    review_world: ReviewWorld, answers: dict[str, Any], tmp_path: Path
) -> None:
    path = write(tmp_path, [{"external_id": "a1", "score": 0.5},
                            {"external_id": "a1", "score": 0.75}])  # the same answer twice

    first, _ = run(path)
    again, err = run(path)

    assert "1 imported, 1 already there" in first
    assert "0 imported, 2 already there, 0 refused" in again and err == ""
    assert ReviewSubmission.objects.count() == 1
    assert ReviewItem.objects.count() == 1


def test_an_answer_in_an_open_review_is_left_to_the_experts(
    review_world: ReviewWorld, answers: dict[str, Any], tmp_path: Path
) -> None:
    services.review_batch_create(use_case=review_world.use_case, week=shift_week(WEEK, 1))
    out, err = run(write(tmp_path, [{"external_id": "a1", "score": 1}]))
    assert "open review of week" in err and "0 imported" in out
    assert not ReviewSubmission.objects.exists()


def test_unknown_use_case_reviewer_or_file_is_a_clear_error(
    review_world: ReviewWorld, tmp_path: Path
) -> None:
    path = write(tmp_path, [])
    assert "no use case 'nope'" in run(path, use_case="nope")[1]
    assert "no user 'nobody-here'" in run(path, reviewer="nobody-here")[1]
    assert "cannot read" in run(tmp_path / "missing.jsonl")[1]


def test_a_line_that_is_not_utf8_costs_only_itself(
    review_world: ReviewWorld, answers: dict[str, Any], tmp_path: Path
) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b'{"external_id": "a\xff1", "score": 1}\n{"external_id": "a3", "score": 1}\n')
    out, err = run(path)
    assert "line 1: not UTF-8: byte 0xff at position 19 (save the file as UTF-8)" in err
    assert "1 imported" in out


def test_a_nul_or_a_surrogate_in_an_id_is_refused_and_the_file_goes_on(
    review_world: ReviewWorld, answers: dict[str, Any], tmp_path: Path
) -> None:
    # PostgreSQL refuses a NUL in text: the command stopped with a traceback at such a line,
    # before the lines after it and before its report.
    path = write(tmp_path, [
        '{"external_id": "a1\\u0000", "score": 0.5}',
        '{"external_id": "a1\\ud800", "score": 0.5}',
        {"external_id": "a3", "score": 1},
    ])
    out, err = run(path)
    assert "line 1: external_id: contains a NUL character" in err
    assert "line 2: external_id: contains a NUL character or an unpaired surrogate" in err
    assert "1 imported, 0 already there, 2 refused" in out
    assert ReviewSubmission.objects.get().item.answer.external_id == "a3"


def test_an_overlong_line_is_refused_without_holding_it_in_memory(
    review_world: ReviewWorld, answers: dict[str, Any], tmp_path: Path
) -> None:
    # A 150 MB line took 506 MB of memory before it was refused: the whole line was read first.
    path = tmp_path / "long.jsonl"
    with path.open("wb") as f:
        f.write(b'{"external_id": "a1", "score": 1, "note": "')
        for _ in range(40):
            f.write(b"x" * 1_000_000)
        f.write(b'"}\n{"external_id": "a3", "score": 1}\n')
        f.write(b'{"external_id": "a2", "labels": [' + b'"GEDECKT", ' * 60_000 + b'"GEDECKT"]}')
    tracemalloc.start()
    try:
        out, err = run(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "line 1: line longer than 100000 characters" in err
    assert "line 3: line longer than 100000 characters" in err  # the last line, no newline
    assert "1 imported, 0 already there, 2 refused" in out
    assert peak < 8_000_000, f"{peak / 1e6:.0f} MB held for a 40 MB line"


def test_read_lines_keeps_every_line_up_to_its_limit() -> None:
    stream = io.BytesIO(b"abc\n" + b"y" * 10 + b"\n" + b"z" * 11 + b"\nlast")
    lines = list(read_lines(stream, max_bytes=10))
    assert lines == [b"abc\n", b"y" * 10 + b"\n", OverlongLine(), b"last"]


def test_a_byte_order_mark_is_not_part_of_the_first_line(
    review_world: ReviewWorld, answers: dict[str, Any], tmp_path: Path
) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes('\ufeff{"external_id": "a1", "score": 1}\n'.encode())
    out, err = run(path)
    assert "1 imported, 0 already there, 0 refused" in out and err == ""


def test_a_deactivated_reviewer_is_refused(
    review_world: ReviewWorld, answers: dict[str, Any], tmp_path: Path
) -> None:
    expert = review_world.users["expert"]
    expert.is_active = False
    expert.save(update_fields=["is_active"])
    out, err = run(write(tmp_path, [{"external_id": "a1", "score": 1}]),
                   reviewer=expert.get_username())
    assert f"the user '{expert.get_username()}' is deactivated" in err
    assert not ReviewSubmission.objects.exists()


def test_imported_reviews_put_the_week_on_the_experts_scale(
    review_world: ReviewWorld, answers: dict[str, Any], tmp_path: Path, client: Any
) -> None:
    from dashboard.domain.expert_scale import Review
    from dashboard.domain.expert_weeks import expert_scale_by_week
    from dashboard.selectors import figures as dashboard

    run(write(tmp_path, [{"external_id": "a1", "labels": [G, U]},   # judge 1.0, expert 0.5
                         {"external_id": "a3", "score": 0.75}]))   # judge 1.0, expert 0.75
    until = services._week_start(shift_week(WEEK, 1))
    weeks = dashboard.use_case_weeks(use_case=review_world.use_case, weeks=2, until=until)
    week = weeks[0]
    assert week.label == WEEK
    x = week.expert
    assert x is not None and (x.n_reviews, x.weeks_pooled) == (2, 4)
    # The product's own estimator on the same strata and reviews, by hand.
    strata = [statistics_strata(w) for w in dashboard.use_case_weeks(
        use_case=review_world.use_case, weeks=4, until=services._week_start(WEEK))]
    expected = expert_scale_by_week(
        strata, [[], [], [], [Review(0.5, 1.0, False), Review(0.75, 1.0, False)]])
    assert x.value == pytest.approx(expected.value)
    assert x.value is not None and week.pooled is not None and week.pooled.value is not None
    assert x.value < week.pooled.value  # the experts are stricter than the judge here
    assert x.too_few  # 2 reviews: below a week's batch, the judge's scale stays the headline
    assert not week.headline_on_experts_scale

    client.force_login(review_world.users["lead"])
    data = client.get(f"/api/v1/use-cases/recht/estimates?from={WEEK}&to={WEEK}").json()
    out = data["weeks"][0]["expert_scale"]
    assert out["n_reviews"] == 2 and out["weeks_pooled"] == 4
    assert out["value"] == pytest.approx(x.value) and out["low"] <= out["value"] <= out["high"]


def statistics_strata(week: Any) -> list:
    """The week's [flagged, unflagged] strata as the selector builds them (read back from the
    figures: the same answers, judged in full or drawn)."""
    from dashboard.domain.statistics.cells import Stratum
    from monitoring.models import Answer

    rows = Answer.objects.filter(created_at__gte=week.week.start, created_at__lt=week.week.end,
                                 use_case__slug="recht")
    flagged = [a.score for a in rows if a.flagged and a.score is not None]
    unflagged = [a.score for a in rows if not a.flagged and a.score is not None]
    return [Stratum(max(week.flagged, len(flagged)), flagged, drawn=False),
            Stratum(max(week.volume - week.flagged, len(unflagged)), unflagged, drawn=True)]


def test_an_imported_answer_is_not_drawn_into_the_weeks_own_batch(
    review_world: ReviewWorld, answers: dict[str, Any], tmp_path: Path
) -> None:
    run(write(tmp_path, [{"external_id": "a1", "score": 0.5}]))
    own = services.review_batch_create(use_case=review_world.use_case, week=shift_week(WEEK, 1))
    assert own.batch is not None
    drawn = set(own.batch.items.values_list("answer__external_id", flat=True))
    assert "a1" not in drawn and {"a2", "a3"} <= drawn


@pytest.mark.parametrize("details", [
    "recorded",
    {},  # alarms from before source_week was kept: the week before the key's
    {"source_week": ["2026-W48"]},  # odd details (a hand edit): the key's week instead
    {"source_week": 48},
    {"source_week": "2026-w48"},
    [],
])
def test_a_drift_alarm_restarts_the_experts_scale_from_its_source_week_only(
    review_world: ReviewWorld, answers: dict[str, Any], tmp_path: Path, details: Any
) -> None:
    from alarms.models import Alarm
    from dashboard.selectors import figures as dashboard

    later = shift_week(WEEK, 1)
    review_world.answer("b1", week=later, claims=[("Fünfte.", G)])
    run(write(tmp_path, [{"external_id": "a1", "labels": [G, U]},
                         {"external_id": "a3", "score": 0.75},
                         {"external_id": "b1", "score": 0.5}]))
    until = services._week_start(later)

    def reviews() -> dict[str, int | None]:
        weeks = dashboard.use_case_weeks(use_case=review_world.use_case, weeks=2, until=until)
        assert [w.label for w in weeks] == [WEEK, later]
        return {w.label: w.expert.n_reviews if w.expert else None for w in weeks}

    assert reviews() == {WEEK: 2, later: 3}  # the later week pools both
    # The batch of review week WEEK+2 (the answers of WEEK+1) crossed the CUSUM's limit.
    crossed = shift_week(WEEK, 2)
    Alarm.objects.create(
        use_case=review_world.use_case, kind=Alarm.Kind.DRIFT, key=f"cusum:{crossed}",
        message="Kalibrierungsdrift",
        details={"week": crossed, "source_week": later, "restart": shift_week(crossed, 1)}
        if details == "recorded" else details,
    )
    # WEEK keeps its figure; WEEK+1 starts again from its own reviews.
    assert reviews() == {WEEK: 2, later: 1}
    # A key that names no week restarts nothing (and breaks nothing).
    Alarm.objects.filter(kind=Alarm.Kind.DRIFT).update(key="cusum:0001-W01", details={})
    assert reviews() == {WEEK: 2, later: 3}
    # A bias alarm says the judge is off, not that it changed: nothing restarts.
    Alarm.objects.filter(kind=Alarm.Kind.DRIFT).update(key=f"bias:{crossed}")
    assert reviews() == {WEEK: 2, later: 3}


def test_a_judge_change_restarts_the_experts_scale_from_its_week(
    review_world: ReviewWorld, answers: dict[str, Any], tmp_path: Path, settings: Any
) -> None:
    from dashboard.selectors import figures as dashboard

    later = shift_week(WEEK, 1)
    settings.TREUE_JUDGE_MODEL = "anderer-richter"  # a new judge model from the later week on
    review_world.answer("b1", week=later, claims=[("Fünfte.", G)])
    run(write(tmp_path, [{"external_id": "a1", "labels": [G, U]},
                         {"external_id": "a3", "score": 0.75},
                         {"external_id": "b1", "score": 0.5}]))
    weeks = dashboard.use_case_weeks(use_case=review_world.use_case, weeks=2,
                                     until=services._week_start(later))
    assert [(w.label, w.judge_changed) for w in weeks] == [(WEEK, False), (later, True)]
    # WEEK keeps its figure; the later week pools its own review only (without the change it
    # pools all three: the drift test above).
    assert [w.expert.n_reviews if w.expert else None for w in weeks] == [2, 1]
    later_figure = weeks[1].expert
    assert later_figure is not None and later_figure.weeks_pooled == 1
    # Its correction is the later week's own review, 0.5 − 1.0, not the mean of all three.
    assert later_figure.correction == pytest.approx(-0.5)


def test_a_new_generator_model_restarts_the_experts_scale_from_its_week(
    review_world: ReviewWorld, answers: dict[str, Any], tmp_path: Path
) -> None:
    """Issue 39, point 3: the week a new generator model carries most answers (as the segments
    find it) restarts the pool, as a judge change does; a few answers of another model do
    not."""
    from dashboard.selectors import figures as dashboard

    later = shift_week(WEEK, 1)
    for i in range(3):  # WEEK: six answers of the old model, a clear leader
        review_world.answer(f"x{i + 2}", week=WEEK)
    review_world.answer("b1", week=later, claims=[("Fünfte.", G)], model="neues-modell")
    for i in range(4):
        review_world.answer(f"b{i + 2}", week=later, model="neues-modell")
    run(write(tmp_path, [{"external_id": "a1", "labels": [G, U]},
                         {"external_id": "a3", "score": 0.75},
                         {"external_id": "b1", "score": 0.5}]))

    def reviews() -> list[int | None]:
        weeks = dashboard.use_case_weeks(use_case=review_world.use_case, weeks=2,
                                         until=services._week_start(later))
        assert [w.label for w in weeks] == [WEEK, later]
        assert not any(w.judge_changed for w in weeks)
        return [w.expert.n_reviews if w.expert else None for w in weeks]

    # Five answers of five from the new model: a change; the later week pools its own review.
    assert reviews() == [2, 1]
    # Two of them from the old model after all: no clear leader, no restart.
    Answer.objects.filter(external_id__in=["b4", "b5"]).update(model=GENERATOR)
    assert reviews() == [2, 3]
