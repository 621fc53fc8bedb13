"""The team lead's pages in a real browser: Plotly draws the charts from the json_script data.

A lead logs in and lands on the overview; its small trend chart has a point per judged week
and the dashed action-threshold line at the threshold's height. The use-case page draws the
weekly trend (26 weeks, two of them with answers), the shares and the similarity buckets. Counted
in the rendered SVG, not only in the data handed to Plotly. No page may raise a script error.

A full-page screenshot of each page is kept under var/test/artifacts/ (or $TREUE_VAR_DIR/
artifacts when scripts/test.sh sets it) as a test artifact.
"""

import os
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import Locator, Page, expect

from dashboard.selectors import weeks as dashboard
from monitoring.models import SettingChange, UseCase
from monitoring.services import tuning
from tests.monitoring.dashboard_world import OTHER_JUDGE, DashWorld
from tests.monitoring.test_dashboard_pages import world  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# plotly.min.js is 4-5 MB: the first page that loads it on a busy machine needs longer than the
# browser fixture's 5 s default (deferred scripts hold DOMContentLoaded back). Pages are opened
# without waiting for it, then the charts are.
DRAW_TIMEOUT_MS = 30_000


def artifacts_dir() -> Path:
    var = os.environ.get("TREUE_VAR_DIR") or Path(django_settings.BASE_DIR) / "var" / "test"
    path = Path(var) / "artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path


def screenshot(page: Page, name: str) -> None:
    path = artifacts_dir() / f"dashboard-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 0


def log_in(page: Page, base: str, user: User) -> None:
    """The session cookie of a logged-in user (the login form has its own browser test)."""
    client = Client()
    client.force_login(user)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    page.context.add_cookies(
        [{"name": cookie.key, "value": cookie.value, "url": base, "httpOnly": True}]
    )


def drawn(chart: Locator) -> Locator:
    """Wait until Plotly has drawn into the chart element; return it."""
    expect(chart.locator(".main-svg").first).to_be_attached(timeout=DRAW_TIMEOUT_MS)
    return chart


def traces(chart: Locator) -> list[dict[str, Any]]:
    """Role, x and y of each trace as Plotly holds them after drawing."""
    return chart.evaluate(
        "el => el.data.map(t => ({role: t.meta && t.meta.role, x: t.x, y: t.y}))"
    )


def svg_trace(chart: Locator, index: int) -> Locator:
    """The SVG group of scatter trace `index` (Plotly draws them in data order)."""
    return chart.locator(".scatterlayer .trace").nth(index)


def line_height(chart: Locator, index: int) -> list[float]:
    """The pixel heights of the points of the drawn line of trace `index`."""
    d = svg_trace(chart, index).locator("path.js-line").first.get_attribute("d") or ""
    return [float(y) for y in re.findall(r"[ML][\d.]+,([\d.]+)", d)]


def pixel_of(chart: Locator, value: float) -> float:
    return chart.evaluate(f"el => el._fullLayout.yaxis.l2p({value})")


def axis_range(chart: Locator) -> dict[str, Any]:
    """The x-axis' range as Plotly drew it, and its categories."""
    return chart.evaluate(
        "el => ({range: el._fullLayout.xaxis.range,"
        " categories: el._fullLayout.xaxis._categories.slice()})"
    )


def assert_spans_the_weeks(chart: Locator) -> None:
    """The axis runs from half a week before the first week with data to half a week after
    the last one, no further (issue 20: [-1.10, 19.15] for weeks 0-14)."""
    axis = axis_range(chart)
    low, high = axis["range"]
    n = len(axis["categories"])
    assert n >= 1
    assert -0.5 - 1e-6 <= low and high <= n - 0.5 + 1e-6, axis


def overlapping(chart: Locator, selector: str) -> list[tuple[str, str]]:
    """Pairs of drawn texts among `selector` whose boxes overlap."""
    return chart.evaluate("""(el, selector) => {
        const boxes = [...el.querySelectorAll(selector)]
            .filter(t => t.textContent.trim() && t.getBoundingClientRect().width > 0)
            .map(t => [t.textContent, t.getBoundingClientRect()]);
        const out = [];
        for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
            const [a, r] = boxes[i], [b, q] = boxes[j];
            if (r.left < q.right - 0.5 && q.left < r.right - 0.5 && r.top < q.bottom - 0.5
                && q.top < r.bottom - 0.5) out.push([a, b]);
        }
        return out;
    }""", selector)


