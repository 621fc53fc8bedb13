"""What a claim's verdict is worth: the one rule behind an answer's score, the claim-level share
and the rollups (GEDECKT 1, TEILWEISE 0.5, UNGEDECKT 0; an unreadable verdict counts neither as
a claim nor as points)."""

CLAIM_POINTS: dict[str, float] = {"GEDECKT": 1.0, "TEILWEISE": 0.5, "UNGEDECKT": 0.0}

# Twice the points, as integers: what the rollups sum exactly.
POINTS2: dict[str, int] = {label: round(2 * points) for label, points in CLAIM_POINTS.items()}

