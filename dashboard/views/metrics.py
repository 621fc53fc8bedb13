"""`/metrics`: the current week's figures and the judge tier's state for Prometheus.

Operations chart and alert on these in the tools they already have: per active use case this
ISO week's faithfulness estimate with its interval and sample sizes, the share below the action
threshold, flagged share, volume, judge calls and cost (gauges labelled `use_case`); the judge
queue, the age of the oldest sampled answer still without a score, and judge call counters
(over all use cases: see `queue_figures`); the alarms open per use case and kind, and the
answers the ingest API refused. The alerting rules over these ship in deploy/prometheus/.

Written with `prometheus_client` rather than by hand: the exposition format has escaping rules
for label values (backslash, quote, newline) and float spellings (NaN, +Inf, integral values)
that are easy to get subtly wrong, and the tests parse the output with the same library's
parser. Its global registry (process-wide metrics updated in place) does not fit here: the
figures are read from the database on each scrape, so a custom collector yields them into a
fresh `CollectorRegistry` per request and nothing is shared between requests or threads.

Not public: the scrape needs `Authorization: Bearer <TREUE_METRICS_TOKEN>` (compared in constant
time) or a staff session. A wrong token is a 401 and never a redirect to the login page, which a
scraper could not follow anyway.
"""

import hmac
from collections.abc import Iterator, Sequence

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    StateSetMetricFamily,
)

from dashboard.domain.expert_scale import ExpertScale
from dashboard.domain.statistics.cells import Estimate
from dashboard.selectors import metrics as metric_selectors
from dashboard.selectors.metrics import CurrentWeek, QueueFigures
from ingest import selectors as ingest_selectors
from ingest import services as ingest_services
from ingest.models import RefusalCount
from monitoring import extensions


def _estimate_families(
    name: str, what: str, rows: Sequence[tuple[str, Estimate | ExpertScale | None]]
) -> Iterator[Metric]:
    """<name>, <name>_low and <name>_high; a week that cannot be estimated has no sample
    (absent = unknown, so an alert on `< threshold` stays quiet instead of firing on a 0)."""
    for suffix, part, attr in (
        ("", "", "value"), ("_low", ", lower end of the 95 % interval", "low"),
        ("_high", ", upper end of the 95 % interval", "high"),
    ):
        family = GaugeMetricFamily(f"{name}{suffix}", f"{what}{part}", labels=["use_case"])
        for slug, estimate in rows:
            value = getattr(estimate, attr) if estimate is not None else None
            if value is not None:
                family.add_metric([slug], value)
        yield family


