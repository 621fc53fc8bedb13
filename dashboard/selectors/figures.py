"""The figures of one use case's weeks: each week's stratified estimate (its flagged and its
unflagged answers are two strata, weighted by their sizes), the shares, the pooled view over the
weeks before it, the experts' scale and the judge's usage. The statistics live in
`dashboard.domain.statistics` and `expert_scale`; this module hands them what reads.py read."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from django.utils import timezone

from common.db_router import reads_from_replica
from dashboard.domain.expert_scale import POOLED_WEEKS as EXPERT_POOLED_WEEKS
from dashboard.domain.expert_scale import ExpertScale, Review, pooling_weeks
from dashboard.domain.expert_weeks import expert_scale_by_week
from dashboard.domain.headline import (
    EXPERTS,
    RUNNING_CONFIDENCE,
    Correction,
    Figure,
    Headline,
    complete_week_headline,
)
from dashboard.domain.headline import headline as headline_now
from dashboard.domain.statistics import counts as statistics_counts
from dashboard.domain.statistics import estimates as statistics_estimates
from dashboard.domain.statistics import precision as statistics_precision
from dashboard.domain.statistics.cells import Estimate, StratumSums, z_value
from dashboard.domain.statistics.precision import Precision
from dashboard.domain.trend import WeekPoint
from dashboard.selectors.judged import StratumJudged, WeekJudged
from dashboard.selectors.reads import (
    Usage,
    read_reviews,
)
from dashboard.selectors.restarts import pool_restarts
from dashboard.selectors.segments import SegmentFilter
from dashboard.selectors.weekly_inputs import weekly_inputs, weekly_usage
from dashboard.selectors.weeks import POOLED_WEEKS, WEEKS, Week, iso_weeks
from judging.domain import judgement
from monitoring.models import JudgeMode, UseCase


@dataclass(frozen=True)
class WeekFigures:
    """Everything the dashboard shows about one use case in one ISO week.

    `below`, `abstention_share` and `claims` are None where they were not asked for (the
    overview computes them for this week and last only).
    """

    week: Week
    current: bool  # the week is not over yet
    volume: int
    flagged: int
    judged: int
    judged_flagged: int
    judged_unflagged: int
    abstentions: int  # judged answers without claims
    estimate: Estimate  # mean faithfulness, stratified
    below: Estimate | None  # share of answers below the action threshold
    abstention_share: Estimate | None
    claims: Estimate | None  # share of supported claims
    light: str  # red / amber / green / grey
    runs: int
    calls: int
    cost: Decimal
    unpriced_runs: int
    judges: tuple[tuple[str, str], ...]  # (judge model, prompt version), sorted
    judge_changed: bool  # a judge model or prompt version the latest judged week before lacked
    # The judge-scale estimate over this week and the ones before it (`pooled_weeks` in all,
    # fewer at the start of the data), and its light.
    pooled: Estimate | None = None
    pooled_light: str = "grey"
    pooled_weeks: int = 1
    # The light of the 4-week pooled view (POOLED_WEEKS), whichever view is shown: the action
    # alarm reads that one, and so does the overview's card light where both weeks are grey.
    standard_pooled_light: str = "grey"
    standard_pooled_n: int = 0  # the judged answers that light rests on
    # What the week's own estimate can decide and what would make it decisive.
    precision: Precision | None = None
    # Faithfulness on the experts' scale (prediction-powered: the judge-scale estimate over
    # this week and the 3 before it, corrected by the mean expert − judge difference of the
    # reviews of those weeks, none before a drift restart); None without any review there.
    expert: ExpertScale | None = None
    expert_light: str = "grey"
    # The 4-week pooled view itself (the light above reads it) and the weeks it spans.
    standard_pooled: Estimate | None = None
    standard_pooled_weeks: int = 1
    # The running week only: its estimate at headline.RUNNING_CONFIDENCE, for the hourly
    # looks (None for a complete week), and that estimate's light.
    strict: Estimate | None = None
    strict_light: str = "grey"
    # Of `runs`, those still pending or running: a week whose light is grey because it is
    # still being judged says so (the same grouped read as `runs`, no query of its own).
    open_runs: int = 0
    # The judge's estimates of this week and the ones before it (up to POOLED_WEEKS, oldest
    # first), for the trend check of a pooled headline, and the threshold it is read against.
    pool_points: tuple[WeekPoint, ...] = ()
    action_threshold: float | None = None

    @property
    def complete_headline(self) -> Headline:
        """The headline of this week as a complete week (dashboard.domain.headline)."""
        expert = self.expert
        return complete_week_headline(
            week=self.label,
            experts=None if expert is None else Figure(
                expert.value, expert.low, expert.high, expert.n_reviews, expert.too_few,
                self.expert_light, expert.weeks_pooled),
            judge_week=_figure(self.estimate, self.light, 1),
            judge_pooled=_figure(self.standard_pooled, self.standard_pooled_light,
                                 self.standard_pooled_weeks)
            if self.standard_pooled is not None else _figure(self.estimate, self.light, 1),
            pool_weeks=self.pool_points, action_threshold=self.action_threshold,
        )

    @property
    def running_strict(self) -> Figure | None:
        """The running week's strict estimate as the headline reads it (None: complete)."""
        return None if self.strict is None else _figure(self.strict, self.strict_light, 1)

    @property
    def judge_labels(self) -> list[tuple[str, str, str]]:
        """(judge model, prompt version, mode as the reader calls it) per judge of the week."""
        return [
            (model, version, str(JudgeMode(judgement.mode_of_prompt_version(version)).label))
            for model, version in self.judges
        ]

    @property
    def headline_on_experts_scale(self) -> bool:
        """The experts' scale leads once a week's batch of reviews stands behind it."""
        return (
            self.expert is not None and self.expert.value is not None
            and not self.expert.too_few
        )

    @property
    def label(self) -> str:
        return self.week.label

    @property
    def flagged_share(self) -> float | None:
        return self.flagged / self.volume if self.volume else None

    @property
    def flagged_percent(self) -> float | None:
        return self.flagged / self.volume * 100 if self.volume else None


