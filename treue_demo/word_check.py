"""The demo's word check for a claim that is not among the demo answers (a README example, a
question typed by hand): supported when the passages carry its content words and numbers."""

import re

from judging.domain.judge_parse import Label

# Words (letters, at least 4) and numbers; the numbers keep their decimal separator.
WORD = re.compile(r"[^\W\d_]{4,}")



_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")



_NEGATIONS = frozenset({"nicht", "kein", "keine", "keinen", "keiner", "keines", "nie", "niemals",
                        "not", "never", "no", "none", "neither", "nor"})



# Share of a claim's words found in the context from which it counts as supported / partly.
WORDS_SUPPORTED, WORDS_PARTLY = 0.8, 0.5



def word_check(claim: str, context: str) -> Label:
    """A claim the demo has no human label for (an answer sent to the demo by hand), checked by
    its words: a number or a negation the context does not have makes it UNGEDECKT; else the
    share of its words found in the context decides (0.8: GEDECKT, 0.5: TEILWEISE). No model:
    a paraphrase is missed and a reordering passes, but a changed number or an added "nicht"
    is found, so a contradiction in a hand-sent answer does not score 1.0."""
    lowered = context.lower()
    context_words = set(WORD.findall(lowered)) | set(re.findall(r"\b\w+\b", lowered))
    numbers = set(_NUMBER.findall(context))
    tokens = set(re.findall(r"\b\w+\b", claim.lower()))
    if any(n not in numbers for n in _NUMBER.findall(claim)):
        return Label.UNGEDECKT
    if (tokens & _NEGATIONS) - context_words:
        return Label.UNGEDECKT
    words = WORD.findall(claim.lower())
    if not words:
        return Label.GEDECKT
    share = sum(w in context_words for w in words) / len(words)
    if share >= WORDS_SUPPORTED:
        return Label.GEDECKT
    return Label.TEILWEISE if share >= WORDS_PARTLY else Label.UNGEDECKT