class TreueCollector:
    """Yields the figures read before the registry asks; collecting does no query."""

    def __init__(
        self, current: Sequence[CurrentWeek], queue: QueueFigures,
        currencies: dict[str, str], parts: Sequence[Metric] = (),
        alarms: dict[tuple[str, str], int] | None = None,
        refused: Sequence[tuple[str, str, int]] = (),
    ) -> None:
        self.weeks = [(c.use_case, c.figures) for c in current]
        self.headlines = [(c.use_case, c.headline) for c in current]
        self.queue = queue
        self.currencies = currencies
        self.alarms = alarms or {}
        self.refused = refused
        # Other apps' families (monitoring/extensions.py), read like the rest before collecting.
        self.parts = parts

    def collect(self) -> Iterator[Metric]:
        yield from self._headline()
        yield from self._week()
        yield from self._judge()
        yield from self._alarms()
        yield from self._ingest()
        yield from self.parts

    def _alarms(self) -> Iterator[Metric]:
        """The alarms open now, per use case and kind (0 where none is): what the app mails
        its team leads, for the monitoring a team already watches (deploy/prometheus/)."""
        family = GaugeMetricFamily(
            "treue_alarms_open",
            "Alarms open now (raised and not cleared), by kind: action (the action signal), "
            "drift (calibration drift), decomposition, missed_review (weekly review missed)",
            labels=["use_case", "kind"],
        )
        for (slug, kind), n in sorted(self.alarms.items()):
            family.add_metric([slug, kind], n)
        yield family

    def _ingest(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "treue_ingest_answers_refused",
            "Answers of the ingest API refused one by one (a single answer's or a batch "
            "item's 4xx), by reason: conflict (409), not_allowed (403), invalid (400)",
            labels=["service", "reason"],
        )
        for service, reason, count in self.refused:
            family.add_metric([service, reason], count)
        yield family

    def _headline(self) -> Iterator[Metric]:
        """The figure each use case is judged by, as the overview's card and the action alarm
        read it: its value and interval labelled with its scale and view, and its light."""
        for suffix, part, attr in (
            ("", "", "value"), ("_low", ", lower end of the 95 % interval", "low"),
            ("_high", ", upper end of the 95 % interval", "high"),
        ):
            family = GaugeMetricFamily(
                f"treue_headline_faithfulness{suffix}",
                "The faithfulness a use case is judged by (its overview card and action alarm): "
                "the experts' scale where it leads (scale=experts), else the judge's last "
                f"week or pooled weeks (view=week|pooled){part}",
                labels=["use_case", "scale", "view"],
            )
            for use_case, headline in self.headlines:
                value = getattr(headline, attr)
                if value is not None:
                    family.add_metric([use_case.slug, headline.scale, headline.view], value)
            yield family
        light = StateSetMetricFamily(
            "treue_headline_light", "The headline's light (red, amber, green or grey)",
            labels=["use_case"],
        )
        for use_case, headline in self.headlines:
            light.add_metric([use_case.slug], {
                state: headline.light == state for state in ("red", "amber", "green", "grey")
            })
        yield light

    def _week(self) -> Iterator[Metric]:
        weeks = self.weeks
        start = GaugeMetricFamily(
            "treue_week_start_timestamp_seconds",
            "Start of the current ISO week (Monday 00:00, Europe/Berlin) the treue_week_* "
            "figures are about, as a Unix time",
        )
        if weeks:
            start.add_metric([], weeks[0][1].week.start.timestamp())
        yield start

        threshold = GaugeMetricFamily(
            "treue_action_threshold", "Faithfulness below this is an action signal",
            labels=["use_case"],
        )
        for use_case, _ in weeks:
            threshold.add_metric([use_case.slug], use_case.action_threshold)
        yield threshold

        yield from _estimate_families(
            "treue_week_faithfulness",
            "Estimated mean faithfulness of this week's answers, on the judge's scale "
            "(stratified)",
            [(u.slug, f.estimate) for u, f in weeks],
        )
        yield from _estimate_families(
            "treue_week_faithfulness_pooled",
            "Estimated mean faithfulness of the answers of this week and the 3 before it, on "
            "the judge's scale (stratified over week and stratum)",
            [(u.slug, f.pooled) for u, f in weeks],
        )
        yield from _estimate_families(
            "treue_week_faithfulness_expert_scale",
            "Faithfulness on the experts' scale over this week and the 3 before it (none "
            "before a drift alarm): the judge's estimate corrected by the reviewed answers' "
            "mean expert - judge difference (absent without reviews)",
            [(u.slug, f.expert) for u, f in weeks],
        )
        reviews = GaugeMetricFamily(
            "treue_week_expert_scale_reviews",
            "Reviewed answers the experts' scale rests on (absent without reviews)",
            labels=["use_case"],
        )
        for use_case, f in weeks:
            if f.expert is not None:
                reviews.add_metric([use_case.slug], f.expert.n_reviews)
        yield reviews
        judged = GaugeMetricFamily(
            "treue_week_judged_answers",
            "Judged answers the estimate rests on, per stratum (flagged: judged in full; "
            "random: the random sample of the unflagged answers)",
            labels=["use_case", "stratum"],
        )
        too_few = GaugeMetricFamily(
            "treue_week_too_few",
            "1 when few answers are judged (a statement of precision; the estimate and its "
            "interval are still given)",
            labels=["use_case"],
        )
        for use_case, f in weeks:
            n_flagged, n_random = (tuple(f.estimate.n_by_stratum) + (0, 0))[:2]
            judged.add_metric([use_case.slug, "flagged"], n_flagged)
            judged.add_metric([use_case.slug, "random"], n_random)
            too_few.add_metric([use_case.slug], 1 if f.estimate.too_few else 0)
        yield judged
        yield too_few

        yield from _estimate_families(
            "treue_week_below_threshold_share",
            "Estimated share of this week's answers below the action threshold",
            [(u.slug, f.below) for u, f in weeks],
        )
        flagged_share = GaugeMetricFamily(
            "treue_week_flagged_share", "Share of this week's answers flagged by tier 1",
            labels=["use_case"],
        )
        volume = GaugeMetricFamily(
            "treue_week_answers", "Answers received for this week", labels=["use_case"]
        )
        calls = GaugeMetricFamily(
            "treue_week_judge_calls", "Judge calls spent on this week's answers",
            labels=["use_case"],
        )
        cost = GaugeMetricFamily(
            "treue_week_judge_cost",
            "Judge cost of this week's answers; absent while a run used a model without price",
            labels=["use_case", "currency"],
        )
        for use_case, f in weeks:
            slug = use_case.slug
            if f.flagged_share is not None:
                flagged_share.add_metric([slug], f.flagged_share)
            volume.add_metric([slug], f.volume)
            calls.add_metric([slug], f.calls)
            if not f.unpriced_runs:
                currency = metric_selectors.week_currency(
                    figures=f, currencies=self.currencies
                )
                cost.add_metric([slug, currency or ""], float(f.cost))
        yield from (flagged_share, volume, calls, cost)

    def _judge(self) -> Iterator[Metric]:
        queue = self.queue
        answers = GaugeMetricFamily(
            "treue_judge_queue_answers",
            "Sampled answers waiting for their score (queued) or being judged (judging)",
            labels=["use_case", "status"],
        )
        slugs = sorted({u.slug for u, _ in self.weeks} | {s for s, _ in queue.answers})
        for slug in slugs:
            for status in metric_selectors.UNSCORED_STATUSES:
                answers.add_metric([slug, status], queue.answers.get((slug, status), 0))
        yield answers

        runs = GaugeMetricFamily(
            "treue_judge_queue_runs", "Judge runs waiting for a worker (pending) or running",
            labels=["status"],
        )
        for run_status in metric_selectors.OPEN_RUN_STATUSES:
            runs.add_metric([run_status], queue.runs.get(run_status, 0))
        yield runs

        oldest = GaugeMetricFamily(
            "treue_judge_oldest_unscored_seconds",
            "Age of the oldest sampled answer still without a score, since it was received "
            "(0 when none waits)",
        )
        oldest.add_metric([], queue.oldest_unscored_seconds)
        yield oldest

        calls = CounterMetricFamily("treue_judge_calls", "Judge calls made, retries included")
        calls.add_metric([], queue.calls)
        yield calls
        failed = CounterMetricFamily("treue_judge_runs_failed", "Judge runs that failed")
        failed.add_metric([], queue.runs.get("failed", 0))
        yield failed


