"""Where the experts' scale pools again (issue 39, point 3): after a drift alarm
(`reads.drift_restarts`) and from the week a new generator model carries most of a use case's
answers (issue 40's `segments.changes`): reviews of another model's answers measured the
judge's error on other answers. A change of judge is found by the weekly figures themselves
(`figures.judge_changed`)."""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import Count, Sum
from django.utils import timezone

from dashboard.domain.segments import changes
from dashboard.selectors.reads import answers_in, drift_restarts
from dashboard.selectors.weeks import Week, week_bucket
from monitoring.models import RollupSegment
from monitoring.models.rollups import rollups_ready


def model_changes(use_case_ids: Sequence[int], weeks: Sequence[Week]) -> dict[int, list[str]]:
    """Per use case, the ISO weeks within `weeks` from which a new generator model carries
    most answers (`segments.changes`: beyond chance, at MIN_CHANGE_VOLUME answers or more),
    oldest first: from the rollups once whole (one index-only read of all use cases), else one
    grouped read of the answers."""
    if not use_case_ids or not weeks:
        return {}
    volumes: dict[int, list[dict[str, int]]] = {pk: [{} for _ in weeks] for pk in use_case_ids}
    if rollups_ready():
        mondays = {timezone.localtime(w.start).date(): i for i, w in enumerate(weeks)}
        rows = (
            RollupSegment.objects.filter(dimension="model", use_case_id__in=use_case_ids,
                                         week__in=list(mondays))
            .values_list("use_case_id", "week", "value").annotate(n=Sum("answers")).order_by()
        )
        for use_case_id, week, value, n in rows:
            if n:
                volumes[use_case_id][mondays[week]][value] = n
    else:
        for use_case_id, wk, value, n in (
            answers_in(use_case_ids, weeks).annotate(wk=week_bucket("created_at", weeks))
            .values_list("use_case_id", "wk", "model").annotate(n=Count("*")).order_by()
        ):
            volumes[use_case_id][wk][value or ""] = n
    out: dict[int, list[str]] = {}
    for use_case_id, by_week in volumes.items():
        found = [weeks[c.week].label for c in changes("model", by_week)]
        if found:
            out[use_case_id] = found
    return out


def pool_restarts(use_case_ids: Sequence[int], weeks: Sequence[Week]) -> dict[int, list[str]]:
    """Per use case, the ISO weeks from which the experts' scale pools again, oldest first:
    drift alarms' and generator model changes'."""
    drift = drift_restarts(use_case_ids, weeks)
    models = model_changes(use_case_ids, weeks)
    return {
        pk: sorted(set(drift.get(pk, ())) | set(models.get(pk, ())))
        for pk in set(drift) | set(models)
    }
