"""The team lead's pages: the overview (their landing page) and a use case's page.

Answers come in through the real ingest and are judged by the real judge service against the
local OpenAI-compatible server, whose verdicts the tests script. Which unflagged answers the
random draw takes is decided by the same hash as in production; the tests pick external ids so
that exactly the wanted number is drawn. The expected figures are worked out by hand below.

The scenario of last week in use case A (action threshold 0.9, sample rate 0.25):

- 10 flagged answers, all judged: 5 with one UNGEDECKT claim (score 0), 5 with GEDECKT +
  UNGEDECKT (0.5); stratum mean 0.25; 15 claims, 5 supported.
- 40 unflagged answers, 10 drawn and judged with two GEDECKT claims each (1.0).

Stratified estimate (10·0.25 + 40·1.0) / 50 = 0.85; the naive mean of the 20 judged answers,
(2.5 + 10) / 20 = 0.625, must not appear. Claim share (0.2·5/10 + 0.8·20/10) / (0.2·15/10 +
0.8·20/10) = 1.7 / 1.9 = 0.894. Below the threshold: the flagged stratum, 10 / 50 = 20 %.
Flagged share 20 %. Judge calls: a decomposition plus one call per claim, 5·2 + 5·3 + 10·3 = 55.
"""

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from html import unescape
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db.models import Sum
from django.test import Client
from django.utils import timezone, translation

from dashboard.domain.statistics import estimates as statistics_estimates
from dashboard.domain.statistics import precision as statistics_precision
from dashboard.domain.statistics.cells import Estimate, Stratum
from dashboard.selectors import diagnosis as dashboard_diagnosis
from dashboard.selectors import figures as dashboard_figures
from dashboard.selectors import overview as dashboard_overview
from dashboard.selectors import weeks as dashboard_weeks
from dashboard.selectors.weeks import Week, iso_weeks
from dashboard.views.readings import chunks_reading, multi_part_reading, similarity_reading
from ingest import services
from ingest.domain.sampling import random_draw
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from judging.domain.batched import BATCHED_PROMPT_VERSION
from judging.domain.single import SINGLE_PROMPT_VERSION
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, JudgeMode, JudgePrice, JudgeRun, Service, UseCase
from monitoring.services.rollup_rebuild import rollups_check, rollups_rebuild
from tests.support.openai_server import ScriptedJudge
from tests.support.text import found
from tests.support.world import WorldBuilder

G, T, U = "GEDECKT", "TEILWEISE", "UNGEDECKT"
GENERATOR = "gpt-4o-mini"
JUDGE = "judge-x"
OTHER_JUDGE = "judge-y"
PASSWORD = "pw-only-for-tests-77d"
RATE = 0.25
SINGLE = "Wie oft muss der Behälter geprüft werden?"
MULTI = "Wie oft muss der Behälter geprüft werden, und was kostet die Prüfung?"


def logprobs(text: str, flag: bool) -> dict[str, Any]:
    """One token per word, p = 0.99; with `flag`, "Behälter" gets p = 0.05 (flags at 0.5)."""
    content = []
    for piece in re.findall(r"\s*\S+", text):
        p = 0.05 if flag and piece.strip() == "Behälter" else 0.99
        content.append({"token": piece, "logprob": math.log(p), "bytes": list(piece.encode())})
    return {"content": content}


@dataclass
class DashWorld:
    a: UseCase
    b: UseCase
    service: Service
    judge: ScriptedJudge
    users: dict[str, User]
    weeks: list[Week] = field(default_factory=lambda: iso_weeks(weeks=dashboard_weeks.WEEKS))

    @property
    def this_week(self) -> Week:
        return self.weeks[-1]

    @property
    def last_week(self) -> Week:
        return self.weeks[-2]

    def moment(self, week: Week) -> datetime:
        """A moment in the week that has passed: Wednesday noon, or just now in this week."""
        return min(week.start + timedelta(days=2, hours=12), timezone.now() - timedelta(seconds=5))

    def ids(self, prefix: str, drawn: int, not_drawn: int) -> tuple[list[str], list[str]]:
        """External ids of which exactly `drawn` fall in the random sample (same hash as
        ingest), and `not_drawn` that do not."""
        hit: list[str] = []
        miss: list[str] = []
        i = 0
        while len(hit) < drawn or len(miss) < not_drawn:
            external_id = f"{prefix}-{i}"
            i += 1
            if random_draw(str(self.service.pk), external_id) < RATE:
                if len(hit) < drawn:
                    hit.append(external_id)
            elif len(miss) < not_drawn:
                miss.append(external_id)
        return hit, miss

    def answer(
        self, external_id: str, *, week: Week, verdicts: list[str] | None = None,
        flagged: bool = False, use_case: UseCase | None = None, question: str = SINGLE,
        chunk_scores: tuple[float, ...] = (0.85, 0.7),
    ) -> Answer:
        """Ingest an answer created in `week`; if it is sampled, judge it with one claim per
        verdict (an empty list: no claims, an abstention)."""
        use_case = use_case or self.a
        text = f"Antwort {external_id}: Der Behälter wird alle 5 Jahre geprüft."
        body: dict[str, Any] = {
            "external_id": external_id, "use_case": use_case.slug, "question": question,
            "answer": text, "model": GENERATOR,
            "chunks": [{"text": f"Abschnitt {i}", "score": s} for i, s in enumerate(chunk_scores)],
            "logprobs": logprobs(text, flagged),
            "created_at": self.moment(week).isoformat(),
        }
        result = services.answer_ingest(
            service=self.service, payload=AnswerIn.model_validate(body), raw=body
        )
        assert result.outcome == IngestOutcome.CREATED, result.errors
        answer = result.answer
        assert answer is not None
        assert answer.flagged == flagged
        run = answer.judge_runs.filter(status=JudgeRun.Status.PENDING).first()
        if run is not None:
            verdicts = [G] if verdicts is None else verdicts
            claims = [f"{external_id} sagt Punkt {i}." for i in range(len(verdicts))]
            self.judge.claims = claims
            self.judge.verdicts.update(dict(zip(claims, verdicts, strict=True)))
            judge_run_execute(run_id=run.pk)
        answer.refresh_from_db()
        return answer

    def last_week_scenario(self, *, use_case: UseCase | None = None, prefix: str = "lw",
                           week: Any = None) -> None:
        """The scenario of the module docstring, in last week (or `week`)."""
        use_case = use_case or self.a
        week = week or self.last_week
        for i in range(10):
            self.answer(f"{prefix}-f{i}", week=week, flagged=True, use_case=use_case,
                        verdicts=[U] if i < 5 else [G, U], question=MULTI,
                        chunk_scores=tuple([0.45] * 12))
        drawn, rest = self.ids(f"{prefix}-u", 10, 30)
        for external_id in drawn:
            self.answer(external_id, week=week, verdicts=[G, G], use_case=use_case)
        for external_id in rest:
            answer = self.answer(external_id, week=week, use_case=use_case)
            assert not answer.sampled

    def this_week_good(self, *, drawn: int = 12, not_drawn: int = 8, prefix: str = "tw") -> None:
        """This week in A: only unflagged answers, the drawn ones fully supported."""
        hit, miss = self.ids(prefix, drawn, not_drawn)
        for external_id in hit:
            self.answer(external_id, week=self.this_week, verdicts=[G])
        for external_id in miss:
            self.answer(external_id, week=self.this_week)


