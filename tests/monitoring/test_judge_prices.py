"""Judge prices (issue 41, point 6): list prices of common judge models out of the box, past runs
priced when a model gets its price (in the admin), and amounts written with their currency on
the overview, the use case's page and the judge page."""

import re
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from dashboard.selectors import figures as dashboard_figures
from monitoring import tasks
from monitoring.domain.prices import LIST_PRICES, price_key
from monitoring.models import JudgePrice, JudgeRun, RollupUsage
from monitoring.services.prices import PRICE_PAST_RUNS_TASK, past_runs_price_all
from monitoring.services.rollup_rebuild import rollups_check
from tests.monitoring.dashboard_world import (
    COST,
    JUDGE,
    DashWorld,
    build_world,
    client_for,
    de,
    text_of,
    week_row,
    weekly_table,
)
from tests.support.text import found
from tests.support.world import WorldBuilder


@pytest.fixture
def world(world_builder: WorldBuilder, db: None) -> DashWorld:
    return build_world(world_builder)


def euros(amount: Decimal | float, currency: str = "EUR") -> str:
    amount = Decimal(str(amount))
    places = 2 if amount >= 1 else max(2, -amount.adjusted() + 1)
    return f"{de(float(amount), places)} {currency}"


def admin_client() -> Client:
    user = get_user_model().objects.create_superuser("preis-admin", "p@example.org", "x")
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_list_prices_of_common_judge_models_are_there_out_of_the_box() -> None:
    prices = {price_key(p.judge_model): p for p in JudgePrice.objects.all()}
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano",
                  "o3-mini", "claude-sonnet-4-0"):
        assert model in prices, model
        assert prices[model].currency == "USD"
        assert prices[model].prompt_per_1k > 0 and prices[model].completion_per_1k > 0
    # gpt-4o-mini: 0.15 USD per million prompt tokens, 0.60 per million completion tokens.
    mini = prices["gpt-4o-mini"]
    assert (mini.prompt_per_1k, mini.completion_per_1k) == (Decimal("0.00015"),
                                                            Decimal("0.0006"))
    assert len(prices) >= len(LIST_PRICES)


def test_the_admin_says_where_the_list_prices_come_from(world: DashWorld) -> None:
    html = admin_client().get("/admin/monitoring/judgeprice/add/").content.decode()
    assert "Listenpreise Stand 2025-08" in html
    assert "https://openai.com/api/pricing/" in html


def test_a_price_set_in_the_admin_prices_the_past_runs(
    world: DashWorld, django_capture_on_commit_callbacks: Any
) -> None:
    JudgePrice.objects.filter(judge_model=JUDGE).delete()
    world.last_week_scenario()
    runs = JudgeRun.objects.filter(judge_model=JUDGE)
    assert runs.count() == 20 and not runs.filter(cost__isnull=False).exists()
    lead = client_for(world, "lead_a")
    judge_page = text_of(lead.get("/use-cases/auskunft/judge/").content.decode())
    assert "kein Preis hinterlegt (20 Läufe)" in judge_page

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_client().post("/admin/monitoring/judgeprice/add/", {
            "judge_model": JUDGE, "prompt_per_1k": "0.5", "completion_per_1k": "2",
            "cached_prompt_per_1k": "", "currency": "EUR",
        })
    assert response.status_code == 302, response.content.decode()[:2000]
    # The pricing is published once the price is committed (a worker takes it: the task).
    assert len(callbacks) == 1
    assert tasks.price_past_runs.name == PRICE_PAST_RUNS_TASK
    assert tasks.price_past_runs.run(JUDGE) == 20

    price = JudgePrice.objects.get(judge_model=JUDGE)
    for run in runs:
        assert run.cost == price.cost(prompt_tokens=run.prompt_tokens,
                                      completion_tokens=run.completion_tokens,
                                      cached_tokens=run.cached_tokens)
    # The rollups moved with the runs: equal to a recount, no unpriced run left.
    assert rollups_check() == []
    usage = RollupUsage.objects.get(use_case=world.a, judge_model=JUDGE)
    assert (usage.priced_runs, usage.unpriced_runs) == (20, 0)
    total = sum((r.cost or Decimal(0) for r in runs), start=Decimal(0))
    assert usage.cost_micros == int(total.scaleb(6))
    # Twice costs nothing: no run is priced again.
    assert tasks.price_past_runs.run(JUDGE) == 0
    assert past_runs_price_all() == {}

    # Every page writes the amount with its currency, nowhere "kein Preis".
    week = dashboard_figures.use_case_weeks(use_case=world.a)[-2]
    assert week.cost == total and not week.unpriced_runs
    html = lead.get("/use-cases/auskunft/").content.decode()
    assert week_row(html, world.last_week)[COST] == euros(total)
    assert dict(weekly_table(html)[1])[COST] == euros(total)
    overview = text_of(lead.get("/overview/").content.decode())
    assert f"Prüfkosten 0,00 EUR (0 Aufrufe) {euros(total)} (55 Aufrufe)" in overview
    judge_html = lead.get("/use-cases/auskunft/judge/").content.decode()
    assert "kein Preis" not in text_of(judge_html)
    day = found(r'<tr data-day="total">(.*?)</tr>', judge_html, re.S).group(1)
    assert euros(total) in text_of(day)
    per_run = found(r'<tr data-day="total">(.*?)</tr>', judge_html, re.S).group(1)
    assert euros(total / 20) in text_of(per_run)


def test_past_runs_are_priced_case_blind_and_a_price_is_never_overwritten(
    world: DashWorld
) -> None:
    JudgePrice.objects.filter(judge_model=JUDGE).delete()
    world.last_week_scenario()
    # The price of " Judge-X " is judge-x's (monitoring.domain.prices.price_key).
    JudgePrice.objects.create(judge_model=f" {JUDGE.upper()} ", prompt_per_1k=Decimal("1"),
                              completion_per_1k=Decimal("1"), currency="EUR")
    assert past_runs_price_all() == {JUDGE: 20}
    assert not JudgeRun.objects.filter(judge_model=JUDGE, cost__isnull=True).exists()
    assert rollups_check() == []
    # The list prices are written only where a model has none (the demo's seeding too).
    from monitoring.services.prices import list_prices_create

    JudgePrice.objects.filter(judge_model="gpt-4o").update(prompt_per_1k=Decimal("9"))
    JudgePrice.objects.filter(judge_model="gpt-4.1").delete()
    assert list_prices_create() == ["gpt-4.1"]
    assert JudgePrice.objects.get(judge_model="gpt-4o").prompt_per_1k == Decimal("9")


def test_small_amounts_keep_their_digits_and_mixed_weeks_say_what_is_unpriced(
    world: DashWorld
) -> None:
    JudgePrice.objects.filter(judge_model=JUDGE).delete()
    world.last_week_scenario()
    # A price so small that a week costs less than a cent.
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=Decimal("0.0005"),
                              completion_per_1k=Decimal("0.0005"), currency="EUR")
    world.this_week_good(drawn=2, not_drawn=0)
    this = dashboard_figures.use_case_weeks(use_case=world.a)[-1]
    assert Decimal(0) < this.cost < Decimal("0.005")
    lead = client_for(world, "lead_a")
    overview = text_of(lead.get("/overview/").content.decode())
    assert f"Prüfkosten {euros(this.cost)} (" in overview
    assert "0,00 EUR" not in overview and "+?" not in overview
    html = lead.get("/use-cases/auskunft/").content.decode()
    assert dict(weekly_table(html)[1])[COST] == f"{euros(this.cost)} dazu 20 Läufe ohne Preis"
