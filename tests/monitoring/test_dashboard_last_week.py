"""The team lead's pages on last week's scenario (tests/monitoring/dashboard_world.py): the figures
worked out by hand, the charts, the weekly table, causes and the overview.

The scenario's 70 answers go through the real ingest and judge once for the module
(tests/support/shared_world.py); each test runs in a savepoint and sees them as built.
"""

import dataclasses
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from django.db.models import Sum

from dashboard.domain.statistics import estimates as statistics_estimates
from dashboard.domain.statistics import precision as statistics_precision
from dashboard.selectors import figures as dashboard_figures
from dashboard.selectors import overview as dashboard_overview
from dashboard.selectors import weeks as dashboard_weeks
from judging.domain.batched import BATCHED_PROMPT_VERSION
from judging.domain.single import SINGLE_PROMPT_VERSION
from monitoring.models import Answer, JudgeMode, JudgeRun, UseCase
from tests.monitoring.dashboard_world import (
    BELOW,
    CALLS,
    CLAIMS,
    COST,
    EXPERT,
    JUDGE,
    JUDGES,
    OTHER_JUDGE,
    POOLED,
    WEEK,
    DashWorld,
    build_world,
    client_for,
    de,
    estimate_text,
    figure,
    hand_strata,
    role,
    text_of,
    week_row,
    weekly_table,
)
from tests.support.openai_server import FakeOpenAIServer
from tests.support.shared_world import built_once, read_again
from tests.support.text import found
from tests.support.world import WorldBuilder


@pytest.fixture(scope="module")
def built(
    django_db_setup: None, django_db_blocker: Any,
    _openai_server_of_this_process: FakeOpenAIServer,
) -> Iterator[DashWorld]:
    def build() -> DashWorld:
        world = build_world(WorldBuilder(settings, lambda: _openai_server_of_this_process))
        world.last_week_scenario()
        world.this_week_good()
        return world

    with built_once(django_db_blocker, build) as world:
        yield world


@pytest.fixture
def scenario(built: DashWorld, world_builder: WorldBuilder, db: None) -> DashWorld:
    """Last week's scenario and a good current week in A."""
    return read_again(built, judge=world_builder.judge(built.judge.copy()))


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
    assert cells[COST] == f"{de(float(last.cost), 2)} EUR"
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



def test_weekly_table_totals_sit_under_their_headers(scenario: DashWorld) -> None:
    # Issue 20: a colspan two short put the calls' and the cost's totals two columns left.
    html = client_for(scenario, "lead_a").get("/use-cases/auskunft/").content.decode()
    headers, totals = weekly_table(html)
    assert headers[CALLS] == "Aufrufe" and headers[COST] == "Kosten"
    filled = {column: text for column, text in totals if text}
    weeks = dashboard_figures.use_case_weeks(use_case=scenario.a)
    cost = sum((w.cost for w in weeks), start=Decimal(0))
    assert filled == {WEEK: "Summe", CALLS: str(sum(w.calls for w in weeks)),
                      COST: f"{de(float(cost), 2)} EUR"}
    assert week_row(html, scenario.last_week)[CALLS] == "55"



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
    # The card's light is its headline's (last week's, by the judge), then this week and last.
    headline = dashboard_figures.use_case_headline(weeks)
    assert (headline.scale, headline.view, headline.week) == ("judge", "week",
                                                             scenario.last_week.label)
    assert lights[:2] == [headline.light, headline.light] == [weeks[-2].light] * 2
    assert lights[2:4] == [weeks[-1].light, weeks[-2].light]
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



def test_where_no_single_week_decides_the_pooled_view_sets_the_overview_light(
    scenario: DashWorld,
) -> None:
    weeks = dashboard_figures.use_case_weeks(
        use_case=scenario.a, weeks=dashboard_weeks.OVERVIEW_WEEKS)
    undecided = [dataclasses.replace(w, light="grey", standard_pooled_light="red")
                 for w in weeks]
    row = dashboard_overview.OverviewRow(scenario.a, undecided, [])
    assert (row.light, row.headline.view, row.headline.week) == (
        "red", "pooled", scenario.last_week.label)
    # The running week decides only on its strict interval: amber at 95 % does not.
    running = [*undecided[:-1], dataclasses.replace(undecided[-1], light="amber")]
    assert dashboard_overview.OverviewRow(scenario.a, running, []).light == "red"
    # Last week decided: it is the headline, whatever the pool says.
    decided = [*undecided[:-2], dataclasses.replace(undecided[-2], light="amber"),
               undecided[-1]]
    row = dashboard_overview.OverviewRow(scenario.a, decided, [])
    assert (row.light, row.headline.view) == ("amber", "week")



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

