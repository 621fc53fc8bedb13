"""Text from outside is never markup in a chart, checked where it counts: in Chromium, in the
SVG that Plotly draws (issue 21, point 8).

A judge model named with a link, a script and a hover-template expression judges this week's
answers, whose generator model, chunk sources and external ids carry the same; the use case's
name too. The use-case page's judge-change annotation must show that name as text (no `<a>` in
the plot, no dialog, no script error), and so must the judge page and the calibration page.

Plotly decodes only some entities, so the escaping is also checked against plotly.js itself: a
figure built by the domain with the hostile text in every label, week and name is drawn on
the page, hovered, and read back from the SVG.

Screenshots go to var/test/artifacts/ (or $TREUE_VAR_DIR/artifacts).
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import ConsoleMessage, Dialog, Locator, Page, expect

from common.domain.weeks import shift_week
from dashboard.domain import charts
from dashboard.domain.charts import Point
from ingest import services
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, JudgeRun
from review import services as review_services
from tests.browser.test_dashboard_browser import DRAW_TIMEOUT_MS, artifacts_dir, drawn, log_in
from tests.monitoring.dashboard_world import DashWorld, G, logprobs
from tests.monitoring.test_dashboard_pages import world  # noqa: F401  (the fixture)
from tests.review.conftest import ReviewWorld, review_world  # noqa: F401
from tests.review.test_alarms import batch_of, review

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LINK = '<a href="https://evil.example">x</a>'
SCRIPT = "<script>alert(1)</script>"
TEMPLATE = "%{y}"
EVIL = f"{LINK}{SCRIPT}{TEMPLATE}"
EVIL_JUDGE = f"judge {EVIL}"
EVIL_GENERATOR = f"gen {EVIL}"


@dataclass
class Watch:
    """Dialogs (an alert would be a script that ran), script errors and console errors."""

    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def clean(self) -> None:
        assert self.dialogs == [], self.dialogs
        assert self.errors == [], self.errors


@pytest.fixture
def watch(page: Page) -> Iterator[Watch]:
    seen = Watch()
    page.on("dialog", seen.dialog)
    page.on("pageerror", lambda e: seen.errors.append(str(e)))
    page.on("console", seen.console)
    yield seen


def screenshot(page: Page, name: str) -> None:
    path = artifacts_dir() / f"escaping-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 0


# Elements whose link leads to the attacker's host. A link of the site's own that carries the
# hostile text as an escaped query parameter (the segments' "this segment's answers") is not one.
POINTING_AT_EVIL = """root => [...root.querySelectorAll('[href], [*|href]')].filter(e => {
    const target = e.getAttribute('href') || e.getAttribute('xlink:href') || '';
    try { return new URL(target, location.href).hostname.includes('evil.example'); }
    catch (error) { return target.includes('evil.example'); }
}).length"""


def no_link_in_the_plot(chart: Locator) -> None:
    """No `<a>` inside Plotly's SVGs (its modebar buttons are HTML links outside them), and no
    element anywhere pointing at the attacker's site."""
    expect(chart.locator("svg a")).to_have_count(0)
    expect(chart.locator("script")).to_have_count(0)
    assert chart.evaluate(POINTING_AT_EVIL) == 0


def no_link_on_the_page(page: Page) -> None:
    assert page.evaluate(f"() => ({POINTING_AT_EVIL})(document)") == 0


def hostile_answer(world: DashWorld, external_id: str) -> Answer:  # noqa: F811
    """An answer of this week with markup in its external id, generator model and chunk
    sources, flagged (so it is judged), judged with one supported claim."""
    text = "Antwort: Der Behälter wird alle 5 Jahre geprüft."
    body: dict[str, Any] = {
        "external_id": external_id, "use_case": world.a.slug,
        "question": f"Wie oft muss der Behälter geprüft werden? {EVIL}",
        "answer": text, "model": EVIL_GENERATOR,
        "chunks": [{"text": "Prüfintervall: 5 Jahre.", "score": 0.9, "source": f"{EVIL}.pdf"}],
        "logprobs": logprobs(text, True),
        "created_at": world.moment(world.this_week).isoformat(),
    }
    result = services.answer_ingest(
        service=world.service, payload=AnswerIn.model_validate(body), raw=body
    )
    assert result.outcome == IngestOutcome.CREATED, result.errors
    assert result.answer is not None
    run = result.answer.judge_runs.get(status=JudgeRun.Status.PENDING)
    claim = f"Aussage {external_id}."
    world.judge.claims = [claim]
    world.judge.verdicts[claim] = G
    judge_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.SUCCEEDED, run.error
    assert run.judge_model == EVIL_JUDGE
    return result.answer


@pytest.fixture
def hostile(world: DashWorld, settings: Any) -> DashWorld:  # noqa: F811
    """Last week judged by the usual judge; this week by the hostile one: a judge change."""
    drawn_ids, _ = world.ids("lw", 3, 0)
    for external_id in drawn_ids:
        world.answer(external_id, week=world.last_week, verdicts=[G])
    settings.TREUE_JUDGE_MODEL = EVIL_JUDGE
    for i in range(3):
        hostile_answer(world, f"{LINK}{SCRIPT}-{i}")
    world.a.name = f"Auskunft {LINK}"
    world.a.save(update_fields=["name"])
    return world


