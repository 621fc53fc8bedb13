"""Causes with curved similarity (issue 39, point 6), for bench/statistics.py --only causes.

A diagnosis window (CAUSES_WEEKS weeks) of a use case in which only similarity acts on
faithfulness - as a line, a step or an S-curve - while chunk count follows similarity (poor
retrieval returns more chunks) without an effect of its own, and multi-part questions have none.
Each answer has 1 + Poisson(2.5) claims, each supported with the probability its similarity
gives, so scores mix 1.0 and partial values; tier 1 flags the unfaithful answers more often,
every flagged answer is judged, and a random 3 % of the rest. The product's `adjusted_effects`
(dashboard/domain/adjusted.py) fits the judged answers; the rows say how often it advises a
reranker (chunks hold, fewer being better) or blames multi-part questions (target ≤ 5 % each),
and how often it finds similarity. Beside it, the straight-line fit the product used before
(`linear_fit`, the same weights, sandwich and Holm), for comparison.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from dashboard.domain.adjusted import adjusted_effects, holm

# The diagnosis' window: dashboard.selectors.weeks.CAUSES_WEEKS (a module that needs Django).
CAUSES_WEEKS = 8
SAMPLE_RATE = 0.03
MULTI_PART = 0.25  # share of multi-part questions, unrelated to the score
TARGET = 0.05  # advice where only similarity acts, at most


def _line(s: np.ndarray) -> np.ndarray:
    return np.clip(0.45 + 0.55 * s, 0.0, 1.0)


def _step(s: np.ndarray) -> np.ndarray:
    return np.where(s < 0.65, 0.65, 0.95)


def _s_curve(s: np.ndarray) -> np.ndarray:
    return 0.65 + 0.30 / (1 + np.exp(-(s - 0.65) / 0.03))


# How a claim's chance of being supported depends on the answer's best similarity.
SHAPES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "line": _line, "step": _step, "S-curve": _s_curve,
}


# How many chunks an answer's retrieval returns, on average, by its best similarity: poor
# retrieval returns more. Along a line, the old straight-line fit was safe (what similarity's
# curve leaves over is uncorrelated with a line in similarity); bent, the curve's remainder
# went to chunk count.
CHUNKS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "line": lambda s: 2 + 30 * (1 - s),
    "convex": lambda s: 2 + 40 * (1 - s) ** 2,
    "S-curve": lambda s: 3 + 20 / (1 + np.exp((s - 0.65) / 0.05)),
}


@dataclass(frozen=True, slots=True)
class Window:
    rows: list[tuple[float, int, bool, bool, float]]  # the judged answers
    sizes: tuple[int, int]  # (flagged, unflagged) answers of the window


def window(rng: np.random.Generator, shape: str, chunks_by: str, per_week: int) -> Window:
    """CAUSES_WEEKS weeks of about ``per_week`` answers each."""
    n = int(rng.poisson(per_week * CAUSES_WEEKS))
    s = np.clip(rng.normal(0.72, 0.12, n), 0.2, 0.99)
    chunks = rng.poisson(CHUNKS[chunks_by](s))  # follows similarity, no effect of its own
    multi = rng.random(n) < MULTI_PART
    claims = 1 + rng.poisson(2.5, n)
    score = rng.binomial(claims, SHAPES[shape](s)) / claims
    flagged = rng.random(n) < 0.04 + 0.5 * (1 - score)  # tier 1 finds the unfaithful ones
    judged = flagged | (rng.random(n) < SAMPLE_RATE)
    rows = [(float(a), int(b), bool(c), bool(d), float(e)) for a, b, c, d, e in zip(
        s[judged], chunks[judged], multi[judged], flagged[judged], score[judged], strict=True)]
    return Window(rows, (int(flagged.sum()), int((~flagged).sum())))


def linear_fit(w: Window) -> tuple[bool, bool, bool]:
    """The fit the product made before: similarity as a straight line. (similarity found,
    reranker advised, multi-part blamed), with the same weights, sandwich variance and Holm."""
    data = np.array(w.rows, dtype=float)
    h = (data[:, 3] == 0).astype(int)
    counts = np.bincount(h, minlength=2)
    weights = np.array([w.sizes[k] / counts[k] if counts[k] else 0.0 for k in (0, 1)])[h]
    x = np.column_stack([np.ones(len(data)), data[:, 0] / 0.1, data[:, 1] / 10, data[:, 2]])
    y = data[:, 4]
    bread = np.linalg.pinv(x.T @ (weights[:, None] * x))
    beta = bread @ (x.T @ (weights * y))
    scores = (weights * (y - x @ beta))[:, None] * x
    meat = np.zeros((4, 4))
    for k in (0, 1):
        part = scores[h == k]
        if len(part) > 1:
            centred = part - part.mean(axis=0)
            meat += len(part) / (len(part) - 1) * centred.T @ centred
    se = np.sqrt(np.diag(bread @ meat @ bread))[1:]
    p = [float(2 * stats.t.sf(abs(b) / e, len(data) - 4)) for b, e in zip(beta[1:], se,
                                                                         strict=True)]
    held = [q < 0.05 for q in holm(p)]
    return held[0] and beta[1] > 0, held[1] and beta[2] < 0, held[2] and beta[3] < 0


@dataclass(frozen=True, slots=True)
class Row:
    shape: str
    chunks_by: str
    per_week: int
    judged: float  # judged answers per window, mean
    similarity: float  # share of runs in which similarity holds (higher: more faithful)
    reranker: float  # chunks hold, fewer being better: a reranker advised
    multi_part: float  # multi-part questions blamed
    old_similarity: float  # the straight-line fit's
    old_reranker: float
    old_multi_part: float


def causes_row(
    rng: np.random.Generator, shape: str, chunks_by: str, per_week: int, reps: int
) -> Row:
    found = np.zeros((reps, 6), dtype=bool)
    judged = 0
    for r in range(reps):
        w = window(rng, shape, chunks_by, per_week)
        judged += len(w.rows)
        similarity, chunks, multi = adjusted_effects(w.rows, sizes=w.sizes).effects
        found[r, :3] = [
            similarity.holds and (similarity.estimate or 0) > 0,
            chunks.holds and (chunks.estimate or 0) < 0,
            multi.holds and (multi.estimate or 0) < 0,
        ]
        found[r, 3:] = linear_fit(w)
    share = found.mean(axis=0)
    return Row(shape, chunks_by, per_week, judged / reps, *map(float, share))


def causes_table(rng: np.random.Generator, reps: int) -> list[str]:
    """Prints the table; returns the targets missed."""
    print("\nCauses with curved similarity: only similarity acts; chunk count follows it, "
          f"multi-part questions do nothing ({CAUSES_WEEKS}-week window, {reps} runs a row).")
    print("Advice share: chunks (reranker) and multi-part hold in the harmful direction "
          f"(target ≤ {100 * TARGET:.0f} %); similarity found: it holds, higher being better.")
    print("| similarity acts | chunks follow | answers/wk | judged | similarity found | "
          "reranker advised | multi-part advised | old line: similarity | old: reranker | "
          "old: multi-part |")
    print("|-----------------|---------------|-----------:|-------:|-----------------:|"
          "-----------------:|-------------------:|---------------------:|--------------:|"
          "----------------:|")
    missed = []
    for shape in SHAPES:
        for chunks_by in CHUNKS:
            for per_week in (500, 2000):
                row = causes_row(rng, shape, chunks_by, per_week, reps)
                print(f"| {shape:<15} | {chunks_by:<13} | {per_week:>10,} | {row.judged:>6.0f} | "
                      f"{_pct(row.similarity):>16} | {_pct(row.reranker):>16} | "
                      f"{_pct(row.multi_part):>18} | {_pct(row.old_similarity):>20} | "
                      f"{_pct(row.old_reranker):>13} | {_pct(row.old_multi_part):>15} |",
                      flush=True)
                for name, share in (("reranker", row.reranker), ("multi-part", row.multi_part)):
                    if share > TARGET + _noise(TARGET, reps):
                        missed.append(f"{name} advised in {_pct(share)} of runs ({shape} "
                                      f"similarity, chunks along a {chunks_by}, {per_week:,} "
                                      "answers a week)")
    return missed


def _noise(share: float, reps: int) -> float:
    """Two Monte Carlo standard errors of a share at the target: a row within them cannot be
    told from one on the target."""
    return 2 * math.sqrt(share * (1 - share) / reps)


def _pct(share: float) -> str:
    return f"{100 * share:.1f} %"
