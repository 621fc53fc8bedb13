"""DEFAULT_CUSUM does its job on simulated review weeks: rare false alarms, quick real ones.

Observations are drawn as in production: 20 reviewed answers a week, each a disagreement
about the action side with probability p. Fixed seeds, the real bernoulli_cusum; a few
hundred thousand observations in all, about a second.
"""

import statistics

import numpy as np

from review.domain.cusum import DEFAULT_CUSUM, bernoulli_cusum

PER_WEEK = 20
RUNS = 500


def alarm_indexes(observations):
    """Every observation that raised an alarm (bernoulli_cusum restarts after each)."""
    result = bernoulli_cusum(observations, DEFAULT_CUSUM)
    return [i for i, s in enumerate(result.statistic) if s >= DEFAULT_CUSUM.limit]


def test_no_drift_rarely_alarms_within_half_a_year():
    # Measured in-control ARL at h = 6.0: about 5,750 answers, so P(alarm within 520) is
    # about 1 - exp(-520 / 5750) = 8-9 % (8.1 % over 20,000 simulated runs). Over 500 runs
    # the standard error is 1.2 points; 12 % is three of them above (this seed: 45 of 500,
    # 9 %). At h = 4.3 (an in-control ARL of one year) it is about 39 % and fails.
    rng = np.random.default_rng(20260102)
    weeks = 26
    draws = rng.random((RUNS, weeks * PER_WEEK)) < DEFAULT_CUSUM.p0
    alarmed = sum(bool(alarm_indexes(run.tolist())) for run in draws)
    assert alarmed / RUNS < 0.12


def test_real_drift_alarms_within_a_few_weeks():
    # p jumps from p0 to 0.35 after week 4; the delay counts weeks of drift until the first
    # alarm after the jump (1 = in the first drifting week). Measured ARL at 0.35 from S = 0:
    # about 26 answers, so the median alarm falls in the second drifting week.
    rng = np.random.default_rng(20260103)
    before, after = 4, 26
    clean = rng.random((RUNS, before * PER_WEEK)) < DEFAULT_CUSUM.p0
    drifting = rng.random((RUNS, after * PER_WEEK)) < 0.35
    delays = []
    for head, tail in zip(clean, drifting, strict=True):
        observations = head.tolist() + tail.tolist()
        late = [i for i in alarm_indexes(observations) if i >= before * PER_WEEK]
        assert late, "a drift to 0.35 went unnoticed for half a year"
        delays.append((late[0] - before * PER_WEEK) // PER_WEEK + 1)
    assert statistics.median(delays) <= 3
    # Measured with this seed: 221 runs alarm in drifting week 1, 213 in week 2, 51 in week 3,
    # 12 in week 4, 3 in week 5. Most within two weeks (434 of 500) ...
    assert sum(delay <= 2 for delay in delays) / RUNS > 0.8
    # ... and hardly ever later than four.
    assert sum(delay > 4 for delay in delays) / RUNS < 0.05