@pytest.fixture
def world(world_builder: WorldBuilder, db: None) -> DashWorld:
    judge = world_builder.judge(ScriptedJudge())
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=Decimal("0.5"),
                              completion_per_1k=Decimal("2"), currency="EUR")
    a = world_builder.use_case("auskunft", "Auskunft", sample_rate=RATE, action_threshold=0.9)
    b = world_builder.use_case("vertrieb", "Vertrieb", sample_rate=RATE)
    service, _ = world_builder.service("dash-bot", a, b)

    def user(name: str, **extra: Any) -> User:
        return world_builder.user(name, email=f"{name}@example.org", password=PASSWORD, **extra)

    users = {
        "lead_a": user("leitung-a", lead_of=[a]), "lead_b": user("leitung-b", lead_of=[b]),
        "expert_a": user("expertin", expert_of=[a]),
        "staff": user("verwaltung", is_staff=True), "nobody": user("niemand"),
    }
    return DashWorld(a, b, service, judge, users)


def client_for(world: DashWorld, who: str) -> Client:
    client = Client()
    client.force_login(world.users[who])
    return client


def text_of(html: str) -> str:
    html = re.sub(r"<script.*?</script>", " ", html, flags=re.DOTALL)
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()
    return re.sub(r" ([.,;:)])", r"\1", text)


def figure(html: str, element_id: str) -> dict[str, Any]:
    match = re.search(
        rf'<script id="{re.escape(element_id)}" type="application/json">(.*?)</script>', html,
        re.DOTALL,
    )
    assert match, f"json_script {element_id} is on the page"
    return json.loads(match.group(1))


