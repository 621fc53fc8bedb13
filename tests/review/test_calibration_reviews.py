"""The experts' submitted reviews behind the calibration page: the list on the page and on its
own pages, and one review in full (the expert's label per claim beside the judge's, the
comment, who and when, both scores); who may read them, and that an answer an expert still
reviews blind never shows up there.

The weeks are relative to today, because the calibration figures look back from now.
"""

import re
from typing import Any

import pytest
from django.urls import reverse

from review import services
from review.models import ReviewBatch, ReviewItem
from tests.review.conftest import JUDGE, ReviewWorld
from tests.review.test_alarms import batch_of, review
from tests.support.text import found

G, T, U = "GEDECKT", "TEILWEISE", "UNGEDECKT"
COMMENT = 'Quelle ist veraltet <script>alert("x")</script> & "zitiert"\nzweite Zeile'


@pytest.fixture
def reviewed(
    review_world: ReviewWorld, django_capture_on_commit_callbacks: Any
) -> dict[str, ReviewItem]:
    """Three answers of one batch: `full` submitted with labels that differ from the judge's,
    an added claim, a comment and a wrong decomposition; `plain` submitted after it; `open`
    never submitted."""
    w = review_world
    expert = w.users["expert"]
    full, plain, still_open = batch_of(w, [(G, U, T), (G,), (U,)],
                                       week=services.current_week(), prefix="r")
    with django_capture_on_commit_callbacks(execute=True):
        services.review_item_save(item=full, user=expert, data=services.ItemInput(
            new_claim="Die Prüfung ist gebührenfrei."))
        services.review_item_save(item=full, user=expert, data=services.ItemInput(
            labels={1: G, 2: G, 3: U, 4: G}, problems=["merged"], comment=COMMENT))
        services.review_item_submit(item=full, user=expert)
        review(plain, (G,), user=w.users["expert2"])
    # Something to hide: a label on the open one, saved but not submitted.
    services.review_item_save(item=still_open, user=expert,
                              data=services.ItemInput(labels={1: T}, comment="noch offen"))
    return {"full": full, "plain": plain, "open": still_open}


def detail_url(item: ReviewItem, slug: str = "recht") -> str:
    return reverse("review:calibration_review", args=[slug, item.pk])


def listed(html: str) -> list[int]:
    """The items of the submitted-review rows of a page, in order."""
    return [int(pk) for pk in re.findall(r'<tr class="submitted-review[^"]*" data-item="(\d+)"',
                                         html)]


def claim_rows(html: str) -> list[tuple[str, str, str, str, str | None]]:
    """(agreement, position, text, expert's label, judge's label) per claim row."""
    rows = []
    for row in re.findall(r'<tr class="claim-verdict .*?</tr>', html, re.S):
        agreement = found(r'class="claim-verdict (\w+)"', row)[1]
        position, text = found(r'data-position="(\d+)">([^<]*)', row).groups()
        labels = re.findall(r'class="badge verdict v-\w+">(\w+)<', row)
        judge = labels[1] if len(labels) > 1 else None
        rows.append((agreement, position, text.strip(), labels[0], judge))
    return rows


