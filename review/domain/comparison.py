"""Two judges set against the same experts: how well each agrees with the experts' labels.

A judge comparison runs a candidate judge as a shadow on answers the experts have reviewed: it
verifies the claims the experts labelled. For the current judge (the run the experts reviewed)
and the candidate, on the same answers, this module gives the per-claim agreement (weighted
kappa with a bootstrap interval over answers), the per-answer agreement (bias, its t interval,
mean absolute error, disagreement on the action threshold) and what verifying an answer's
claims cost. Plain values in, plain values out.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from review.domain.calibration import BiasSummary, ReviewedPair, bias_summary
from review.domain.kappa import Kappa, kappa_with_interval

LABELS = frozenset({"GEDECKT", "TEILWEISE", "UNGEDECKT"})


@dataclass(frozen=True, slots=True)
class ComparedAnswer:
    """One reviewed answer as one judge saw it."""

    answer_id: int
    week: str  # ISO week of the answer, "2026-W48"
    expert_score: float
    expert_labels: dict[int, str]  # claim id -> the expert's label, for the judge's claims
    judge_labels: dict[int, str]  # claim id -> this judge's label (UNPARSEABLE possible)
    judge_score: float | None  # None: the judge gave no score (every verdict unreadable)
    calls: int  # calls that verified the claims (the decomposition apart: the same for both)
    prompt_tokens: int
    completion_tokens: int
    cost: float | None  # None: no price for the judge model


@dataclass(frozen=True, slots=True)
class JudgeAgreement:
    answers: int
    kappa: Kappa
    bias: BiasSummary
    calls_per_answer: float | None
    prompt_tokens_per_answer: float | None
    completion_tokens_per_answer: float | None
    cost_per_answer: float | None  # None when a price is missing for any answer


def judge_agreement(
    answers: Sequence[ComparedAnswer], *, action_threshold: float, seed: int = 0
) -> JudgeAgreement:
    """How one judge agrees with the experts over ``answers``.

    Claims count where both gave one of the three words; an answer counts for the per-answer
    figures where the judge gave a score. The kappa interval resamples whole answers (their
    claims share a context), deterministic for ``seed``.
    """
    pairs: list[tuple[str, str]] = []
    groups: list[int] = []
    for answer in answers:
        for claim_id, expert in answer.expert_labels.items():
            judge = answer.judge_labels.get(claim_id)
            if expert in LABELS and judge in LABELS:
                pairs.append((expert, str(judge)))
                groups.append(answer.answer_id)
    scored = [a for a in answers if a.judge_score is not None]
    bias = bias_summary(
        [ReviewedPair(a.expert_score, float(a.judge_score or 0.0), a.week) for a in scored],
        action_threshold=action_threshold,
    )
    n = len(answers)
    costs = [a.cost for a in answers]
    return JudgeAgreement(
        answers=n,
        kappa=kappa_with_interval(pairs, groups=groups, seed=seed),
        bias=bias,
        calls_per_answer=sum(a.calls for a in answers) / n if n else None,
        prompt_tokens_per_answer=sum(a.prompt_tokens for a in answers) / n if n else None,
        completion_tokens_per_answer=sum(a.completion_tokens for a in answers) / n if n else None,
        cost_per_answer=(
            math.fsum(c for c in costs if c is not None) / n
            if n and all(c is not None for c in costs) else None
        ),
    )


# What a claim adds to a prompt (its line, numbered) and a batched reply's line per claim (the
# word, the chunk ranks, a sentence): rough figures for the estimate before a comparison starts,
# which the page calls an estimate.
CLAIM_PROMPT_TOKENS = 25
BATCH_LINE_COMPLETION_TOKENS = 30
WORD_COMPLETION_TOKENS = 3


@dataclass(frozen=True, slots=True)
class Verification:
    calls: int
    prompt_tokens: float
    completion_tokens: float


def expected_verification(
    *, mode: str, claims: int, context_tokens: float, batch_size: int
) -> Verification:
    """Calls and tokens to verify ``claims`` claims against a context of ``context_tokens``
    (instructions included): per claim, the context with each claim; batched, the context once
    per call of at most ``batch_size`` claims, every claim listed. In one call ("single") the
    comparison hands the judge the claims the experts labelled, so they are verified as
    batched."""
    if claims <= 0:
        return Verification(0, 0.0, 0.0)
    if mode in ("batched", "single"):
        calls = math.ceil(claims / batch_size)
        return Verification(
            calls, calls * context_tokens + claims * CLAIM_PROMPT_TOKENS,
            claims * BATCH_LINE_COMPLETION_TOKENS,
        )
    return Verification(
        claims, claims * (context_tokens + CLAIM_PROMPT_TOKENS), claims * WORD_COMPLETION_TOKENS
    )


def context_tokens_of(call_log: Sequence[dict[str, object]]) -> float | None:
    """The context's prompt tokens (instructions included) as a run's verification calls show
    them: a per-claim call's prompt less its claim, a batched call's less its listed claims.
    None without a verification call with token counts."""
    sizes: list[float] = []
    for record in call_log:
        purpose, tokens = record.get("purpose"), record.get("prompt_tokens")
        if not isinstance(tokens, int) or tokens <= 0:
            continue
        if purpose == "verify" and record.get("attempt") == 1:
            sizes.append(max(tokens - CLAIM_PROMPT_TOKENS, 1))
        elif purpose == "verify_batch":
            claims = record.get("claims")
            listed = claims if isinstance(claims, int) and claims > 0 else 1
            sizes.append(max(tokens - listed * CLAIM_PROMPT_TOKENS, 1))
    return math.fsum(sizes) / len(sizes) if sizes else None
