"""The calibration page: the numbers it shows for hand-built reviews, computed here by hand;
the scatter figure's data; "too few"; who may open it.

The weeks are relative to today, because the page looks back from now.
"""

import json
import math
import re
from typing import Any

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import translation

from common.domain.weeks import shift_week
from monitoring.models import Answer
from review import services
from review.domain.cusum import DRIFT_COST, DriftCost, cusum_arl, cusum_params_for
from review.models import ReviewItem
from tests.review.conftest import ReviewWorld, batch_for
from tests.review.test_alarms import batch_of, review, reviewed
from tests.support.text import found

G, T, U = "GEDECKT", "TEILWEISE", "UNGEDECKT"
# Student t, 97.5 % quantile, 5 degrees of freedom (from a table: 2.5706).
T_975_5 = 2.5705818


def de(value: float, places: int = 3) -> str:
    """A number as the German page writes it."""
    return f"{value:.{places}f}".replace(".", ",")


def dd(html: str, dd_id: str) -> str:
    match = re.search(rf'<dd id="{dd_id}">(.*?)</dd>', html, re.S)
    assert match, dd_id
    return re.sub(r"\s+", " ", match.group(1))


def figure(html: str, element_id: str) -> dict[str, Any]:
    match = re.search(
        rf'<script id="{element_id}" type="application/json">(.*?)</script>', html, re.S
    )
    assert match, element_id
    return json.loads(match.group(1))


def calibration(client: Any, slug: str = "recht") -> str:
    response = client.get(f"/review/calibration/{slug}/")
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture
def six(review_world: ReviewWorld, django_capture_on_commit_callbacks: Any) -> dict[str, Any]:
    """Six reviewed answers over two weeks, with their (automatic, manual) scores."""
    w = review_world
    current = services.current_week()
    previous = shift_week(current, -1)
    earlier = reviewed(w, [
        ((G,), (G,), False),  # 1.0 / 1.0
        ((U,), (G,), False),  # 0.0 / 1.0: other side of the threshold
        ((G, U), (G, T), False),  # 0.5 / 0.75
    ], week=previous, prefix="p", capture=django_capture_on_commit_callbacks)
    later = reviewed(w, [
        ((G, G), (G, U), False),  # 1.0 / 0.5: other side
        ((T,), (T,), False),  # 0.5 / 0.5
        ((G,), (G,), True),  # 1.0 / 1.0, decomposition marked wrong
    ], week=current, prefix="c", capture=django_capture_on_commit_callbacks)
    # Each source week had 3 more answers that were not reviewed: 6 reviews of 12 answers.
    w.unjudged("px", 3, week=shift_week(previous, -1))
    w.unjudged("cx", 3, week=previous)
    scores = [(1.0, 1.0), (0.0, 1.0), (0.5, 0.75), (1.0, 0.5), (0.5, 0.5), (1.0, 1.0)]
    return {"current": current, "previous": previous, "items": earlier + later,
            "scores": scores}


