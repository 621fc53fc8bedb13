from django.core.exceptions import ValidationError


def describe(error: ValidationError) -> str:
    """A model validation error as one line for the terminal: `field: message; ...`."""
    return "; ".join(f"{k}: {' '.join(v)}" for k, v in error.message_dict.items())
