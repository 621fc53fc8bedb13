"""An alarm's text, kept as message ids and their values and rendered in the reader's language.

An alarm is stored once but read by people in German and English, by mail and on the pages. So
the raising code gives its sentences as (message id, values) pairs, marked with gettext_noop so
that makemessages finds them; they are rendered with gettext when shown, in the language that
is active then. A number the pages write localized (0,83 / 0.83) is given as ``number(x)``.
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.template.defaultfilters import floatformat
from django.utils.translation import gettext

# One sentence: a message id (German, as everywhere) and the values for its placeholders.
Part = tuple[str, Mapping[str, Any]]


def number(value: float, digits: int = 2) -> dict[str, Any]:
    """A value written as the pages write numbers in the reader's language."""
    return {"number": value, "digits": digits}


def stored(parts: Iterable[Part]) -> list[list[Any]]:
    """The parts as JSON (for Alarm.message_parts)."""
    return [[msgid, dict(values)] for msgid, values in parts]


def render(parts: Sequence[Sequence[Any]]) -> str:
    """The sentences in the active language, joined by spaces."""
    return " ".join(gettext(msgid) % {k: _value(v) for k, v in values.items()}
                    for msgid, values in parts)


def _value(value: Any) -> Any:
    if isinstance(value, dict) and "number" in value:
        return str(floatformat(value["number"], value.get("digits", 2)))
    return value