def inside(inner: Locator, outer: Locator) -> bool:
    box, frame = inner.bounding_box(), outer.bounding_box()
    assert box is not None and frame is not None
    return (box["x"] >= frame["x"] - 1 and box["y"] >= frame["y"] - 1
            and box["x"] + box["width"] <= frame["x"] + frame["width"] + 1
            and box["y"] + box["height"] <= frame["y"] + frame["height"] + 1)


def test_lead_lands_on_the_overview_and_its_chart_is_drawn(
    page: Page, live_server: Any, world: DashWorld  # noqa: F811
) -> None:
    world.last_week_scenario()
    world.this_week_good()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    base = live_server.url
    log_in(page, base, world.users["lead_a"])
    page.goto(base + "/", wait_until="commit")
    expect(page).to_have_url(base + "/overview/")
    expect(page.get_by_role("heading", name="Übersicht", exact=True)).to_be_visible()
    card = page.locator("section.dash-case")
    expect(card).to_have_count(1)
    expect(card.get_by_role("heading")).to_have_text("Auskunft")
    expect(card.locator(".row-estimate td[data-week='last'] .estimate-value")).to_have_text("0,85")

    chart = drawn(page.locator("#overview-chart-0"))
    data = traces(chart)
    roles = [t["role"] for t in data]
    assert roles[:4] == ["band", "estimate", "too_few", "threshold"]
    assert set(roles[4:]) <= {"overlay"}, "the pooled view (and the experts' scale) on top"
    estimate, undecided = data[1], data[2]
    # One point per week, from the first week with answers on (of the overview's eight).
    assert len(estimate["x"]) == 2 < dashboard.OVERVIEW_WEEKS, "the x-axis spans the data"
    shown = [a is not None or b is not None for a, b in zip(estimate["y"], undecided["y"],
                                                              strict=True)]
    assert shown == [True, True]
    # Drawn: a marker for each week on the line (decided), none for the empty ones.
    decided = sum(y is not None for y in estimate["y"])
    assert decided >= 1
    expect(svg_trace(chart, 1).locator("path.point")).to_have_count(decided)
    # The threshold line, dashed, at the height of 0.9.
    threshold = data[3]
    assert threshold["y"] == [0.9, 0.9]
    heights = line_height(chart, 3)
    assert len(heights) == 2 and heights[0] == pytest.approx(heights[1])
    assert heights[0] == pytest.approx(pixel_of(chart, 0.9), abs=1)
    dash = svg_trace(chart, 3).locator("path.js-line").first.evaluate(
        "p => getComputedStyle(p).strokeDasharray"
    )
    assert dash not in ("", "none")
    screenshot(page, "overview")
    assert errors == []

    # On a phone the cards' week tables scroll inside their card, not the page.
    page.set_viewport_size({"width": 375, "height": 800})
    page.reload()
    expect(card).to_be_visible()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 375


