"""Creating use cases and services, and rotating a service's key: the writes behind the admin,
the `create_use_case`, `create_service` and `rotate_service_key` commands and the demo."""

from collections.abc import Sequence
from datetime import timedelta

from django.db import (
    transaction,
)
from django.utils import timezone

from monitoring.domain import keys
from monitoring.domain.sample_rate import DEFAULT_SAMPLE_RATE
from monitoring.domain.segments import check_declared
from monitoring.models import (
    JudgeMode,
    Service,
    UseCase,
)
from monitoring.services.segment_rollups import (
    segment_keys_declared,
    segment_keys_roll_on_commit,
)


def use_case_create(
    *,
    slug: str,
    name: str,
    language: str = "de",
    sample_rate: float = DEFAULT_SAMPLE_RATE,
    logprob_threshold: float = 0.5,
    action_threshold: float = 0.85,
    leaves_unreviewed: bool = False,
    judge_mode: str = JudgeMode.PER_CLAIM,
    judge_evidence: bool = True,
) -> UseCase:
    use_case = UseCase(
        judge_mode=judge_mode,
        judge_evidence=judge_evidence,
        slug=slug,
        name=name,
        language=language,
        sample_rate=sample_rate,
        logprob_threshold=logprob_threshold,
        action_threshold=action_threshold,
        leaves_unreviewed=leaves_unreviewed,
    )
    use_case.full_clean()
    use_case.save()
    return use_case


def service_create(*, name: str, use_cases: Sequence[UseCase]) -> tuple[Service, str]:
    """Create a service; return it with its key, which exists nowhere else after this call."""
    key, prefix, digest = keys.generate_key()
    service = Service(name=name, key_prefix=prefix, key_hash=digest)
    service.full_clean()
    with transaction.atomic():
        service.save()
        service.use_cases.set(use_cases)
    return service, key


def service_rotate_key(*, service: Service, grace: timedelta = timedelta(0)) -> str:
    """Give the service a new key and return it. The old key stays valid for ``grace`` (none by
    default), so that the services can move to the new one; a key older than that is revoked
    now."""
    key, prefix, digest = keys.generate_key()
    if grace > timedelta(0):
        service.previous_key_prefix = service.key_prefix
        service.previous_key_hash = service.key_hash
        service.previous_key_expires_at = timezone.now() + grace
    else:
        service.previous_key_prefix, service.previous_key_hash = "", ""
        service.previous_key_expires_at = None
    service.key_prefix, service.key_hash = prefix, digest
    service.save(update_fields=[
        "key_prefix", "key_hash",
        "previous_key_prefix", "previous_key_hash", "previous_key_expires_at",
    ])
    return key


def use_case_declare_segment_keys(*, use_case: UseCase, keys: Sequence[str]) -> list[str]:
    """Declare the metadata keys whose values become segments; checked (`check_declared`).
    Returns the keys as stored. Answers stored before keep their metadata: a key declared now
    breaks down earlier answers too."""
    checked = check_declared(list(keys))
    with transaction.atomic():
        pending = segment_keys_declared(use_case=use_case, keys=checked)
        use_case.segment_keys = checked
        use_case.save(update_fields=["segment_keys"])
        if pending:  # their past answers' segments, counted on a worker
            segment_keys_roll_on_commit(use_case_id=use_case.pk)
    return checked
