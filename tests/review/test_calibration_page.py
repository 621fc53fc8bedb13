"""The calibration page: the numbers it shows for hand-built reviews, computed here by hand;
the scatter figure's data; "too few"; who may open it.

The weeks are relative to today, because the page looks back from now.
"""

import json
import math
import re
from typing import Any

import pytest
from django.urls import reverse

from review import services
from review.domain.batches import shift_week
from review.models import ReviewItem
from tests.review.conftest import ReviewWorld
from tests.review.test_alarms import batch_of, review, reviewed

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
    sd = math.sqrt(sum((d - bias) ** 2 for d in diffs) / (n - 1))  # sqrt(1.21875 / 5)
    half = T_975_5 * sd / math.sqrt(n)  # 0.5181
    assert (round(bias - half, 3), round(bias + half, 3)) == (-0.393, 0.643)
    mae = sum(abs(d) for d in diffs) / n  # 1.75 / 6

    assert dd(html, "rolling-n") == "n = 6"
    assert dd(html, "rolling-bias") == (
        f'{de(bias)} <span class="muted">(95 %: {de(bias - half)} … {de(bias + half)})</span>'
    )
    assert dd(html, "rolling-bias") == (
        '0,125 <span class="muted">(95 %: -0,393 … 0,643)</span>'
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
    line = bias["data"][0]
    assert list(line["x"]) == [six["previous"], six["current"]]
    assert [round(v, 6) for v in line["y"]] == [round(1.25 / 3, 6), round(-0.5 / 3, 6)]


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
    low, high = re.search(r"\(95 %: (-?\d,\d\d) … (-?\d,\d\d), n = 20 Aussagen\)",
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
