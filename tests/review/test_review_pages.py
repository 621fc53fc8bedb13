"""The expert's pages: the queue, one answer to review, saving as one goes, submitting, editing
after submission; who may open them; and hostile text rendered inert."""

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from monitoring.models import Answer
from monitoring.services.use_cases import service_create
from review import services
from review.models import ReviewBatch, ReviewItem, ReviewSubmission, ReviewVerdict
from tests.review.conftest import ReviewWorld, batch_for, build_review_world
from tests.support.openai_server import FakeOpenAIServer
from tests.support.shared_world import built_once, read_again
from tests.support.text import found
from tests.support.world import WorldBuilder

G, T, U = "GEDECKT", "TEILWEISE", "UNGEDECKT"
QUESTION = "Wie oft muss der Behälter geprüft werden?"


def claims_of(ext: str, *labels: str) -> list[tuple[str, str]]:
    return [(f"Aussage {k} der Antwort {ext}.", label) for k, label in enumerate(labels, 1)]


def build_batch(w: ReviewWorld) -> ReviewBatch:
    """2026-W49's batch of three answers from 2026-W48, two claims each; a0 is flagged."""
    w.answer("a0", week="2026-W48", flagged=True, claims=claims_of("a0", G, T))
    w.answer("a1", week="2026-W48", claims=claims_of("a1", G, U))
    w.answer("a2", week="2026-W48", claims=claims_of("a2", U, U))
    return batch_for(use_case=w.use_case, week="2026-W49")


@pytest.fixture(scope="module")
def built(
    django_db_setup: None, django_db_blocker: Any,
    _openai_server_of_this_process: FakeOpenAIServer,
) -> Iterator[tuple[ReviewWorld, int]]:
    """The review world and its batch, built once for the module (tests/support/shared_world.py);
    every test here runs on it."""

    def build() -> tuple[ReviewWorld, int]:
        world = build_review_world(WorldBuilder(settings, lambda: _openai_server_of_this_process))
        return world, build_batch(world).pk

    with built_once(django_db_blocker, build) as world_and_batch:
        yield world_and_batch


@pytest.fixture(autouse=True)
def review_world(
    built: tuple[ReviewWorld, int], world_builder: WorldBuilder, db: None
) -> ReviewWorld:
    world, _ = built
    return read_again(world, judge=world_builder.judge(world.judge.copy()))


@pytest.fixture
def batch(built: tuple[ReviewWorld, int], review_world: ReviewWorld) -> ReviewBatch:
    return ReviewBatch.objects.get(pk=built[1])


def item_of(batch: ReviewBatch, ext: str) -> ReviewItem:
    return batch.items.select_related("answer", "judge_run").get(answer__external_id=ext)


def url(item: ReviewItem, action: str = "") -> str:
    return f"/review/items/{item.pk}/" + (f"{action}/" if action else "")


def save_json(client: Client, item: ReviewItem, data: dict[str, Any]) -> Any:
    return client.post(url(item, "save"), data, HTTP_ACCEPT="application/json")


def is_checked(html: str, position: int, label: str) -> bool:
    return f'name="claim-{position}" value="{label}" checked' in html


def labels(item: ReviewItem) -> list[str]:
    return list(item.verdicts.order_by("position").values_list("label", flat=True))


# -- the queue ---------------------------------------------------------------------------------