def role(fig: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [t for t in fig["data"] if t["meta"]["role"] == name]
    return found


def de(value: float | None, digits: int = 2) -> str:
    """A number as the German page writes it (floatformat: half up, decimal comma)."""
    from django.template.defaultfilters import floatformat
    from django.utils import translation

    # German whatever language an earlier test's request left active in this thread.
    with translation.override("de"):
        return str(floatformat(value, digits))


def estimate_text(estimate: Estimate) -> str:
    return f"{de(estimate.value)} ({de(estimate.low)}–{de(estimate.high)}) n = {estimate.n}"


@pytest.fixture
def scenario(world: DashWorld) -> DashWorld:
    """Last week's scenario and a good current week in A."""
    world.last_week_scenario()
    world.this_week_good()
    return world


def hand_strata() -> list[Stratum]:
    return [Stratum(10, [0.0] * 5 + [0.5] * 5),
            Stratum(40, [1.0] * 10)]


# The weekly table's columns: the week (the row's header), the week's counts (answers,
# flagged, judged), the estimates, calls, cost and judges.
WEEK, COUNTS, ESTIMATE, POOLED, EXPERT, BELOW, ABSTENTIONS, CLAIMS, CALLS, COST, JUDGES = range(11)


def week_row(html: str, week: Week) -> list[str]:
    row = re.search(rf'<tr data-week="{week.label}"[^>]*>(.*?)</tr>', html, re.DOTALL)
    assert row, f"{week.label} has a row in the table"
    return [text_of(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row.group(1),
                                           re.DOTALL)]


# --- the numbers -------------------------------------------------------------------------------


def test_use_case_figures_and_page_match_the_hand_computation(scenario: DashWorld) -> None:
    """The selector's weekly figures, and the page showing them - never the naive mean."""
    weeks = dashboard_figures.use_case_weeks(use_case=scenario.a)
    assert [w.label for w in weeks] == [w.label for w in scenario.weeks]
    last = weeks[-2]
    assert (last.volume, last.flagged, last.judged) == (50, 10, 20)
    assert (last.judged_flagged, last.judged_unflagged) == (10, 10)
    assert last.flagged_share == pytest.approx(0.2)
    assert last.estimate.value == pytest.approx(0.85)
    assert last.estimate == statistics_estimates.stratified_mean(hand_strata())
    assert last.estimate.n_by_stratum == (10, 10) and last.estimate.population == 50
    assert last.below is not None and last.claims is not None
    assert last.abstention_share is not None
    assert last.below.value == pytest.approx(0.2)
    assert last.claims.value == pytest.approx(1.7 / 1.9)
    assert last.abstention_share.value == 0 and last.abstentions == 0
    assert (last.runs, last.calls) == (20, 55)
    assert [model for model, _ in last.judges] == [JUDGE]
    assert last.cost == JudgeRun.objects.filter(
        answer__use_case=scenario.a, answer__created_at__gte=scenario.last_week.start,
        answer__created_at__lt=scenario.last_week.end,
    ).aggregate(s=Sum("cost"))["s"] > 0
    this = weeks[-1]
    assert (this.volume, this.flagged, this.judged) == (20, 0, 12)
    assert this.estimate.value == 1.0 and not this.estimate.too_few
    assert this.current and not last.current
    assert weeks[0].volume == 0 and weeks[0].estimate.value is None and weeks[0].light == "grey"

    html = client_for(scenario, "lead_a").get("/use-cases/auskunft/").content.decode()
    text = text_of(html)
    assert estimate_text(last.estimate).startswith("0,85 (")
    cells = week_row(html, scenario.last_week)
    assert cells[:3] == [scenario.last_week.label, "50 20,0 % markiert 10 + 10 geprüft",
                         estimate_text(last.estimate)]
    # The pooled view (this week's data only: the weeks before are empty) and no expert scale
    # without reviews.
    assert last.pooled is not None
    assert cells[POOLED] == estimate_text(last.pooled) and cells[EXPERT] == "–"
    below = last.below
    assert below.value is not None and below.low is not None and below.high is not None
    assert cells[BELOW] == (f"{de(below.value * 100, 1)} % "
                        f"({de(below.low * 100, 1)}–{de(below.high * 100, 1)})")
    assert cells[BELOW].startswith("20,0 %")
    assert cells[CLAIMS].startswith("0,89 (") and cells[CLAIMS].endswith("n = 20")
    assert cells[CALLS] == "55"
    assert cells[COST] == de(float(last.cost), 2)
    assert JUDGE in cells[JUDGES]
    assert (f"letzte Woche, laut Prüfmodell ({scenario.last_week.label}) "
            f"{estimate_text(last.estimate)}") in text

    # The naive mean of the judged answers, 0.625, is nowhere: not as a number on the page,
    # not in the chart.
    naive = (5 * 0.0 + 5 * 0.5 + 10 * 1.0) / 20
    assert naive == 0.625 and de(naive) == "0,63"
    shown = re.findall(r'<strong class="estimate-value">([^<]*)</strong>', html)
    assert "0,85" in shown and "0,63" not in shown
    trend = figure(html, "trend-figure")
    values = [v for role_name in ("estimate", "too_few") for v in role(trend, role_name)["y"]
              if v is not None]
    assert sorted(values) == [pytest.approx(0.85), 1.0]
    assert "Das misst die Treue zu den Quellen, nicht die Wahrheit" in text
    assert "nicht der Mittelwert der geprüften Antworten" in text


def test_charts_have_a_point_per_week_the_threshold_and_judge_changes(
    scenario: DashWorld, settings: Any
) -> None:
    settings.TREUE_JUDGE_MODEL = OTHER_JUDGE
    scenario.this_week_good(drawn=1, not_drawn=0, prefix="neu")
    html = client_for(scenario, "lead_a").get("/use-cases/auskunft/").content.decode()
    trend = figure(html, "trend-figure")
    labels = [w.label for w in scenario.weeks]
    line = role(trend, "estimate")
    # One point per week from the first week with answers (last week) on: the 24 empty weeks
    # of the 26-week range before it are not drawn.
    assert len(labels) == dashboard_weeks.WEEKS
    assert line["x"] == labels[-2:], "the x-axis spans the data"
    assert trend["layout"]["xaxis"]["categoryarray"] == labels[-2:]
    # This week (one random answer judged) is undecided: its interval reaches across the
    # line and is wider than 0.10, so it is the grey point, not part of the line.
    assert line["y"][-2] == pytest.approx(0.85) and line["y"][-1] is None
    assert role(trend, "too_few")["y"][-1] == 1.0
    assert [c[0] for c in line["customdata"]][-2:] == [20, 13], "n per point"
    threshold = role(trend, "threshold")
    assert threshold["x"] == [labels[-2], labels[-1]]
    assert threshold["y"] == [0.9, 0.9]
    assert role(trend, "too_few")["y"][:-1] == [None]
    # This week's answers were judged by another model: a marker there, and in the table.
    assert [s["x0"] for s in trend["layout"]["shapes"]] == [scenario.this_week.label]
    [note] = trend["layout"]["annotations"]
    assert note["text"] == "Prüfer gewechselt" and OTHER_JUDGE in note["hovertext"]
    cells = week_row(html, scenario.this_week)
    assert "gewechselt" in cells[JUDGES] and OTHER_JUDGE in cells[JUDGES]
    assert JUDGE in cells[JUDGES]

    shares = figure(html, "shares-figure")
    below, flagged, abstentions = shares["data"][:3]
    assert below["x"] == labels[-2:], "from the first week with data, as the trend"
    assert below["y"][-2] == pytest.approx(0.2)
    assert flagged["y"][-2] == pytest.approx(0.2) and flagged["y"][-1] == 0
    assert abstentions["y"][-2] == 0
    assert '<div class="dash-chart" id="trend-chart" data-dash-figure="trend-figure"' in html
    assert "<script>" not in html and "onload=" not in html, "no inline script"
    assert 'src="/static/vendor/plotly/plotly.min.js"' in html
    assert 'src="/static/js/charts.js"' in html


def weekly_table(html: str) -> tuple[list[str], list[tuple[int, str]]]:
    """The weekly table's header texts, and its totals row as (first column, text) per cell,
    colspans counted."""
    table = found(r'<table class="usage numbers dash-table">(.*?)</table>', html,
                  re.DOTALL).group(1)
    head = found(r"<thead>(.*?)</thead>", table, re.DOTALL).group(1)
    headers = [text_of(c) for c in re.findall(r"<th[^>]*>(.*?)</th>", head, re.DOTALL)]
    foot = found(r"<tfoot>(.*?)</tfoot>", table, re.DOTALL).group(1)
    totals, column = [], 0
    for attrs, cell in re.findall(r"<t[hd]([^>]*)>(.*?)</t[hd]>", foot, re.DOTALL):
        span = re.search(r'colspan="(\d+)"', attrs)
        totals.append((column, text_of(cell)))
        column += int(span.group(1)) if span else 1
    assert column == len(headers), "the totals row is as wide as the table"
    return headers, totals


def test_weekly_table_totals_sit_under_their_headers(scenario: DashWorld) -> None:
    # Issue 20: a colspan two short put the calls' and the cost's totals two columns left.
    html = client_for(scenario, "lead_a").get("/use-cases/auskunft/").content.decode()
    headers, totals = weekly_table(html)
    assert headers[CALLS] == "Aufrufe" and headers[COST] == "Kosten (EUR)"
    filled = {column: text for column, text in totals if text}
    weeks = dashboard_figures.use_case_weeks(use_case=scenario.a)
    cost = sum((w.cost for w in weeks), start=Decimal(0))
    assert filled == {WEEK: "Summe", CALLS: str(sum(w.calls for w in weeks)),
                      COST: de(float(cost), 2)}
    assert week_row(html, scenario.last_week)[CALLS] == "55"


def test_weekly_table_says_when_no_price_is_set_never_zero(world: DashWorld,
                                                           settings: Any) -> None:
    # Issue 20: a week judged by a model without a price showed "0,00 +?"; the cost says
    # "kein Preis hinterlegt", as on the overview and the judge page, in every row and the
    # totals. Where some runs had a price and some not, the sum has "+?".
    JudgePrice.objects.all().delete()
    world.last_week_scenario()
    html = client_for(world, "lead_a").get("/use-cases/auskunft/").content.decode()
    headers, totals = weekly_table(html)
    assert headers[COST] == "Kosten"
    assert week_row(html, world.last_week)[COST] == "kein Preis hinterlegt"
    assert dict(totals)[COST] == "kein Preis hinterlegt"
    table = found(r'<table class="usage numbers dash-table">(.*?)</table>', html,
                  re.DOTALL).group(1)
    assert "0,00" not in text_of(table)
    # This week priced (judge-x has its price again) beside last week's unpriced runs.
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=Decimal("0.5"),
                              completion_per_1k=Decimal("2"), currency="EUR")
    world.this_week_good(drawn=2, not_drawn=0)
    html = client_for(world, "lead_a").get("/use-cases/auskunft/").content.decode()
    this = dashboard_figures.use_case_weeks(use_case=world.a)[-1]
    assert this.cost > 0 and not this.unpriced_runs
    assert week_row(html, world.this_week)[COST] == de(float(this.cost), 2)
    assert week_row(html, world.last_week)[COST] == "kein Preis hinterlegt"
    _, totals = weekly_table(html)
    assert dict(totals)[COST] == f"{de(float(this.cost), 2)} +?"


