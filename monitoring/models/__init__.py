"""Monitoring's models, by what they are about: use cases and services (`use_cases.py`), answers
and their chunks (`answers.py`), the judge tier's runs, claims and prices (`judging.py`), the
workers' heartbeats (`health.py`) and the dashboards' weekly rollups (`rollups.py`). Everything
is importable from here, as before the split: migrations name
`monitoring.models.validate_finite` and `monitoring.models.CompactTokensField`.
"""

from monitoring.models.answers import Answer, AnswerKey, Chunk, CompactTokensField
from monitoring.models.health import WorkerHeartbeat
from monitoring.models.judging import (
    Claim,
    JudgeEndpoint,
    JudgePrice,
    JudgeProgress,
    JudgeRun,
    JudgeUsage,
    VerifyPath,
)
from monitoring.models.rollups import (
    DroppedMonth,
    RollupCause,
    RollupCauseScore,
    RollupDay,
    RollupMoments,
    RollupScore,
    RollupSealed,
    RollupState,
    RollupUsage,
    RollupUsageDay,
)
from monitoring.models.segment_rollups import (
    RollupSegment,
    RollupSegmentScore,
    RollupSegmentSums,
)
from monitoring.models.use_cases import (
    JudgeMode,
    Service,
    SettingChange,
    UseCase,
    validate_finite,
    validate_sample_rate,
)

__all__ = [
    "Answer",
    "DroppedMonth",
    "JudgeEndpoint",
    "VerifyPath",
    "AnswerKey",
    "Chunk",
    "Claim",
    "CompactTokensField",
    "JudgeMode",
    "JudgePrice",
    "JudgeProgress",
    "JudgeRun",
    "JudgeUsage",
    "RollupCause",
    "RollupCauseScore",
    "RollupDay",
    "RollupMoments",
    "RollupScore",
    "RollupSealed",
    "RollupSegment",
    "RollupSegmentScore",
    "RollupSegmentSums",
    "RollupState",
    "RollupUsage",
    "RollupUsageDay",
    "Service",
    "SettingChange",
    "UseCase",
    "WorkerHeartbeat",
    "validate_finite",
    "validate_sample_rate",
]
