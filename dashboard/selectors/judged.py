"""A week's judged answers as the weekly figures need them: histograms, not rows.

Per stratum (flagged, unflagged) of one use case and week: how many judged answers had each
score, how many abstained (no claims), and how many had each (supported points, claims) pair.
That is all `figures.py` reads of them, and it is what weekly rollups can keep (issue 22): the
raw path builds these from the judged rows (`from_rows`), a rollup path will read them, and
both go through the same statistics (`statistics.sums_from_counts` and
`claim_share_from_counts`, which give the very floats the lists give).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dashboard.selectors.reads import JudgedRow

# An answer whose run has no readable claim (an abstention, or unreadable verdicts only).
NO_CLAIMS = (0.0, 0)


@dataclass(frozen=True)
class StratumJudged:
    """The judged answers of one stratum of one week."""

    scores: Counter[float] = field(default_factory=Counter)  # score → answers
    abstentions: int = 0  # judged answers without claims
    # (supported points, claims) → answers, where the claims were read (None: not asked for).
    claims: Counter[tuple[float, int]] | None = None

    @property
    def n(self) -> int:
        return sum(self.scores.values())


@dataclass(frozen=True)
class WeekJudged:
    """A week's judged answers: the flagged stratum and the unflagged one."""

    flagged: StratumJudged = field(default_factory=StratumJudged)
    unflagged: StratumJudged = field(default_factory=StratumJudged)

    @property
    def strata(self) -> tuple[StratumJudged, StratumJudged]:
        return self.flagged, self.unflagged

    @classmethod
    def from_rows(
        cls, rows: Iterable[JudgedRow], claims: Mapping[int, tuple[float, int]] | None = None,
    ) -> WeekJudged:
        """From the week's judged rows; `claims`: (points, claims) by run id, where read."""
        parts: list[StratumJudged] = []
        rows = rows if isinstance(rows, list) else list(rows)
        for flagged in (True, False):
            mine = [r for r in rows if bool(r.flagged) is flagged]
            parts.append(StratumJudged(
                Counter(r.score for r in mine),
                sum(1 for r in mine if r.abstention),
                None if claims is None else Counter(
                    NO_CLAIMS if r.run_id is None else claims.get(r.run_id, NO_CLAIMS)
                    for r in mine
                ),
            ))
        return cls(parts[0], parts[1])


def judged_by_week(
    rows: Iterable[JudgedRow], claims: Mapping[int, tuple[float, int]] | None = None, *,
    claims_from: int = 0,
) -> dict[tuple[int, int], WeekJudged]:
    """`WeekJudged` per (use case id, week index) of the judged rows; the claims (by run id)
    for the weeks from `claims_from` on, those they were read for."""
    grouped: dict[tuple[int, int], list[JudgedRow]] = {}
    for row in rows:
        grouped.setdefault((row.use_case_id, row.week), []).append(row)
    return {
        key: WeekJudged.from_rows(part, claims if key[1] >= claims_from else None)
        for key, part in grouped.items()
    }
