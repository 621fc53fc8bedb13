"""A batched judge reply of 1 MB (issue 37, point 2): `batched.read_batch` reads pathological
replies - runs of ids, pipes, brackets, fences, think tags, blanks, evidence that never closes -
in time linear in their length, measured as tests/hardening/test_linear_time.py measures: CPU
seconds of this process with the garbage collector off, best of 3, a generous bound for the
whole megabyte and at most 8 times the time of a quarter of it (linear work gives about 4,
quadratic work 16) where the time is long enough to measure. A case still running after 60 s on
the wall clock is stopped and fails.

A reply this long comes from no endpoint with a sane max_tokens; the bound is for the one that
does not keep to it, or a proxy that sends something else.
"""

from __future__ import annotations

import gc
import math
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

from judging.domain.batch_reading import read_batch
from judging.domain.batched import MAX_REASON, BatchReading, claim_ids

BIG = 1_000_000
SMALL = BIG // 4
LIMIT_S = 10.0
RATIO = 8.0
FLOOR_S = 0.05  # below this, timer noise would rule the ratio
STOP_S = 60.0

CLAIMS = (
    "Der Druckbehälter wird alle 5 Jahre geprüft.",
    "Teilweise werden die Kosten von der Kasse erstattet.",
    "Die Prüfung kostet 1.250 €.",
)
K1, K2, K3 = claim_ids(CLAIMS)


def _repeat(unit: str) -> Callable[[int], str]:
    return lambda n: (unit * (n // len(unit) + 1))[:n]


def _run(head: str, fill: str, tail: str) -> Callable[[int], str]:
    return lambda n: head + fill * max((n - len(head) - len(tail)) // len(fill), 0) + tail


def _json_list(n: int) -> str:
    item = f'{{"id": "{K1}", "verdict": "GEDECKT", "chunks": [1], "reason": "x"}}'
    return "[" + ", ".join([item] * (n // (len(item) + 2))) + "]"


FAMILIES: dict[str, Callable[[int], str]] = {
    "K7: ": _repeat(f"{K1}: "),
    "|": _repeat("|"),
    "| K7 ": _repeat(f"| {K1} "),
    "table rows with the claim": _repeat(f"| {K2} | {CLAIMS[1]} | GEDECKT | 1 |\n"),
    "K7: <blanks> GEDECKT": _run(f"{K1}: ", " ", "GEDECKT"),
    "NICHT <blanks and tabs> GEDECKT": _run(f"{K1}: NICHT", " \t", "GEDECKT"),
    "NOT <blanks> x": _run(f"{K1}: NOT", " ", "x"),
    "NICHT ": _run(f"{K1}: ", "NICHT ", ""),
    "[": _repeat("["),
    "{": _repeat("{"),
    '{"K7": ': _repeat(f'{{"{K1}": '),
    "JSON list of verdicts": _json_list,
    '{"verdicts": nested': lambda n: '{"verdicts": ' * (n // 14) + "1" + "}" * (n // 14),
    "```": _repeat("```"),
    "```json\\n": _repeat("```json\n"),
    "<think>": _repeat("<think>"),
    "</think>": _repeat("</think>"),
    "<think> never closed": _run("<think>\n", f"{K1}: GEDECKT\n", ""),
    "evidence never closed": _run(f"{K1}: GEDECKT [", "1,", ""),
    "long evidence": _run(f"{K1}: GEDECKT [", "1, ", "]"),
    "the claim echoed again and again": _run(f"{K2}: ", CLAIMS[1] + " ", " GEDECKT"),
    "verdict lines": _repeat(f"{K1}: GEDECKT [1] Abschnitt 1 nennt die 5 Jahre.\n"),
    "contradicting lines": _repeat(f"{K1}: GEDECKT\n{K1}: UNGEDECKT\n"),
    "\\n": _repeat("\n"),
    "blanks": _repeat(" "),
    "x": _repeat("x"),
    "*": _repeat("*"),
    "**K7:** ": _repeat(f"**{K1}:** "),
    "Aussage ": _run("", "Aussage ", f"{K1}: GEDECKT"),
    "K7:----": _run(f"{K1}:", "-", ""),
    "---- K7: GEDECKT": _run("", "-", f" {K1}: GEDECKT"),
    "„„„ GEDECKT": _run(f"{K1}: ", "„", "GEDECKT"),
    "mixed": _repeat(f'{K1}: GEDECKT | [1, "{CLAIMS[1]}" ** <think> ``` NICHT {K2}: \n'),
}


class _TookTooLong(BaseException):
    """Raised by the alarm; a BaseException, so no `except Exception` in the code swallows it."""


def _alarm(signum: int, frame: Any) -> None:
    raise _TookTooLong


def _seconds(reply: str, cut: bool) -> tuple[float, BatchReading]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, STOP_S)
    gc.disable()
    start = time.process_time()
    try:
        reading = read_batch(reply, CLAIMS, cut=cut, chunk_count=3)
    except _TookTooLong:
        pytest.fail(f"still running after {STOP_S} s on {len(reply):,} characters")
    finally:
        seconds = time.process_time() - start
        gc.enable()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return seconds, reading


@pytest.mark.parametrize("cut", [False, True], ids=["whole", "cut at max_tokens"])
@pytest.mark.parametrize("family", FAMILIES)
def test_a_megabyte_reply_is_read_in_linear_time(family: str, cut: bool) -> None:
    make = FAMILIES[family]
    big, small = make(BIG), make(SMALL)
    assert BIG * 0.9 <= len(big) <= BIG * 1.1
    t_big, reading = _seconds(big, cut)
    if t_big >= FLOOR_S:
        # Big and small in turn, best of 3; on a busy machine two more rounds before judging.
        t_small = math.inf
        for _ in range(3):
            for _ in range(3):
                t_big = min(t_big, _seconds(big, cut)[0])
                t_small = min(t_small, _seconds(small, cut)[0])
            if t_big < LIMIT_S and t_big / t_small < RATIO:
                break
        assert t_big / t_small < RATIO, (
            f"{t_small * 1000:.0f} ms for {len(small):,} characters, {t_big * 1000:.0f} ms for "
            f"{len(big):,}: grows faster than linear"
        )
    assert t_big < LIMIT_S, f"{len(big):,} characters took {t_big:.2f} s"
    # Its ordinary kind of result: claims of the call, reasons within their bound.
    assert isinstance(reading, BatchReading)
    assert set(reading.verdicts) | set(reading.missing) == {1, 2, 3}
    assert not set(reading.verdicts) & set(reading.missing)
    assert all(len(e.reason) <= MAX_REASON for e in reading.verdicts.values())
    assert all(e.chunks in ((), (1,)) for e in reading.verdicts.values())
