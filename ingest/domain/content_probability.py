"""The lowest probability of a content token in an answer: stored at ingest, so that the threshold
tuner can say what any threshold would have flagged without reading the tokens again."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping
from typing import Any

from ingest.domain.logprobs import content_word_spans


def min_content_probability(answer: str, compact: Mapping[str, Any] | None) -> float | None:
    """The lowest exp(logprob) of a token inside a content-bearing word of the answer.

    ``compact`` is the token copy ``logprobs.analyse_answer`` stores. For every threshold t in
    (0, 1], ``logprobs.reanalyse(answer, compact, t)`` finds a word exactly when this value is
    below t. None when there are no logprobs, the tokens were unaligned, or no content word
    (capitalised word, number, "§ 4") is touched by a token: such an answer is never flagged.
    """
    if not compact:
        return None
    starts, ends, values = compact.get("s"), compact.get("e"), compact.get("lp")
    # The same refusals as logprobs.reanalyse, which this must agree with.
    if starts is None or ends is None or values is None or not len(starts) == len(ends):
        return None
    n = min(len(starts), len(ends), len(values))
    # A token counts where find_uncertain_words would count it at some threshold: it has text
    # and a logprob below +inf (NaN never compares below anything, so it never counts). The
    # walk goes word by word (content words are a fraction of the tokens): the tokens in text
    # order that touch a word are those from the first one ending after the word starts to the
    # last one starting before it ends - the same (word, token) contacts find_uncertain_words
    # walks, found by the same binary search over token ends (it runs for every answer).
    lowest_logprob = math.inf
    for word_start, word_end in content_word_spans(answer):
        k = bisect_right(ends, word_start, 0, n)
        while k < n and starts[k] < word_end:
            value = values[k]
            if value < lowest_logprob and ends[k] > starts[k]:
                lowest_logprob = value
            k += 1
    # The same expression logprobs compares with the threshold, so the two agree to the last
    # bit rather than up to the 4-digit rounding of UncertainWord.probability.
    lowest = math.exp(min(lowest_logprob, 0.0)) if lowest_logprob < math.inf else math.inf
    return None if lowest == math.inf else lowest
