"""Figures resting on too few answers to be shown beside a blind review
(dashboard.domain.small_cells): withheld however deep they sit, everything else untouched."""

from dataclasses import dataclass, field

import pytest

from dashboard.domain import small_cells
from dashboard.domain.adjusted import Adjusted, Effect
from dashboard.domain.causes import Bucket
from dashboard.domain.expert_scale import ExpertScale
from dashboard.domain.statistics.cells import Estimate, Stratum
from dashboard.domain.statistics.estimates import stratified_mean
from dashboard.domain.statistics.lift import lift


def week(*scores: float) -> Estimate:
    return stratified_mean([Stratum(size=len(scores), values=list(scores), drawn=False)])


@dataclass(frozen=True)
class Page:
    buckets: list[Bucket]
    by_name: dict[str, Estimate]
    pair: tuple[Estimate, str]
    note: str = "unverändert"
    extra: list[object] = field(default_factory=list)


@pytest.mark.parametrize(("n", "withheld"), [(0, False), (1, True), (4, True), (5, False)])
def test_an_estimate_is_withheld_on_1_to_4_answers(n: int, withheld: bool) -> None:
    estimate = week(*([1 / 7] * n))
    out = small_cells.withhold_small(estimate)
    assert (out.value is None) is (withheld or n == 0)
    assert out.n == n  # the count stays: "–" beside "1 bewertet"
    if not withheld:
        assert out is estimate


def test_figures_deep_in_a_page_are_withheld_and_the_rest_kept() -> None:
    one, many = week(1 / 7), week(*[0.5] * 6)
    page = Page(
        buckets=[Bucket("< 0,5", None, 0.5, one), Bucket("≥ 0,5", 0.5, None, many)],
        by_name={"single": one, "multi": many},
        pair=(one, "x"),
    )
    out = small_cells.withhold_small(page)
    assert [b.estimate.value for b in out.buckets] == [None, many.value]
    assert out.buckets[1] is page.buckets[1]
    assert out.by_name["single"].value is None and out.by_name["multi"] is many
    assert out.pair[0].value is None and out.pair[1] == "x"
    assert out.note == "unverändert"
    assert page.buckets[0].estimate is one  # the input is not changed


def test_a_lift_on_few_random_or_flagged_answers_is_withheld() -> None:
    few = lift(flagged_bad=1, flagged_n=2, random_bad=3, random_n=40)
    out = small_cells.withhold_small(few)
    assert out.flagged_share is None and out.lift is None and out.too_few
    assert out.random_share == few.random_share
    enough = lift(flagged_bad=3, flagged_n=9, random_bad=3, random_n=40)
    assert small_cells.withhold_small(enough) is enough


def test_a_regression_on_few_answers_says_nothing() -> None:
    effect = Effect("similarity", 0.2, 0.1, 0.3, 0.01, 0.02, True)
    out = small_cells.withhold_small(Adjusted((effect,), n=3, too_few=True))
    assert out.effects[0].estimate is None and out.effects[0].holds is False


def test_the_experts_scale_on_a_withheld_judge_estimate_is_withheld() -> None:
    scale = ExpertScale(0.2, 0.1, 0.3, 2, 4, week(1 / 7), 0.05, False)
    out = small_cells.withhold_small(scale)
    assert (out.value, out.correction, out.too_few) == (None, None, True)
    kept = ExpertScale(0.5, 0.4, 0.6, 20, 4, week(*[0.5] * 6), 0.0, False)
    assert small_cells.withhold_small(kept) is kept


def test_then_sees_every_dataclass_old_and_new() -> None:
    seen = []

    def then(old, new):
        seen.append((type(old).__name__, old is new))
        return new

    small_cells.withhold_small(Page([Bucket("a", None, None, week(0.3))], {}, (week(), "")),
                               then=then)
    assert ("Bucket", False) in seen and ("Page", False) in seen
