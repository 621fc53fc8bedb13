"""The random sample's rate: its default and the values a use case may set."""


DEFAULT_SAMPLE_RATE = 0.03


def validate_rate(rate: float) -> float:
    """Return the rate if 0 < rate <= 1, else raise ValueError."""
    if not isinstance(rate, int | float) or isinstance(rate, bool):
        raise ValueError("sample rate must be a number")
    if not (0.0 < rate <= 1.0):  # also false for NaN
        raise ValueError("sample rate must be greater than 0 and at most 1")
    return float(rate)
