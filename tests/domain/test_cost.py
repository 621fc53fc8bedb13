"""Expected judge cost (judging.domain.cost), every figure computed by hand in the
comments."""

import math
from decimal import Decimal

import pytest

from judging.domain.cost import (
    ASSUMED_CALLS_PER_ANSWER,
    ASSUMED_CLAIMS_PER_ANSWER,
    RescoreCalls,
    WeeklyCostEstimate,
    call_cost,
    expected_weekly_judge_cost,
    rescore_calls,
)
from monitoring.domain import prices
from monitoring.domain.prices import price_key, token_cost

# (id, volume, flagged, rate, calls/answer, prompt tok/call, completion tok/call, prompt price,
#  completion price, judged, calls, cost)
WEEKLY_CASES = [
    # 1000 × (0.1 + 0.9 × 0.03) = 127; 127 × 6 = 762; (500 × 0.15 + 5 × 0.6) / 1000 = 0.078
    # per call; 762 × 0.078 = 59.436
    ("typical", 1000, 0.1, 0.03, 6, 500, 5, 0.15, 0.6, 127.0, 762.0, 59.436),
    # nothing flagged: 7000 × 0.03 = 210; × 5 = 1050; (1000 × 1 + 2 × 2) / 1000 = 1.004;
    # 1050 × 1.004 = 1054.2
    ("nothing flagged", 7000, 0.0, 0.03, 5, 1000, 2, 1.0, 2.0, 210.0, 1050.0, 1054.2),
    # everything flagged: the rate does not matter, 200 × 1 = 200; × 4 = 800;
    # (250 × 0.2 + 1 × 0.8) / 1000 = 0.0508; 800 × 0.0508 = 40.64
    ("all flagged", 200, 1.0, 0.05, 4, 250, 1, 0.2, 0.8, 200.0, 800.0, 40.64),
    # a rate of 1 judges every answer: 50; × 3 = 150; free model → 0
    ("rate one, free model", 50, 0.3, 1.0, 3, 400, 3, 0.0, 0.0, 50.0, 150.0, 0.0),
    ("no answers", 0, 0.0, 0.03, 6, 500, 5, 0.15, 0.6, 0.0, 0.0, 0.0),
    # fractions: 350 × (0.02 + 0.98 × 0.02) = 350 × 0.0396 = 13.86; × 5.5 = 76.23;
    # (800 × 0.5 + 3 × 1.5) / 1000 = 0.4045; 76.23 × 0.4045 = 30.835035
    ("fractions", 350, 0.02, 0.02, 5.5, 800, 3, 0.5, 1.5, 13.86, 76.23, 30.835035),
    # no price: calls are still known, the cost is not (None, never 0)
    # 100 × (0.2 + 0.8 × 0.05) = 24; × 7 = 168
    ("no price", 100, 0.2, 0.05, 7, 500, 5, None, None, 24.0, 168.0, None),
    ("no completion price", 100, 0.2, 0.05, 7, 500, 5, 0.1, None, 24.0, 168.0, None),
    # no judged answer yet, so no token figures: 100 × 0.24 = 24; × 6 (the assumption) = 144
    ("no token figures", 100, 0.2, 0.05, ASSUMED_CALLS_PER_ANSWER, None, None, 0.15, 0.6,
     24.0, 144.0, None),
]


@pytest.mark.parametrize(
    ("volume", "flagged", "rate", "calls_per", "prompt_tok", "completion_tok", "prompt_price",
     "completion_price", "judged", "calls", "cost"),
    [case[1:] for case in WEEKLY_CASES],
    ids=[case[0] for case in WEEKLY_CASES],
)
def test_expected_weekly_judge_cost(
    volume, flagged, rate, calls_per, prompt_tok, completion_tok, prompt_price,
    completion_price, judged, calls, cost,
):
    estimate = expected_weekly_judge_cost(
        weekly_volume=volume,
        flagged_share=flagged,
        sample_rate=rate,
        calls_per_answer=calls_per,
        prompt_tokens_per_call=prompt_tok,
        completion_tokens_per_call=completion_tok,
        prompt_price_per_1k=prompt_price,
        completion_price_per_1k=completion_price,
    )
    assert isinstance(estimate, WeeklyCostEstimate)
    assert estimate.judged_answers == pytest.approx(judged, rel=1e-12, abs=1e-12)
    assert estimate.calls == pytest.approx(calls, rel=1e-12, abs=1e-12)
    if cost is None:
        assert estimate.cost is None
    else:
        assert estimate.cost == pytest.approx(cost, rel=1e-12, abs=1e-12)