@pytest.mark.parametrize(("mode", "version", "label"), [
    (JudgeMode.BATCHED, BATCHED_PROMPT_VERSION, "gebündelt"),
    (JudgeMode.SINGLE, SINGLE_PROMPT_VERSION, "ein Aufruf"),
])
def test_a_change_of_judge_mode_is_marked_like_a_change_of_model(
    scenario: DashWorld, mode: str, version: str, label: str
) -> None:
    UseCase.objects.filter(slug="auskunft").update(judge_mode=mode)
    scenario.this_week_good(drawn=1, not_drawn=0, prefix="neu")
    html = client_for(scenario, "lead_a").get("/use-cases/auskunft/").content.decode()
    trend = figure(html, "trend-figure")
    assert [s["x0"] for s in trend["layout"]["shapes"]] == [scenario.this_week.label]
    note = trend["layout"]["annotations"][0]["hovertext"]
    assert f"{JUDGE} {version} ({label})" in note
    cells = week_row(html, scenario.this_week)
    assert "gewechselt" in cells[JUDGES] and label in cells[JUDGES]
    before = week_row(html, scenario.weeks[-2])
    assert "je Aussage" in before[JUDGES] and "gewechselt" not in before[JUDGES]


def test_a_small_week_shows_its_number_and_interval_and_is_grey_only_when_undecided(
    world: DashWorld,
) -> None:
    # Four judged answers of 0.5: few, but the whole interval lies below the line (0.9). The
    # week is shown with its number, band and a red light, not hidden as "too few".
    hit, miss = world.ids("wenig", 4, 6)
    for external_id in hit:
        world.answer(external_id, week=world.last_week, verdicts=[G, U])
    for external_id in miss:
        world.answer(external_id, week=world.last_week)
    week = dashboard_figures.use_case_weeks(use_case=world.a)[-2]
    assert week.estimate.too_few and week.estimate.value == pytest.approx(0.5)
    assert week.estimate.high is not None
    assert week.estimate.high < 0.9 and week.light == "red"
    html = client_for(world, "lead_a").get("/use-cases/auskunft/").content.decode()
    trend = figure(html, "trend-figure")
    assert role(trend, "estimate")["y"][-2] == pytest.approx(0.5)
    assert world.last_week.label in role(trend, "band")["x"]
    assert week_row(html, world.last_week)[ESTIMATE] == estimate_text(week.estimate)
    # One judged answer of 1.0 in a week is undecided (an interval from far below the line to
    # 1): grey, with a sentence saying what would decide it.
    (alone,), quiet = world.ids("allein", 1, 9)
    world.answer(alone, week=world.this_week, verdicts=[G])
    for external_id in quiet:
        world.answer(external_id, week=world.this_week)
    this = dashboard_figures.use_case_weeks(use_case=world.a)[-1]
    assert this.light == "grey" and this.precision is not None and not this.precision.decisive
    html = client_for(world, "lead_a").get("/use-cases/auskunft/").content.decode()
    note = text_of(found(r'<p class="note precision-note">(.*?)</p>', html, re.S).group(1))
    assert note.startswith(f"Unentschieden ({this.label}): das Intervall (±")
    # What would decide it, from the week's own volume and spread: a sample rate and the
    # pooled view, each to ±0.05.
    p = this.precision
    assert p.sample_rate is not None and p.current_rate is not None
    rate = re.search(r"Bei diesem Volumen ergäbe eine Stichprobenrate von ([\d,]+) % \(in "
                     r"dieser Woche geprüft: ([\d,]+) %\) ±0,05\.", note)
    assert rate is not None, note
    assert float(rate.group(1).replace(",", ".")) == pytest.approx(100 * p.sample_rate, abs=0.05)
    assert float(rate.group(2).replace(",", ".")) == pytest.approx(100 * p.current_rate, abs=0.05)
    assert p.sample_rate > p.current_rate  # deciding it takes more than was judged
    pooled = re.search(r"Die 4-Wochen-Sicht ergibt ±(\d,\d\d)\.$", note)
    assert pooled is not None, note
    assert float(pooled.group(1).replace(",", ".")) == pytest.approx(p.pooled_half_width,
                                                                    abs=0.005)
    # The overview's card says the same under the use case's figures.
    overview = client_for(world, "lead_a").get("/overview/").content.decode()
    card = overview[overview.index('data-use-case="auskunft"'):]
    card = card[:card.index("</section>")]
    small = re.search(r'<p class="note precision-note small">(.*?)</p>', card, re.S)
    assert small is not None and text_of(small.group(1)) == note


