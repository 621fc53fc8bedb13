"""The experts' scale on the pages and in /metrics: the headline once a week's batch of reviews
(expert_scale.MIN_REVIEWS) stands behind it, below the judge's figure before that; pooled over
4 weeks whatever the pooled view shows."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from dashboard.domain.expert_scale import MIN_REVIEWS
from dashboard.selectors import figures as dashboard
from tests.review.conftest import ReviewWorld, shift_week

G, U = "GEDECKT", "UNGEDECKT"


def last_week() -> str:
    iso = timezone.localdate().isocalendar()
    return shift_week(f"{iso.year}-W{iso.week:02d}", -1)


def import_labels(tmp_path: Path, ids: list[str]) -> None:
    path = tmp_path / "labels.jsonl"
    # The judge found both claims supported; the experts find the second one not supported.
    path.write_text("\n".join(json.dumps({"external_id": i, "labels": [G, U]}) for i in ids),
                    encoding="utf-8")
    out = io.StringIO()
    call_command("import_expert_labels", str(path), use_case="recht", reviewer="expertin",
                 stdout=out, stderr=io.StringIO())
    assert f"{len(ids)} imported" in out.getvalue()


@pytest.fixture
def answered(review_world: ReviewWorld) -> list[str]:
    ids = [f"s{i:02d}" for i in range(MIN_REVIEWS)]
    for external_id in ids:
        review_world.answer(external_id, week=last_week(),
                            claims=[(f"Erste von {external_id}.", G), ("Zweite.", G)])
    return ids


def card(client: Client) -> str:
    html = client.get("/overview/").content.decode()
    start = html.index('data-use-case="recht"')
    return html[start:html.index("</section>", start)]


def metric(client: Client, name: str) -> float | None:
    for family in text_string_to_metric_families(client.get("/metrics").content.decode()):
        for sample in family.samples:
            if sample.name == name and sample.labels.get("use_case") == "recht":
                return sample.value
    return None


def test_the_experts_scale_leads_once_a_weeks_batch_stands_behind_it(
    review_world: ReviewWorld, answered: list[str], tmp_path: Path
) -> None:
    lead, staff = Client(), Client()
    lead.force_login(review_world.users["lead"])
    staff.force_login(review_world.users["staff"])

    import_labels(tmp_path, answered[:2])
    html = card(lead)
    assert html.index('class="row-estimate"') < html.index('class="row-expert"')
    assert 'data-scale="experts"' not in html
    page = lead.get("/use-cases/recht/").content.decode()
    assert 'data-scale="experts"' not in page
    assert metric(staff, "treue_week_expert_scale_reviews") == 2

    import_labels(tmp_path, answered[2:])
    html = card(lead)
    assert html.index('class="row-expert"') < html.index('class="row-estimate"')
    assert '<tr class="row-expert" data-scale="experts">' in html
    assert "Treue, Skala der Fachexperten" in html
    page = lead.get("/use-cases/recht/").content.decode()
    assert 'data-scale="experts"' in page
    this_week = dashboard.use_case_weeks(use_case=review_world.use_case, weeks=1)[-1]
    x = this_week.expert
    assert x is not None and x.n_reviews == MIN_REVIEWS and not x.too_few
    assert x.value is not None and this_week.pooled is not None
    assert this_week.pooled.value is not None
    assert x.value < this_week.pooled.value  # the experts are stricter than the judge here
    assert metric(staff, "treue_week_expert_scale_reviews") == MIN_REVIEWS
    assert metric(staff, "treue_week_faithfulness_expert_scale") == pytest.approx(x.value)
    assert metric(staff, "treue_week_faithfulness_expert_scale_low") == pytest.approx(x.low)


def test_the_experts_scale_pools_four_weeks_whatever_the_pooled_view(
    review_world: ReviewWorld, answered: list[str], tmp_path: Path
) -> None:
    import_labels(tmp_path, answered)
    for pooled in (1, 4, 13):
        week = dashboard.use_case_weeks(use_case=review_world.use_case, weeks=1,
                                        pooled_weeks=pooled)[-1]
        assert week.pooled_weeks == pooled
        assert week.expert is not None and week.expert.weeks_pooled == 4
    lead = Client()
    lead.force_login(review_world.users["lead"])
    page = lead.get("/use-cases/recht/?pooled=13").content.decode()
    assert 'data-scale="experts"' in page
    assert "4 Wochen bis" in page
