"""The judge comparison's plain figures (review.domain.comparison), by hand."""

import pytest

from review.domain.comparison import (
    ComparedAnswer,
    context_tokens_of,
    expected_verification,
    judge_agreement,
)

G, T, U = "GEDECKT", "TEILWEISE", "UNGEDECKT"


@pytest.mark.parametrize(
    ("mode", "claims", "calls", "prompt", "completion"),
    [
        # per claim: 7 × (375 + 25) = 2,800 prompt, 7 × 3 = 21 completion
        ("per-claim", 7, 7, 2800, 21),
        # batched, batches of 5: 2 calls × 375 + 7 × 25 = 925 prompt, 7 × 30 = 210 completion
        ("batched", 7, 2, 925, 210),
        ("batched", 0, 0, 0, 0),
        # one call: the experts' claims are given, so verified as batched
        ("single", 7, 2, 925, 210),
    ],
)
def test_expected_verification(mode, claims, calls, prompt, completion):
    got = expected_verification(mode=mode, claims=claims, context_tokens=375, batch_size=5)
    assert (got.calls, got.prompt_tokens, got.completion_tokens) == (calls, prompt, completion)


def test_context_tokens_from_a_runs_verifications():
    log = [
        {"purpose": "decompose", "attempt": 1, "prompt_tokens": 900},
        {"purpose": "verify", "attempt": 1, "prompt_tokens": 425},
        {"purpose": "verify", "attempt": 2, "prompt_tokens": 480},  # a retry: left out
        {"purpose": "verify", "attempt": 1, "prompt_tokens": 445},
    ]
    # (425 - 25 + 445 - 25) / 2 = 410
    assert context_tokens_of(log) == 410
    assert context_tokens_of([{"purpose": "decompose", "prompt_tokens": 900}]) is None


def answer(i, expert, judge, judge_score, *, cost=0.01):
    return ComparedAnswer(
        answer_id=i, week="2026-W48", expert_score=expert_score(expert),
        expert_labels=dict(enumerate(expert)), judge_labels=dict(enumerate(judge)),
        judge_score=judge_score, calls=2, prompt_tokens=800, completion_tokens=4, cost=cost,
    )


def expert_score(labels):
    return sum({G: 1.0, T: 0.5, U: 0.0}[label] for label in labels) / len(labels)


def test_agreement_by_hand():
    answers = [
        answer(1, [G, G], [G, G], 1.0),
        answer(2, [G, U], [G, G], 1.0),
        answer(3, [U, U], [U, "UNPARSEABLE"], 0.0),  # an unreadable verdict: no claim pair
        answer(4, [G, T], [G, T], 0.75, cost=None),
    ]
    got = judge_agreement(answers, action_threshold=0.85)
    # Differences expert - judge: 0, -0.5, 0, 0: bias -0.125, MAE 0.125; answer 2 on the other
    # side of 0.85: 25 %.
    assert got.answers == 4
    assert got.bias.bias == pytest.approx(-0.125) and got.bias.mae == pytest.approx(0.125)
    assert got.bias.threshold_disagreement == pytest.approx(0.25)
    assert got.kappa.n == 7  # 8 claims, one unreadable
    assert got.calls_per_answer == 2 and got.prompt_tokens_per_answer == 800
    assert got.cost_per_answer is None  # one answer's judge has no price


def test_no_answers():
    got = judge_agreement([], action_threshold=0.85)
    assert (got.answers, got.calls_per_answer, got.cost_per_answer) == (0, None, None)
    assert got.bias.bias is None and got.kappa.kappa is None