def _figure(estimate: Estimate, light: str, weeks: int) -> Figure:
    return Figure(estimate.value, estimate.low, estimate.high, estimate.n, estimate.too_few,
                  light, weeks)


def use_case_headline(weeks: Sequence[WeekFigures]) -> Headline:
    """The use case's headline now (dashboard.domain.headline): the running week where its
    strict estimate already decides it red, else the last complete week's headline. `weeks`
    oldest first, as the selectors give them. It carries the judge runs of the week it speaks
    for, open ones included."""
    headline = _headline_now(weeks)
    spoken = next((w for w in reversed(weeks) if w.label == headline.week), None)
    if spoken is None or not spoken.runs:
        return headline
    return dataclasses.replace(headline, runs=spoken.runs, open_runs=spoken.open_runs)


def _headline_now(weeks: Sequence[WeekFigures]) -> Headline:
    last = weeks[-1]
    if not last.current:
        return last.complete_headline
    # A span of the running week alone: its own figures stand in for the complete week's.
    complete = weeks[-2].complete_headline if len(weeks) > 1 else dataclasses.replace(
        last.complete_headline, running=True)
    return headline_now(
        complete=complete, running_week=last.label,
        running=_figure(last.estimate, last.light, 1), running_strict=last.running_strict,
        correction=carried_correction(weeks[-2]) if len(weeks) > 1 else None,
    )


def carried_correction(complete: WeekFigures) -> Correction | None:
    """The experts' correction of a complete week whose headline is on the experts' scale,
    to read the running week on that scale too; None where the judge's scale leads."""
    expert = complete.expert
    if (complete.complete_headline.scale != EXPERTS or expert is None
            or expert.correction is None or expert.correction_variance is None
            or complete.action_threshold is None):
        return None
    return Correction(expert.correction, expert.correction_variance, complete.action_threshold)


