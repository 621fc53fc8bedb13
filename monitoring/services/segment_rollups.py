"""The segments' rollups (issue 40; `RollupSegment`, `RollupSegmentScore`) beyond what the
writers in rollups.py keep as answers arrive and are judged:

- `expected_segments`: the recount from the raw rows that the rebuild writes and the check
  compares, one grouped read per dimension;
- `segment_keys_declared` / `segment_keys_roll`: a metadata key declared later breaks down the
  answers stored before it too. Its rows are counted by a task, under the rebuild's exclusive
  lock; until then the readers read that dimension raw (`UseCase.segment_keys_rolled`). A key
  no longer declared loses its rows at once;
- `metadata_cleared`: retention empties an answer's metadata; its segments of the declared
  keys move to "none" as a recount would count them (metadata can be personal data).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import date
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, QuerySet
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import TruncDate

from monitoring.domain.segments import (
    FIELDS,
    METADATA,
    built_in_value,
    segment_value,
)
from monitoring.models import (
    Answer,
    RollupSealed,
    RollupSegment,
    RollupSegmentScore,
    RollupSegmentSums,
    UseCase,
)
from monitoring.models.rollups import local_midnight, monday_of, week_of
from monitoring.services.rollups import (
    SEGMENT_KEY,
    SEGMENT_SCORE_KEY,
    SEGMENT_SUMS,
    lock_exclusive,
    lock_shared,
    rows_add,
    segment_scores_add,
    segment_sums,
)

SEGMENT_TABLES = (RollupSegment, RollupSegmentScore, RollupSegmentSums)

logger = logging.getLogger(__name__)

Counts = dict[tuple[Any, ...], tuple[int, ...]]


def _dimensions(keys: Sequence[str]) -> dict[str, Any]:
    """Each dimension with the expression of its raw value: the built-in ones' fields, a
    declared key's JSON value (made text by `segment_value`, as the writers make it)."""
    out: dict[str, Any] = {dimension: F(field) for dimension, field in FIELDS.items()}
    out.update({METADATA + key: KeyTransform(key, "metadata") for key in keys})
    return out


def _text(dimension: str, raw: Any) -> str:
    if dimension.startswith(METADATA):
        return segment_value(raw) or ""
    return built_in_value(raw)


def expected_segments(
    use_case_ids: Sequence[int], since: date | None = None, *,
    only_keys: Sequence[str] | None = None, rolled_only: bool = False,
) -> tuple[Counts, Counts, Counts]:
    """(segment, segment_score, segment_sums) rows these use cases' answers (from the Monday
    `since` on) should give, counted from the raw rows: every dimension of each use case's
    declared keys now, of those already rolled (`rolled_only`), or (`only_keys`) just these
    keys'."""
    zone = ZoneInfo(settings.TIME_ZONE)
    volumes: Counter[tuple[Any, ...]] = Counter()
    scores: Counter[tuple[Any, ...]] = Counter()
    declared = _keys(use_case_ids, rolled_only=rolled_only)
    for use_case_id in sorted(use_case_ids):
        answers = Answer.objects.filter(use_case_id=use_case_id)
        if since is not None:
            answers = answers.filter(created_at__gte=local_midnight(since))
        answers = answers.annotate(day=TruncDate("created_at", tzinfo=zone))
        keys = list(declared.get(use_case_id) or [])
        dimensions = _dimensions(keys)
        if only_keys is not None:
            dimensions = {METADATA + k: dimensions[METADATA + k] for k in only_keys if k in keys}
        judged = answers.filter(status=Answer.Status.JUDGED, score__isnull=False)
        for dimension, expression in dimensions.items():
            for day, flagged, raw, n in _grouped(answers, expression, ()):
                volumes[(use_case_id, monday_of(day), bool(flagged), dimension,
                         _text(dimension, raw))] += n
            for day, flagged, raw, score, n in _grouped(judged, expression, ("score",)):
                scores[(use_case_id, monday_of(day), bool(flagged), dimension,
                        _text(dimension, raw), float(score))] += n
    return ({k: (n,) for k, n in volumes.items() if n},
            {k: (n,) for k, n in scores.items() if n},
            segment_sums(scores))


def _keys(use_case_ids: Iterable[int], *, rolled_only: bool) -> dict[int, list[str]]:
    """Each use case's declared keys (`rolled_only`: those the rollups hold in full)."""
    return {
        pk: [k for k in keys or [] if not rolled_only or k in (rolled or [])]
        for pk, keys, rolled in UseCase.objects.filter(pk__in=use_case_ids).values_list(
            "pk", "segment_keys", "segment_keys_rolled")
    }


def unrolled(rows: Counts, use_case_ids: Iterable[int]) -> Counts:
    """Rows of the segment tables without those of keys not yet rolled (their task has not
    counted them: the check leaves them alone)."""
    held = _keys(use_case_ids, rolled_only=True)
    return {
        k: v for k, v in rows.items()
        if not k[3].startswith(METADATA) or k[3][len(METADATA):] in held.get(k[0], ())
    }


