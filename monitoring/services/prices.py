"""Judge prices as they are set: the list prices Treue ships as defaults, and the past runs of
a model that ran without a price, priced once it has one (with the rollups that sum them)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models.functions import Lower, Trim

from monitoring.domain.prices import LIST_PRICES, ListPrice, missing_list_prices, price_key
from monitoring.models import JudgePrice, JudgeRun
from monitoring.models.rollups import USAGE_DAY_SUMS, USAGE_SUMS, in_week_usage, week_of
from monitoring.services import rollups

logger = logging.getLogger(__name__)

# The name of the task that prices a model's past runs (monitoring/tasks.py): services publish
# by name, they never import tasks.
PRICE_PAST_RUNS_TASK = "monitoring.tasks.price_past_runs"

# Runs priced in one transaction: short locks on the runs and on the use case's rollups.
PRICE_BATCH = 500


def list_prices_create(*, prices: Iterable[ListPrice] = LIST_PRICES) -> list[str]:
    """Create the list prices of the models that have no price yet (never changing one an
    operator set); returns the models created. Their past runs are priced by the caller's
    `past_runs_price_on_commit`."""
    existing = JudgePrice.objects.values_list("judge_model", flat=True)
    created = [
        JudgePrice(
            judge_model=p.judge_model, prompt_per_1k=p.prompt_per_1k,
            cached_prompt_per_1k=p.cached_prompt_per_1k,
            completion_per_1k=p.completion_per_1k, currency=p.currency,
        )
        for p in missing_list_prices(existing, prices)
    ]
    JudgePrice.objects.bulk_create(created, ignore_conflicts=True)
    return [p.judge_model for p in created]


def past_runs_price_on_commit(*, judge_model: str) -> None:
    """Once the transaction that set the model's price commits, price its past runs on a
    worker (there may be many). A broker that is down loses nothing the next setting of a
    price, or `manage.py price_past_runs`, cannot redo."""
    from jobs import framework as jobs

    transaction.on_commit(lambda: jobs.publish_each(
        PRICE_PAST_RUNS_TASK, [judge_model], what="pricing of past runs"
    ))


def _unpriced(judge_model: str) -> Any:
    """The ended runs of this model (by `price_key`) that made calls and have no cost: those
    the rollups count as unpriced."""
    return (
        JudgeRun.objects.alias(key=Lower(Trim("judge_model")))
        .filter(key=price_key(judge_model), cost__isnull=True, calls__gt=0,
                status__in=[JudgeRun.Status.SUCCEEDED, JudgeRun.Status.FAILED],
                finished_at__isnull=False)
    )


def past_runs_price(*, judge_model: str) -> int:
    """Price the ended runs of this model that ran without a price, at its price now, and
    move them from the unpriced to the priced in the usage rollups. Returns how many were
    priced. Runs once priced keep their cost (what they cost at the time); a run that ends
    meanwhile is priced by its own completion. Running twice prices nothing twice: a run is
    taken only while its cost is empty, under a row lock."""
    price = JudgePrice.objects.filter(judge_model=judge_model).first()
    if price is None:
        key = price_key(judge_model)
        price = next((p for p in JudgePrice.objects.all() if price_key(p.judge_model) == key),
                     None)
    if price is None:
        return 0
    priced = 0
    while True:
        with transaction.atomic():
            runs = list(
                _unpriced(judge_model).select_for_update(skip_locked=True, of=("self",))
                .order_by("pk")
                .values("pk", "use_case_id", "answer_created_at", *rollups.RUN_FIELDS)
                [:PRICE_BATCH]
            )
            if not runs:
                return priced
            _price(price, runs)
            priced += len(runs)
        logger.info("priced %d past runs of %s", priced, judge_model)


def past_runs_price_all() -> dict[str, int]:
    """Price the past runs of every model that has a price and runs without a cost (nightly,
    and by `manage.py price_past_runs`: after the list prices came with an update, or where
    the message of a price's setting was lost). Returns the runs priced by model."""
    keys = {price_key(p) for p in JudgePrice.objects.values_list("judge_model", flat=True)}
    models = set(
        JudgeRun.objects.filter(
            cost__isnull=True, calls__gt=0, finished_at__isnull=False,
            status__in=[JudgeRun.Status.SUCCEEDED, JudgeRun.Status.FAILED],
        ).values_list("judge_model", flat=True).distinct()
    )
    done: dict[str, int] = {}
    for model in sorted(models):
        key = price_key(model)
        if key in keys and key not in done:
            done[key] = past_runs_price(judge_model=model)
    return done


def _price(price: JudgePrice, runs: list[dict[str, Any]]) -> None:
    usage: dict[tuple[Any, ...], tuple[int, ...]] = defaultdict(lambda: (0,) * len(USAGE_SUMS))
    usage_day: dict[tuple[Any, ...], tuple[int, ...]] = defaultdict(
        lambda: (0,) * len(USAGE_DAY_SUMS))
    for run in runs:
        cost = price.cost(prompt_tokens=run["prompt_tokens"],
                          completion_tokens=run["completion_tokens"],
                          cached_tokens=run["cached_tokens"])
        JudgeRun.objects.filter(pk=run["pk"], cost__isnull=True).update(cost=cost)
        # What the run adds to the rollups now, less what it added without a cost.
        before, after = run, {**run, "cost": cost}
        if in_week_usage(run["trigger"]):  # an on-demand run is in the days' usage only
            key = (run["use_case_id"], week_of(run["answer_created_at"]), run["judge_model"],
                   run["prompt_version"])
            usage[key] = _add(usage[key], rollups.usage_of(after), rollups.usage_of(before))
        day_key = rollups.usage_day_key(run)
        usage_day[day_key] = _add(usage_day[day_key], rollups.usage_day_of(after),
                                  rollups.usage_day_of(before))
    rollups.usage_moved(use_case_ids={r["use_case_id"] for r in runs},
                        usage=dict(usage), usage_day=dict(usage_day))


def _add(total: tuple[int, ...], plus: tuple[int, ...], minus: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(t + p - m for t, p, m in zip(total, plus, minus, strict=True))