def segment_family(volumes: dict[tuple[str, str], dict[str, int]]) -> Metric:
    """This week's answers by generator model and prompt version (issue 40): the ten largest
    values of each use case by name, the rest as "other" (a bounded label set)."""
    family = GaugeMetricFamily(
        "treue_week_segment_answers",
        "Answers received this week per generator model (dimension=model) or prompt version "
        "(dimension=prompt_version): the 10 largest values by name, the rest as value=\"other\"; "
        "value=\"\" for answers without one",
        labels=["use_case", "dimension", "value"],
    )
    for (slug, dimension), values in sorted(volumes.items()):
        for value, n in values.items():
            family.add_metric([slug, dimension, value], n)
    return family


def _refuse(status: int, message: str) -> HttpResponse:
    response = HttpResponse(message + "\n", status=status, content_type="text/plain")
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


def _access(request: HttpRequest) -> HttpResponse | None:
    """None when the caller may scrape, else the response that refuses."""
    header = request.headers.get("Authorization")
    if header is not None:
        scheme, _, token = header.partition(" ")
        expected = settings.TREUE_METRICS_TOKEN
        # An empty setting allows no token at all, not the empty one.
        if (
            expected
            and scheme.lower() == "bearer"
            and hmac.compare_digest(token.strip().encode(), expected.encode())
        ):
            return None
        return _refuse(401, "invalid metrics token")
    user = request.user
    if not user.is_authenticated:
        return _refuse(401, "a metrics token or a staff login is required")
    if not user.is_staff:
        return _refuse(403, "only staff may read the metrics")
    return None


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    refused = _access(request)
    if refused is not None:
        return refused
    use_cases = metric_selectors.active_use_cases()
    current = metric_selectors.current_week_figures(use_cases=use_cases)
    collector = TreueCollector(
        current,
        metric_selectors.queue_figures(),
        metric_selectors.judge_currencies(
            models={model for c in current for model, _ in c.figures.judges}
        ),
        [family for part in extensions.registry.metrics_parts.values() for family in part()]
        + [segment_family(metric_selectors.segment_volumes(use_cases=[c.use_case
                                                                      for c in current]))],
        alarms=metric_selectors.open_alarms(use_cases=use_cases),
        refused=ingest_selectors.refusal_counts(
            kind=RefusalCount.Kind.ANSWER,
            reasons=[o.value for o in ingest_services.ANSWER_REFUSALS],
        ),
    )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_PLAIN_0_0_4)