def test_causes_worth_and_tuner(scenario: DashWorld) -> None:
    html = client_for(scenario, "lead_a").get("/use-cases/auskunft/").content.decode()
    readings = {
        key: text_of(value)
        for key, value in re.findall(r'<p class="reading" data-reading="(\w+)">(.*?)</p>', html,
                                     re.DOTALL)
    }
    # The flagged answers (similarity 0.45, twelve chunks, two-part questions) score 0.25, the
    # rest 1.0: each cause separates them - all three together, so none can take the credit
    # from the others. The page says what is associated, and advises nothing.
    assert readings["similarity"] == (
        "Antworten mit bester Ähnlichkeit unter 0,50 sind zu 25 % treu. Bereinigt um "
        "Abschnittszahl und Frageart ist der Zusammenhang nicht gesichert: daraus folgt noch "
        "keine Schwelle."
    )
    assert "Reranker" not in readings["chunks"]
    assert readings["multi_part"] == (
        "Mehrteilige Fragen werden zu 25 % treu beantwortet, einfache zu 100 %. Bereinigt um "
        "die übrigen Ursachen kein gesicherter Unterschied."
    )
    assert readings["no_passing"] == (
        "10 Antworten wurden gegeben, obwohl kein Abschnitt die Ähnlichkeit 0,50 erreichte; "
        "sie sind zu 25 % treu."
    )
    table = found(r'data-cause="similarity">(.*?)</table>', html, re.DOTALL).group(1)
    rows = [text_of(r) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.DOTALL)][1:]
    assert rows[0] == "< 0,5 10 0,25 (0,25–0,25) n = 10", "judged in full: no sampling error"
    assert rows[1].startswith("0,8–0,9 60 1,00 (")
    bars = figure(html, "similarity-figure")
    # "<" as an entity, which Plotly draws as "<" (tests/domain/test_chart_escaping.py).
    assert role(bars, "estimate")["x"] == ["&lt; 0,5", "0,8–0,9"]
    assert role(bars, "threshold")["y"] == [0.9, 0.9]

    worth = text_of(found(r'<section class="card dash-worth">(.*?)</section>', html,
                          re.DOTALL).group(1))
    assert "untreu unter markierten Antworten 100 % (n = 10)" in worth
    random_sample = Answer.objects.filter(use_case=scenario.a, in_random_sample=True,
                                          status="judged")
    n, bad = random_sample.count(), random_sample.filter(score__lt=0.9).count()
    assert n >= 22
    assert f"untreu in der Zufallsstichprobe {round(100 * bad / n)} % (n = {n})" in worth

    tuner = found(r'<table class="compare numbers tuner-table">(.*?)</table>', html,
                  re.DOTALL).group(1)
    thresholds: list[tuple[str, str, str]] = re.findall(
        r'<tr data-threshold="([^"]+)"( class="current")?>(.*?)</tr>', tuner, re.DOTALL)
    assert [r[0] for r in thresholds] == ["0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7",
                                          "0.8", "0.9"]
    assert [r[0] for r in thresholds if r[1]] == ["0.5"], "the current threshold is highlighted"
    # The flagged answers' lowest content-word probability is 0.05, the others' 0.99: every
    # threshold flags the same 10 of the 70 answers of the window.
    for _, _, row in thresholds:
        cells = [text_of(c) for c in re.findall(r"<td>(.*?)</td>", row, re.DOTALL)]
        assert cells[1] == "14 %"


def test_overview_this_week_and_last(scenario: DashWorld) -> None:
    scenario.last_week_scenario(use_case=scenario.b, prefix="b")
    scenario.a.leaves_unreviewed = True
    scenario.a.save()

    def listed(who: str) -> list[str]:
        html = client_for(scenario, who).get("/overview/").content.decode()
        return sorted(re.findall(r'data-use-case="([\w-]+)"', html))

    assert listed("lead_a") == ["auskunft"]
    assert listed("lead_b") == ["vertrieb"]
    assert listed("staff") == ["auskunft", "vertrieb"]
    assert listed("expert_a") == [], "experts review; the overview is for leads"

    html = client_for(scenario, "lead_a").get("/overview/").content.decode()
    text = text_of(html)
    assert "Vertrieb" not in text
    weeks = dashboard_figures.use_case_weeks(use_case=scenario.a)
    card = text_of(found(r'<section class="card dash-case.*?</section>', html,
                         re.DOTALL).group(0))
    assert f"{estimate_text(weeks[-1].estimate)} {estimate_text(weeks[-2].estimate)}" in card
    assert "markiert 0,0 % 20,0 %" in card
    assert "Antworten 20 50" in card
    assert f"{de(float(weeks[-2].cost))} EUR (55 Aufrufe)" in card
    assert "menschliche Freigabe erforderlich" in card
    lights = re.findall(r'data-light="(\w+)"', html)
    assert lights[1:3] == [weeks[-1].light, weeks[-2].light]
    assert weeks[-2].light == statistics_precision.traffic_light(weeks[-2].estimate, 0.9)
    trend = statistics_precision.trend(weeks[-1].estimate, weeks[-2].estimate)
    assert re.findall(r'data-trend="(\w+)"', html) == [trend] == ["up"]
    chart = figure(html, "overview-figure-0")
    # Of the overview's 8 weeks, the two with answers.
    assert role(chart, "estimate")["x"] == [w.label for w in scenario.weeks[-2:]]
    assert role(chart, "estimate")["y"][-2] == pytest.approx(0.85)
    assert 1.0 in (role(chart, "estimate")["y"][-1], role(chart, "too_few")["y"][-1])
    assert role(chart, "threshold")["y"] == [0.9, 0.9]

    page = text_of(client_for(scenario, "lead_a").get("/use-cases/auskunft/").content.decode())
    assert "Menschliche Freigabe erforderlich. Die Antworten dieses Anwendungsfalls gehen " \
           "ungeprüft nach außen" in page

    # In English the numbers have decimal points, in the page and in the charts.
    client = client_for(scenario, "lead_a")
    client.post("/i18n/setlang/", {"language": "en", "next": "/"})
    html = client.get("/use-cases/auskunft/").content.decode()
    assert '<html lang="en">' in html
    assert figure(html, "trend-figure")["layout"]["separators"] == ".,"
    assert re.search(r'<strong class="estimate-value">0\.85</strong>', html)