def test_use_case_page_draws_trend_shares_and_causes(
    page: Page, live_server: Any, world: DashWorld  # noqa: F811
) -> None:
    world.last_week_scenario()
    world.this_week_good()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    base = live_server.url
    log_in(page, base, world.users["lead_a"])
    page.goto(base + "/overview/", wait_until="commit")
    with page.expect_navigation(wait_until="commit"):
        page.get_by_role("link", name="Auskunft").click()
    expect(page).to_have_url(base + "/use-cases/auskunft/")
    expect(page.get_by_role("heading", name="Auskunft", exact=True)).to_be_visible()

    trend = drawn(page.locator("#trend-chart"))
    data = traces(trend)
    assert [t["role"] for t in data][:4] == ["band", "estimate", "too_few", "threshold"]
    assert data[1]["x"] == [w.label for w in world.weeks][-2:], "the x-axis spans the data"
    assert data[1]["y"][-2] == pytest.approx(0.85)
    assert 1.0 in (data[1]["y"][-1], data[2]["y"][-1])  # on the line, or undecided (grey)
    decided = sum(y is not None for y in data[1]["y"])
    expect(svg_trace(trend, 1).locator("path.point")).to_have_count(decided)
    undecided = sum(y is not None for y in data[2]["y"])
    expect(svg_trace(trend, 2).locator("path.point")).to_have_count(undecided)
    assert decided + undecided == 2
    # Every drawn point carries its interval as whiskers: an error bar per point, drawn.
    whiskers = trend.evaluate("el => el.data.slice(1, 3).map(t => t.error_y)")
    for trace_data, error in zip(data[1:3], whiskers, strict=True):
        for y, up, down in zip(trace_data["y"], error["array"], error["arrayminus"],
                               strict=True):
            assert (y is None) == (up is None) == (down is None)
    expect(svg_trace(trend, 1).locator("g.errorbar path.yerror")).to_have_count(decided)
    expect(svg_trace(trend, 2).locator("g.errorbar path.yerror")).to_have_count(undecided)
    # The estimate's line joins the decided weeks; the band is drawn around both.
    assert len(line_height(trend, 1)) == decided
    expect(svg_trace(trend, 0).locator("path.js-fill")).to_have_count(1)
    assert data[3]["y"] == [0.9, 0.9]
    heights = line_height(trend, 3)
    assert heights[0] == pytest.approx(heights[1])
    assert heights[0] == pytest.approx(pixel_of(trend, 0.9), abs=1)
    # The estimate's point of last week lies below the threshold line (0.85 < 0.9: further
    # down, a larger pixel height).
    assert line_height(trend, 1)[0] > heights[0]
    expect(trend.locator(".legendtext")).to_contain_text(
        ["95-%-Intervall", "Treue laut Prüfmodell", "unentschieden", "Handlungsschwelle",
         "4 Wochen, Prüfmodell"]
    )

    shares = drawn(page.locator("#shares-chart"))
    assert [t["role"] for t in traces(shares)] == ["share", "share", "share"]
    expect(svg_trace(shares, 0).locator("path.point")).to_have_count(2)
    expect(svg_trace(shares, 1).locator("path.point")).to_have_count(2)
    # The estimated shares (below the threshold, abstentions) draw their intervals as the
    # table gives them, a whisker per point; the flagged share is counted and has none.
    errors_y = shares.evaluate("el => el.data.map(t => t.error_y ? t.error_y.array : null)")
    assert errors_y[1] is None
    for index in (0, 2):
        expect(svg_trace(shares, index).locator("g.errorbar path.yerror")).to_have_count(
            sum(v is not None for v in errors_y[index]))
    assert sum(v is not None for v in errors_y[0]) == 2
    for chart in (trend, shares):
        assert_spans_the_weeks(chart)

    bars = drawn(page.locator("#similarity-chart"))
    bar_data = traces(bars)
    assert bar_data[0]["x"] == ["&lt; 0,5", "0,8–0,9"], "escaped in the data, as all labels"
    expect(bars.locator(".xtick text")).to_have_text(["< 0,5", "0,8–0,9"])
    expect(bars.locator(".barlayer .point")).to_have_count(2)
    assert bar_data[1]["role"] == "threshold" and bar_data[1]["y"] == [0.9, 0.9]
    # The chart's buckets are the table's rows, in the same order.
    rows = page.locator("table[data-cause='similarity'] tbody tr td:first-child")
    expect(rows).to_have_text(["< 0,5", "0,8–0,9"])

    expect(page.locator("p.reading[data-reading='similarity']")).to_contain_text(
        "Antworten mit bester Ähnlichkeit unter 0,50 sind zu 25 % treu"
    )
    expect(page.locator("table.tuner-table tr.current")).to_have_attribute("data-threshold", "0.5")
    screenshot(page, "use-case")
    assert errors == []

    # On a phone: nothing wider than the screen, and the trend's legend inside its chart.
    page.set_viewport_size({"width": 375, "height": 800})
    page.reload(wait_until="commit")
    trend = drawn(page.locator("#trend-chart"))
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 375
    chart_box = trend.bounding_box()
    legend_box = trend.locator(".legend").bounding_box()
    assert chart_box is not None and legend_box is not None
    assert legend_box["x"] + legend_box["width"] <= chart_box["x"] + chart_box["width"] + 1
    # The weekly table scrolls inside its box, its week column staying in view (sticky).
    wrap = page.locator(".table-wrap:has(table.dash-table)")
    assert wrap.evaluate("w => w.scrollWidth > w.clientWidth"), "wider than a phone"
    week = wrap.locator("tbody tr th").first
    before = week.bounding_box()
    wrap.evaluate("w => { w.scrollLeft = w.scrollWidth; }")
    assert wrap.evaluate("w => w.scrollLeft") > 100
    after = week.bounding_box()
    assert before is not None and after is not None
    assert after["x"] == pytest.approx(before["x"], abs=1), "the week stays where it was"
    screenshot(page, "use-case-375")
    assert errors == []