def running_strict_on_headline_scale(before: WeekFigures, week: WeekFigures) -> Figure | None:
    """The running week's strict figure as the headline reads it: on the experts' scale where
    the complete week before leads on it (`carried_correction`), else the judge's."""
    strict = week.running_strict
    correction = carried_correction(before)
    if strict is None or correction is None:
        return strict
    return correction.apply(strict, z_value(RUNNING_CONFIDENCE))


def _sums(
    sizes: tuple[int, int], judged: WeekJudged,
    counts: Callable[[StratumJudged], Mapping[float, int]] | None = None,
) -> list[StratumSums]:
    """[flagged, unflagged] sufficient statistics from their sizes and the week's judged
    answers (`counts`: the histogram to take of each stratum; its scores by default). A
    stratum is never smaller than what was judged of it (an answer stored between the two
    queries would otherwise make the domain refuse the group); the flagged one is judged in
    full, the unflagged one drawn at random."""
    return [
        statistics_counts.sums_from_counts(
            (counts or _scores)(part), size=max(size, part.n), drawn=h == 1
        )
        for h, (size, part) in enumerate(zip(sizes, judged.strata, strict=True))
    ]


def _scores(part: StratumJudged) -> Mapping[float, int]:
    return part.scores


@dataclass(frozen=True)
class _Shares:
    below: Estimate | None = None  # share of answers below the action threshold
    abstention: Estimate | None = None
    claims: Estimate | None = None  # share of supported claims


def _shares(
    sizes: tuple[int, int], judged: WeekJudged, threshold: float, *, claims: bool
) -> _Shares:
    """A week's shares: below the threshold, abstentions, and (`claims`: the week's claims
    were read) the supported claims."""
    below = statistics_estimates.share_from_sums(_sums(
        sizes, judged, lambda part: statistics_counts.indicator_counts(part.scores,
                                                                lambda s: s < threshold)
    ))
    abstention = statistics_estimates.share_from_sums(_sums(
        sizes, judged, lambda part: {1.0: part.abstentions, 0.0: part.n - part.abstentions}
    ))
    if not claims:
        return _Shares(below, abstention)
    claim_share = statistics_counts.claim_share_from_counts([
        statistics_counts.ClaimCounts(max(size, part.n), part.claims or {}, drawn=h == 1)
        for h, (size, part) in enumerate(zip(sizes, judged.strata, strict=True))
    ])
    return _Shares(below, abstention, claim_share)


def _expert(
    use_case_id: int, i: int, labels: Sequence[str], every: list[list[StratumSums]],
    reviews: dict[tuple[int, int], list[Review]] | None, restarts: Sequence[str],
) -> ExpertScale | None:
    """The experts' scale of week `i` (an index into `labels` and `every`): over it and the
    weeks before it (expert_scale.POOLED_WEEKS, whatever the pooled view shows), none before
    the latest restart up to it (`restarts`: a drift alarm's or a judge change's week). The
    correction is taken per week and stratum (`expert_weeks`), so each week's reviews stay
    with their week. Reviews after week `i` never enter, so a later alarm does not change an
    earlier week's figure."""
    if reviews is None:
        return None
    restart = max((r for r in restarts if r <= labels[i]), default=None)
    chosen = set(pooling_weeks(labels[: i + 1], restart=restart))
    since = [j for j in range(i + 1) if labels[j] in chosen]
    by_week = [reviews.get((use_case_id, j), []) for j in since]
    if not any(by_week):
        return None
    return expert_scale_by_week([every[j] for j in since], by_week)