def test_numbers_shown_match_a_hand_computation(
    review_world: ReviewWorld, six: dict[str, Any], login: Any
) -> None:
    html = calibration(login(review_world.users["lead"]))

    diffs = [manual - automatic for automatic, manual in six["scores"]]
    assert diffs == [0.0, 1.0, 0.25, -0.5, 0.0, 0.0]
    n = 6
    bias = sum(diffs) / n  # 0.125
    # The bias over the 12 answers of the two weeks (all unflagged, one stratum), estimated
    # from the 6 reviewed: s̃² with one pseudo-review 0.35 off the mean as a floor, the finite
    # population correction 1 − 6/12, Student t with 5 degrees of freedom.
    sq_dev = sum((d - bias) ** 2 for d in diffs)  # 1.21875
    spread = (sq_dev + 0.35**2) / n  # 0.2235417
    half = T_975_5 * math.sqrt((1 - 6 / 12) * spread / n)  # 2.5706 · 0.136486 = 0.3509
    assert (round(bias - half, 3), round(bias + half, 3)) == (-0.226, 0.476)
    mae = sum(abs(d) for d in diffs) / n  # 1.75 / 6

    assert dd(html, "rolling-n") == "n = 6"
    assert dd(html, "rolling-bias") == (
        f'{de(bias)} <span class="muted">(95 %: {de(bias - half)} … {de(bias + half)})</span>'
    )
    assert dd(html, "rolling-bias") == (
        '0,125 <span class="muted">(95 %: -0,226 … 0,476)</span>'
    )
    assert de(mae) == "0,292"
    assert f"<dd>{de(mae)}</dd>" in html
    assert "<dd>33 % </dd>" in html  # 2 of 6 on the other side of the action threshold
    assert dd(html, "decomposition-share") == '17 % <span class="muted">(n = 6)</span>'
    # 8 claim pairs: too few for kappa.
    assert dd(html, "kappa") == '<span class="muted">zu wenige Prüfungen</span> (n = 8)'

    # Per week: three reviews each, too few for an interval.
    rows = re.findall(r"<tr[^>]*><td>(\d{4}-W\d\d)</td><td>(\d+)</td>\s*<td>([^<]*)</td>\s*"
                      r"<td>([^<]*)</td>\s*<td>([^<]*)</td>\s*<td>([^<]*)</td></tr>", html)
    assert rows == [
        (six["current"], "3", de(-0.5 / 3), "zu wenige", de(0.5 / 3), "33 %"),
        (six["previous"], "3", de(1.25 / 3), "zu wenige", de(1.25 / 3), "33 %"),
    ]
    assert "zu wenige Prüfungen für ein Bild" not in html


def test_scatter_has_a_point_per_reviewed_answer(
    review_world: ReviewWorld, six: dict[str, Any], login: Any
) -> None:
    client = login(review_world.users["lead"])
    html = calibration(client)
    fig = figure(html, "scatter-figure")
    traces = fig["data"]
    weeks = [t for t in traces if t.get("mode") == "markers"]
    assert [t["name"] for t in weeks] == [six["previous"], six["current"]]  # a trace per week
    expected = {
        item.answer_id: (automatic, manual)
        for item, (automatic, manual) in zip(six["items"], six["scores"], strict=True)
    }
    shown = {}
    for trace in weeks:
        for x, y, (answer_id, url) in zip(trace["x"], trace["y"], trace["customdata"],
                                          strict=True):
            assert answer_id not in shown
            shown[answer_id] = (x, y)
            assert url == reverse("monitoring:answer_detail", args=[answer_id])
    assert shown == expected
    in_previous = {i.answer_id for i in six["items"][:3]}
    assert {a for a, _ in weeks[0]["customdata"]} == in_previous
    assert "%{customdata[0]}" in weeks[0]["hovertemplate"]

    diagonal = [t for t in traces if t.get("mode") == "lines"]
    assert len(diagonal) == 1
    assert (list(diagonal[0]["x"]), list(diagonal[0]["y"])) == ([0, 1], [0, 1])
    shapes = fig["layout"]["shapes"]
    assert len(shapes) == 2
    assert {(s["x0"], s["x1"]) for s in shapes if s["x0"] == s["x1"]} == {(0.85, 0.85)}
    assert {(s["y0"], s["y1"]) for s in shapes if s["y0"] == s["y1"]} == {(0.85, 0.85)}

    # A point's link opens its answer.
    answer_id, url = weeks[1]["customdata"][0]
    page = client.get(url)
    assert page.status_code == 200
    item = ReviewItem.objects.get(answer_id=answer_id)
    assert item.answer.external_id in page.content.decode()

    bias = figure(html, "bias-figure")
    line, too_few = bias["data"][:2]
    assert (line["meta"]["role"], too_few["meta"]["role"]) == ("bias", "too_few")
    assert list(line["x"]) == list(too_few["x"]) == [six["previous"], six["current"]]
    # Three reviews a week are too few for an interval: each week is a grey point off the
    # line (at its bias), not a point on it with a bar of zero width.
    assert list(line["y"]) == [None, None]
    assert [round(v, 6) for v in too_few["y"]] == [round(1.25 / 3, 6), round(-0.5 / 3, 6)]