def test_the_assumption_is_one_decomposition_and_five_claims():
    assert ASSUMED_CALLS_PER_ANSWER == 1 + 5
    assert ASSUMED_CLAIMS_PER_ANSWER == 5


# (mode, claims, batch size, calls, at least): per claim one decomposition and one call a claim;
# batched one decomposition and one call per batch, more when a reply leaves claims open; in
# one call everything at once, more when the reply cannot be read.
RESCORE_CALLS = [
    ("per-claim", 6, 30, 7, False),
    ("per-claim", 0, 30, 1, False),
    ("batched", 6, 30, 2, True),  # issue 41: the preview said 7, the run made 2
    ("batched", 1, 30, 2, True),
    ("batched", 30, 30, 2, True),
    ("batched", 31, 30, 3, True),
    ("batched", 7, 3, 4, True),  # 1 + ⌈7 / 3⌉
    ("batched", 0, 30, 1, True),
    ("single", 6, 30, 1, True),
    ("single", 0, 30, 1, True),
]


@pytest.mark.parametrize(("mode", "claims", "size", "calls", "at_least"), RESCORE_CALLS)
def test_rescore_calls_follow_the_judge_mode(mode, claims, size, calls, at_least):
    assert rescore_calls(mode=mode, claims=claims, batch_size=size) == RescoreCalls(
        calls=calls, at_least=at_least)


@pytest.mark.parametrize(("mode", "claims", "size"), [
    ("bulk", 1, 30), ("per-claim", -1, 30), ("batched", 1, 0),
])
def test_rescore_calls_refuse_what_is_no_run(mode, claims, size):
    with pytest.raises(ValueError):
        rescore_calls(mode=mode, claims=claims, batch_size=size)


def test_more_sampling_costs_more_and_flagging_everything_ignores_the_rate():
    def judged(flagged, rate):
        return expected_weekly_judge_cost(
            weekly_volume=1000, flagged_share=flagged, sample_rate=rate, calls_per_answer=6,
            prompt_tokens_per_call=500, completion_tokens_per_call=5,
            prompt_price_per_1k=0.1, completion_price_per_1k=0.1,
        ).judged_answers

    assert judged(0.1, 0.02) < judged(0.1, 0.03) < judged(0.1, 0.05)
    assert judged(1.0, 0.02) == judged(1.0, 0.5) == 1000


BAD_INPUTS = [
    ("flagged share above 1", {"flagged_share": 1.1}),
    ("negative flagged share", {"flagged_share": -0.01}),
    ("rate above 1", {"sample_rate": 1.5}),
    ("negative rate", {"sample_rate": -0.1}),
    ("rate nan", {"sample_rate": math.nan}),
    ("negative volume", {"weekly_volume": -1}),
    ("infinite volume", {"weekly_volume": math.inf}),
    ("negative calls", {"calls_per_answer": -1}),
    ("negative prompt tokens", {"prompt_tokens_per_call": -5}),
    ("negative price", {"prompt_price_per_1k": -0.1}),
    ("negative price without tokens", {"prompt_tokens_per_call": None,
                                       "completion_price_per_1k": -1}),
]