def test_judge_model_in_the_trend_annotation_is_text_not_a_link(
    page: Page, live_server: Any, hostile: DashWorld, watch: Watch
) -> None:
    base = live_server.url
    log_in(page, base, hostile.users["lead_a"])
    page.goto(base + f"/use-cases/{hostile.a.slug}/", wait_until="commit")
    trend = drawn(page.locator("#trend-chart"))
    note = trend.locator(".annotation-text")
    expect(note).to_have_count(1)
    # A short label above the line; the name, as it came, in its hover, shown literally: the
    # link's markup, the script tag, the "%{y}".
    expect(note).to_have_text("Prüfer gewechselt")
    note.hover()
    expect(trend.locator(".hoverlayer")).to_contain_text(EVIL_JUDGE)
    no_link_in_the_plot(trend)
    for chart_id in ("#shares-chart", "#similarity-chart"):
        no_link_in_the_plot(drawn(page.locator(chart_id)))
    expect(page.get_by_role("heading", name=f"Auskunft {LINK}", exact=True)).to_be_visible()
    no_link_on_the_page(page)
    screenshot(page, "use-case")

    # Plotly itself shows every escaped text literally: a domain figure with the hostile text
    # in its labels, week, series and change, drawn here, hovered and read back.
    figure = charts.trend_figure(
        [Point(f"2026-W01 {EVIL}", 0.9, 0.85, 0.95, 40, False),
         Point("2026-W02", 0.8, 0.7, 0.9, 40, False)],
        threshold=0.85,
        labels={k: f"{k} {EVIL}" for k in ("value", "band", "too_few", "threshold", "y")},
        changes=[(f"2026-W01 {EVIL}", f"Prüfer {EVIL}", f"Prüfer: {EVIL}")],
    )
    shown = page.evaluate("""figure => {
        const el = document.createElement('div');
        el.id = 'escaping-probe';
        el.style.width = '900px';
        document.querySelector('main').prepend(el);
        return window.Plotly.newPlot(el, figure.data, figure.layout, figure.config).then(() => {
            window.Plotly.Fx.hover(el, [{curveNumber: 1, pointNumber: 0}]);
            const texts = sel => Array.from(el.querySelectorAll(sel)).map(t => t.textContent);
            return {
                annotation: texts('.annotation-text'), legend: texts('.legendtext'),
                ticks: texts('.xtick text'), title: texts('.ytitle'),
                hover: texts('.hoverlayer text'),
            };
        });
    }""", json.loads(json.dumps(figure)))
    probe = page.locator("#escaping-probe")
    no_link_in_the_plot(probe)
    assert shown["annotation"] == [f"Prüfer {EVIL}"]
    assert f"value {EVIL}" in shown["legend"] and f"threshold {EVIL}" in shown["legend"]
    assert f"2026-W01 {EVIL}" in shown["ticks"]
    assert shown["title"] == [f"y {EVIL}"]
    hover = " ".join(shown["hover"])
    assert f"2026-W01 {EVIL}" in hover and f"value {EVIL}" in hover, shown["hover"]
    assert "0,90" in hover, "the template's own expressions are still filled in"
    screenshot(page, "probe")
    watch.clean()


def test_judge_page_shows_the_model_names_as_text(
    page: Page, live_server: Any, hostile: DashWorld, watch: Watch
) -> None:
    base = live_server.url
    log_in(page, base, hostile.users["lead_a"])
    page.goto(base + f"/use-cases/{hostile.a.slug}/judge/")
    expect(page.get_by_text(EVIL_JUDGE).first).to_be_visible()
    no_link_on_the_page(page)
    screenshot(page, "judge")
    watch.clean()


@pytest.fixture
def hostile_review(review_world: ReviewWorld, settings: Any) -> ReviewWorld:  # noqa: F811
    """Two weekly batches of answers with markup in their external ids, judged by the hostile
    judge, all reviewed by the expert; the use case's name with a link too."""
    w = review_world
    settings.TREUE_JUDGE_MODEL = EVIL_JUDGE
    current = review_services.current_week()
    judged = [(G,), ("UNGEDECKT",), (G, G)]
    for week, prefix in ((shift_week(current, -1), "p"), (current, "c")):
        items = batch_of(w, judged, week=week, prefix=f"{prefix}{LINK}{SCRIPT}")
        for item, labels in zip(items, judged, strict=True):
            review(item, ("TEILWEISE",) * len(labels), user=w.users["expert"])
    w.use_case.name = f"Recht {LINK}"
    w.use_case.save(update_fields=["name"])
    return w


def test_calibration_charts_carry_no_link(
    page: Page, live_server: Any, hostile_review: ReviewWorld, watch: Watch
) -> None:
    w = hostile_review
    lead: User = w.users["lead"]
    base = live_server.url
    log_in(page, base, lead)
    page.goto(base + f"/review/calibration/{w.use_case.slug}/", wait_until="commit")
    scatter = page.locator("#calibration-scatter")
    bias = page.locator("#bias-chart")
    for chart in (scatter, bias):
        expect(chart.locator(".main-svg").first).to_be_attached(timeout=DRAW_TIMEOUT_MS)
        no_link_in_the_plot(chart)
    expect(scatter.locator(".scatterlayer path.point")).to_have_count(6)
    expect(page.get_by_role("heading", name=f"Kalibrierung: Recht {LINK}")).to_be_visible()
    no_link_on_the_page(page)
    screenshot(page, "calibration")
    watch.clean()
