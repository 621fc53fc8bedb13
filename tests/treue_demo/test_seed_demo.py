"""The demo's story (`treue_demo.data`) and its seed command (`seed_demo`).

The story must give the pages something to show: enough weeks and answers for a light and a
band every week, a healthy use case, one that degrades after week DEGRADES_AFTER on the
annotators' (the experts') scale, a small one, and a judge a little kinder than the experts.
The scores are computed as the product computes them, from RAGTruth's labels: the judge's
through the demo judge's own replies to the real prompts, the experts' through
`expert_score`.

The seed command is run at a few per cent of its volume against a test database, its judge
runs executed against the demo judge server as the worker executes them, and its expert
labels imported through `import_expert_labels`.
"""

import functools
import json
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client, override_settings
from django.utils import timezone

from dashboard.selectors.weeks import iso_weeks
from judging.domain.judge_parse import parse_claims, parse_verdict
from judging.domain.judge_prompt import decompose_messages, format_context, verify_messages
from judging.domain.scoring import score_labels
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, Claim, JudgeMode, JudgePrice, JudgeRun, UseCase
from review.domain.imports import LabelLine, parse_line
from review.models import ReviewSubmission
from treue_demo.answers import DemoAnswer, expert_score, load_answers
from treue_demo.data import (
    DEGRADES_AFTER,
    DEMO_JUDGE_MODEL,
    USE_CASES,
    WEEKS,
    DemoUseCase,
    planned,
)
from treue_demo.judge import DemoJudge
from treue_demo.management.commands.seed_demo import DEMO_EXPERT, DEMO_USER
from treue_demo.server import DemoJudgeServer

# It seeds the whole demo: seconds a test, so the fast part leaves it to CI.
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("demo_app")]

HEALTHY, DEGRADING, SMALL = USE_CASES
SCALE = 0.04  # 16, 10 and 2 answers a week: every path, in seconds


@functools.cache
def _answers() -> dict[str, DemoAnswer]:
    return {a.id: a for a in load_answers()}


@functools.cache
def _judge() -> DemoJudge:
    return DemoJudge(list(_answers().values()))


@functools.cache
def judge_score(row_id: str) -> float:
    """The demo judge's score of a RAGTruth answer: its replies to the judge's own prompts."""
    answer, judge = _answers()[row_id], _judge()
    reply, _ = judge.reply(decompose_messages(question=answer.question, answer=answer.response,
                                              language="en"))
    claims = parse_claims(reply)
    assert claims is not None
    context = format_context(list(answer.passages))
    labels = [parse_verdict(judge.reply(verify_messages(context=context, claim=c,
                                                        language="en"))[0]) for c in claims]
    score = score_labels(labels).score
    assert score is not None
    return score


@functools.cache
def experts_score(row_id: str) -> float:
    return expert_score(_answers()[row_id])


def week_mean(case: DemoUseCase, week: int, score: Callable[[str], float]) -> float:
    return statistics.fmean(score(slot.row["id"]) for slot in planned(case, week))


def test_enough_weeks_and_answers_for_a_light_every_week() -> None:
    assert 12 <= WEEKS <= 16
    assert max(c.per_week for c in USE_CASES) >= 300  # several hundred a week
    assert min(c.per_week for c in USE_CASES) <= 100  # and a small one
    assert all(0.1 <= c.sample_rate <= 0.2 for c in USE_CASES)
    ids: Counter[str] = Counter()
    for case in USE_CASES:
        for week in range(1, WEEKS + 2):
            slots = planned(case, week)
            assert len(slots) == case.per_week
            assert all(0 <= s.offset < 7 * 86400 for s in slots)
            assert all(s.row["model"] in case.phase(week).models for s in slots)
            ids.update(s.external_id for s in slots)
            # Within a week an answer repeats only when its models have no other left.
            pool = sum(1 for a in _answers().values() if a.model in case.phase(week).models)
            assert len({s.row["id"] for s in slots}) == min(len(slots), pool)
    assert max(ids.values()) == 1
    # Seeding again plans the same answers, so it stores nothing twice.
    assert [s.external_id for s in planned(DEGRADING, 3)] == [
        s.external_id for s in planned(DEGRADING, 3)
    ]
    assert [s.row["id"] for s in planned(DEGRADING, 3)] == [
        s.row["id"] for s in planned(DEGRADING, 3)
    ]


