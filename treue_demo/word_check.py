"""The demo's word check for a claim that is not among the demo answers (a README example, a
question typed by hand): supported when the passages carry its content words and numbers."""

import re
from collections.abc import Iterable

from investigations.domain.consistency.vocabulary import ARTICLES, number
from judging.domain.judge_parse import Label

# Words (letters, at least 4) and numbers; the numbers keep their decimal separator.
WORD = re.compile(r"[^\W\d_]{4,}")


# A numeral with its separators: "5", "0,5", "1.250,00", "1,250.00".
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


# The rank a judge prompt writes before each passage ("[2] text", judging.domain.judge_prompt):
# a number of the prompt, not of the passages.
_RANK = re.compile(r"^\[\d+\] ", re.MULTILINE)


_NEGATIONS = frozenset({"nicht", "kein", "keine", "keinen", "keiner", "keines", "nie", "niemals",
                        "not", "never", "no", "none", "neither", "nor"})


# Words of four letters or more that carry no content of their own: a claim need not find them
# in the passages ("Alle 5 Jahre." is the passage's "5 Jahre"). German and English.
_FUNCTION_WORDS = frozenset("""
    alle allem allen aller alles also auch aber beim bzw dann dass denn dem den der des dessen
    deren dies diese diesem diesen dieser dieses doch durch eine einem einen einer eines etwa
    etwas gegen hier ihre ihrem ihren ihrer ihres immer jede jedem jeden jeder jedes jeweils
    muss müssen noch nach oder ohne sehr sein seine seinem seinen seiner seines sich sind
    sowie soll sollen über unter viel viele vom von wann warum weil wenn werden wird wurde
    wurden zwischen laut gemäß damit dafür dazu davon darin daher kann können haben hatte
    about after also been before being both does each either every from have having here
    into its just more most much must only other over same should some such than that their
    them then there these they this those very were what when where which while will with
    would your
""".split())


# Share of a claim's content words found in the context from which it counts as supported /
# partly.
WORDS_SUPPORTED, WORDS_PARTLY = 0.8, 0.5


# Word endings German inflects with; a word is also found by its stem ("Jahren" for "Jahre").
_ENDINGS = ("en", "er", "es", "em", "e", "n", "s")


def _stem(word: str) -> str:
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 4:
            return word[: -len(ending)]
    return word


def _values(text: str) -> set[float | str]:
    """What a numeral or number word may mean, read as German and as English: "1.250,00" 1250,
    "1.250" 1250 or 1.25, "0,5" 0.5, "fünf" and "five" 5; empty when it is no number."""
    found: set[float | str] = set()
    for language in ("de", "en"):
        try:
            value = number(text, language)
        except (ValueError, RecursionError):
            value = None
        if value is not None:
            found.add(value)
    return found


def _number_words(words: Iterable[str]) -> dict[str, set[float | str]]:
    """The words of a text that are number words ("fünf", "twelve"), with their values; articles
    ("ein", "a") and "one" are no numbers on their own."""
    out = {}
    for word in words:
        if word in ARTICLES or word in ("one", "null") or not word.isalpha():
            continue
        values = _values(word)
        if values:
            out[word] = values
    return out


def word_check(claim: str, context: str) -> Label:
    """A claim the demo has no human label for (an answer sent to the demo by hand), checked by
    its words: a number or a negation the context does not have makes it UNGEDECKT; else the
    share of its content words found in the context decides (0.8: GEDECKT, 0.5: TEILWEISE).
    Numbers are compared by value, written as digits in German or English formats or as words
    ("5", "fünf"; "1.250,00 €" is 1250, and "1" is not in it); function words ("alle", "with")
    need not be found; a word is found by its stem as well ("Jahren" for "Jahre"). No model: a
    paraphrase is missed and a reordering passes, but a changed number or an added "nicht" is
    found, so a contradiction in a hand-sent answer does not score 1.0."""
    context = _RANK.sub("", context)
    lowered = context.lower()
    tokens_in_context = set(re.findall(r"\b\w+\b", lowered))
    context_words = set(WORD.findall(lowered)) | tokens_in_context
    context_stems = {_stem(w) for w in context_words}
    # A numeral that reads as no number ("1.2.3") is compared as written.
    numbers: set[float | str] = set()
    for numeral in _NUMBER.findall(context):
        numbers |= _values(numeral) or {numeral}
    for values in _number_words(tokens_in_context).values():
        numbers |= values

    tokens = set(re.findall(r"\b\w+\b", claim.lower()))
    claim_number_words = _number_words(tokens)
    claimed = [_values(n) or {n} for n in _NUMBER.findall(claim)]
    claimed += claim_number_words.values()
    if any(not (values & numbers) for values in claimed):
        return Label.UNGEDECKT
    if (tokens & _NEGATIONS) - context_words:
        return Label.UNGEDECKT
    words = [w for w in WORD.findall(claim.lower())
             if w not in _FUNCTION_WORDS and w not in claim_number_words
             and w not in _NEGATIONS]
    if not words:
        return Label.GEDECKT
    share = sum(w in context_words or _stem(w) in context_stems for w in words) / len(words)
    if share >= WORDS_SUPPORTED:
        return Label.GEDECKT
    return Label.TEILWEISE if share >= WORDS_PARTLY else Label.UNGEDECKT
