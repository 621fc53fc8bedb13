"""How the expert's notes on the claim decomposition are recorded: naming a problem or adding a
missing claim means the decomposition is wrong, whatever the checkbox says."""

from review import services
from review.models import ReviewBatch
from tests.review.conftest import ReviewWorld


def _item(w: ReviewWorld):
    w.answer("d1", week="2026-W48", claims=[("Claim A.", "GEDECKT"), ("Claim B.", "GEDECKT")])
    services.review_batches_create(week="2026-W49")
    return ReviewBatch.objects.get(use_case=w.use_case, week="2026-W49").items.get()


def test_a_named_problem_marks_the_decomposition_wrong(review_world: ReviewWorld) -> None:
    item = _item(review_world)
    saved = services.review_item_save(
        item=item, user=review_world.users["expert"],
        data=services.ItemInput(decomposition_wrong=False, problems=["merged"]),
    )
    assert saved.decomposition_wrong is True
    assert saved.decomposition_problems == ["merged"]
    cleared = services.review_item_save(
        item=item, user=review_world.users["expert"],
        data=services.ItemInput(decomposition_wrong=False, problems=[]),
    )
    assert cleared.decomposition_wrong is False


def test_an_added_claim_counts_as_a_missing_one(review_world: ReviewWorld) -> None:
    item = _item(review_world)
    user = review_world.users["expert"]
    saved = services.review_item_save(
        item=item, user=user, data=services.ItemInput(new_claim="Claim C fehlt.")
    )
    assert saved.decomposition_problems == ["missing"]
    assert saved.decomposition_wrong is True
    # Autosave sends the form's problems without "missing": the added claim keeps it.
    again = services.review_item_save(
        item=item, user=user, data=services.ItemInput(problems=["merged"])
    )
    assert again.decomposition_problems == ["missing", "merged"]
    added = again.verdicts.get(claim__isnull=True)
    removed = services.review_item_save(
        item=item, user=user,
        data=services.ItemInput(
            decomposition_wrong=False, problems=[], remove_claim=added.position
        ),
    )
    assert removed.decomposition_problems == []
    assert removed.decomposition_wrong is False