def test_the_healthy_use_case_stays_around_0_9() -> None:
    weekly = [week_mean(HEALTHY, w, experts_score) for w in range(1, WEEKS + 2)]
    assert all(0.86 <= m <= 0.94 for m in weekly), weekly
    assert 0.88 <= statistics.fmean(weekly) <= 0.92


def test_the_degrading_use_case_falls_below_the_action_line_after_week_k() -> None:
    """Its truth (the mean of the experts' scores) is healthy up to DEGRADES_AFTER and below
    0.85 after it, falling on."""
    weekly = [week_mean(DEGRADING, w, experts_score) for w in range(1, WEEKS + 2)]
    before, after = weekly[:DEGRADES_AFTER], weekly[DEGRADES_AFTER:]
    assert all(m >= 0.87 for m in before), before
    assert all(m < 0.85 for m in after), after
    assert after[-2] < after[0] - 0.05  # the last whole week against the first bad one
    assert DEGRADES_AFTER + 3 <= WEEKS  # weeks enough after it for a trend


def test_the_demo_judge_is_a_little_kinder_than_the_experts() -> None:
    """So that the expert-scale correction has something to show: a few hundredths, the
    judge's score never below the experts' for any answer."""
    rows = {slot.row["id"] for w in range(1, WEEKS + 2) for slot in planned(HEALTHY, w)}
    judge = statistics.fmean(judge_score(r) for r in rows)
    experts = statistics.fmean(experts_score(r) for r in rows)
    assert 0.01 <= judge - experts <= 0.05, (judge, experts)
    assert all(judge_score(r) >= experts_score(r) for r in rows)


@pytest.fixture
def demo_judge() -> Iterator[DemoJudgeServer]:
    server = DemoJudgeServer(port=0, judge=_judge()).start()
    try:
        with override_settings(TREUE_JUDGE_BASE_URL=server.base_url,
                               TREUE_JUDGE_MODEL=DEMO_JUDGE_MODEL, TREUE_JUDGE_API_KEY="demo"):
            yield server
    finally:
        server.stop()


def seed(**options: object) -> str:
    out = StringIO()
    call_command("seed_demo", stdout=out, stderr=out, **options)
    return out.getvalue()