def test_queue_shows_progress_and_due_date(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    client = login(review_world.users["expert"])
    page = client.get("/review/").content.decode()
    assert '<strong class="progress-count">0/3</strong>' in page
    # Due at the end of the review week 2026-W49: Sunday 6 December 2026.
    assert "fällig bis Sonntag, 6. Dezember 2026" in page
    # In English the date is written the English way, not as a translated German date.
    client.cookies["django_language"] = "en"
    english = client.get("/review/").content.decode()
    assert "due by Sunday, December 6, 2026" in english
    assert "6. December" not in english
    english = client.get(url(item_of(batch, "a0"))).content.decode()
    assert "due by Sun, December 6" in english
    del client.cookies["django_language"]
    assert "Antworten aus 2026-W48" in page
    for item in batch.items.all():
        assert f'href="/review/items/{item.pk}/"' in page

    item = item_of(batch, "a1")
    services.review_item_save(item=item, user=review_world.users["expert"],
                              data=services.ItemInput(labels={1: G, 2: G}))
    services.review_item_submit(item=item, user=review_world.users["expert"])
    page = client.get("/review/").content.decode()
    assert '<strong class="progress-count">1/3</strong>' in page
    assert '<progress max="3" value="1">' in page


# -- the item page -----------------------------------------------------------------------------


def test_item_page_shows_question_chunks_answer_and_claims(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    item = item_of(batch, "a0")
    page = login(review_world.users["expert"]).get(url(item))
    html = page.content.decode()
    assert page.status_code == 200
    assert QUESTION in html
    assert "Prüfintervall: 5 Jahre." in html  # the chunk
    assert "Ähnlichkeit 0,810" in html  # its retrieval similarity
    assert "Ordnung.pdf" in html
    # The uncertain word is highlighted inside the answer text.
    assert re.search(r'<mark class="uncertain"[^>]*>Der</mark> Behälter wird alle 5 Jahre', html)
    for text, _ in claims_of("a0", G, T):
        assert text in html
    for position in (1, 2):
        for label in (G, T, U):
            assert f'name="claim-{position}" value="{label}"' in html
    assert " checked" not in html  # nothing chosen yet
    assert f"Antwort {item.position} von 3" in html
    # An answer that was not flagged has nothing highlighted.
    other = login(review_world.users["expert"]).get(url(item_of(batch, "a1"))).content.decode()
    assert "<mark" not in other


def test_json_save_persists_and_a_reload_shows_it(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    client = login(review_world.users["expert"])
    item = item_of(batch, "a1")
    response = save_json(client, item, {"claim-1": T, "comment": "Quelle knapp."})
    assert response.status_code == 200
    body = response.json()
    assert body.pop("revision") == services.item_revision(ReviewItem.objects.get(pk=item.pk))
    assert body == {"saved": True, "status": "in_progress", "labelled": 1, "claims": 2}
    assert labels(item) == [T, ""]

    html = client.get(url(item)).content.decode()
    assert is_checked(html, 1, T)
    assert not is_checked(html, 1, G) and not is_checked(html, 1, U)
    assert not any(is_checked(html, 2, label) for label in (G, T, U))
    assert ">Quelle knapp.</textarea>" in html

    response = save_json(client, item, {"claim-1": T, "claim-2": U, "comment": "Quelle knapp."})
    assert response.json()["labelled"] == 2
    html = client.get(url(item)).content.decode()
    assert is_checked(html, 1, T) and is_checked(html, 2, U)


def test_form_post_persists_comment_and_decomposition(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    client = login(review_world.users["expert"])
    item = item_of(batch, "a2")
    response = client.post(url(item, "save"), {
        "claim-2": G, "decomposition_wrong": "on", "problems": ["merged", "invented"],
        "comment": "Zwei Aussagen\nin einer.",
    })
    assert response.status_code == 302
    assert response["Location"] == url(item)

    item.refresh_from_db()
    assert item.status == ReviewItem.Status.IN_PROGRESS
    assert item.decomposition_wrong is True
    assert item.decomposition_problems == ["merged", "invented"]
    assert item.comment == "Zwei Aussagen\nin einer."
    assert labels(item) == ["", G]

    html = client.get(url(item)).content.decode()
    assert is_checked(html, 2, G)
    assert 'name="decomposition_wrong" id="decomposition-wrong" checked' in html
    assert 'value="merged" checked' in html and 'value="invented" checked' in html
    assert 'value="missing" checked' not in html
    assert "Zwei Aussagen\nin einer.</textarea>" in html

    # Unticking is saved too (the form sends its whole state).
    client.post(url(item, "save"), {"claim-2": G, "comment": ""})
    item.refresh_from_db()
    assert (item.decomposition_wrong, item.decomposition_problems, item.comment) == (
        False, [], ""
    )


def test_add_and_remove_a_missing_claim(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    client = login(review_world.users["expert"])
    item = item_of(batch, "a1")
    response = client.post(url(item, "save"), {
        "claim-1": G, "new_claim": "  Die Prüfung kostet 80 Euro.  ",
    })
    assert response.status_code == 302
    assert response["Location"] == url(item) + "#aussagen"
    added = item.verdicts.get(position=3)
    assert (added.claim_id, added.added_text, added.label) == (None, "Die Prüfung kostet 80 Euro.",
                                                               "")
    html = client.get(url(item)).content.decode()
    assert "Die Prüfung kostet 80 Euro." in html
    assert 'name="claim-3" value="UNGEDECKT"' in html
    assert 'name="remove_claim" value="3"' in html
    assert 'name="remove_claim" value="1"' not in html  # the judge's claims stay

    assert save_json(client, item, {"claim-1": G, "claim-3": U}).status_code == 200
    assert labels(item) == [G, "", U]

    # The judge's claims cannot be removed; the expert's own can.
    refused = save_json(client, item, {"claim-1": G, "remove_claim": "1"})
    assert refused.status_code == 400
    assert refused.json() == {
        "errors": ["Nur selbst ergänzte Aussagen können entfernt werden."]
    }
    assert item.verdicts.count() == 3
    removed = client.post(url(item, "save"), {"claim-1": G, "remove_claim": "3"})
    assert removed.status_code == 302
    assert list(item.verdicts.values_list("position", flat=True)) == [1, 2]
    assert "Die Prüfung kostet 80 Euro." not in client.get(url(item)).content.decode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"claim-1": G, "claim-2": "VIELLEICHT"}, "VIELLEICHT"),
        ({"claim-1": G, "claim-2": "gedeckt"}, "gedeckt"),
        ({"claim-9": G}, "Aussage 9 gibt es hier nicht."),
        ({"claim-x": G}, "claim-x"),
        ({"claim-1": G, "problems": ["vergessen"]}, "vergessen"),
        ({"claim-1": G, "comment": "x" * 10001}, "Kommentar ist zu lang"),
        ({"claim-1": G, "new_claim": "y" * 2001}, "Aussage ist zu lang"),
        ({"claim-1": G, "remove_claim": "zwei"}, "Unbekannte Aussage"),
    ],
)
def test_invalid_input_is_a_400_and_nothing_is_lost(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any, data: dict, message: str
) -> None:
    client = login(review_world.users["expert"])
    item = item_of(batch, "a1")
    ok = save_json(client, item, {"claim-1": T, "claim-2": U, "comment": "erst",
                                  "decomposition_wrong": "on", "problems": ["missing"]})
    assert ok.status_code == 200

    response = save_json(client, item, {"comment": "neu", **data})

    assert response.status_code == 400
    errors = response.json()["errors"]
    assert len(errors) == 1 and message in errors[0]
    item.refresh_from_db()
    assert labels(item) == [T, U]
    assert item.comment == "erst"
    assert (item.decomposition_wrong, item.decomposition_problems) == (True, ["missing"])
    assert item.verdicts.count() == 2


@pytest.mark.parametrize(
    ("field", "name"), [("comment", "Kommentar"), ("new_claim", "Neue Aussage")]
)
def test_a_nul_in_a_text_field_refuses_that_field_and_keeps_the_rest(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any, field: str, name: str
) -> None:
    # Seen in an attack: a NUL in the comment was a 500 (PostgreSQL refuses it in text), and
    # on submit the labels sent with it were lost.
    client = login(review_world.users["expert"])
    item = item_of(batch, "a1")
    assert save_json(client, item, {"comment": "erst"}).status_code == 200

    response = save_json(
        client, item, {"claim-1": T, "claim-2": U, "comment": "erst", field: "a\x00b"}
    )

    assert response.status_code == 400
    body = response.json()
    assert body["saved"] is False and body["labelled"] == 2
    assert len(body["errors"]) == 1 and body["errors"][0].startswith(name)
    item.refresh_from_db()
    assert labels(item) == [T, U]
    assert item.comment == "erst"
    assert item.verdicts.count() == 2  # no claim added


def test_a_nul_in_a_submitted_comment_keeps_the_labels_and_does_not_submit(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    client = login(review_world.users["expert"])
    item = item_of(batch, "a1")

    response = client.post(
        url(item, "submit"), {"claim-1": G, "claim-2": U, "comment": "\x00"}, follow=True
    )

    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == url(item)
    assert "Kommentar enthält ein unzulässiges Zeichen" in response.content.decode()
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.IN_PROGRESS
    assert labels(item) == [G, U]
    assert not ReviewSubmission.objects.exists()
    # Put right, it goes through.
    client.post(url(item, "submit"), {"claim-1": G, "claim-2": U, "comment": "ok"})
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.SUBMITTED and item.comment == "ok"


def test_invalid_label_in_a_form_post_shows_the_message(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    client = login(review_world.users["expert"])
    item = item_of(batch, "a1")
    response = client.post(url(item, "save"), {"claim-1": "JA"}, follow=True)
    assert response.status_code == 200
    assert "Unbekanntes Urteil „JA“ für Aussage 1." in response.content.decode()
    assert labels(item) == ["", ""]


def test_submit_without_every_label_is_refused(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    client = login(review_world.users["expert"])
    item = item_of(batch, "a1")
    response = client.post(url(item, "submit"), {"claim-1": G}, follow=True)
    html = response.content.decode()
    assert response.redirect_chain[-1][0] == url(item)
    assert "Noch ohne Urteil: Aussage 2." in html
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.IN_PROGRESS and item.version == 0
    assert item.manual_score is None and item.submitted_at is None
    assert not ReviewSubmission.objects.exists()
    assert labels(item) == [G, ""]  # what was sent is kept
    assert is_checked(html, 1, G)


@pytest.mark.parametrize(
    ("manual", "score"),
    [((G, G), 1.0), ((G, T), 0.75), ((T, T), 0.5), ((T, U), 0.25), ((U, U), 0.0), ((G, U), 0.5)],
)
def test_submit_scores_like_the_judge(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any, manual: tuple, score: float
) -> None:
    client = login(review_world.users["expert2"])
    item = item_of(batch, "a2")
    response = client.post(url(item, "submit"), {"claim-1": manual[0], "claim-2": manual[1]})
    assert response.status_code == 302
    assert response["Location"] == url(item) + "#vergleich"
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.SUBMITTED
    assert item.manual_score == score and item.manual_abstention is False
    sub = ReviewSubmission.objects.get(item=item)
    assert (sub.version, sub.manual_score, sub.automatic_score) == (1, score, 0.0)
    assert [(v["position"], v["label"], v["added"]) for v in sub.verdicts] == [
        (1, manual[0], False), (2, manual[1], False)
    ]
    assert [v["text"] for v in sub.verdicts] == [c for c, _ in claims_of("a2", U, U)]


def test_manual_score_equals_the_judges_for_the_same_labels(
    review_world: ReviewWorld, batch: ReviewBatch
) -> None:
    expert = review_world.users["expert"]
    for ext, judge_labels in (("a0", (G, T)), ("a1", (G, U)), ("a2", (U, U))):
        item = item_of(batch, ext)
        services.review_item_save(item=item, user=expert, data=services.ItemInput(
            labels=dict(enumerate(judge_labels, 1))))
        item = services.review_item_submit(item=item, user=expert)
        assert item.manual_score == item.judge_run.score == item.answer.score


def test_added_claim_counts_in_the_manual_score(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    client = login(review_world.users["expert"])
    item = item_of(batch, "a1")
    client.post(url(item, "save"), {"new_claim": "Erfunden: 80 Euro."})
    client.post(url(item, "submit"), {"claim-1": G, "claim-2": G, "claim-3": U})
    item.refresh_from_db()
    assert item.manual_score == pytest.approx(2 / 3)
    sub = item.submissions.get()
    assert sub.verdicts[2] == {"position": 3, "claim_id": None, "text": "Erfunden: 80 Euro.",
                               "label": U, "added": True}


def test_abstention_scores_one_and_an_added_claim_ends_it(
    review_world: ReviewWorld, login: Any
) -> None:
    # A week of its own: the module's batch is 2026-W49's.
    w = review_world
    w.answer("leer", week="2026-W46", claims=[])
    w.answer("leer2", week="2026-W46", claims=[])
    batch = batch_for(use_case=w.use_case, week="2026-W47")
    client = login(w.users["expert"])

    item = item_of(batch, "leer")
    assert item.judge_run.abstention and item.judge_run.score == 1.0
    html = client.get(url(item)).content.decode()
    assert "keine Aussage gefunden (Enthaltung)" in html
    client.post(url(item, "submit"), {})
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.SUBMITTED
    assert (item.manual_score, item.manual_abstention) == (1.0, True)
    sub = item.submissions.get()
    assert (sub.manual_score, sub.manual_abstention, sub.verdicts) == (1.0, True, [])

    other = item_of(batch, "leer2")
    client.post(url(other, "save"), {"new_claim": "Der Behälter wird alle 5 Jahre geprüft."})
    client.post(url(other, "submit"), {"claim-1": U})
    other.refresh_from_db()
    assert (other.manual_score, other.manual_abstention) == (0.0, False)


def test_page_after_submission_shows_the_comparison(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    client = login(review_world.users["expert"])
    item = item_of(batch, "a0")  # judge: GEDECKT, TEILWEISE = 0.75
    client.post(url(item, "submit"), {"claim-1": G, "claim-2": U, "comment": "Zu großzügig."})
    html = client.get(url(item)).content.decode()
    assert 'id="vergleich"' in html
    assert 'id="review-form"' not in html  # no radios any more
    assert '<dd class="score">0,50</dd>' in html  # the expert's score
    assert '<dd class="score">0,75 <span class="muted small">judge-x</span></dd>' in html
    # Issue 41: the difference carries its sign and says which way it is taken.
    assert re.search(r"Abweichung \(Fachprüfung − Prüfmodell\)</dt><dd>−0,25", html)
    assert "verschiedene Seiten der Handlungsschwelle" not in html  # both below 0.85
    compared = re.findall(r'class="badge verdict v-\w+" title="([^"]+)">(\w+)<', html)
    assert compared == [("Ihr Urteil", G), ("Prüfmodell", G), ("Ihr Urteil", U),
                        ("Prüfmodell", T)]
    # Issue 41: the two chips are labelled where touch screens show no title.
    labelled = re.findall(r'<span class="verdict-who">([^<]+)</span> ?<span class="badge verdict '
                          r'v-\w+" title="[^"]+">(\w+)<', html)
    assert labelled == [("Fachprüfung", G), ("Prüfmodell", G), ("Fachprüfung", U),
                        ("Prüfmodell", T)]
    assert "Zu großzügig." in html
    assert "Abgegeben von expertin" in html and "(Fassung 1)" in html


def test_edit_after_submission_keeps_the_earlier_version(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    w = review_world
    first = login(w.users["expert"])
    item = item_of(batch, "a1")
    first.post(url(item, "submit"), {"claim-1": G, "claim-2": T, "comment": "v1"})
    v1 = ReviewSubmission.objects.get(item=item, version=1)
    v1_snapshot = (v1.manual_score, v1.verdicts, v1.comment, v1.reviewer_id, v1.submitted_at)
    assert v1.manual_score == 0.75

    # Saving a submitted answer without reopening it is refused.
    refused = save_json(first, item, {"claim-1": U, "claim-2": U})
    assert refused.status_code == 409
    assert labels(item) == [G, T]

    # Another expert of the use case reopens and changes it.
    second = login(w.users["expert2"])
    assert second.post(url(item, "reopen")).status_code == 302
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.IN_PROGRESS and item.version == 1
    html = second.get(url(item)).content.decode()
    assert 'id="review-form"' in html
    assert is_checked(html, 1, G) and is_checked(html, 2, T)  # the submitted labels return
    second.post(url(item, "submit"), {"claim-1": G, "claim-2": G, "comment": "v2"})

    item.refresh_from_db()
    assert (item.version, item.manual_score, item.reviewer, item.comment) == (
        2, 1.0, w.users["expert2"], "v2"
    )
    subs = list(ReviewSubmission.objects.filter(item=item).order_by("version"))
    assert [s.version for s in subs] == [1, 2]
    v1 = subs[0]
    assert (v1.manual_score, v1.verdicts, v1.comment, v1.reviewer_id, v1.submitted_at) \
        == v1_snapshot
    assert [v["label"] for v in v1.verdicts] == [G, T]
    assert (subs[1].manual_score, [v["label"] for v in subs[1].verdicts]) == (1.0, [G, G])
    assert subs[1].reviewer == w.users["expert2"]
    assert subs[1].submitted_at >= v1.submitted_at
    assert "(Fassung 2)" in second.get(url(item)).content.decode()


def test_submitting_twice_writes_one_version(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    client = login(review_world.users["expert"])
    item = item_of(batch, "a1")
    for _ in range(2):
        response = client.post(url(item, "submit"), {"claim-1": G, "claim-2": T})
        assert response.status_code == 302
    item.refresh_from_db()
    assert item.version == 1
    assert ReviewSubmission.objects.filter(item=item).count() == 1


def test_batch_finishes_when_every_item_is_submitted(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    client = login(review_world.users["expert"])
    items = list(batch.items.order_by("position"))
    for item in items[:-1]:
        client.post(url(item, "submit"), {"claim-1": G, "claim-2": G})
        batch.refresh_from_db()
        assert batch.finished_at is None
    before = timezone.now()
    client.post(url(items[-1], "submit"), {"claim-1": G, "claim-2": G})
    batch.refresh_from_db()
    assert batch.finished_at is not None and before <= batch.finished_at <= timezone.now()
    # A reopened item does not unfinish the batch: its submitted version still counts.
    client.post(url(items[0], "reopen"))
    batch.refresh_from_db()
    assert batch.finished_at is not None
    page = client.get("/review/").content.decode()
    assert "Abgeschlossen" in page and "<td>3/3</td>" in page
    assert "progress-count" not in page  # no open batch left


def test_reviewer_and_time_are_recorded(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    w = review_world
    item = item_of(batch, "a2")
    login(w.users["expert"]).post(url(item, "save"), {"claim-1": U},
                                  HTTP_ACCEPT="application/json")
    item.refresh_from_db()
    assert item.reviewer == w.users["expert"]  # who started it
    before = timezone.now()
    login(w.users["expert2"]).post(url(item, "submit"), {"claim-1": U, "claim-2": T})
    after = timezone.now()
    item.refresh_from_db()
    sub = item.submissions.get()
    assert item.reviewer == sub.reviewer == w.users["expert2"]  # who submitted it
    assert item.submitted_at is not None and sub.submitted_at is not None
    assert before <= item.submitted_at == sub.submitted_at <= after
    assert all(before - timedelta(minutes=1) <= v.updated_at <= after
               for v in ReviewVerdict.objects.filter(item=item))
    queue = login(w.users["expert"]).get("/review/").content.decode()
    assert "experte" in queue


def test_any_expert_of_the_use_case_can_take_any_item(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    w = review_world
    a, b = item_of(batch, "a0"), item_of(batch, "a1")
    one = Client()
    one.force_login(w.users["expert"])
    two = Client()
    two.force_login(w.users["expert2"])
    assert save_json(one, a, {"claim-1": G}).status_code == 200
    # The second expert carries on with the item the first began, and takes another one.
    assert two.get(url(a)).status_code == 200
    assert is_checked(two.get(url(a)).content.decode(), 1, G)
    assert two.post(url(a, "submit"), {"claim-1": G, "claim-2": T}).status_code == 302
    assert two.post(url(b, "submit"), {"claim-1": U, "claim-2": U}).status_code == 302
    assert item_of(batch, "a0").submissions.get().reviewer == w.users["expert2"]
    assert item_of(batch, "a1").status == ReviewItem.Status.SUBMITTED


def revision_on_page(client: Client, item: ReviewItem) -> str:
    html = client.get(url(item)).content.decode()
    match = re.search(r'name="revision" id="revision" value="([^"]+)"', html)
    assert match, "the review form carries the revision it was made on"
    return match.group(1)


def experts(w: ReviewWorld) -> tuple[Client, Client]:
    one, two = Client(), Client()
    one.force_login(w.users["expert"])
    two.force_login(w.users["expert2"])
    return one, two


def test_a_save_from_a_page_older_than_anothers_save_is_refused_and_keeps_theirs(
    review_world: ReviewWorld, batch: ReviewBatch
) -> None:
    one, two = experts(review_world)
    item = item_of(batch, "a1")
    seen_by_one, seen_by_two = revision_on_page(one, item), revision_on_page(two, item)
    assert seen_by_one == seen_by_two

    first = save_json(one, item, {"claim-1": G, "claim-2": G, "revision": seen_by_one})
    assert first.status_code == 200
    # The next save of the same page goes on with the revision the last one returned.
    again = save_json(one, item, {"claim-1": G, "claim-2": T, "revision": first.json()["revision"]})
    assert again.status_code == 200, again.content

    late = save_json(two, item, {"claim-1": U, "claim-2": U, "revision": seen_by_two})
    assert late.status_code == 409
    assert "inzwischen anderswo geändert" in late.json()["errors"][0]
    assert labels(item) == [G, T]  # the first expert's work stands

    # Reloaded, the second expert sees that work and may carry on with it.
    fresh = revision_on_page(two, item)
    assert is_checked(two.get(url(item)).content.decode(), 2, T)
    assert save_json(two, item, {"claim-2": U, "revision": fresh}).status_code == 200
    assert labels(item) == [G, U]


def test_submitting_an_answer_another_expert_submitted_meanwhile_takes_nothing(
    review_world: ReviewWorld, batch: ReviewBatch
) -> None:
    w = review_world
    one, two = experts(w)
    item = item_of(batch, "a1")
    seen_by_two = revision_on_page(two, item)
    first = one.post(url(item, "submit"),
                     {"claim-1": G, "claim-2": G, "revision": revision_on_page(one, item)})
    assert first.status_code == 302

    response = two.post(url(item, "submit"), {"claim-1": U, "claim-2": U,
                                              "revision": seen_by_two}, follow=True)
    page = response.content.decode()
    assert "inzwischen abgegeben (Fassung 1)" in page
    assert "Abgegeben. Hier der Vergleich" not in page
    assert "Bewertung von expertin" in page and "Ihre Bewertung" not in page
    item.refresh_from_db()
    assert (item.version, item.reviewer, item.manual_score) == (1, w.users["expert"], 1.0)
    assert labels(item) == [G, G]
    assert ReviewSubmission.objects.filter(item=item).count() == 1


def test_the_second_request_of_a_double_click_is_no_conflict(
    review_world: ReviewWorld, batch: ReviewBatch
) -> None:
    # Both requests of a double click on "Abgeben" load the item before either has submitted;
    # the second waits for the first's lock and then finds the item submitted by the same expert.
    one, _ = experts(review_world)
    item = item_of(batch, "a1")
    seen = revision_on_page(one, item)
    loaded_by_second = ReviewItem.objects.get(pk=item.pk)
    assert one.post(url(item, "submit"), {"claim-1": G, "claim-2": G, "revision": seen}
                    ).status_code == 302
    data = services.ItemInput(labels={1: G, 2: G}, revision=seen)
    user = review_world.users["expert"]
    saved = services.review_item_save(item=loaded_by_second, user=user, data=data)
    assert services.review_item_submit(item=saved, user=user).version == 1
    assert ReviewSubmission.objects.filter(item=item).count() == 1
    # Another expert with the same stale page is still told.
    with pytest.raises(services.ReviewConflict):
        services.review_item_save(item=loaded_by_second, user=review_world.users["expert2"],
                                  data=data)


def test_a_form_made_before_anothers_save_cannot_submit_over_it(
    review_world: ReviewWorld, batch: ReviewBatch
) -> None:
    one, two = experts(review_world)
    item = item_of(batch, "a2")
    seen_by_two = revision_on_page(two, item)
    assert save_json(one, item, {"claim-1": T, "revision": revision_on_page(one, item)}
                     ).status_code == 200
    response = two.post(url(item, "submit"), {"claim-1": U, "claim-2": U,
                                              "revision": seen_by_two}, follow=True)
    assert "inzwischen anderswo geändert" in response.content.decode()
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.IN_PROGRESS and item.version == 0
    assert labels(item) == [T, ""]


# -- permissions -------------------------------------------------------------------------------


@pytest.fixture
def other_item(review_world: ReviewWorld) -> ReviewItem:
    w = review_world
    w.answer("f0", week="2026-W48", use_case=w.other, claims=claims_of("f0", G))
    batch = batch_for(use_case=w.other, week="2026-W49")
    return batch.items.get()


def all_urls(item: ReviewItem) -> list[tuple[str, str]]:
    slug = item.batch.use_case.slug
    return [
        ("get", "/review/"),
        ("get", url(item)),
        ("post", url(item, "save")),
        ("post", url(item, "submit")),
        ("post", url(item, "reopen")),
        ("get", f"/review/calibration/{slug}/"),
    ]


def test_expert_sees_only_assigned_use_cases(
    review_world: ReviewWorld, batch: ReviewBatch, other_item: ReviewItem, login: Any
) -> None:
    client = login(review_world.users["expert"])
    queue = client.get("/review/").content.decode()
    assert "Rechtsauskunft" in queue and "Fremd" not in queue
    assert url(other_item) not in queue
    for method, path in all_urls(other_item)[1:]:
        response = getattr(client, method)(path, {"claim-1": U})
        assert response.status_code == 404, path
    other_item.refresh_from_db()
    assert other_item.status == ReviewItem.Status.OPEN and not other_item.verdicts.exists()
    # And the other use case's expert sees only theirs.
    queue = login(review_world.users["other_expert"]).get("/review/").content.decode()
    assert "Fremd" in queue and "Rechtsauskunft" not in queue
    client = login(review_world.users["expert"])
    assert client.get(url(item_of(batch, "a0"))).status_code == 200


@pytest.mark.parametrize("who", ["lead", "nobody", "staff"])
def test_people_who_are_not_experts_have_no_items(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any, who: str
) -> None:
    client = login(review_world.users[who])
    queue = client.get("/review/")
    assert queue.status_code == 200
    html = queue.content.decode()
    assert "Sie sind für keinen Anwendungsfall als Fachexperte eingetragen." in html
    assert "/review/items/" not in html
    item = item_of(batch, "a0")
    for method, path in all_urls(item)[1:-1]:
        assert getattr(client, method)(path, {"claim-1": G}).status_code == 404, path
    assert not item.verdicts.exists()
    calibration = client.get("/review/calibration/recht/").status_code
    assert calibration == (404 if who == "nobody" else 200)


def test_anonymous_is_sent_to_login_everywhere(
    review_world: ReviewWorld, batch: ReviewBatch, client: Client
) -> None:
    item = item_of(batch, "a0")
    for method, path in all_urls(item):
        response = getattr(client, method)(path, {"claim-1": G})
        assert response.status_code == 302, path
        assert response["Location"].startswith("/login/?next="), path
    assert not item.verdicts.exists()


def test_a_service_key_opens_no_page(
    review_world: ReviewWorld, batch: ReviewBatch, client: Client
) -> None:
    _, key = service_create(name="bot-2", use_cases=[review_world.use_case])
    item = item_of(batch, "a0")
    for method, path in all_urls(item):
        response = getattr(client, method)(path, {"claim-1": G},
                                           HTTP_AUTHORIZATION=f"Bearer {key}")
        assert response.status_code in (302, 401, 403), path
        if response.status_code == 302:
            assert response["Location"].startswith("/login/"), path
    assert not item.verdicts.exists()


def test_post_without_csrf_token_is_refused(
    review_world: ReviewWorld, batch: ReviewBatch
) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(review_world.users["expert"])
    item = item_of(batch, "a0")
    for action in ("save", "submit"):
        response = client.post(url(item, action), {"claim-1": G, "claim-2": G},
                               HTTP_ACCEPT="application/json")
        assert response.status_code == 403, action
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.OPEN and labels(item) in ([], ["", ""])
    # With the page's token the same request goes through: the check above is the token.
    html = client.get(url(item)).content.decode()
    token = found(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    response = client.post(url(item, "save"), {"claim-1": G, "csrfmiddlewaretoken": token},
                           HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    assert labels(item) == [G, ""]


def test_wrong_methods(review_world: ReviewWorld, batch: ReviewBatch, login: Any) -> None:
    client = login(review_world.users["expert"])
    item = item_of(batch, "a0")
    assert client.get(url(item, "save")).status_code == 405
    assert client.get(url(item, "submit")).status_code == 405
    assert client.post(url(item), {"claim-1": G}).status_code == 405
    assert client.post("/review/calibration/recht/").status_code == 405
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.OPEN


# -- hostile text ------------------------------------------------------------------------------

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
SCRIPT_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
IMG_ESCAPED = "&lt;img src=x onerror=alert(1)&gt;"


def assert_inert(html: str) -> None:
    assert SCRIPT not in html and "<script>alert" not in html
    assert IMG not in html and "<img src=x" not in html
    assert "onerror=alert(1)>" not in html.replace(IMG_ESCAPED, "")


def test_hostile_text_renders_inert(review_world: ReviewWorld, login: Any) -> None:
    # A week of its own: the module's batch is 2026-W49's.
    w = review_world
    answer = w.answer(
        "boese", week="2026-W46", flagged=True,
        question=f"Frage {SCRIPT} und {IMG}?",
        text=f"Antwort {SCRIPT} Der Behälter {IMG} wird geprüft.",
        claims=[(f"Aussage {SCRIPT}.", G), (f"Bild {IMG}.", U)],
    )
    assert answer.flagged and answer.uncertain_tokens
    batch = batch_for(use_case=w.use_case, week="2026-W47")
    item = batch.items.get()
    client = login(w.users["expert"])

    for page in (client.get("/review/"), client.get(url(item))):
        html = page.content.decode()
        assert page.status_code == 200
        assert_inert(html)
        assert SCRIPT_ESCAPED in html and IMG_ESCAPED in html
    html = client.get(url(item)).content.decode()
    assert f"Frage {SCRIPT_ESCAPED} und {IMG_ESCAPED}?" in html
    assert f"Aussage {SCRIPT_ESCAPED}." in html and f"Bild {IMG_ESCAPED}." in html
    assert re.search(r'<mark class="uncertain"[^>]*>Der</mark>', html)

    # The expert's own text (an added claim, a comment) is escaped too, before and after
    # submission.
    client.post(url(item, "save"), {"new_claim": f"Neu {IMG}", "comment": f"Notiz {SCRIPT}"})
    html = client.get(url(item)).content.decode()
    assert_inert(html)
    assert f"Neu {IMG_ESCAPED}" in html and f"Notiz {SCRIPT_ESCAPED}" in html
    client.post(url(item, "submit"), {"claim-1": G, "claim-2": U, "claim-3": U,
                                      "comment": f"Notiz {SCRIPT}"})
    assert Answer.objects.get(pk=answer.pk).text.count(SCRIPT) == 1  # stored as sent
    html = client.get(url(item)).content.decode()
    assert 'id="vergleich"' in html
    assert_inert(html)
    assert f"Aussage {SCRIPT_ESCAPED}." in html and f"Notiz {SCRIPT_ESCAPED}" in html
    lead_page = login(w.users["lead"]).get("/review/calibration/recht/").content.decode()
    assert_inert(lead_page)


def test_the_judges_evidence_shows_only_after_submission(
    review_world: ReviewWorld, batch: ReviewBatch, login: Any
) -> None:
    # A batched judge gave evidence for its first claim: the chunk it rests on and why.
    item = item_of(batch, "a0")
    first = item.judge_run.claims.order_by("position").first()
    assert first is not None
    first.evidence_chunks, first.reason = [1], "Abschnitt 1 nennt das Intervall."
    first.save(update_fields=["evidence_chunks", "reason"])
    client = login(review_world.users["expert"])
    blind = client.get(url(item)).content.decode()
    assert "Abschnitt 1 nennt das Intervall." not in blind and "Beleg des Prüfmodells" not in blind
    client.post(url(item, "submit"), {"claim-1": G, "claim-2": U})
    html = client.get(url(item)).content.decode()
    assert ('Beleg des Prüfmodells: <a href="#chunk-1">#1</a> (Ordnung.pdf) – Abschnitt 1 '
            "nennt das Intervall.") in html
    assert html.count("Beleg des Prüfmodells") == 1, "the second claim has no evidence"
    assert 'id="chunk-1"' in html, "the link leads to the chunk on the page"