def test_kappa_is_shown_with_enough_claims(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any, login: Any
) -> None:
    w = review_world
    judge = (G, G, T, U)
    reviewed(w, [
        (judge, judge, False),
        (judge, judge, False),
        (judge, judge, False),
        (judge, (G, T, T, U), False),
        (judge, (G, G, U, U), False),
    ], week=services.current_week(), prefix="k", capture=django_capture_on_commit_callbacks)
    # 20 (manual, judge) pairs: agree 18 times; (T, G) and (U, T) once each, weight |i - j| = 1.
    # Marginals over (U, T, G): manual (6, 5, 9), judge (5, 5, 10).
    # sum d*r*c = 6*5 + 6*10*2 + 5*5 + 5*10 + 9*5*2 + 9*5 = 360
    # kappa_w = 1 - n * sum d*O / sum d*r*c = 1 - 20 * 2 / 360 = 0.889
    kappa = 1 - 20 * 2 / 360
    html = calibration(login(w.users["expert"]))
    shown = dd(html, "kappa")
    assert shown.startswith(f"κ = {de(kappa, 2)} ")
    low, high = found(r"\(95 %: (-?\d,\d\d) … (-?\d,\d\d), n = 20 Aussagen\)",
                      shown).groups()
    low, high = float(low.replace(",", ".")), float(high.replace(",", "."))
    assert low <= kappa <= high <= 1.0


def test_too_few_reviews_say_so(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any, login: Any
) -> None:
    w = review_world
    client = login(w.users["lead"])
    html = calibration(client)
    assert "Noch keine abgegebenen Prüfungen." in html
    assert "Erst 0 geprüfte Antworten – zu wenige Prüfungen für ein Bild." in html
    # The drift CUSUM without a review of its own: the prior's cautious in-control rate, tuned
    # to a rise of 0.1, the limit for 156 weeks between false alarms at 20 reviews a week (the
    # chain's ARL steps over it to 162.95 weeks; 4.23 falls short).
    prior = cusum_params_for(disagreements=0, reviews=0)
    assert (prior.p0, prior.p1, prior.limit) == (0.212, 0.312, 4.24)
    assert cusum_arl(prior, prior.p0) / 20 == pytest.approx(162.95, abs=0.01)
    assert dd(html, "cusum") == (
        "üblich bis 21 %, Alarm bei 31 %; Grenze 4,24, Stand 0,00; ein Fehlalarm im Mittel "
        "alle 163 Wochen bei 20 Prüfungen pro Woche <span class=\"muted\">(noch ohne eigene "
        "Prüfungen vor den letzten 4 Wochen: vorsichtige Vorannahme)</span>"
    )

    items = batch_of(w, [(G,), (U,), (G,)], week=services.current_week(), prefix="f")
    expert = w.users["expert"]
    with django_capture_on_commit_callbacks(execute=True):
        review(items[0], (G,), user=expert)
        review(items[1], (T,), user=expert)  # the third stays open: not a point
    html = calibration(client)
    assert dd(html, "rolling-n") == "n = 2"
    assert dd(html, "rolling-bias") == '<span class="muted">zu wenige Prüfungen</span>'
    assert dd(html, "kappa") == '<span class="muted">zu wenige Prüfungen</span> (n = 2)'
    assert "Erst 2 geprüfte Antworten – zu wenige Prüfungen für ein Bild." in html
    points = [p for t in figure(html, "scatter-figure")["data"] if t["mode"] == "markers"
              for p in zip(t["x"], t["y"], strict=True)]
    assert sorted(points) == [(0.0, 0.5), (1.0, 1.0)]

    # An edit after submission moves the point (the latest version counts), not adds one.
    services.review_item_reopen(item=items[1], user=expert)
    with django_capture_on_commit_callbacks(execute=True):
        review(items[1], (U,), user=expert)
    html = calibration(client)
    assert dd(html, "rolling-n") == "n = 2"
    points = [p for t in figure(html, "scatter-figure")["data"] if t["mode"] == "markers"
              for p in zip(t["x"], t["y"], strict=True)]
    assert sorted(points) == [(0.0, 0.0), (1.0, 1.0)]