@pytest.mark.django_db
def test_seed_then_judge_then_import_the_experts_labels(
    demo_judge: DemoJudgeServer, tmp_path: Path
) -> None:
    first = seed(scale=SCALE)
    # The key once, then on every later start where it went and how to get a new one.
    assert "API-Schlüssel des Demo-Dienstes (nur jetzt sichtbar): tr_" in first
    assert "manage.py rotate_service_key demo-rag" in first
    weeks = iso_weeks(weeks=WEEKS + 1)
    now = timezone.now()
    for case in USE_CASES:
        use_case = UseCase.objects.get(slug=case.slug)
        assert use_case.sample_rate == case.sample_rate
        for number, week in enumerate(weeks, start=1):
            stored = Answer.objects.filter(use_case=use_case, created_at__gte=week.start,
                                           created_at__lt=week.end).count()
            expected = round(case.per_week * SCALE)
            if number <= WEEKS:
                assert stored == expected, (case.slug, week.label)
            else:  # the current week, up to now
                assert stored <= expected
        assert not Answer.objects.filter(use_case=use_case, created_at__gte=now).exists()
        assert not Answer.objects.filter(use_case=use_case,
                                         created_at__lt=weeks[0].start).exists()
    total = Answer.objects.count()
    again = seed(scale=SCALE)
    assert "0 neue Antworten" in again  # safe to run again
    assert "nur jetzt sichtbar" not in again
    assert "beim ersten Start gezeigt" in again and "rotate_service_key demo-rag" in again
    assert Answer.objects.count() == total

    runs = list(JudgeRun.objects.filter(status=JudgeRun.Status.PENDING).values_list("pk",
                                                                                    flat=True))
    assert runs
    assert [judge_run_execute(run_id=pk) for pk in runs] == ["scored"] * len(runs)
    # New use cases verify an answer's claims in one call, so the demo shows the judge's
    # evidence (the chunk a verdict rests on, and why) on the answer page.
    assert set(UseCase.objects.values_list("judge_mode", flat=True)) == {JudgeMode.BATCHED}
    scored = JudgeRun.objects.filter(pk__in=runs)
    assert set(scored.values_list("judge_mode", flat=True)) == {JudgeMode.BATCHED}
    # Issue 41, point 6: the demo judge has a price (gpt-4o-mini's, editable), so every run
    # has a cost and no page says "kein Preis hinterlegt".
    assert JudgePrice.objects.filter(judge_model=DEMO_JUDGE_MODEL, currency="USD").exists()
    assert not scored.filter(cost__isnull=True).exists()
    claims = Claim.objects.filter(run__in=scored)
    assert claims.exclude(evidence_chunks=[]).exists() and claims.exclude(reason="").exists()

    out = seed(expert_labels=str(tmp_path))
    assert "refused" not in out.replace("0 refused", "")
    lines: dict[str, LabelLine] = {}
    for case in USE_CASES:
        path = tmp_path / f"{case.slug}.jsonl"
        assert f"import_expert_labels {path} --use-case {case.slug}" in out
        for number, text in enumerate(path.read_text("utf-8").splitlines(), start=1):
            parsed = parse_line(text, number)
            assert isinstance(parsed, LabelLine), parsed
            assert parsed.labels is not None and parsed.score is None
            assert set(json.loads(text)) == {"external_id", "labels"}
            lines[parsed.external_id] = parsed
    assert lines

    imported = ReviewSubmission.objects.filter(imported=True).select_related(
        "item__answer", "item__judge_run", "reviewer")
    assert {s.item.answer.external_id for s in imported} == set(lines)
    reviewed_weeks: Counter[tuple[str, str]] = Counter()
    for submission in imported:
        answer = submission.item.answer
        assert submission.reviewer is not None
        assert submission.reviewer.username == DEMO_EXPERT
        assert answer.in_random_sample  # drawn from the random sample, as a batch draws
        assert len(lines[answer.external_id].labels or ()) == (
            submission.item.judge_run.claims.count())
        assert submission.manual_score == pytest.approx(
            experts_score(answer.metadata["ragtruth_id"]))
        assert submission.manual_score is not None and submission.automatic_score is not None
        assert submission.manual_score <= submission.automatic_score
        week = next(w for w in weeks if w.start <= answer.created_at < w.end)
        reviewed_weeks[(answer.use_case.slug, week.label)] += 1
    # The experts see what the judge let pass: some answers score lower with them.
    # (Both scores are there: the loop above asserted it for each.)
    assert any(s.manual_score is not None and s.automatic_score is not None
               and s.manual_score < s.automatic_score for s in imported)
    # Not last week (this week's batch, reviewed in the browser) nor the current one.
    assert {label for _, label in reviewed_weeks} <= {w.label for w in weeks[:-2]}
    assert max(reviewed_weeks.values()) <= 20

    reimported = StringIO()
    for case in USE_CASES:
        call_command("import_expert_labels", str(tmp_path / f"{case.slug}.jsonl"),
                     use_case=case.slug, reviewer=DEMO_EXPERT, stdout=reimported)
    assert reimported.getvalue().count(" 0 imported") == len(USE_CASES)
    assert ReviewSubmission.objects.filter(imported=True).count() == len(lines)
    assert get_user_model().objects.get(username=DEMO_USER).check_password("treue-demo")

    # What the overview shows the demo's login: for the use cases with reviews in the last four
    # weeks (not the small one, at this scale), the experts' scale beside the judge's, the
    # pooled view and the trend's interval band.
    client = Client()
    client.force_login(get_user_model().objects.get(username=DEMO_USER))
    html = client.get("/overview/").content.decode()
    for case in (HEALTHY, DEGRADING):
        card = html[html.index(f'data-use-case="{case.slug}"'):]
        card = card[:card.index("</section>")]
        assert 'class="row-expert"' in card and "Skala der Fachexperten" in card, case.slug
        pooled = re.search(r'<tr class="row-pooled">(.*?)</tr>', card, re.S)
        assert pooled is not None, case.slug
        shown = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", pooled.group(1)))
        assert re.search(r"\d,\d+ \( ?\d,\d\d–\d,\d\d ?\)", shown), shown  # a value, an interval
        data = re.search(r'<script id="overview-figure-\d+" type="application/json">(.*?)'
                         r"</script>", card, re.S)
        assert data is not None, case.slug
        [band] = [t for t in json.loads(data.group(1))["data"] if t["meta"]["role"] == "band"]
        assert any(y is not None for y in band["y"]), case.slug  # an interval drawn

    # Issue 40: the Kundenservice's switch to another generator model opens its causes and is
    # marked on its trend; the answers carry a channel that the declared key breaks down.
    html = client.get(f"/use-cases/{DEGRADING.slug}/").content.decode()
    causes = html[html.index('class="card dash-causes"'):]
    opening = causes[:causes.index("Die Ursachen aus dem Artikel")]
    assert 'data-reading="team-change"' in opening and "llama-2-7b-chat" in opening, opening
    assert "Generator-Modell gewechselt" in html
    html = client.get(f"/use-cases/{DEGRADING.slug}/?dimension=metadata.kanal").content.decode()
    assert 'data-segment="chat"' in html and 'data-segment="mail"' in html