def test_cost_without_a_price_says_so_instead_of_zero(world: DashWorld) -> None:
    JudgePrice.objects.all().delete()  # before any run: the runs cost nothing known
    world.last_week_scenario()
    world.this_week_good()
    scenario = world
    weeks = dashboard_figures.use_case_weeks(use_case=scenario.a)
    assert weeks[-2].calls == 55 and weeks[-2].cost == 0 and weeks[-2].unpriced_runs > 0
    card = text_of(found(
        r'<section class="card dash-case.*?</section>',
        client_for(scenario, "lead_a").get("/overview/").content.decode(), re.DOTALL,
    ).group(0))
    # This week and last, each with its calls.
    assert ("Prüfkosten kein Preis hinterlegt (24 Aufrufe) kein Preis hinterlegt "
            "(55 Aufrufe)") in card
    assert "0,00" not in card
    page = text_of(client_for(scenario, "lead_a").get("/use-cases/auskunft/").content.decode())
    assert "Prüfkosten (letzte Woche) kein Preis hinterlegt 55 Aufrufe" in page


def test_light_is_red_only_when_the_whole_interval_is_below(world: DashWorld) -> None:
    # Every answer judged (rate 1): the estimate is exact, 0.25, far below 0.9: red.
    world.a.sample_rate = 1.0
    world.a.save()
    for i in range(12):
        world.answer(f"rot-{i}", week=world.last_week, verdicts=[U] if i % 2 else [G, U])
    last = dashboard_figures.use_case_weeks(use_case=world.a, claims=False)[-2]
    assert last.estimate.high is not None
    assert last.estimate.value == pytest.approx(0.25) and last.estimate.high < 0.9
    assert last.light == "red"
    html = client_for(world, "lead_a").get("/overview/").content.decode()
    assert 'class="card dash-case light-border-red"' in html


# --- who sees what -----------------------------------------------------------------------------


@pytest.mark.parametrize(("who", "url", "status"), [
    ("lead_a", "/use-cases/auskunft/", 200),
    ("lead_a", "/use-cases/vertrieb/", 404),
    ("lead_b", "/use-cases/auskunft/", 404),
    ("lead_b", "/use-cases/vertrieb/", 200),
    ("expert_a", "/use-cases/auskunft/", 200),
    ("expert_a", "/use-cases/vertrieb/", 404),
    ("nobody", "/use-cases/auskunft/", 404),
    ("staff", "/use-cases/vertrieb/", 200),
    ("lead_a", "/use-cases/gibt-es-nicht/", 404),
])
def test_use_case_page_only_for_its_people(world: DashWorld, who: str, url: str,
                                           status: int) -> None:
    assert client_for(world, who).get(url).status_code == status


def test_anonymous_is_sent_to_log_in(world: DashWorld) -> None:
    for url in ("/", "/overview/", "/use-cases/auskunft/"):
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"] == f"/login/?next={url}"


def test_home_sends_leads_to_the_overview_experts_to_their_queue_and_others_to_the_answers(
    world: DashWorld,
) -> None:
    for who in ("lead_a", "staff"):
        response = client_for(world, who).get("/")
        assert (response.status_code, response["Location"]) == (302, "/overview/")
    # An expert's work is the weekly review: the queue, not the answer list.
    response = client_for(world, "expert_a").get("/")
    assert (response.status_code, response["Location"]) == (302, "/review/")
    assert client_for(world, "nobody").get("/").templates[0].name == "monitoring/answer_list.html"
    # "/" with filters was the list's address: old links keep working for everyone.
    for who in ("expert_a", "nobody"):
        response = client_for(world, who).get("/", {"flagged": "1"})
        assert response.status_code == 200
        assert response.templates[0].name == "monitoring/answer_list.html"
    assert client_for(world, "lead_a").get("/answers/").status_code == 200


def test_navigation_offers_the_overview_to_leads_only(world: DashWorld) -> None:
    lead = client_for(world, "lead_a").get("/answers/").content.decode()
    expert = client_for(world, "expert_a").get("/answers/").content.decode()
    assert 'href="/overview/">Übersicht</a>' in lead
    assert 'href="/overview/"' not in expert
    assert '<a class="brand" href="/">Treue</a>' in expert


def test_links_from_the_use_case_page(world: DashWorld) -> None:
    html = client_for(world, "lead_a").get("/use-cases/auskunft/").content.decode()
    assert 'href="/use-cases/auskunft/judge/"' in html
    assert 'href="/answers/?use_case=auskunft"' in html
    assert 'href="/review/calibration/auskunft/"' in html


def test_empty_use_case_renders(world: DashWorld) -> None:
    html = client_for(world, "lead_a").get("/use-cases/auskunft/").content.decode()
    text = text_of(html)
    assert "keine Antworten" in text
    assert "Zu wenige geprüfte Antworten je Ähnlichkeitsstufe für eine Aussage." in text
    trend = figure(html, "trend-figure")
    # No data at all: the current week alone, so the chart still has an axis.
    assert role(trend, "estimate")["x"] == [world.weeks[-1].label]
    overview = client_for(world, "lead_a").get("/overview/")
    assert overview.status_code == 200


# --- the figures ingest stores for the dashboard -------------------------------------------------


def test_ingest_stores_the_tuner_and_multi_part_figures(world: DashWorld) -> None:
    """Single and batch ingest fill min_content_probability (flagged at t iff below t) and
    multi_part; the backfill command fills answers stored before, and only those."""
    from io import StringIO

    from django.core.management import call_command

    single = world.answer("einzeln", week=world.last_week, flagged=True, question=MULTI)
    assert single.min_content_probability == pytest.approx(0.05)
    assert single.multi_part is True
    text = "Antwort stapel: Der Behälter wird alle 5 Jahre geprüft."
    items = [
        {"external_id": "stapel-1", "use_case": "auskunft", "question": SINGLE, "answer": text,
         "model": GENERATOR, "logprobs": logprobs(text, False)},
        {"external_id": "stapel-2", "use_case": "vertrieb", "question": MULTI, "answer": text,
         "model": GENERATOR, "logprobs": None},
    ]
    results = services.answer_ingest_batch(service=world.service, items=items)
    assert [r.outcome for r in results] == [IngestOutcome.CREATED] * 2
    first, second = (Answer.objects.get(external_id=i) for i in ("stapel-1", "stapel-2"))
    assert (first.min_content_probability, first.multi_part) == (pytest.approx(0.99), False)
    assert (second.min_content_probability, second.multi_part) == (None, True)
    assert first.min_content_probability is not None
    assert not first.flagged and first.min_content_probability >= first.logprob_threshold

    # Answers from before the fields existed: NULL, until the backfill computes them (and
    # rebuilds the rollups that counted them without).
    Answer.objects.filter(pk__in=[single.pk, first.pk]).update(
        min_content_probability=None, multi_part=None
    )
    rollups_rebuild()
    out = StringIO()
    call_command("backfill_dashboard_fields", "--batch-size", "1", stdout=out)
    assert out.getvalue().strip().splitlines() == [
        "updated 2 answers", "rebuilt the rollups of 1 use cases"
    ]
    assert rollups_check() == []
    single.refresh_from_db()
    first.refresh_from_db()
    assert (single.min_content_probability, single.multi_part) == (pytest.approx(0.05), True)
    assert (first.min_content_probability, first.multi_part) == (pytest.approx(0.99), False)


