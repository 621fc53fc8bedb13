"""Writes of the monitoring app: ingest (`ingest.py`), retention, alarms, health. The judge
tier's are in monitoring/judging/services/."""

from monitoring.services.ingest import (
    WARNING_NO_LOGPROBS,
    WARNING_UNALIGNED,
    IngestOutcome,
    IngestResult,
    answer_ingest,
    answer_ingest_batch,
    answer_warnings,
    content_hash,
    field_errors,
    format_loc,
    service_create,
    service_rotate_key,
    use_case_create,
)

__all__ = [
    "WARNING_NO_LOGPROBS",
    "WARNING_UNALIGNED",
    "IngestOutcome",
    "IngestResult",
    "answer_ingest",
    "answer_ingest_batch",
    "answer_warnings",
    "content_hash",
    "field_errors",
    "format_loc",
    "service_create",
    "service_rotate_key",
    "use_case_create",
]
