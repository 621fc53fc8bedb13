"""Blind review, checked on the raw HTML and JSON: until the expert submits an answer, nothing
the review pages return carries the judge's verdicts, score or model; afterwards both sides
are shown.

The judge is scripted to be distinctive: every claim UNGEDECKT, score 0.0, model "judge-x".
The page's own radio buttons also say UNGEDECKT, so the label is looked for outside them.
"""

import csv
import io
import json
import re
from html.parser import HTMLParser
from typing import Any

import pytest
from django.urls import reverse

from alarms.models import Alarm
from alarms.services import alarm_raise
from review import services
from review.models import ReviewBatch, ReviewItem
from tests.review.conftest import JUDGE, ReviewWorld, batch_for, shift_week
from tests.support.judged import current_run

G, T, U = "GEDECKT", "TEILWEISE", "UNGEDECKT"
SCORE_TEXTS = ("0,00", "0.00", "0,0<", "0.0<")


class _Visible(HTMLParser):
    """Text and attribute values of a page, leaving out the label choices (the radios and
    their captions, which name all three labels on every claim) and the keyboard hint."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skip_depth = 0
        self.stack: list[tuple[str, bool]] = []
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        skip = (tag == "fieldset" and "label-choice" in classes) or (
            tag == "p" and "hint" in classes
        )
        if tag not in ("input", "br", "meta", "link", "img"):
            self.stack.append((tag, skip))
            if skip:
                self.skip_depth += 1
        if not self.skip_depth:
            self.parts.extend(value or "" for _, value in attrs)

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            open_tag, skip = self.stack.pop()
            if skip:
                self.skip_depth -= 1
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if not self.skip_depth:
            self.parts.append(data)


def visible(html: str) -> str:
    parser = _Visible()
    parser.feed(html)
    return "\n".join(parser.parts)


def assert_blind(raw: str) -> None:
    # The form's revision is a timestamp (…:10.004+00:00), not a score: left out of the search.
    raw = re.sub(r'(name="revision"[^>]*value=)"[^"]*"', r"\1", raw)
    assert JUDGE not in raw
    for text in SCORE_TEXTS:
        assert text not in raw, text
    assert 'class="badge verdict' not in raw
    assert 'id="vergleich"' not in raw
    assert "<h2>Vergleich mit dem Prüfmodell</h2>" not in raw
    assert U not in visible(raw).upper()


@pytest.fixture
def batch(review_world: ReviewWorld) -> ReviewBatch:
    w = review_world
    for ext in ("b0", "b1"):
        answer = w.answer(ext, week="2026-W48", claims=[
            (f"Der Behälter wird alle 5 Jahre geprüft ({ext}).", U),
            (f"Die Prüfung kostet 80 Euro ({ext}).", U),
        ])
        assert answer.score == 0.0
        assert current_run(answer).judge_model == JUDGE
        assert list(current_run(answer).claims.values_list("label", flat=True)) == [U, U]
    return batch_for(use_case=w.use_case, week="2026-W49")


def first_item(batch: ReviewBatch) -> ReviewItem:
    item = batch.items.order_by("position").first()
    assert item is not None
    return item


def test_the_check_itself_finds_a_leak() -> None:
    # The helper must catch the judge's label outside the radios, and ignore it inside.
    radios = ('<fieldset class="label-choice"><label class="choice v-ungedeckt">'
              '<input type="radio" name="claim-1" value="UNGEDECKT"><span>UNGEDECKT</span>'
              '</label></fieldset><p class="hint">3 UNGEDECKT</p>')
    assert_blind(radios)
    assert_blind(radios + '<input type="hidden" name="revision" id="revision" '
                          'value="2026-12-04T12:43:10.004+00:00">')
    for leak in ('<span data-judge="UNGEDECKT"></span>', "<td>ungedeckt</td>",
                 '<span class="badge verdict v-ungedeckt">x</span>', "<dd>0,00</dd>",
                 "<!-- judge-x -->"):
        with pytest.raises(AssertionError):
            assert_blind(radios + leak)


def test_item_page_and_save_responses_are_blind_until_submitted(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    client = login(review_world.users["expert"])
    item = first_item(batch)
    page = client.get(f"/review/items/{item.pk}/")
    raw = page.content.decode()
    assert page.status_code == 200
    assert 'id="review-form"' in raw  # the page under test is the review form
    assert_blind(raw)
    assert " checked" not in raw  # the judge's labels are not preselected either

    responses = [
        client.post(f"/review/items/{item.pk}/save/", {"claim-1": G, "comment": "a"},
                    HTTP_ACCEPT="application/json"),
        client.post(f"/review/items/{item.pk}/save/", {"claim-1": G, "new_claim": "Neu."},
                    HTTP_ACCEPT="application/json"),
        client.post(f"/review/items/{item.pk}/save/", {"claim-1": "NEIN"},
                    HTTP_ACCEPT="application/json"),
        client.post(f"/review/items/{item.pk}/save/", {"claim-1": G, "remove_claim": "1"},
                    HTTP_ACCEPT="application/json"),
    ]
    assert [r.status_code for r in responses] == [200, 200, 400, 400]
    for response in responses:
        raw = response.content.decode()
        body = json.loads(raw)
        assert JUDGE not in raw and U not in raw.upper() and "judge" not in raw.lower()
        assert "score" not in raw
    assert set(responses[0].json()) == {"saved", "status", "labelled", "claims", "revision"}

    # A form post redirects to the page, which is still blind.
    followed = client.post(f"/review/items/{item.pk}/save/", {"claim-1": G, "claim-2": T},
                           follow=True)
    assert_blind(followed.content.decode())
    # The submit refused for a missing label shows the page again, blind.
    refused = client.post(f"/review/items/{item.pk}/submit/", {"claim-1": G, "claim-2": T,
                                                              "claim-3": ""}, follow=True)
    raw = refused.content.decode()
    assert "Noch ohne Urteil: Aussage 3." in raw
    assert_blind(raw)
    assert body  # (the last save response was JSON too)


def test_queue_and_other_items_are_blind(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    client = login(review_world.users["expert"])
    assert_blind(client.get("/review/").content.decode())
    one, two = batch.items.order_by("position")
    client.post(f"/review/items/{one.pk}/submit/", {"claim-1": G, "claim-2": G})
    # Submitting one answer reveals nothing about the next one, on its page or the queue.
    assert_blind(client.get(f"/review/items/{two.pk}/").content.decode())
    queue = client.get("/review/").content.decode()
    assert JUDGE not in queue and "0,00" not in queue


def test_after_submission_the_judge_is_shown(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    client = login(review_world.users["expert"])
    item = first_item(batch)
    client.post(f"/review/items/{item.pk}/submit/", {"claim-1": G, "claim-2": T})
    raw = client.get(f"/review/items/{item.pk}/").content.decode()
    assert JUDGE in raw
    assert '<dd class="score">0,00 <span class="muted small">judge-x</span></dd>' in raw
    assert '<dd class="score">0,75</dd>' in raw
    judge_badges = re.findall(r'class="badge verdict v-(\w+)" title="Prüfmodell">(\w+)<', raw)
    assert judge_badges == [("ungedeckt", U), ("ungedeckt", U)]
    assert "verschiedene Seiten der Handlungsschwelle" not in raw  # 0.75 and 0.0: both below
    # A second expert of the use case sees the comparison of the submitted item too.
    other = login(review_world.users["expert2"])
    assert JUDGE in other.get(f"/review/items/{item.pk}/").content.decode()


def test_answer_detail_is_blind_for_an_expert_with_the_item_open(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    w = review_world
    item = first_item(batch)
    detail = reverse("monitoring:answer_detail", args=[item.answer_id])
    expert = login(w.users["expert"])
    page = expert.get(detail)
    assert page.status_code == 200
    raw = page.content.decode()
    assert "Der Behälter wird alle 5 Jahre geprüft." in raw  # the answer itself is shown
    assert_blind(raw)
    for claim in item.judge_run.claims.all():
        assert claim.text not in raw
    # The team lead, who does not review, sees the judge's verdicts there.
    lead = login(w.users["lead"]).get(detail).content.decode()
    assert JUDGE in lead and U in visible(lead)
    # Once submitted, the expert sees them as well.
    expert = login(w.users["expert"])
    expert.post(f"/review/items/{item.pk}/submit/", {"claim-1": G, "claim-2": G})
    raw = expert.get(detail).content.decode()
    assert JUDGE in raw and U in visible(raw)


def test_answer_list_judge_page_and_export_are_blind_for_an_expert_with_items_open(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    w = review_world
    answer_list = reverse("monitoring:answer_list")
    expert = login(w.users["expert"])
    listing = expert.get(answer_list, {"use_case": "recht"})
    assert listing.status_code == 200
    raw = listing.content.decode()
    for item in batch.items.all():
        # the answers are listed, without their judge score
        assert reverse("monitoring:answer_detail", args=[item.answer_id]) in raw
    assert "0,00" not in raw and "0.00" not in raw
    # Sorting or filtering by score would give the score away by position: left out.
    for query in ({"sort": "score"}, {"score_max": "0.5"}):
        raw = expert.get(answer_list, {"use_case": "recht", **query}).content.decode()
        assert not any(
            reverse("monitoring:answer_detail", args=[i.answer_id]) in raw
            for i in batch.items.all()
        ), query
    judge_page = expert.get(reverse("monitoring:use_case_judge", args=["recht"]))
    assert judge_page.status_code == 200
    assert "0,00" not in judge_page.content.decode()
    export = expert.get(reverse("monitoring:answer_export"), {"use_case": "recht"})
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert len(rows) == 2
    assert all(row["score"] == "" for row in rows)
    lead = login(w.users["lead"])
    assert "0,00" in lead.get(answer_list, {"use_case": "recht"}).content.decode()
    export = lead.get(reverse("monitoring:answer_export"), {"use_case": "recht"})
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert [float(row["score"]) for row in rows] == [0.0, 0.0]


def test_an_investigation_report_is_blind_for_an_expert_with_the_answers_open(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    # Seen in an attack: the report showed "Treue 0,00" and the table by judge score for the
    # very answers the expert was reviewing blind.
    from investigations import selectors as investigation_selectors
    from investigations import services as investigation_services
    from investigations.models import Investigation, Question
    from monitoring.models import Answer

    w = review_world
    Answer.objects.filter(use_case=w.use_case).update(
        messages=[{"role": "user", "content": "Wie oft muss der Behälter geprüft werden?"}]
    )
    plan = investigation_selectors.investigation_plan(
        use_case=w.use_case, selection=Investigation.Selection.LATEST, n=5, samples=3,
        temperature=0.7, generator_model="gpt-4o-mini",
    )
    assert {a.pk for a in plan.answers} == {i.answer_id for i in batch.items.all()}
    investigation = investigation_services.investigation_start(plan=plan, user=w.users["lead"])
    Question.objects.filter(investigation=investigation).update(
        consistent=True, status=Question.Status.DONE
    )
    url = f"/investigations/{investigation.pk}/"

    raw = login(w.users["expert"]).get(url).content.decode()
    # What the investigation cost is no score (gpt-4o-mini has its list price): left out of
    # the look for one.
    raw = re.sub(r'<dd id="spent-cost">.*?</dd>', "", raw, flags=re.S)
    assert "Treue 0,00" not in raw and "0,00" not in raw
    assert raw.count("Treue verborgen bis zur Abgabe Ihrer Wochenprüfung") == 2
    assert "2 Fragen aus Ihrer offenen Wochenprüfung fehlen in der zweiten Tabelle" in raw

    lead = login(w.users["lead"]).get(url).content.decode()
    assert lead.count("Treue 0,00") == 2 and "verborgen" not in lead

    # Picked as "below the threshold", an answer would give its score away just the same.
    below = Investigation.Selection.BELOW
    expert_sees = investigation_selectors.selection_queryset(
        use_case=w.use_case, selection=below, user=w.users["expert"])
    lead_sees = investigation_selectors.selection_queryset(
        use_case=w.use_case, selection=below, user=w.users["lead"])
    assert not expert_sees.exists() and lead_sees.count() == 2

    # Once the expert has submitted them, the scores are there for the expert too.
    expert = login(w.users["expert"])
    for item in batch.items.all():
        expert.post(f"/review/items/{item.pk}/submit/", {"claim-1": G, "claim-2": G})
    assert login(w.users["expert"]).get(url).content.decode().count("Treue 0,00") == 2


def test_small_figures_are_withheld_from_a_reader_with_open_items_on_every_page(
    review_world: ReviewWorld, login: Any
) -> None:
    # A lead who is also an expert of the use case, with last week's two answers open in this
    # week's batch: last week rests on 2 judged answers (mean (1/7 + 1) / 2 = 0.57), the week
    # before on 6 (1.0). The figure on 2 must not reach them on the use-case page, the
    # overview or the estimates API; the one on 6 does; a lead without open items sees both.
    w = review_world
    this_week = services.current_week()
    last_week, before = shift_week(this_week, -1), shift_week(this_week, -2)
    w.answer("open-1", week=last_week, claims=[("Eins.", G), *((f"{n}.", U) for n in range(6))])
    w.answer("open-2", week=last_week)
    for n in range(6):
        w.answer(f"old-{n}", week=before)
    batch = batch_for(use_case=w.use_case, week=this_week)
    assert batch.items.count() == 2
    both = w.users["lead"]
    w.use_case.experts.add(both)
    plain = w.users["staff"]

    def estimates(user: Any) -> dict[str, Any]:
        client = login(user)
        response = client.get("/api/v1/use-cases/recht/estimates?weeks=3")
        assert response.status_code == 200, response.content
        return {week["week"]: week["estimate"] for week in response.json()["weeks"]}

    seen, hidden = estimates(plain), estimates(both)
    assert seen[last_week]["value"] == pytest.approx((1 / 7 + 1) / 2)
    assert hidden[last_week]["value"] is None and hidden[last_week]["n"] == 2
    assert hidden[before]["value"] == seen[before]["value"] == pytest.approx(1.0)
    # An action alarm on that week says its value: the reader with open items is told the
    # week, not the figure.
    alarm_raise(use_case=w.use_case, kind=Alarm.Kind.ACTION, key=last_week,
                text=[("Woche %(week)s: liegt bei %(value)s.", {"week": last_week,
                                                                "value": "0,57"})],
                details={"week": last_week, "n": 2})
    for path in ("/overview/", "/use-cases/recht/", "/use-cases/recht/?pooled=1"):
        assert "0,57" in login(plain).get(path).content.decode(), path
        page = login(both).get(path).content.decode()
        assert "0,57" not in page and "0.57" not in page and "0,14" not in page, path
        assert f"Woche {last_week}: unter der Handlungsschwelle" in page, path