@pytest.mark.parametrize("width", [1440, 375])
def test_trend_axis_spans_the_weeks_with_a_setting_and_a_judge_change(
    page: Page, live_server: Any, world: DashWorld, settings: Any, width: int  # noqa: F811
) -> None:
    """Issue 20: after a setting change the note at the last week, centred and 524 px long,
    made Plotly widen the axis to [-1.10, 19.15] for weeks 0-14 and was cut off on a phone.
    Here last week's sample rate changed and this week's answers have a new judge: two notes,
    short, inside the chart, their details in the hover, and the axis on the weeks."""
    world.last_week_scenario()
    [change] = tuning.use_case_tune(use_case=world.a, user=world.users["lead_a"],
                                    values={"sample_rate": 0.3}, note="mehr Stichprobe")
    SettingChange.objects.filter(pk=change.pk).update(
        changed_at=world.moment(world.last_week))
    settings.TREUE_JUDGE_MODEL = OTHER_JUDGE
    world.this_week_good(drawn=3, not_drawn=0, prefix="neu")
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_viewport_size({"width": width, "height": 900})
    base = live_server.url
    log_in(page, base, world.users["lead_a"])
    page.goto(base + "/use-cases/auskunft/", wait_until="commit")
    trend = drawn(page.locator("#trend-chart"))
    data = traces(trend)
    assert data[1]["x"] == [w.label for w in world.weeks][-2:], "the data's weeks"
    assert axis_range(trend)["categories"] == data[1]["x"]
    assert_spans_the_weeks(trend)
    notes = trend.locator(".annotation")
    expect(notes.locator(".annotation-text")).to_have_text(
        ["Einstellung geändert", "Prüfer gewechselt"])
    for i in range(2):
        assert inside(notes.nth(i), trend), f"note {i} is drawn whole inside the chart"
    notes.nth(0).hover()
    expect(trend.locator(".hoverlayer")).to_contain_text("Stichprobenrate 25 % → 30 %")
    notes.nth(1).hover()
    expect(trend.locator(".hoverlayer")).to_contain_text(OTHER_JUDGE)
    assert overlapping(trend, ".xtick text, .ytick text, .annotation-text") == []
    screenshot(page, f"use-case-changes-{width}")
    assert errors == []


@pytest.mark.parametrize("width", [1440, 375])
def test_overview_cards_show_every_column_and_their_charts_ticks_apart(
    page: Page, live_server: Any, world: DashWorld, width: int  # noqa: F811
) -> None:
    """Issue 20: at 1440 px two cards side by side were 525 px wide and a card's table 911 px,
    hiding "letzte Woche"; at 375 px the numbers were cut ("0,91 (0…") and a chart's y label
    "0,8" touched the x label "2026-W42". This week here is undecided (grey, the longest
    light), last week red: the widest texts a card has."""
    world.last_week_scenario()
    world.this_week_good(drawn=1, not_drawn=3)
    page.set_viewport_size({"width": width, "height": 900})
    base = live_server.url
    log_in(page, base, world.users["lead_a"])
    page.goto(base + "/overview/", wait_until="commit")
    card = page.locator("section.dash-case")
    expect(card).to_have_count(1)
    expect(card.locator("[data-light='grey']").first).to_be_visible()
    chart = drawn(page.locator("#overview-chart-0"))
    body = card.locator(".dash-case-body")
    assert body.evaluate("b => b.scrollWidth <= b.clientWidth + 1"), "nothing scrolled away"
    for cell in card.locator("table.dash-weeks th, table.dash-weeks td").all():
        if cell.is_visible():
            assert inside(cell, body), cell.inner_text()
    expect(card.locator("thead")).to_contain_text("letzte Woche")
    assert_spans_the_weeks(chart)
    assert overlapping(chart, ".xtick text, .ytick text") == []
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    screenshot(page, f"overview-{width}")