@pytest.mark.parametrize(
    ("who", "slug", "status"),
    [
        ("lead", "recht", 200),
        ("expert", "recht", 200),
        ("expert2", "recht", 200),
        ("staff", "recht", 200),
        ("staff", "fremd", 200),
        ("expert", "fremd", 404),  # an expert of another use case
        ("lead", "fremd", 404),
        ("other_lead", "recht", 404),
        ("other_expert", "recht", 404),
        ("nobody", "recht", 404),
        ("lead", "gibt-es-nicht", 404),
    ],
)
def test_who_may_open_the_calibration_page(
    review_world: ReviewWorld, login: Any, who: str, slug: str, status: int
) -> None:
    response = login(review_world.users[who]).get(f"/review/calibration/{slug}/")
    assert response.status_code == status


# Student t, 97.5 % quantile, 7 degrees of freedom (from a table: 2.3646).
T_975_7 = 2.3646243


def test_flagged_top_ups_are_weighted_in_the_weekly_bias(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any, login: Any
) -> None:
    w = review_world
    week = services.current_week()
    source = shift_week(week, -1)
    w.use_case.review_batch_size = 8
    w.use_case.save(update_fields=["review_batch_size"])
    # The week before: 4 answers of the random sample, on which expert and judge agree; 4
    # flagged ones outside it, which fill the batch up, the expert 0.5 above the judge on
    # each; and 4 more unflagged answers the sample left out.
    for i in range(4):
        w.answer(f"r{i}", week=source, claims=[(f"Aussage r{i}.", G)])
    flagged = [w.answer(f"f{i}", week=source, flagged=True, claims=[(f"Aussage f{i}.", U)])
               for i in range(4)]
    Answer.objects.filter(pk__in=[a.pk for a in flagged]).update(in_random_sample=False)
    w.unjudged("u", 4, week=source)
    batch = batch_for(use_case=w.use_case, week=week)
    assert sorted(batch.items.values_list("stratum", flat=True)) == ["flagged"] * 4 + [
        "random"] * 4
    with django_capture_on_commit_callbacks(execute=True):
        for item in batch.items.select_related("answer"):
            review(item, (T,) if item.answer.flagged else (G,), user=w.users["expert"])

    # Taken as a random sample the bias would be (4 · 0.5)/8 = 0.25. By stratum: the flagged
    # are 4 of the week's 12 answers, so 4/12 · 0.5 + 8/12 · 0 = 0.1667. Its variance comes
    # from the unflagged stratum alone (every flagged answer was reviewed): (8/12)² · (1 − 4/8)
    # · s̃²/4 with s̃² = (0 + 0.35² · 4/8)/4, the floor's share of its 4 of 8 reviews.
    bias = 4 / 12 * 0.5
    half = T_975_7 * math.sqrt((8 / 12) ** 2 * 0.5 * (0.35**2 * 4 / 8 / 4) / 4)
    assert (round(bias - half, 3), round(bias + half, 3)) == (0.098, 0.236)
    html = calibration(login(w.users["lead"]))
    rows = re.findall(r"<tr[^>]*><td>(\d{4}-W\d\d)</td><td>(\d+)</td>\s*<td>([^<]*)</td>\s*"
                      r"<td>([^<]*)</td>", html)
    assert rows == [(week, "8", de(bias), f"{de(bias - half)} … {de(bias + half)}")]
    assert dd(html, "rolling-bias") == (
        f'{de(bias)} <span class="muted">(95 %: {de(bias - half)} … {de(bias + half)})</span>'
    )
    line = figure(html, "bias-figure")["data"][0]
    assert line["y"] == [pytest.approx(bias)]
    # The definition changed; the page says so, once.
    assert html.count("Seit Dezember 2026 ist die Abweichung (hier und oben) nach Stichprobe "
                      "gewichtet") == 1


