"""Retention: how long an answer keeps its content, and what of its records is content.

Plain values in, plain values out; the service (monitoring/services/retention.py) does the
writes. What is removed is what a person could ask about — the question, the answer, the
retrieved passages, and everything the judge or an expert wrote about them. What stays is every
number the dashboards read, so the figures of a week do not move when its texts go. The
review's and the investigations' parts are in review/domain/retention.py and
investigations/domain/retention.py.
"""

from datetime import datetime, timedelta
from typing import Any

# The weekly review draws last week's judged answers on Monday and is due the Monday after, so
# an answer is up to 14 days old when its expert labels it; a batch created late (the command
# run for a week that was missed) adds another week; 28 days leaves one more week of slack, and
# a team lead can still rescore the last four weeks with another judge model.
MIN_RETENTION_DAYS = 28
# Answers anonymised per transaction: one giant UPDATE over a million rows would hold its
# locks (and the WAL of it) for minutes; 1,000 rows is a fraction of a second per batch.
BATCH_SIZE = 1000

# Keys of a judge call record (judging.domain.judgement.CallRecord) that hold no text:
# kept, so the call log still tells what was called, how often, with what tokens and latency.
CALL_LOG_NUMBERS = (
    "purpose", "position", "attempt", "prompt_tokens", "completion_tokens", "latency_ms",
    "model",
)


def retention_cutoff(*, now: datetime, days: int) -> datetime:
    """Answers created before this moment are due for anonymisation."""
    return now - timedelta(days=days)


def scrub_call_log(call_log: Any) -> list[dict[str, Any]]:
    """The call log without the raw replies: one entry per call, its numbers only."""
    if not isinstance(call_log, list):
        return []
    return [
        {key: entry[key] for key in CALL_LOG_NUMBERS if key in entry}
        for entry in call_log
        if isinstance(entry, dict)
    ]