@translation.override("de")  # the readings' words; a test before may have left English on
def test_advice_only_where_the_adjusted_association_holds() -> None:
    from dashboard.domain.causes import Adjusted, Bucket, Effect

    def est(value: float) -> Any:
        return Estimate(
            value, value - 0.05, value + 0.05, 40, 100, (20, 20), False)

    def causes_with(*effects: Effect, held_out: bool = True) -> dashboard_diagnosis.Causes:
        return dashboard_diagnosis.Causes(
            similarity=[], cutoff=0.5, similarity_threshold=0.5, chunks=[],
            single=est(0.95), multi=est(0.6), no_passing_chunk=est(0.4), unclassified=0,
            adjusted=Adjusted(effects, 200, False), cutoff_held_out=held_out,
        )

    holding = causes_with(
        Effect("similarity", 0.08, 0.03, 0.13, 0.001, 0.003, True),
        Effect("chunks", -0.06, -0.1, -0.02, 0.002, 0.004, True),
        Effect("multi_part", -0.3, -0.4, -0.2, 0.0, 0.0, True),
    )
    assert "„Weiß ich nicht“ erlauben" in similarity_reading(holding, 0.85)
    assert "ein Reranker ist einen Versuch wert" in chunks_reading(holding, 0.85)
    assert "fehlen die Quellen" in multi_part_reading(holding)
    # Each cause as a difference with its corrected interval, in words that say "associated".
    assert (
        "Bei gleicher übriger Lage geht je 0,1 mehr an bester Ähnlichkeit mit +0,08 Treue "
        "einher (korrigiertes 95-%-Intervall 0,03 bis 0,13)."
    ) in similarity_reading(holding, 0.85)
    reading = multi_part_reading(holding)
    assert (
        "Bei gleicher übriger Lage geht eine mehrteilige statt einer einfachen Frage mit -0,30 "
        "Treue einher (korrigiertes 95-%-Intervall -0,40 bis -0,20)."
    ) in reading
    assert "keine Ursache" in reading and "erfindet" not in reading
    # The association holds, but the cut-off chosen on half of the weeks is not confirmed on
    # the other half: no threshold advised.
    assert holding.adjusted is not None
    unconfirmed = causes_with(*holding.adjusted.effects, held_out=False)
    reading = similarity_reading(unconfirmed, 0.85)
    assert "erlauben" not in reading and "In den übrigen Wochen bestätigt sich" in reading
    # The same dips without an association that survives the correction: no advice.
    weak = causes_with(
        Effect("similarity", 0.08, -0.01, 0.17, 0.03, 0.09, False),
        Effect("chunks", -0.06, -0.15, 0.03, 0.04, 0.09, False),
        Effect("multi_part", -0.3, -0.7, 0.1, 0.03, 0.09, False),
    )
    assert "erlauben" not in similarity_reading(weak, 0.85)
    assert "Reranker" not in chunks_reading(weak, 0.85)
    assert "fehlen die Quellen" not in multi_part_reading(weak)
    assert "-0,70 bis 0,10" in multi_part_reading(weak)  # shown, advising nothing
    # No bucket safely below the line, but a slope that holds: said without a contradiction.
    no_cutoff = dashboard_diagnosis.Causes(
        similarity=[], cutoff=None, similarity_threshold=0.5, chunks=[], single=est(0.95),
        multi=est(0.6), no_passing_chunk=est(0.4), unclassified=0,
        adjusted=holding.adjusted, cutoff_held_out=False,
    )
    buckets = [Bucket("0.5–0.6", 0.5, 0.6, est(0.9)), Bucket("0.6–0.7", 0.6, 0.7, est(0.95))]
    reading = similarity_reading(
        dataclasses.replace(no_cutoff, similarity=buckets), 0.85)
    assert reading.startswith(
        "Keine Ähnlichkeitsstufe liegt sicher unter der Handlungsschwelle von 0,85. Bei "
        "gleicher übriger Lage geht je 0,1 mehr an bester Ähnlichkeit mit +0,08")
    assert "nicht als Zusammenhang erkennbar" not in reading
    assert "nicht als Zusammenhang erkennbar" in similarity_reading(
        dataclasses.replace(no_cutoff, similarity=buckets, adjusted=weak.adjusted), 0.85)
    # Too few to compare the two kinds of question: no adjusted difference either.
    few = dataclasses.replace(holding, multi=Estimate(
        0.6, 0.3, 0.9, 3, 10, (0, 3), True))
    assert multi_part_reading(few) == (
        "Zu wenige geprüfte mehrteilige oder einfache Fragen für einen Vergleich.")
    # An association in the other direction never advises either.
    wrong_way = causes_with(Effect("chunks", 0.06, 0.02, 0.1, 0.001, 0.003, True))
    assert "Reranker" not in chunks_reading(wrong_way, 0.85)


def test_a_cut_off_is_confirmed_only_by_weeks_it_was_not_chosen_on(world: DashWorld) -> None:
    # The dip below similarity 0.5 in one week only: chosen there, not confirmed elsewhere.
    world.last_week_scenario()
    causes = dashboard_diagnosis.use_case_diagnosis(use_case=world.a).causes
    assert causes.cutoff == 0.5 and causes.cutoff_held_out is False
    # The same in the week before: chosen on one half of the weeks, red on the other too.
    world.last_week_scenario(prefix="vw", week=world.weeks[-3])
    causes = dashboard_diagnosis.use_case_diagnosis(use_case=world.a).causes
    assert causes.cutoff == 0.5 and causes.cutoff_held_out is True


