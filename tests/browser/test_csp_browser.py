"""The Content-Security-Policy in a real browser: every main page loads without a violation.

At 1440 px and on a 375 px phone, a team lead, an expert and an admin open the overview, the
use-case page with its Plotly charts, the answer list and an answer, the judge page, the
calibration page with the experts' submitted reviews and one of them, the investigations, the
review queue and an item, and the admin's service list. No page may report a
`securitypolicyviolation`, log a console error or raise a script error, or be wider than the
window, and the charts must be drawn (Plotly's SVG exists) under the policy.
"""

from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import Page, Response, expect

from monitoring.models import UseCase
from monitoring.services import tuning
from tests.support.world import WorldBuilder
from tests.treue_site.world import World, build_world

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# plotly.min.js is 4-5 MB: on a busy machine the first page that loads it needs longer than the
# browser fixture's default timeout.
DRAW_TIMEOUT_MS = 30_000

# Collects violations from the moment a document starts, before any script of the page runs.
LISTEN = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', e => window.__violations.push(
  e.violatedDirective + ' ' + (e.blockedURI || '') + ' ' + (e.sourceFile || '') + ':' + e.lineNumber
));
"""


# What sticks out past the window's right edge outside a box that scrolls: names the culprit
# when a page is too wide.
WIDER_THAN_THE_WINDOW = """() => {
  const width = document.documentElement.clientWidth;
  const scrolls = el => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(p).overflowX)) return true;
    }
    return false;
  };
  return [...document.querySelectorAll('body *')]
    .filter(el => el.getBoundingClientRect().right > width + 1 && !scrolls(el))
    .slice(0, 5).map(el => el.tagName + '.' + el.className);
}"""


@pytest.fixture
def world(world_builder: WorldBuilder, transactional_db: None) -> World:
    return build_world(world_builder)


def log_in(page: Page, base: str, user: User) -> None:
    client = Client()
    client.force_login(user)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    page.context.add_cookies(
        [{"name": cookie.key, "value": cookie.value, "url": base, "httpOnly": True}]
    )


# Tables that scroll sideways inside their box (the page itself is checked apart).
SCROLLING_TABLES = """() => [...document.querySelectorAll('.table-wrap, .dash-case-body')]
  .filter(w => w.scrollWidth > w.clientWidth + 1)
  .map(w => (w.querySelector('table') || w).className + ' ' + w.scrollWidth + '/' + w.clientWidth)
"""

# Plotly's buttons that would send a chart elsewhere ("Share chart..." uploads it to Plotly
# Cloud, "Edit in Chart Studio" in older versions), and any modebar tooltip still in English.
CLOUD_AND_ENGLISH_BUTTONS = """() => {
  const english = ['Download plot as a PNG', 'Download plot', 'Zoom', 'Pan', 'Zoom in',
                   'Zoom out', 'Autoscale', 'Reset axes', 'Box Select', 'Lasso Select'];
  const titles = [...document.querySelectorAll('.modebar-btn')]
    .map(b => b.getAttribute('data-title') || '');
  return titles.filter(t => /share|cloud|chart studio/i.test(t) || english.includes(t))
    .concat(document.querySelectorAll('[data-title="Edit in Chart Studio"]').length
            ? ['Edit in Chart Studio'] : []);
}"""

# The trend's x-axis as Plotly drew it: within half a week of its first and last week.
TREND_AXIS = """() => {
  const el = document.getElementById('trend-chart');
  const axis = el._fullLayout.xaxis;
  return {range: axis.range, weeks: axis._categories.length};
}"""


class Watch:
    """Console errors, page errors and CSP violations of one page, and every host a request
    goes to (only the test server: no CDN, no Plotly Cloud)."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        self.hosts: set[str] = set()
        page.add_init_script(LISTEN)
        page.on("request", lambda r: self.hosts.add(urlsplit(r.url).netloc))
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        page.on("response", self._response)

    def _response(self, response: Response) -> None:
        if response.status >= 400:
            self.errors.append(f"{response.status} {response.url}")

    def _console(self, message: Any) -> None:
        # A missing icon counts too: every page links one, and /favicon.ico redirects to it.
        if message.type == "error":
            self.errors.append(f"console: {message.text} {message.location}")

    def visit(self, url: str, *, charts: int = 0, tables_fit: bool = False) -> None:
        """Open ``url``: 200 under the policy, no violation or error, nothing wider than the
        window (a table too wide scrolls inside its own box, not the page); with `tables_fit`
        no table scrolls even inside its box. Charts offer no upload and speak German."""
        response = self.page.goto(url, wait_until="commit")
        assert response is not None and response.status == 200, url
        header = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in header, url
        self.check(url, charts=charts, tables_fit=tables_fit)

    def check(self, url: str, *, charts: int = 0, tables_fit: bool = False) -> None:
        """The checks of `visit` on the page as it is (reached by a click or a form)."""
        self.page.wait_for_load_state("load", timeout=DRAW_TIMEOUT_MS)
        if charts:
            svgs = self.page.locator(".plot-container svg.main-svg")
            expect(svgs.nth(charts - 1)).to_be_attached(timeout=DRAW_TIMEOUT_MS)
        violations = self.page.evaluate("window.__violations")
        assert not violations, f"{url}: {violations}"
        assert not self.errors, f"{url}: {self.errors}"
        width = self.page.evaluate("() => window.innerWidth")
        wide = self.page.evaluate(WIDER_THAN_THE_WINDOW)
        assert self.page.evaluate("() => document.documentElement.scrollWidth") <= width, (
            f"{url} at {width} px: {wide}")
        if tables_fit:
            assert self.page.evaluate(SCROLLING_TABLES) == [], f"{url} at {width} px"
        if charts:
            assert self.page.evaluate(CLOUD_AND_ENGLISH_BUTTONS) == [], url


