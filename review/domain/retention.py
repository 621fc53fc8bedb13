"""Retention of an expert's review: what of a submitted review is content.

Plain values in, plain values out; review/extensions.py blanks the rows when monitoring
anonymises the reviewed answer (monitoring/services/retention.py).
"""

from typing import Any


def scrub_submitted_verdicts(verdicts: Any) -> list[dict[str, Any]]:
    """A review submission's verdicts with their claim texts blanked: the labels, positions and
    claim ids stay (calibration pairs them with the judge's labels)."""
    if not isinstance(verdicts, list):
        return []
    return [
        {**verdict, "text": ""} if isinstance(verdict, dict) else verdict
        for verdict in verdicts
    ]