def week_figures(
    *,
    use_case: UseCase,
    weeks: Sequence[Week],
    counts: dict[tuple[int, int], tuple[int, int]],
    judged: Mapping[tuple[int, int], WeekJudged],
    usage: dict[tuple[int, int], Usage],
    full_from: int = 0,
    claims_from: int | None = None,
    reviews: dict[tuple[int, int], list[Review]] | None = None,
    restarts: Sequence[str] = (),
    pooled_weeks: int = POOLED_WEEKS,
) -> list[WeekFigures]:
    """The figures of each week: the shares from week `full_from` on, the claim share from
    week `claims_from` on (None: none; `judged` holds those weeks' claims).

    `judged`: the judged answers by (use case id, week index). `restarts`: the weeks from which
    the experts' scale pools again (`restarts.pool_restarts`: drift alarms' and new generator
    models'); a week whose judge changed (the trend's mark, `judge_changed`) is added here."""
    threshold = use_case.action_threshold
    now = timezone.now()
    out: list[WeekFigures] = []
    every: list[list[StratumSums]] = []  # each week's strata, for the pooled views
    labels = [w.label for w in weeks]
    # The judges of the latest week before that had any: a week with a judge it lacked is a
    # change (a switch back to an earlier model or prompt is one too).
    before: set[tuple[str, str]] = set()
    # Restarts of the experts' pool: the drift alarms' and the judge changes' seen so far.
    restarting = list(restarts)
    for i, week in enumerate(weeks):
        volume, flagged = counts.get((use_case.pk, i), (0, 0))
        week_judged = judged.get((use_case.pk, i), _NOTHING_JUDGED)
        sizes = (flagged, volume - flagged)
        strata = _sums(sizes, week_judged)
        every.append(strata)
        window = list(range(max(0, i - pooled_weeks + 1), i + 1))
        pooled = statistics_estimates.pooled_mean([every[j] for j in window])
        standard = pooled if pooled_weeks == POOLED_WEEKS else statistics_estimates.pooled_mean(
            every[max(0, i - POOLED_WEEKS + 1):i + 1])
        week_usage = usage.get((use_case.pk, i), Usage())
        if judge_changed(before, week_usage.judges):
            # A new judge model, mode or prompt version (the mode is in the prompt version):
            # reviews of the judge before it measured another judge's error.
            restarting.append(week.label)
        shares = _Shares()
        if i >= full_from:
            shares = _shares(sizes, week_judged, threshold,
                             claims=claims_from is not None and i >= claims_from)
        figures = _figures(
            week=week, current=week.end > now, volume=volume, flagged=flagged,
            judged=week_judged, strata=strata, shares=shares, threshold=threshold,
            usage=week_usage, before=before, pooled=pooled,
            pooled_weeks=len(window), standard_pooled=standard,
            standard_pooled_weeks=min(POOLED_WEEKS, i + 1),
            expert=_expert(use_case.pk, i, labels, every, reviews, restarting),
        )
        points = tuple(f.pool_points[-1] for f in out[-(_POOL_SPAN - 1):]) + (WeekPoint(
            figures.estimate.value, figures.estimate.low, figures.estimate.high, volume),)
        figures = dataclasses.replace(figures, pool_points=points, action_threshold=threshold)
        out.append(figures)
        if figures.judges:
            before = set(figures.judges)
    return out


_NOTHING_JUDGED = WeekJudged()
# The weeks a pooled headline can span: the judge's standard view or the experts' scale.
_POOL_SPAN = max(POOLED_WEEKS, EXPERT_POOLED_WEEKS)


def judge_changed(before: set[tuple[str, str]], judges: set[tuple[str, str]]) -> bool:
    """A week judged by a (model, prompt version) that the latest judged week before it lacked:
    the trend's mark, and a restart of the experts' pool."""
    return bool(before and set(judges) - before)


