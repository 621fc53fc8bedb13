"""Retention of a self-consistency question: what of its stored samples is content.

Plain values in, plain values out; investigations/extensions.py blanks the rows when monitoring
anonymises the answer the question re-asked (monitoring/services/retention.py).
"""

from typing import Any

# Keys of a self-consistency sample (Question.sample_data) without text:
# the re-asked answer and its log-probabilities go, the call's figures stay.
SAMPLE_NUMBERS = ("model", "latency_ms", "prompt_tokens", "completion_tokens")


def scrub_samples(samples: Any) -> list[dict[str, Any]]:
    """A self-consistency question's samples without the re-asked answers' texts."""
    if not isinstance(samples, list):
        return []
    return [
        {key: sample[key] for key in SAMPLE_NUMBERS if key in sample}
        for sample in samples
        if isinstance(sample, dict)
    ]
