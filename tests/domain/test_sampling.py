"""Tier 2 sampling (ingest.domain.sampling): plain Python, no Django."""

import math

import pytest

from ingest.domain.sampling import SampleDecision, decide, random_draw
from monitoring.domain.sample_rate import DEFAULT_SAMPLE_RATE, validate_rate

# (id, rate, expected float or None for ValueError)
RATE_CASES = [
    ("zero", 0, None),
    ("zero float", 0.0, None),
    ("negative", -0.1, None),
    ("one", 1.0, 1.0),
    ("one int", 1, 1.0),
    ("just above one", 1.0001, None),
    ("nan", math.nan, None),
    ("infinity", math.inf, None),
    ("minus infinity", -math.inf, None),
    ("bool true", True, None),
    ("bool false", False, None),
    ("string", "0.1", None),
    ("none", None, None),
    ("smallest positive", 5e-324, 5e-324),
    ("default", DEFAULT_SAMPLE_RATE, DEFAULT_SAMPLE_RATE),
    ("typical", 0.05, 0.05),
]


@pytest.mark.parametrize(
    ("rate", "expected"), [c[1:] for c in RATE_CASES], ids=[c[0] for c in RATE_CASES]
)
def test_validate_rate(rate, expected):
    if expected is None:
        with pytest.raises(ValueError):
            validate_rate(rate)
    else:
        result = validate_rate(rate)
        assert result == expected
        assert type(result) is float


def test_default_rate_is_in_the_sensible_range():
    assert 0.02 <= DEFAULT_SAMPLE_RATE <= 0.05


@pytest.mark.parametrize("rate", [0, -1, 1.5, math.nan, True])
def test_decide_rejects_invalid_rate(rate):
    with pytest.raises(ValueError):
        decide(service_key="1", external_id="x", flagged=False, rate=rate)


def _ids(n, prefix="ans"):
    return [f"{prefix}-{i}" for i in range(n)]


def test_random_draw_is_in_unit_interval_and_deterministic():
    for external_id in _ids(500):
        a = random_draw("7", external_id)
        assert 0.0 <= a < 1.0
        assert random_draw("7", external_id) == a


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (("1", "a"), ("2", "a")),  # other service
        (("1", "a"), ("1", "b")),  # other external id
        # the separator keeps ("1", "2x") and ("12", "x") apart
        (("1", "2x"), ("12", "x")),
    ],
)
def test_random_draw_depends_on_service_and_external_id(left, right):
    assert random_draw(*left) != random_draw(*right)


@pytest.mark.parametrize("rate", [0.01, 0.03, 0.5, 1.0])
def test_flagged_is_always_sampled_with_pi_one(rate):
    for external_id in _ids(300):
        d = decide(service_key="3", external_id=external_id, flagged=True, rate=rate)
        assert d.sampled is True
        assert d.reason == "flagged"
        assert d.inclusion_probability == 1.0


@pytest.mark.parametrize("rate", [0.03, 0.3, 0.9])
def test_unflagged_decision_follows_the_draw(rate):
    seen = set()
    for external_id in _ids(400):
        d = decide(service_key="3", external_id=external_id, flagged=False, rate=rate)
        hit = random_draw("3", external_id) < rate
        assert d.in_random_sample is hit
        assert d.sampled is hit
        assert d.reason == ("random" if hit else "not_sampled")
        # pi is the rate for every unflagged answer, sampled or not (stratum sizes need it)
        assert d.inclusion_probability == rate
        seen.add(hit)
    assert seen == {True, False}


def test_random_draw_is_independent_of_the_flag():
    """The flag changes reason and pi, never the draw itself."""
    rate = 0.2
    both_hit = 0
    for external_id in _ids(1000):
        flagged = decide(service_key="9", external_id=external_id, flagged=True, rate=rate)
        plain = decide(service_key="9", external_id=external_id, flagged=False, rate=rate)
        assert flagged.in_random_sample == plain.in_random_sample
        both_hit += flagged.in_random_sample
    # some flagged answers are also in the random sample, so they can be compared
    assert 0 < both_hit < 1000


def test_decide_is_deterministic():
    for external_id in _ids(200):
        kwargs = {"service_key": "42", "external_id": external_id, "flagged": False, "rate": 0.5}
        assert decide(**kwargs) == decide(**kwargs)
        assert isinstance(decide(**kwargs), SampleDecision)


def test_rate_one_samples_every_unflagged_answer():
    for external_id in _ids(300):
        d = decide(service_key="5", external_id=external_id, flagged=False, rate=1.0)
        assert (d.sampled, d.reason, d.inclusion_probability) == (True, "random", 1.0)


@pytest.mark.parametrize("rate", [0.02, 0.03, 0.05, 0.5])
def test_empirical_share_matches_rate(rate):
    n = 20_000
    hits = sum(
        decide(service_key="11", external_id=f"q-{i}", flagged=False, rate=rate).sampled
        for i in range(n)
    )
    se = math.sqrt(rate * (1 - rate) / n)
    assert abs(hits / n - rate) < 4 * se, (hits / n, rate, se)


def test_draws_are_uniform_over_deciles():
    n = 20_000
    counts = [0] * 10
    for i in range(n):
        counts[int(random_draw("u", f"id{i}") * 10)] += 1
    expected = n / 10
    chi2 = sum((c - expected) ** 2 / expected for c in counts)
    # chi-square with 9 degrees of freedom: P(chi2 > 27.9) = 0.001
    assert chi2 < 27.9, counts