@pytest.mark.parametrize("width", [1440, 375])
def test_the_cards_words_are_visible_where_the_numbers_stand(
    page: Page, live_server: Any, world: DashWorld, width: int  # noqa: F811
) -> None:
    """Issue 41, at a desktop's width and a phone's: an interval that ends at its estimate
    carries a visible mark and its footnote (not only a title, which touch screens never show);
    a week still being judged says so on its light; a pooled view other than the lights' shows
    no light of its own, and says which weeks the light reads."""
    world.this_week_good()  # every drawn answer at 1.0
    for i in range(3):  # last week still being judged
        world.answer(f"offen-{i}", week=world.last_week, flagged=True, judge=False)
    page.set_viewport_size({"width": width, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    base = live_server.url
    log_in(page, base, world.users["lead_a"])
    for url, frame in (("/overview/", "section.dash-case"), ("/use-cases/auskunft/", "main")):
        page.goto(base + url, wait_until="commit")
        scope = page.locator(frame).first
        expect(scope.locator(".tops-at-mark").first).to_be_visible()
        note = scope.locator("[data-note='tops-at']")
        expect(note).to_have_count(1)
        expect(note).to_be_visible()
        expect(note).to_contain_text("Jede zufällig gezogene Antwort erhielt 1,0")
        light = scope.locator("[data-open-runs]").first
        expect(light).to_be_visible()
        expect(light).to_contain_text("wird noch geprüft: 3 von 3 Prüfläufen offen")
        for shown in (note, light):
            box = shown.bounding_box()
            assert box is not None and box["x"] + box["width"] <= width + 1, url
        # What sticks out, named in the failure (the week tables scroll inside their card).
        wide = page.evaluate("""w => [...document.querySelectorAll('body *')]
            .filter(e => e.getBoundingClientRect().right > w + 1 && !e.closest('.table-wrap'))
            .slice(0, 5).map(e => e.className + ': ' + e.textContent.slice(0, 60))""", width)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width, wide
        screenshot(page, f"words-{url.strip('/').replace('/', '-')}-{width}")

        page.goto(base + url + "?pooled=13", wait_until="commit")
        scope = page.locator(frame).first
        pooled = scope.locator("tr.row-pooled, div.stat:not(.headline)[data-week='pooled']").first
        expect(pooled.locator("[data-view-only]")).to_be_visible()
        expect(pooled.locator("[data-view-only]")).to_contain_text(
            "ohne Ampel: die Ampel liest 4 Wochen")
        expect(pooled.locator("[data-light]")).to_have_count(0)
    assert errors == []


def cut_cells(page: Page, wrap_selector: str) -> list[str]:
    """Cells of the table in `wrap_selector` that show part of themselves: inside the scroll
    box's visible part (right of a sticky first column) neither whole nor wholly outside, and
    not hidden. Waits until the table script has looked at the current scroll position."""
    wrap = page.locator(wrap_selector)
    expect(wrap).to_have_attribute(
        "data-checked-at", str(wrap.evaluate("w => Math.round(w.scrollLeft)")))
    return wrap.evaluate("""w => {
        const box = w.getBoundingClientRect();
        const sticky = w.classList.contains('sticky-first')
            && getComputedStyle(w.querySelector('tbody tr > :first-child')).position === 'sticky'
            ? w.querySelector('tbody tr > :first-child').getBoundingClientRect().right : box.left;
        const left = Math.max(box.left, sticky), right = box.left + w.clientWidth;
        return [...w.querySelectorAll('tbody td')].filter(td => {
            if (getComputedStyle(td).visibility === 'hidden') return false;
            const r = td.getBoundingClientRect();
            const whole = r.left >= left - 0.5 && r.right <= right + 0.5;
            const out = r.right <= left + 0.5 || r.left >= right - 0.5;
            return !whole && !out && td.textContent.trim() !== '';
        }).map(td => td.textContent.trim().replace(/\\s+/g, ' '));
    }""")


def test_phone_tables_never_cut_a_number(
    page: Page, live_server: Any, world: DashWorld  # noqa: F811
) -> None:
    """Issue 41 (9): at 375 px the weekly table's edge cut "0,84" to "0,8", which reads as a
    value. The table scrolls in its own box with a cue, and a cell is whole or not shown."""
    world.last_week_scenario()
    world.this_week_good()
    base = live_server.url
    log_in(page, base, world.users["lead_a"])
    selector = ".table-wrap:has(table.dash-table)"

    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(base + "/use-cases/auskunft/", wait_until="commit")
    wrap = page.locator(selector)
    # Wide enough: no scrolling, no cue, nothing hidden.
    assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth")
    assert cut_cells(page, selector) == []
    expect(wrap).not_to_have_class(re.compile(r"\bscrolls\b"))
    expect(wrap.locator("td.cut")).to_have_count(0)

    page.set_viewport_size({"width": 375, "height": 800})
    page.reload(wait_until="commit")
    wrap = page.locator(selector)
    assert wrap.evaluate("w => w.scrollWidth > w.clientWidth"), "wider than a phone"
    expect(wrap).to_have_class(re.compile(r"\bscrolls\b"))  # the cue: a shadow where more is
    widest = wrap.evaluate("w => w.scrollWidth - w.clientWidth")
    for left in sorted({*range(0, widest, 23), widest}):
        wrap.evaluate(f"w => {{ w.scrollLeft = {left}; }}")
        assert cut_cells(page, selector) == [], f"cut at scrollLeft {left}"
    # Scrolled to the end, the last column is whole and shown.
    last = wrap.locator("tbody tr").first.locator("td").last
    assert last.evaluate("td => getComputedStyle(td).visibility") == "visible"
    screenshot(page, "use-case-375-end")


@pytest.mark.parametrize("width", [1440, 375])
def test_settings_are_typed_as_the_page_writes_numbers_and_refused_in_view(
    page: Page, live_server: Any, world: DashWorld, width: int  # noqa: F811
) -> None:
    """Issue 41: "0,80" typed into a number input was sent as "080", and the refusal re-rendered
    the page at its top, its only error 4,250 px further down. The German page's field takes
    "0,80"; a value it cannot read is said where the eye is after the submit."""
    world.last_week_scenario()
    world.this_week_good()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_viewport_size({"width": width, "height": 800})
    base = live_server.url
    log_in(page, base, world.users["lead_a"])
    page.goto(base + "/use-cases/auskunft/", wait_until="commit")
    field = page.locator("#id_action_threshold")
    expect(field).to_have_value("0,9")
    field.fill("")
    field.press_sequentially("0,80")
    with page.expect_navigation(wait_until="commit"):
        page.locator("form.settings-form button[type=submit]").click()
    expect(page.locator(".messages")).to_contain_text("Handlungsschwelle 0,9 → 0,8")
    assert UseCase.objects.get(pk=world.a.pk).action_threshold == 0.8
    expect(field).to_have_value("0,8")
    # The saved page fully loaded before the next submit: a click while it still loads could
    # be taken by the navigation still under way.
    page.wait_for_load_state("load")

    field.fill("")
    field.press_sequentially("0,8x")
    with page.expect_response(
        lambda r: r.request.method == "POST" and "/settings/" in r.url
    ) as posted:
        page.locator("form.settings-form button[type=submit]").click()
    assert posted.value.status == 400
    page.wait_for_load_state("load")
    error = page.locator("#id_action_threshold_error")
    expect(error).to_have_text("Bitte eine Zahl eingeben.")
    expect(error).to_be_in_viewport()
    expect(field).to_be_in_viewport()
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_value("0,8x")
    # At the page's top, a summary links to the field.
    summary = page.locator("#settings-errors")
    expect(summary.get_by_role("link")).to_have_attribute("href", "#id_action_threshold")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    screenshot(page, f"use-case-settings-refused-{width}")
    assert UseCase.objects.get(pk=world.a.pk).action_threshold == 0.8
    assert errors == []


@pytest.mark.parametrize("width", [1440, 375])
def test_the_overview_chart_has_a_legend_naming_every_line_style_and_costs_a_currency(
    page: Page, live_server: Any, world: DashWorld, width: int  # noqa: F811
) -> None:
    """Issue 41 (3, 6): the small chart's four line styles, two of them dashed, were captioned
    only "gestrichelt: Handlungsschwelle"; a legend beside it names each style, drawn as the
    chart draws it, readable at a phone's width. The week's cost reads with its currency."""
    world.last_week_scenario()
    world.this_week_good(drawn=1, not_drawn=3)
    page.set_viewport_size({"width": width, "height": 900})
    base = live_server.url
    log_in(page, base, world.users["lead_a"])
    page.goto(base + "/overview/", wait_until="commit")
    card = page.locator("section.dash-case")
    chart = drawn(page.locator("#overview-chart-0"))
    legend = card.locator(".chart-legend")
    expect(legend).to_be_visible()
    entries = {li.inner_text().strip(): li for li in legend.locator("li").all()}
    # Every line the chart draws is named (the data Plotly holds decides which are drawn).
    drawn_names = {unescape(name) for name in chart.evaluate(
        "el => el.data.filter(t => (t.y || []).some(y => y !== null)).map(t => t.name)")}
    assert drawn_names <= set(entries), (drawn_names, list(entries))
    assert {"Handlungsschwelle", "Treue laut Prüfmodell"} <= set(entries)
    # The threshold's key is dashed as its line is, the estimate's solid.
    dash = entries["Handlungsschwelle"].locator("line").get_attribute("stroke-dasharray")
    assert dash == "5 3"
    assert entries["Treue laut Prüfmodell"].locator("line").get_attribute(
        "stroke-dasharray") is None
    for li in entries.values():
        assert li.is_visible() and inside(li, card), li.inner_text()
    expect(card).not_to_contain_text("gestrichelt")
    # The cost of last week with its currency, and never "+?".
    cost = card.locator("tr.row-cost td").nth(1)
    expect(cost).to_contain_text(re.compile(r"\d,\d+\s+EUR"))
    expect(card).not_to_contain_text("+?")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    screenshot(page, f"overview-legend-{width}")


@pytest.mark.parametrize("width", [1440, 375])
def test_the_judge_pages_costs_name_their_currency(
    page: Page, live_server: Any, world: DashWorld, width: int  # noqa: F811
) -> None:
    """Issue 41 (6): the judge page's day table, path table and latest runs write each amount
    with its currency, small ones with their digits ("0,00025 EUR", not "0,0003")."""
    world.last_week_scenario()
    page.set_viewport_size({"width": width, "height": 900})
    base = live_server.url
    log_in(page, base, world.users["lead_a"])
    page.goto(base + "/use-cases/auskunft/judge/", wait_until="commit")
    total = page.locator('tr[data-day="total"]')
    expect(total).to_contain_text(re.compile(r"\d,\d+\s+EUR"))
    runs = page.locator("table.runs tbody tr")
    expect(runs.first).to_contain_text(re.compile(r"\d,\d+\s+EUR"))
    expect(page.locator("body")).not_to_contain_text("kein Preis hinterlegt")
    # An amount is never broken across lines, nor cut by its cell.
    for cell in page.locator("table.usage span.nowrap, table.runs span.nowrap").all()[:20]:
        if cell.is_visible():
            box = cell.bounding_box()
            assert box is not None and box["height"] < 30, cell.inner_text()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    screenshot(page, f"judge-costs-{width}")


@pytest.mark.parametrize("width", [1440, 375])
def test_the_segments_section_at_desk_and_phone_width(
    page: Page, live_server: Any, world: DashWorld, width: int  # noqa: F811
) -> None:
    """Issue 40: the segments' table, its dimensions and the declared keys' form, with nothing
    wider than the screen; a bad key list answers at the form."""
    world.last_week_scenario()
    page.set_viewport_size({"width": width, "height": 900})
    base = live_server.url
    log_in(page, base, world.users["lead_a"])
    page.goto(base + "/use-cases/auskunft/#segments", wait_until="commit")
    section = page.locator("#segments")
    expect(section.get_by_role("heading", name="Segmente")).to_be_visible()
    table = section.locator("table.segment-table")
    expect(table).to_have_attribute("data-dimension", "model")
    expect(table.locator("tbody tr")).to_have_count(1)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    with page.expect_navigation(wait_until="commit"):
        section.get_by_role("link", name="Dienst", exact=True).click()
    expect(page.locator("table.segment-table")).to_have_attribute("data-dimension", "service")
    form = page.locator("form.segment-keys")
    form.get_by_label("Eigene Segment-Schlüssel").fill("kanal, sp$rache")
    with page.expect_navigation(wait_until="commit"):
        form.get_by_role("button", name="Schlüssel speichern").click()
    expect(page.locator("form.segment-keys .field-error")).to_contain_text("sp$rache")
    page.locator("form.segment-keys").get_by_label("Eigene Segment-Schlüssel").fill("kanal")
    with page.expect_navigation(wait_until="commit"):
        page.locator("form.segment-keys").get_by_role("button", name="Schlüssel speichern").click()
    expect(page.locator("#segments nav")).to_contain_text("Metadaten „kanal“")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    screenshot(page, f"segments-{width}")