def test_the_drift_figures_in_english(review_world: ReviewWorld, login: Any) -> None:
    client = login(review_world.users["lead"])
    client.cookies["django_language"] = "en"
    try:
        html = calibration(client)
    finally:
        # The request left English active in this thread; the next test expects German.
        translation.activate(settings.LANGUAGE_CODE)
    assert dd(html, "cusum") == (
        "normal up to 21 %, alarm at 31 %; limit 4.24, now 0.00; a false alarm every 163 weeks "
        "on average at 20 reviews a week <span class=\"muted\">(no reviews of its own before "
        "the last 4 weeks yet: a cautious prior)</span>"
    )
    assert "Since December 2026 the difference (here and above) is weighted" in html
    assert "lies beyond the tolerance ±0.1 with 95 % confidence (one-sided)" in html


# What the drift check costs as the product runs it (review.domain.cusum.DRIFT_COST).
COST_WEEKS, COST_YEARS = 234.2, 4  # 4.5 years: "less often than once in 4 years"
COST_3, COST_8 = (17, 45), (55, 84)


def cost(html: str) -> str | None:
    match = re.search(r'<p class="hint" id="drift-cost">(.*?)</p>', html, re.S)
    return re.sub(r"\s+", " ", match.group(1)) if match else None


def test_the_page_says_what_the_drift_check_costs(
    review_world: ReviewWorld, login: Any, settings: Any
) -> None:
    # The bench's figures (bench/statistics.py --only drift-product, bench/README.md session
    # 25): 20 reviews a week cannot give both rare false alarms and a rise of 0.1 found
    # within 3 weeks in 90 % of runs; the page says which Treue chose and what it costs.
    assert DRIFT_COST == DriftCost(COST_WEEKS, COST_3, COST_8)
    client = login(review_world.users["lead"])
    assert cost(calibration(client)) == (
        f"Was das kostet: Bei 20 Prüfungen pro Woche kommt ein Fehlalarm im Mittel seltener als "
        f"einmal in {COST_YEARS} Jahren je Anwendungsfall, dafür findet der Alarm einen Anstieg "
        f"von „andere Seite der Schwelle“ um 10 Prozentpunkte nur in {COST_3[0]}–{COST_3[1]} % "
        f"der Fälle innerhalb von 3 Wochen (in {COST_8[0]}–{COST_8[1]} % innerhalb von 8 "
        f"Wochen)."
    )
    client.cookies["django_language"] = "en"
    try:
        english = cost(calibration(client))
    finally:
        translation.activate(settings.LANGUAGE_CODE)
    assert english == (
        f"What this costs: at 20 reviews a week a false alarm comes less often than once in "
        f"{COST_YEARS} years per use case on average; in return the alarm finds a rise of "
        f"“other side of the threshold” cases by 10 percentage points within 3 weeks in only "
        f"{COST_3[0]}–{COST_3[1]} % of cases (within 8 weeks in {COST_8[0]}–{COST_8[1]} %)."
    )
    # Parameters set by hand were not measured: the page does not claim their cost.
    settings.TREUE_CUSUM_P0, settings.TREUE_CUSUM_P1, settings.TREUE_CUSUM_LIMIT = 0.1, 0.3, 6
    client.cookies["django_language"] = "de"
    assert cost(calibration(client)) is None


def test_the_charts_write_decimal_commas_in_german_and_points_in_english(
    review_world: ReviewWorld, six: dict[str, Any], login: Any
) -> None:
    # Issue 41, point 8: the calibration charts wrote "0.5" on a German page.
    client = login(review_world.users["lead"])
    html = calibration(client)
    for element_id in ("scatter-figure", "bias-figure"):
        assert figure(html, element_id)["layout"]["separators"] == ",."
    bias = figure(html, "bias-figure")
    low, high = bias["layout"]["yaxis"]["range"]
    assert low < 0 < high and [low, high] != [-1, 1]
    client.cookies["django_language"] = "en"
    try:
        english = calibration(client)
    finally:
        translation.activate(settings.LANGUAGE_CODE)
    for element_id in ("scatter-figure", "bias-figure"):
        assert figure(english, element_id)["layout"]["separators"] == ".,"