def test_a_lead_reads_labels_comment_reviewer_and_both_scores(
    review_world: ReviewWorld, reviewed: dict[str, ReviewItem], login: Any
) -> None:
    full = reviewed["full"]
    client = login(review_world.users["lead"])
    response = client.get(detail_url(full))
    assert response.status_code == 200
    html = response.content.decode()

    assert "Abgegeben von expertin am " in html and "(Fassung 1)." in html
    # Expert (1 + 1 + 0 + 1) / 4 = 0.75 against the judge's (1 + 0 + 0.5) / 3 = 0.5.
    assert re.search(r'<dd class="score" id="manual-score">0,75</dd>', html)
    assert re.search(rf'<dd class="score" id="judge-score">0,50 <span class="muted small">'
                     rf"{JUDGE}</span></dd>", html)
    # Signed, expert − judge (issue 41); both below the action line: no badge.
    assert '<dd id="difference">+0,25</dd>' in html
    assert "Abweichung (Fachprüfung − Prüfmodell)" in html
    assert f'href="{reverse("monitoring:answer_detail", args=[full.answer_id])}"' in html
    assert claim_rows(html) == [
        ("agrees", "1", "Aussage 1 von r0.", G, G),
        ("differs", "2", "Aussage 2 von r0.", G, U),
        ("differs", "3", "Aussage 3 von r0.", U, T),
        ("added", "4", "Die Prüfung ist gebührenfrei.", G, None),
    ]
    assert html.count("weicht ab") == 2
    # The added claim named the decomposition's missing claim; the expert named merged ones.
    assert ('<p id="decomposition">Zerlegung als falsch markiert: eine Aussage fehlt, '
            "Aussagen zusammengelegt.</p>") in html
    # The comment, escaped, its line break kept.
    assert ('<p class="prose review-comment" id="comment">Quelle ist veraltet '
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &quot;zitiert&quot;<br>"
            "zweite Zeile</p>") in html
    assert "<script>alert" not in html


def test_the_calibration_page_lists_submitted_reviews_newest_first(
    review_world: ReviewWorld, reviewed: dict[str, ReviewItem], login: Any
) -> None:
    client = login(review_world.users["lead"])
    html = client.get("/review/calibration/recht/").content.decode()
    section = html.split('id="abgegebene-pruefungen"', 1)[1].split("</section>", 1)[0]
    # The open one is not there; the later submission comes first.
    assert listed(section) == [reviewed["plain"].pk, reviewed["full"].pk]
    assert f'href="{detail_url(reviewed["full"])}"' in section
    assert f'href="{detail_url(reviewed["open"])}"' not in html
    assert "noch offen" not in html
    assert "<td>experte</td>" in section and "<td>expertin</td>" in section  # who reviewed
    assert "&lt;script&gt;alert" in section and "<script>alert" not in html
    # Expert 0.75 and judge 0.5, with 2 of the judge's 3 claims labelled differently.
    row = found(rf'data-item="{reviewed["full"].pk}">(.*?)</tr>', section, re.S)[1]
    cells = re.findall(r'<td class="num">([^<]*)</td>', row)
    assert cells == ["0,75", "0,50", "2 / 3"]
    # All of them fit on this page: no link to more.
    assert "Alle abgegebenen Prüfungen" not in section