def _figures(
    *, week: Week, current: bool, volume: int, flagged: int, judged: WeekJudged,
    strata: list[StratumSums], shares: _Shares, threshold: float, usage: Usage,
    before: set[tuple[str, str]], pooled: Estimate, pooled_weeks: int, standard_pooled: Estimate,
    standard_pooled_weeks: int, expert: ExpertScale | None,
) -> WeekFigures:
    estimate = statistics_estimates.mean_from_sums(strata)
    # The running week is looked at every hour: the headline reads it at a stricter level.
    strict = statistics_estimates.mean_from_sums(strata, confidence=RUNNING_CONFIDENCE) \
        if current else None
    judges = tuple(sorted(usage.judges))
    judged_flagged, judged_unflagged = judged.flagged.n, judged.unflagged.n
    return WeekFigures(
        week=week,
        current=current,
        volume=volume,
        flagged=flagged,
        judged=judged_flagged + judged_unflagged,
        judged_flagged=judged_flagged,
        judged_unflagged=judged_unflagged,
        abstentions=judged.flagged.abstentions + judged.unflagged.abstentions,
        estimate=estimate,
        below=shares.below,
        abstention_share=shares.abstention,
        claims=shares.claims,
        light=statistics_precision.traffic_light(estimate, threshold),
        runs=usage.runs,
        calls=usage.calls,
        cost=usage.cost,
        unpriced_runs=usage.unpriced_runs,
        open_runs=usage.open_runs,
        judges=judges,
        judge_changed=judge_changed(before, usage.judges),
        pooled=pooled,
        pooled_light=statistics_precision.traffic_light(pooled, threshold),
        pooled_weeks=pooled_weeks,
        standard_pooled_light=statistics_precision.traffic_light(standard_pooled, threshold),
        standard_pooled_n=standard_pooled.n,
        precision=statistics_precision.week_precision(
            strata, action_threshold=threshold, pooled=pooled, pooled_weeks=pooled_weeks
        ),
        expert=expert,
        expert_light=_expert_light(expert, threshold),
        standard_pooled=standard_pooled,
        standard_pooled_weeks=standard_pooled_weeks,
        strict=strict,
        strict_light="grey" if strict is None else statistics_precision.traffic_light(
            strict, threshold),
    )


@reads_from_replica
def use_cases_weeks(
    *, use_cases: Sequence[UseCase], weeks: int = WEEKS, until: datetime | date | None = None,
    pooled_weeks: int = POOLED_WEEKS,
) -> dict[int, list[WeekFigures]]:
    """`use_case_weeks(claims=False)` of several use cases, each table read once for all of
    them (what /metrics asks every scrape). By use case id."""
    if not use_cases:
        return {}
    lead = max(pooled_weeks, EXPERT_POOLED_WEEKS) - 1  # so that the first week's pools are whole
    span = iso_weeks(weeks=weeks + lead, until=until)
    ids = [u.pk for u in use_cases]
    counts, judged = weekly_inputs(ids, span, claims_from=None)
    usage = weekly_usage(ids, span)
    reviews = read_reviews(ids, span)
    restarts = pool_restarts(ids, span)
    return {
        u.pk: week_figures(
            use_case=u, weeks=span, counts=counts, judged=judged, usage=usage,
            reviews=reviews, restarts=restarts.get(u.pk, ()), pooled_weeks=pooled_weeks,
        )[lead:]
        for u in use_cases
    }


def _expert_light(expert: ExpertScale | None, threshold: float) -> str:
    if expert is None or expert.value is None:
        return "grey"
    as_estimate = Estimate(expert.value, expert.low, expert.high, expert.n_reviews, 0, (),
                           expert.too_few)
    return statistics_precision.traffic_light(as_estimate, threshold)


@reads_from_replica
def use_case_weeks(
    *, use_case: UseCase, weeks: int = WEEKS, until: datetime | date | None = None,
    claims: bool = True, pooled_weeks: int = POOLED_WEEKS,
    segment: SegmentFilter | None = None,
) -> list[WeekFigures]:
    """The use case's figures per ISO week, oldest first, the week holding `until` last; of
    the answers of `segment` alone where it is given (issue 40).

    The weeks before the first are read too, so that its pooled views are whole."""
    lead = max(pooled_weeks, EXPERT_POOLED_WEEKS) - 1  # so that the first week's pools are whole
    span = iso_weeks(weeks=weeks + lead, until=until)
    ids = [use_case.pk]
    counts, judged = weekly_inputs(ids, span, claims_from=lead if claims else None,
                                   segment=segment)
    figures = week_figures(
        use_case=use_case,
        weeks=span,
        counts=counts,
        judged=judged,
        usage=weekly_usage(ids, span, segment=segment),
        claims_from=lead if claims else None,
        reviews=read_reviews(ids, span, segment.answers() if segment else None),
        restarts=pool_restarts(ids, span).get(use_case.pk, ()),
        pooled_weeks=pooled_weeks,
    )
    return figures[lead:]