@pytest.mark.parametrize("overrides", [c[1] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_raise(overrides):
    arguments = {
        "weekly_volume": 100, "flagged_share": 0.1, "sample_rate": 0.03, "calls_per_answer": 6,
        "prompt_tokens_per_call": 500, "completion_tokens_per_call": 5,
        "prompt_price_per_1k": 0.15, "completion_price_per_1k": 0.6,
    } | overrides
    with pytest.raises(ValueError):
        expected_weekly_judge_cost(**arguments)


# (id, prompt tokens, completion tokens, prompt price, completion price, cost)
CALL_CASES = [
    # (1200 × 0.5 + 40 × 1.5) / 1000 = (600 + 60) / 1000 = 0.66
    ("a run", 1200, 40, 0.5, 1.5, 0.66),
    ("no tokens", 0, 0, 0.5, 1.5, 0.0),
    # (3 × 0.002 + 0) / 1000 = 0.000006
    ("tiny", 3, 0, 0.002, 9.0, 0.000006),
    ("unknown price", 1200, 40, None, 1.5, None),
]


@pytest.mark.parametrize(
    ("prompt", "completion", "prompt_price", "completion_price", "cost"),
    [c[1:] for c in CALL_CASES], ids=[c[0] for c in CALL_CASES],
)
def test_call_cost(prompt, completion, prompt_price, completion_price, cost):
    got = call_cost(
        prompt_tokens=prompt, completion_tokens=completion,
        prompt_price_per_1k=prompt_price, completion_price_per_1k=completion_price,
    )
    assert got == (None if cost is None else pytest.approx(cost, rel=1e-12, abs=1e-15))


def test_cached_prompt_tokens_cost_the_cached_price():
    # 1,200 prompt tokens of which 1,024 cached: (176 × 0.5 + 1,024 × 0.125 + 40 × 1.5) / 1000
    # = (88 + 128 + 60) / 1000 = 0.276
    got = call_cost(
        prompt_tokens=1200, completion_tokens=40, prompt_price_per_1k=0.5,
        completion_price_per_1k=1.5, cached_tokens=1024, cached_price_per_1k=0.125,
    )
    assert got == pytest.approx(0.276, rel=1e-12)
    # Without a cached price they cost what the other prompt tokens cost: 0.66 as above.
    assert call_cost(
        prompt_tokens=1200, completion_tokens=40, prompt_price_per_1k=0.5,
        completion_price_per_1k=1.5, cached_tokens=1024,
    ) == pytest.approx(0.66, rel=1e-12)


def test_token_cost_in_decimals_and_cached_never_above_the_prompt():
    from decimal import Decimal

    # (0 × 2 + 10 × 1 + 5 × 4) / 1000 = 0.03: a report of more cached than prompt tokens is
    # capped at the prompt tokens, never a negative part.
    assert token_cost(
        prompt_tokens=Decimal(10), completion_tokens=Decimal(5), cached_tokens=Decimal(12),
        prompt_per_1k=Decimal(2), completion_per_1k=Decimal(4), cached_per_1k=Decimal(1),
    ) == Decimal("0.03")


def test_weekly_cost_prices_the_cached_share():
    # 127 judged × 6 = 762 calls as in "typical"; per call (300 × 0.15 + 200 × 0.0375 +
    # 5 × 0.6) / 1000 = (45 + 7.5 + 3) / 1000 = 0.0555; 762 × 0.0555 = 42.291
    got = expected_weekly_judge_cost(
        weekly_volume=1000, flagged_share=0.1, sample_rate=0.03, calls_per_answer=6,
        prompt_tokens_per_call=500, completion_tokens_per_call=5, prompt_price_per_1k=0.15,
        completion_price_per_1k=0.6, cached_tokens_per_call=200, cached_price_per_1k=0.0375,
    )
    assert got.cost == pytest.approx(42.291, rel=1e-12)


@pytest.mark.parametrize("name", ["gpt-4o-mini", " GPT-4o-mini", "gpt-4O-MINI\t"])
def test_one_rule_finds_a_price(name):
    assert price_key(name) == "gpt-4o-mini"


# --- list prices and how amounts are written (issue 41, point 6) ----------------------------


@pytest.mark.parametrize(("amount", "places"), [
    (None, 2), (Decimal(0), 2), (Decimal("12.4"), 2), (Decimal("1"), 2), (Decimal("0.5"), 2),
    (Decimal("0.05"), 3), (Decimal("0.012"), 3), (Decimal("0.00025"), 5),
    (Decimal("0.000254"), 5), (Decimal("0.0000007"), 6), (0.00025, 5), (-0.003, 4),
    (Decimal("NaN"), 2), (float("inf"), 2),
])
def test_amounts_keep_two_significant_digits_below_one_unit(amount, places):
    assert prices.amount_places(amount) == places


def test_list_prices_are_per_thousand_tokens_and_written_only_where_none_is():
    by_model = {p.judge_model: p for p in prices.LIST_PRICES}
    # Published per million tokens: gpt-4o 2.50 / 1.25 cached / 10.00 USD.
    assert by_model["gpt-4o"] == prices.ListPrice(
        "gpt-4o", Decimal("0.0025"), Decimal("0.00125"), Decimal("0.01"), "USD")
    assert len(by_model) == len(prices.LIST_PRICES)  # one price per model
    for p in prices.LIST_PRICES:
        assert p.judge_model == prices.price_key(p.judge_model)
        assert p.prompt_per_1k == round(p.prompt_per_1k, 6)  # JudgePrice keeps six decimals
        assert p.cached_prompt_per_1k is None or p.cached_prompt_per_1k <= p.prompt_per_1k
    missing = prices.missing_list_prices([" GPT-4o ", "mein-modell"])
    assert "gpt-4o" not in {p.judge_model for p in missing}
    assert len(missing) == len(prices.LIST_PRICES) - 1