def test_the_list_pages_through_all_submitted_reviews(
    review_world: ReviewWorld, reviewed: dict[str, ReviewItem], login: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = login(review_world.users["lead"])
    monkeypatch.setattr("review.views.REVIEWS_ON_CALIBRATION", 1)
    html = client.get("/review/calibration/recht/").content.decode()
    assert listed(html) == [reviewed["plain"].pk]
    assert ('<a href="/review/calibration/recht/reviews/">Alle abgegebenen Prüfungen (2) ›</a>'
            in html)
    monkeypatch.setattr("review.views.REVIEWS_PER_PAGE", 1)
    first = client.get("/review/calibration/recht/reviews/").content.decode()
    second = client.get("/review/calibration/recht/reviews/?page=2").content.decode()
    assert "2 abgegebene Prüfungen" in first
    assert listed(first) == [reviewed["plain"].pk] and 'rel="next"' in first
    assert listed(second) == [reviewed["full"].pk] and 'rel="prev"' in second
    assert "Seite 2 von 2" in second


def test_a_review_that_was_never_submitted_is_not_found(
    review_world: ReviewWorld, reviewed: dict[str, ReviewItem], login: Any
) -> None:
    client = login(review_world.users["lead"])
    assert client.get(detail_url(reviewed["open"])).status_code == 404
    assert client.get(detail_url(reviewed["plain"])).status_code == 200  # the control
    # Nor under another use case's address, not even for staff.
    staff = login(review_world.users["staff"])
    assert staff.get(detail_url(reviewed["plain"], "fremd")).status_code == 404


def test_a_reopened_review_shows_its_submitted_version(
    review_world: ReviewWorld, reviewed: dict[str, ReviewItem], login: Any
) -> None:
    full = reviewed["full"]
    expert = review_world.users["expert"]
    services.review_item_reopen(item=full, user=expert)
    services.review_item_save(item=full, user=expert, data=services.ItemInput(
        labels={1: U}, comment="Entwurf, nicht abgegeben"))
    client = login(review_world.users["lead"])
    html = client.get(detail_url(full)).content.decode()
    assert "wird gerade überarbeitet" in html and "(Fassung 1)." in html
    assert claim_rows(html)[0] == ("agrees", "1", "Aussage 1 von r0.", G, G)
    assert "&lt;script&gt;" in html and "Entwurf, nicht abgegeben" not in html
    # Submitted again: the second version is the one shown, and listed once.
    services.review_item_submit(item=full, user=expert)
    html = client.get(detail_url(full)).content.decode()
    assert "wird gerade überarbeitet" not in html and "(Fassung 2)." in html
    assert claim_rows(html)[0] == ("differs", "1", "Aussage 1 von r0.", U, G)
    assert "Entwurf, nicht abgegeben" in html
    listing = client.get("/review/calibration/recht/reviews/").content.decode()
    assert listed(listing) == [full.pk, reviewed["plain"].pk]


@pytest.mark.parametrize(
    ("who", "slug", "status"),
    [
        ("lead", "recht", 200),
        ("staff", "recht", 200),
        # Experts of the use case may open the calibration page, and so its reviews: what
        # is submitted is not blind (review/selectors.blind_answer_ids).
        ("expert", "recht", 200),
        ("expert2", "recht", 200),
        ("other_lead", "recht", 404),
        ("other_expert", "recht", 404),
        ("nobody", "recht", 404),
        ("other_lead", "fremd", 404),  # its own use case, another's review
    ],
)
def test_who_may_read_a_review(
    review_world: ReviewWorld, reviewed: dict[str, ReviewItem], login: Any,
    who: str, slug: str, status: int,
) -> None:
    client = login(review_world.users[who])
    response = client.get(detail_url(reviewed["full"], slug))
    assert response.status_code == status
    assert client.get(f"/review/calibration/{slug}/reviews/").status_code == (
        200 if (who, slug) == ("other_lead", "fremd") else status
    )
    if status == 404:
        assert "expertin" not in response.content.decode()


def test_anonymous_is_sent_to_the_login(
    review_world: ReviewWorld, reviewed: dict[str, ReviewItem], client: Any
) -> None:
    for url in (detail_url(reviewed["full"]), "/review/calibration/recht/reviews/"):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"] == f"/login/?next={url}"


def test_an_answer_the_expert_reviews_blind_is_left_out(
    review_world: ReviewWorld, reviewed: dict[str, ReviewItem], login: Any
) -> None:
    # The services keep an answer in one batch (a weekly batch skips imported answers; an
    # import refuses one that waits in a review), so the second batch is built by hand here:
    # whichever way an answer comes to wait blind, its submitted review must not show.
    plain = reviewed["plain"]
    again = ReviewBatch.objects.create(
        use_case=review_world.use_case, week=services.current_week(), imported=True,
        source_week=plain.batch.source_week, target_size=1, due_at=plain.batch.due_at,
    )
    ReviewItem.objects.create(batch=again, answer=plain.answer, judge_run=plain.judge_run,
                              position=1, stratum=plain.stratum)
    for who, sees in (("expert", False), ("expert2", False), ("lead", True), ("staff", True)):
        client = login(review_world.users[who])
        detail = client.get(detail_url(plain))
        assert detail.status_code == (200 if sees else 404), who
        for url in ("/review/calibration/recht/", "/review/calibration/recht/reviews/"):
            html = client.get(url).content.decode()
            assert (plain.pk in listed(html)) == sees, (who, url)
            assert (reviewed["full"].pk in listed(html)), (who, url)  # the control