@pytest.mark.django_db
def test_the_experts_labels_again_import_nothing_twice(
    demo_judge: DemoJudgeServer, tmp_path: Path
) -> None:
    """A second start of the demo (seed_demo --expert-labels again) leaves the experts' reviews
    as they were: a week keeps the batch it was given, also when the first start imported
    before the judge had scored all of them, and no week gets more than a batch."""
    seed(scale=SCALE)
    # A batch smaller than the week's random sample at this scale, so that there are answers
    # left for a second start to take.
    UseCase.objects.update(review_batch_size=2)
    runs = sorted(JudgeRun.objects.filter(status=JudgeRun.Status.PENDING)
                  .values_list("pk", flat=True))
    assert [judge_run_execute(run_id=pk) for pk in runs[::2]] == ["scored"] * len(runs[::2])
    seed(expert_labels=str(tmp_path / "first"))  # before the judge has scored the rest
    first = ReviewSubmission.objects.filter(imported=True).count()
    assert first
    assert [judge_run_execute(run_id=pk) for pk in runs[1::2]] == ["scored"] * len(runs[1::2])

    def per_week() -> Counter[tuple[str, str]]:
        return Counter(ReviewSubmission.objects.filter(imported=True).values_list(
            "item__batch__use_case__slug", "item__batch__week"))

    seed(expert_labels=str(tmp_path / "second"))
    filled = per_week()
    assert max(filled.values()) == 2  # the weeks the first start left short are filled up
    again = seed(expert_labels=str(tmp_path / "third"))
    assert per_week() == filled
    assert again.count(" 0 imported, ") == len(USE_CASES), again
    for case in USE_CASES:  # the same file, so a re-import of it is idempotent as well
        assert ((tmp_path / "second" / f"{case.slug}.jsonl").read_text("utf-8")
                == (tmp_path / "third" / f"{case.slug}.jsonl").read_text("utf-8"))


@pytest.mark.django_db
def test_seeding_checks_each_demo_use_cases_alarms(
    demo_judge: DemoJudgeServer, monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """The demo's alarms are checked when it is seeded, not an hour after the start (the
    checks go to the broker; the worker takes them once it runs)."""
    from jobs import framework

    published: list[tuple[str, list[int]]] = []

    def publish_each(name: str, items: Iterator[int], **_: object) -> int:
        published.append((name, list(items)))
        return 1

    monkeypatch.setattr(framework, "publish_each", publish_each)
    with django_capture_on_commit_callbacks(execute=True):
        seed(scale=SCALE)
    ids = sorted(UseCase.objects.filter(slug__in=[c.slug for c in USE_CASES])
                 .values_list("pk", flat=True))
    for task in ("dashboard.tasks.check_use_case_action_alarms",
                 "review.tasks.check_use_case_review_alarms"):
        assert sorted(i for name, items in published if name == task for i in items) == ids


@pytest.mark.django_db
def test_seeding_prints_the_metrics_token(demo_judge: DemoJudgeServer, settings: Any) -> None:
    """The token scripts/demo.sh gives /metrics is printed with the login, and a scrape with
    it is let in; without one the demo says that /metrics takes a staff login."""
    settings.TREUE_METRICS_TOKEN = ""
    assert "Kein TREUE_METRICS_TOKEN gesetzt" in seed(scale=0.01)
    settings.TREUE_METRICS_TOKEN = "demo-metrik-token-4711"
    out = seed(scale=0.01)
    assert "metrics token (TREUE_METRICS_TOKEN): demo-metrik-token-4711" in out
    line = next(line for line in out.splitlines() if line.startswith("curl "))
    header = re.search(r'-H "Authorization: Bearer (\S+)"', line)
    assert header is not None and header.group(1) == "demo-metrik-token-4711"
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {header.group(1)}")
    assert response.status_code == 200
    assert b'treue_alarms_open{kind="action",use_case="demo-kundenservice"}' in response.content
