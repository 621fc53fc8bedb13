"""Statistics for the dashboard: stratified weekly and pooled estimates with intervals
(`estimates`), the claim-level share (`claims`), their inputs from histograms of values
rather than lists (`counts`, for the weekly rollups), what a week's interval can decide
(`precision`), the trigger's lift (`lift`).

One import path for callers: everything public is re-exported here.
"""

from monitoring.domain.statistics.claims import ClaimStratum, claim_share
from monitoring.domain.statistics.counts import (
    ClaimCounts,
    claim_share_from_counts,
    indicator_counts,
    sums_from_counts,
)
from monitoring.domain.statistics.estimates import (
    MIN_JUDGED,
    POOLED_PRIOR,
    SCORE_PRIOR,
    SHARE_PRIOR,
    Estimate,
    Fit,
    Stratum,
    StratumSums,
    fit_mean,
    fit_pooled,
    indicator_strata,
    interval,
    mean_from_sums,
    pooled_mean,
    share_below,
    share_from_sums,
    stratified_mean,
    stratified_share,
    summarize,
    week_strata,
    wilson,
    wilson_interval,
    z_value,
)
from monitoring.domain.statistics.lift import Lift, lift
from monitoring.domain.statistics.precision import (
    DECISIVE_HALF_WIDTH,
    UNDECIDED_WIDTH,
    Precision,
    sample_rate_for,
    shown_digits,
    tops_at_estimate,
    traffic_light,
    trend,
    week_precision,
)

__all__ = [
    "DECISIVE_HALF_WIDTH",
    "MIN_JUDGED",
    "UNDECIDED_WIDTH",
    "ClaimCounts",
    "ClaimStratum",
    "Estimate",
    "Fit",
    "Lift",
    "Precision",
    "Stratum",
    "StratumSums",
    "claim_share",
    "claim_share_from_counts",
    "fit_mean",
    "fit_pooled",
    "indicator_counts",
    "indicator_strata",
    "interval",
    "lift",
    "mean_from_sums",
    "pooled_mean",
    "sample_rate_for",
    "POOLED_PRIOR",
    "SCORE_PRIOR",
    "SHARE_PRIOR",
    "share_below",
    "share_from_sums",
    "stratified_mean",
    "stratified_share",
    "summarize",
    "sums_from_counts",
    "traffic_light",
    "trend",
    "shown_digits",
    "tops_at_estimate",
    "week_precision",
    "week_strata",
    "wilson",
    "wilson_interval",
    "z_value",
]