def assert_filters_styled(page: Page) -> None:
    """A filter's select is white at the page's text size, as the form fields elsewhere, not
    the browser's grey at 13.6 px (issue 20)."""
    styles = page.locator(".filters select").evaluate_all(
        "all => all.map(s => [getComputedStyle(s).backgroundColor, getComputedStyle(s).fontSize])"
    )
    assert styles and set(map(tuple, styles)) == {("rgb(255, 255, 255)", "16px")}, styles


@pytest.mark.parametrize("width", [1440, 375])
def test_main_pages_run_under_the_policy(
    page: Page, live_server: Any, world: World, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    base = live_server.url
    watch = Watch(page)
    a, answer = world.a.slug, world.answer_a.pk

    # A long name, as the demo's: a filter's select is as wide as its longest option and
    # must still fit a phone.
    UseCase.objects.filter(pk=world.a.pk).update(
        name="Rechtsauskunft für die Fachabteilungen (Modellwechsel)")
    # A setting changed this week: the weekly table's widest row (its badge) and a note at
    # the trend's last week, which made Plotly widen the axis past the data (issue 20).
    tuning.use_case_tune(use_case=world.a, user=world.users["lead_a"],
                         values={"sample_rate": 0.5}, note="mehr Stichprobe")
    log_in(page, base, world.users["lead_a"])
    # In German, at 1440 px, the overview's cards, the weekly table and the answer list fit
    # without scrolling sideways (issue 20: 1204/1112 px and 1209/1152 px).
    fit = width >= 1440
    watch.visit(f"{base}/overview/", charts=1, tables_fit=fit)
    watch.visit(f"{base}/use-cases/{a}/", charts=3, tables_fit=fit)
    axis = page.evaluate(TREND_AXIS)
    low, high = axis["range"]
    assert -0.5 - 1e-6 <= low and high <= axis["weeks"] - 0.5 + 1e-6, axis
    assert page.locator("#trend-chart .annotation-text").all_text_contents() == [
        "Einstellung geändert"]
    watch.visit(f"{base}/answers/", tables_fit=fit)
    assert_filters_styled(page)
    watch.visit(f"{base}/answers/{answer}/")
    watch.visit(f"{base}/use-cases/{a}/judge/")
    watch.visit(f"{base}/review/calibration/{a}/", charts=2)
    watch.visit(f"{base}/review/calibration/{a}/reviews/")
    watch.visit(f"{base}/review/calibration/{a}/reviews/{world.reviewed_a.pk}/")
    # The judge comparison: its page, the cost shown before it starts, and its figures.
    watch.visit(f"{base}/review/calibration/{a}/judges/")
    page.fill('input[name="judge_model"]', "kandidat-mit-einem-recht-langen-namen-2026-12-04")
    page.locator("form.comparison-form button[type=submit]").click()
    expect(page.locator("h1")).to_have_text("Vergleich bestätigen")
    watch.check("the comparison's cost")
    page.get_by_role("button", name="Ja, vergleichen").click()
    expect(page.locator("table.judge-comparison")).to_be_visible()
    watch.check("a comparison's page")
    watch.visit(f"{base}/investigations/")
    assert_filters_styled(page)
    watch.visit(f"{base}/investigations/new/")
    watch.visit(f"{base}/investigations/{world.investigation_a.pk}/")

    page.context.clear_cookies()
    log_in(page, base, world.users["expert_a"])
    watch.visit(f"{base}/review/")
    watch.visit(f"{base}/review/items/{world.item_a.pk}/")
    # review.js saves as the expert goes: a click runs it under the policy too. The save must
    # land before the cookies go, or it would leave without its CSRF cookie.
    with page.expect_response(lambda r: r.url.endswith("/save/")) as saved:
        page.locator('input[type="radio"]').first.check()
    assert saved.value.status == 200

    # The API docs (Swagger UI from the site's own static files) render under the policy too,
    # for anyone: they list the ingest operations from the schema.
    page.context.clear_cookies()
    watch.visit(f"{base}/api/v1/docs")
    expect(page.get_by_text("/api/v1/answers/batch")).to_be_visible(timeout=DRAW_TIMEOUT_MS)

    log_in(page, base, world.users["superuser"])
    watch.visit(f"{base}/admin/")
    watch.visit(f"{base}/admin/monitoring/service/")
    watch.visit(f"{base}/admin/monitoring/service/{world.service_a.pk}/change/")
    watch.visit(f"{base}/admin/monitoring/usecase/{world.a.pk}/change/")
    assert not page.evaluate("window.__violations")
    assert not watch.errors
    assert watch.hosts == {urlsplit(base).netloc}, "no request leaves the test server"
