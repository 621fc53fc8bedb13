"""Adversarial-text benchmark: what every domain function that reads text from outside costs on
hostile input of growing size, to show that the work grows linearly (issue 21).

The functions are those a request, a judge or a generator can hand text to: question analysis
(``questions.question_parts`` in German, English and both word lists), tier 1
(``logprobs.analyse_answer`` with tokens spelling the text, its word spans,
``tuner.min_content_probability``), the answer page's highlighting (``highlight.segments``), the
judge's replies (``judge_parse.parse_verdict`` / ``parse_claims``, ``judging.judge_answer`` with
a scripted judge replying the text), the judge prompts, self-consistency
(``consistency.extract_values`` in German and English, ``compare_samples`` on three samples of a
third each, ``parse_contradiction``), the review's week parameter, an API key's prefix and the
random sample's draw. Each gets ordinary text (German and English answer prose) and every
adversarial family: repeated separators ("a. ", "1. 2. 3. ", "?!;\\n"), abbreviations
("z. B. ", "e.g. "), digits ("1" * n, "1.5 ", "1,2,3,…", "1 Jahr "), brackets ("[", "(", "{",
'["a", '), quotes ('"', "„“", "*. "), long words ("x" * n, "hundert" * n), long blank runs,
capitals ("A-A-…", "AA AA …"), connectors ("und ", "and ") and a mix. Tier 1 also gets token
lists that do not simply spell the answer (long U+FFFD runs, blank runs, escaped bytes). The
families and functions are the test's (``tests/hardening/test_linear_time.py``), so the bench times
exactly what the test bounds. One line also times what ingest computes from an answer besides
storing it (tier 1, the sample draw, the tuner's probability, the multi-part flag); the rest of
``ingest.services`` needs Django and a database and is ``bench/ingest.py``'s.

It times each function on each family at 25, 50 and 100 KB (1 KB = 1,000 characters; a token
family is sized by its answer), best of 3 runs, and prints a table: milliseconds at each size,
the worst milliseconds per KB over the sizes, and the growth t(100 KB) / t(25 KB), which is about
4 for linear work and 16 for quadratic work. Then, per function, its worst family, and the
overall worst ms per KB. Plain Python in one process, no Django or database:

    .venv/bin/python bench/adversarial.py                         # everything, ~2 minutes
    .venv/bin/python bench/adversarial.py --summary               # only the per-function lines
    .venv/bin/python bench/adversarial.py --function question --family "a. "
    .venv/bin/python bench/adversarial.py --sizes 25,50,100,200 --repeat 5

A run that takes longer than ``--stop`` seconds (default 10) is stopped and shown as ">",
and larger sizes of that case are skipped, so the bench also finishes on quadratic code. Exit
status 0; 1 when a function raised or was stopped; ``--strict`` exits 2 when a worst ms per KB is
above ``--limit`` (default 10, i.e. 1 s for 100 KB, the test's bound).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import platform
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The project instead of this script's folder first on the path: a bench script named like a
# standard module (bench/statistics.py) would otherwise stand in for it.
sys.path[0] = str(ROOT)

from ingest.domain import logprobs, questions, sampling
from ingest.domain.content_probability import min_content_probability
from tests.hardening.test_linear_time import (
    FAMILIES,
    FUNCTIONS,
    TEXT,
    TOKEN_FAMILIES,
    spelling_tokens,
)

KB = 1000
ORDINARY = "ordinary text"


class _Stopped(BaseException):
    """Raised by the alarm; a BaseException, so no `except Exception` in the code swallows it."""


def _alarm(signum: int, frame: Any) -> None:
    raise _Stopped


@dataclass
class Case:
    function: str
    family: str
    run: Callable[[Any], Any]
    make: Callable[[int], Any]
    ms: dict[int, float | None] = field(default_factory=dict)  # None: stopped
    error: str | None = None

    def per_kb(self) -> float | None:
        """The worst ms per KB over the sizes measured; None if nothing was."""
        rates = [ms / kb for kb, ms in self.ms.items() if ms is not None]
        return max(rates) if rates else None

    def growth(self, sizes: list[int]) -> float | None:
        """t(largest) / t(smallest); None below 1 ms, where timer noise rules the ratio."""
        small, large = self.ms.get(sizes[0]), self.ms.get(sizes[-1])
        if small is None or large is None or len(sizes) < 2 or large < 1.0:
            return None
        return large / max(small, 1e-3)


def _ingest_domain_part(text: str) -> None:
    """What ``ingest.services`` computes from an answer besides storing it, with
    the text as the answer (4-character tokens) and, up to the API's 50,000, as the question."""
    logprobs.content_word_spans.cache_clear()  # kept from the last run on the same answer
    tier1 = logprobs.analyse_answer(text, spelling_tokens(text), 0.5)
    sampling.decide(service_key="1", external_id=text[:200] or "x", flagged=tier1.flagged,
                    rate=0.05)
    min_content_probability(text, tier1.compact)
    questions.is_multi_part(text[:50_000], "de")


def _tier1_tokens(pair: tuple[str, list[dict[str, Any]]]) -> logprobs.Tier1Result:
    logprobs.content_word_spans.cache_clear()
    answer, content = pair
    return logprobs.analyse_answer(answer, {"content": content}, 0.5)


def _ordinary_tokens(n: int) -> tuple[str, list[dict[str, Any]]]:
    text = TEXT(n)
    return text, spelling_tokens(text)["content"]


