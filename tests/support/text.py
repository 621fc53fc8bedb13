"""Finding a piece of a page or a prompt: `re.search` that fails the test when the pattern is not
there (rather than an AttributeError on None), and gives the match typed as found."""

import re


def found(pattern: str | re.Pattern[str], text: str, flags: int = 0) -> re.Match[str]:
    match = re.search(pattern, text, flags)
    assert match is not None, f"{pattern!r} not in {text[:500]!r}"
    return match