def test_where_no_single_week_decides_the_pooled_view_sets_the_overview_light(
    scenario: DashWorld,
) -> None:
    weeks = dashboard_figures.use_case_weeks(
        use_case=scenario.a, weeks=dashboard_weeks.OVERVIEW_WEEKS)
    undecided = [dataclasses.replace(w, light="grey", pooled_light="red") for w in weeks]
    assert dashboard_overview.OverviewRow(scenario.a, undecided, []).light == "red"
    # One decided week: the weeks themselves speak (the more alarming of the two).
    one = [*undecided[:-1], dataclasses.replace(undecided[-1], light="amber")]
    assert dashboard_overview.OverviewRow(scenario.a, one, []).light == "amber"


def test_where_no_single_week_decides_the_use_case_page_leads_with_the_pooled_view(
    world: DashWorld,
) -> None:
    for week, prefix in ((world.last_week, "lw"), (world.this_week, "tw")):
        (alone,), quiet = world.ids(prefix, 1, 9)
        world.answer(alone, week=week, verdicts=[G])
        for external_id in quiet:
            world.answer(external_id, week=week)
    weeks = dashboard_figures.use_case_weeks(use_case=world.a)
    assert weeks[-1].light == weeks[-2].light == "grey"
    lead = client_for(world, "lead_a")
    html = lead.get("/use-cases/auskunft/").content.decode()
    assert html.count('data-week="pooled"') == 1
    assert html.index('data-leads="pooled"') < html.index('data-week="this"')
    note = text_of(found(r'<p class="note pooled-leads-note">(.*?)</p>', html, re.S).group(1))
    assert note.endswith("die Hauptzahl ist die Sammelsicht über 4 Wochen.")
    # The single-week view chosen by hand: nothing pooled to lead with.
    html = lead.get("/use-cases/auskunft/?pooled=1").content.decode()
    assert 'data-leads="pooled"' not in html and "pooled-leads-note" not in html


def test_where_a_week_decides_the_weeks_lead(scenario: DashWorld) -> None:
    weeks = dashboard_figures.use_case_weeks(use_case=scenario.a)
    assert "grey" not in (weeks[-1].light, weeks[-2].light) or weeks[-1].light != weeks[-2].light
    html = client_for(scenario, "lead_a").get("/use-cases/auskunft/").content.decode()
    assert 'data-leads="pooled"' not in html
    assert html.index('data-week="this"') < html.index('data-week="pooled"')


def test_an_estimate_that_rounds_onto_the_threshold_shows_a_third_decimal(
    scenario: DashWorld,
) -> None:
    # Last week's estimate is 0.85 exactly; under a line at 0.853 two decimals would print it
    # as "0,85" beside an amber light saying "below the threshold".
    scenario.a.action_threshold = 0.853
    scenario.a.save(update_fields=["action_threshold"])
    client = client_for(scenario, "lead_a")
    for page in ("/use-cases/auskunft/", "/overview/"):
        html = client.get(page).content.decode()
        assert '<strong class="estimate-value">0,850</strong>' in html, page
    # The weekly table (formatted in the view) says the same.
    html = client.get("/use-cases/auskunft/").content.decode()
    start = html.index('<table class="usage numbers dash-table">')
    table = html[start:html.index("</table>", start)]
    assert '<strong class="estimate-value">0,850</strong>' in table
    scenario.a.action_threshold = 0.9
    scenario.a.save(update_fields=["action_threshold"])
    html = client.get("/use-cases/auskunft/").content.decode()
    assert '<strong class="estimate-value">0,85</strong>' in html
    assert '<strong class="estimate-value">0,850</strong>' not in html


def test_the_pooled_view_is_selectable_on_the_overview_and_the_use_case_page(
    world: DashWorld,
) -> None:
    # Judged answers eight weeks back (all 0.5) and last week (all 1.0): the 13-week view
    # holds both, the 4-week view only last week's.
    old, quiet = world.ids("alt", 4, 6)
    for external_id in old:
        world.answer(external_id, week=world.weeks[-9], verdicts=[G, U])
    for external_id in quiet:
        world.answer(external_id, week=world.weeks[-9])
    new, quiet = world.ids("neu", 4, 6)
    for external_id in new:
        world.answer(external_id, week=world.last_week, verdicts=[G])
    for external_id in quiet:
        world.answer(external_id, week=world.last_week)
    lead = client_for(world, "lead_a")
    user = world.users["lead_a"]
    shown: dict[int, float | None] = {}
    lights: list[tuple[str, str]] = []
    for pooled in (1, 4, 13):
        row = next(r for r in dashboard_overview.overview_rows(user=user, pooled_weeks=pooled)
                   if r.use_case == world.a)
        page_week = dashboard_figures.use_case_weeks(use_case=world.a, pooled_weeks=pooled)[-2]
        assert row.last_week.pooled_weeks == page_week.pooled_weeks == pooled
        assert row.last_week.pooled is not None and page_week.pooled is not None
        assert row.last_week.pooled.value == pytest.approx(page_week.pooled.value)
        shown[pooled] = page_week.pooled.value
        # The card's light (and the order of the cards) follows the 4-week view, as the action
        # alarm does, whichever view is shown.
        lights.append((row.light, row.last_week.standard_pooled_light))
        overview = lead.get("/overview/", {"pooled": pooled}).content.decode()
        label = f"{pooled} Woche{'n' if pooled > 1 else ''}"
        assert '<p class="pooled-choice small">Sammelsicht: ' in overview
        assert f"<strong>{label}</strong>" in overview
        assert f"{label}, Prüfmodell" in overview
        page = lead.get("/use-cases/auskunft/", {"pooled": pooled}).content.decode()
        assert f"<strong>{label}</strong>" in page
    assert len(set(lights)) == 1, lights
    four = dashboard_figures.use_case_weeks(use_case=world.a, pooled_weeks=4)[-2]
    assert lights[0][1] == four.pooled_light
    assert shown[1] == shown[4] == pytest.approx(1.0)  # last week alone, or with empty weeks
    thirteen = shown[13]
    assert thirteen is not None and thirteen < 1.0  # the 0.5s of eight weeks back count too
    for path in ("/overview/", "/use-cases/auskunft/"):
        for bad in ("2", "x", "", "-4", "13.0", "1e1"):
            response = lead.get(path, {"pooled": bad})
            assert response.status_code == 400, (path, bad)
            assert response.content.decode() == "pooled: erlaubt sind 1, 4, 13 Wochen."