def _grouped(answers: QuerySet[Answer], expression: Any, more: tuple[str, ...]) -> Any:
    return (
        answers.annotate(segment=expression)
        .values_list("day", "flagged", "segment", *more)
        .annotate(n=Count("*"))
        .order_by()
        .iterator(chunk_size=5000)
    )


def segment_keys_declared(*, use_case: UseCase, keys: Sequence[str]) -> list[str]:
    """In the declaring transaction: the rows of keys no longer declared go, and the keys still
    to be counted are left out of `segment_keys_rolled`. Returns the keys a task must roll
    (`segment_keys_roll`, on commit)."""
    before = set(use_case.segment_keys or [])
    gone = [METADATA + k for k in before - set(keys)]
    if gone:
        lock_exclusive(use_case.pk)
        for model in SEGMENT_TABLES:
            model.objects.filter(use_case=use_case, dimension__in=gone).delete()
    rolled = [k for k in (use_case.segment_keys_rolled or []) if k in keys]
    UseCase.objects.filter(pk=use_case.pk).update(segment_keys_rolled=rolled)
    use_case.segment_keys_rolled = rolled
    return [k for k in keys if k not in rolled]


def segment_keys_roll(*, use_case_id: int) -> list[str]:
    """Count the answers stored before in the segments of the declared keys the rollups do not
    hold yet, under the rebuild's exclusive lock (writers wait meanwhile, and count their
    answers after it); then the readers read them from the rollups. Returns the keys rolled."""
    with transaction.atomic():
        lock_exclusive(use_case_id)
        use_case = UseCase.objects.select_for_update().filter(pk=use_case_id).first()
        if use_case is None:
            return []
        keys = list(use_case.segment_keys or [])
        pending = [k for k in keys if k not in (use_case.segment_keys_rolled or [])]
        if pending:
            dimensions = [METADATA + k for k in pending]
            sealed = set(RollupSealed.objects.filter(use_case_id=use_case_id)
                         .values_list("week", flat=True))
            for model in SEGMENT_TABLES:
                model.objects.filter(use_case_id=use_case_id, dimension__in=dimensions).exclude(
                    week__in=sealed).delete()
            volumes, scores, sums = expected_segments([use_case_id], only_keys=pending)
            rows_add(RollupSegment, SEGMENT_KEY,
                     {k: v for k, v in volumes.items() if k[1] not in sealed})
            rows_add(RollupSegmentScore, SEGMENT_SCORE_KEY,
                     {k: v for k, v in scores.items() if k[1] not in sealed})
            rows_add(RollupSegmentSums, SEGMENT_KEY,
                     {k: v for k, v in sums.items() if k[1] not in sealed}, SEGMENT_SUMS)
        use_case.segment_keys_rolled = keys
        use_case.save(update_fields=["segment_keys_rolled"])
    if pending:
        logger.info("segments of %s counted for the keys %s", use_case.slug, ", ".join(pending))
    return pending


SEGMENT_KEYS_ROLL_TASK = "monitoring.tasks.roll_segment_keys"


def segment_keys_roll_on_commit(*, use_case_id: int) -> None:
    """Once the declaration commits, count the new keys' segments on a worker. A broker that
    is down loses nothing: the nightly check rolls what is still pending
    (`segment_keys_roll_pending`)."""
    from jobs import framework as jobs

    transaction.on_commit(lambda: jobs.publish_each(
        SEGMENT_KEYS_ROLL_TASK, [use_case_id], what="counting of declared segment keys"
    ))


def segment_keys_roll_pending() -> int:
    """Roll every use case's declared keys that the rollups do not hold yet; returns how many
    use cases had any."""
    done = 0
    for pk, keys, rolled in UseCase.objects.order_by("pk").values_list(
            "pk", "segment_keys", "segment_keys_rolled"):
        if set(keys or []) - set(rolled or []):
            segment_keys_roll(use_case_id=pk)
            done += 1
    return done


def metadata_cleared(answers: Iterable[Mapping[str, Any]]) -> None:
    """Retention is about to empty these answers' metadata (their fields: use_case_id,
    created_at, flagged, status, score, metadata): their segments of the declared keys move to
    "none", in the caller's transaction."""
    rows = list(answers)
    declared = dict(UseCase.objects.filter(pk__in={r["use_case_id"] for r in rows})
                    .values_list("pk", "segment_keys"))
    volumes: Counter[tuple[Any, ...]] = Counter()
    scores: Counter[tuple[Any, ...]] = Counter()
    for r in rows:
        metadata = r["metadata"] if isinstance(r["metadata"], Mapping) else {}
        key = (r["use_case_id"], week_of(r["created_at"]), bool(r["flagged"]))
        judged = r["status"] == Answer.Status.JUDGED and r["score"] is not None
        for k in declared.get(r["use_case_id"]) or []:
            value = segment_value(metadata.get(k)) or ""
            if not value:
                continue
            for text, sign in ((value, -1), ("", +1)):
                volumes[(*key, METADATA + k, text)] += sign
                if judged:
                    scores[(*key, METADATA + k, text, float(r["score"]))] += sign
    if not volumes:
        return
    lock_shared(set(declared))
    rows_add(RollupSegment, SEGMENT_KEY, {k: v for k, v in volumes.items() if v})
    segment_scores_add(scores)