def cases(function_filter: str, family_filter: str) -> list[Case]:
    text_functions: dict[str, Callable[[str], Any]] = {
        name: run for name, (run, _) in FUNCTIONS.items()
    }
    text_functions["ingest, domain part"] = _ingest_domain_part
    families = {ORDINARY: TEXT, **FAMILIES}
    found = [
        Case(function, family, run, make)
        for function, run in text_functions.items()
        for family, make in families.items()
    ]
    token_families = {ORDINARY: _ordinary_tokens, **TOKEN_FAMILIES}
    found += [
        Case("analyse_answer, tokens", family, _tier1_tokens, make)
        for family, make in token_families.items()
    ]
    return [
        case for case in found
        if function_filter.lower() in case.function.lower()
        and family_filter.lower() in case.family.lower()
    ]


def measure(case: Case, sizes: list[int], repeat: int, stop: float) -> None:
    # One run before the clock, so that first-call costs (compiling a pattern, starting the
    # judge's threads) are not counted for the smallest size.
    with contextlib.suppress(Exception):  # an error is measured and reported below
        case.run(case.make(sizes[0] * KB // 10))
    for kb in sizes:
        data = case.make(kb * KB)
        best: float | None = float("inf")
        for _ in range(repeat):
            signal.setitimer(signal.ITIMER_REAL, stop)
            gc.disable()  # as timeit does: the collector's passes are not the function's work
            began = time.perf_counter()
            try:
                case.run(data)
            except _Stopped:
                best = None
            except Exception as error:  # a RecursionError too: reported, not raised
                case.error = f"{type(error).__name__}: {str(error)[:60]}"
            finally:
                elapsed = (time.perf_counter() - began) * 1000
                gc.enable()
                signal.setitimer(signal.ITIMER_REAL, 0)
            if best is None or case.error:
                break
            best = min(best, elapsed)
        if case.error:
            return
        case.ms[kb] = best
        if best is None:
            return


def _badness(case: Case) -> float:
    """A case's worst ms per KB; infinite when it raised or was stopped."""
    if case.error or None in case.ms.values():
        return float("inf")
    return case.per_kb() or 0.0


def _ms(value: float | None, present: bool) -> str:
    if not present:
        return ""
    return ">" if value is None else f"{value:.1f}"


def row(case: Case, sizes: list[int], stop: float) -> str:
    cells = [_ms(case.ms.get(kb), kb in case.ms) for kb in sizes]
    per_kb, growth = case.per_kb(), case.growth(sizes)
    tail = case.error or ("" if None not in case.ms.values() else f"stopped after {stop:g} s")
    return (
        f"{case.function:28} {case.family[:22]:22} "
        + " ".join(f"{c:>10}" for c in cells)
        + f" {'' if per_kb is None else f'{per_kb:.3f}':>8} "
        + f"{'' if growth is None else f'{growth:.1f}':>6}  {tail}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="25,50,100",
                        help="sizes in KB of 1,000 characters, comma-separated (default 25,50,100)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size, best kept (3)")
    parser.add_argument("--function", default="", help="only functions whose name holds this")
    parser.add_argument("--family", default="", help="only families whose name holds this")
    parser.add_argument("--stop", type=float, default=10.0,
                        help="seconds after which a run is stopped (10)")
    parser.add_argument("--summary", action="store_true",
                        help="print only each function's worst family, not every row")
    parser.add_argument("--limit", type=float, default=10.0,
                        help="ms per KB that --strict holds every case to (10: 1 s for 100 KB)")
    parser.add_argument("--strict", action="store_true", help="exit 2 when a case is over --limit")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    selected = cases(args.function, args.family)
    if not selected:
        parser.error("no function and family match the filters")
    signal.signal(signal.SIGALRM, _alarm)

    print(f"Python {platform.python_version()} on {platform.machine()}; best of {args.repeat} "
          f"runs; 1 KB = {KB:,} characters; growth = t({sizes[-1]} KB) / t({sizes[0]} KB), "
          "about 4 for linear work, 16 for quadratic")
    header = (f"{'function':28} {'family':22} "
              + " ".join(f"{f'{kb} KB ms':>10}" for kb in sizes)
              + f" {'ms/KB':>8} {'growth':>6}")
    if not args.summary:
        print(header)
        print("-" * len(header))
    started = time.perf_counter()
    for case in selected:
        measure(case, sizes, args.repeat, args.stop)
        if not args.summary:
            print(row(case, sizes, args.stop), flush=True)

    print()
    print("Worst family of each function (highest ms per KB):")
    print(header)
    print("-" * len(header))
    worsts = []
    for function in dict.fromkeys(case.function for case in selected):
        worst = max((case for case in selected if case.function == function), key=_badness)
        print(row(worst, sizes, args.stop))
        worsts.append(worst)
    worst = max(worsts, key=_badness)
    failed = [case for case in selected if _badness(case) == float("inf")]
    over = [case for case in selected if (case.per_kb() or 0.0) > args.limit]
    per_kb = worst.per_kb()
    print()
    print(f"Worst overall: {'' if per_kb is None else f'{per_kb:.3f} ms per KB, '}"
          f"{worst.function} on {worst.family!r}; {len(selected)} cases in "
          f"{time.perf_counter() - started:.0f} s; {len(failed)} raised or stopped; "
          f"{len(over)} over {args.limit:g} ms per KB")
    if failed:
        return 1
    return 2 if args.strict and over else 0


if __name__ == "__main__":
    sys.exit(main())
