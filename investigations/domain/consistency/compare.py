"""Self-consistency's comparison of samples and the question's verdict.

``compare_samples`` applies the comparison rule (the package docstring) to the values
``values`` extracts; ``needs_judge`` says whether the judge must be asked; ``decide`` turns the
comparison and the judge's reply into the verdict.

Samples are the generator's text and may hold thousands of values, so the comparison does not
test every value of one sample against every value of another: values are grouped by dimension
once, and whether two samples share a value is found by a sweep over their sorted ranges.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from investigations.domain.consistency.prompt import ContradictionReply
from investigations.domain.consistency.values import Value, extract_values

REL_TOL = 1e-9


@dataclass(frozen=True)
class Comparison:
    agree: bool
    has_values: bool
    dimension: str | None
    reason: str
    values: list[list[Value]]
    differing: list[list[tuple[int, int]]]
    conflicting: list[str] = field(default_factory=list)  # every conflicting dimension, in order
    unshared_names: list[list[tuple[int, int]]] = field(default_factory=list)  # shown, not judged


@dataclass(frozen=True)
class Verdict:
    consistent: bool | None
    reason: str  # `reason_text(kind, detail, language)` in the investigation's language
    source: str  # "values" | "judge"
    # The reason without its words, for a reader of another language: `kind` is one of
    # REASON_KINDS, `detail` the values or the judge's own words, which are not translated.
    kind: str = ""
    detail: str = ""


_DATE_DIMENSIONS = {"date", "year", "month", "day-month"}
_NEVER_COMPARED = {"name", "number", "evasion"}
_PREFIXES = {
    "number": {"de": "Zahlen widersprechen sich: ", "en": "Numbers contradict each other: "},
    "date": {"de": "Daten widersprechen sich: ", "en": "Dates contradict each other: "},
    "detail": {"de": "Angaben widersprechen sich: ", "en": "Details contradict each other: "},
}


def _category(dimension: str) -> str:
    if dimension in _NEVER_COMPARED:
        return "never"
    if dimension in _DATE_DIMENSIONS:
        return "date"
    return "detail" if dimension.startswith(("ref:", "code:")) else "number"


def _same(a: Value, b: Value) -> bool:
    if a.amount is None or b.amount is None or a.kind == "name":
        return a.key == b.key
    a_hi = a.upper if a.upper is not None else a.amount
    b_hi = b.upper if b.upper is not None else b.amount
    tol = REL_TOL * max(abs(a.amount), abs(a_hi), abs(b.amount), abs(b_hi))
    return a.amount <= b_hi + tol and b.amount <= a_hi + tol


def _share(a: list[Value], b: list[Value]) -> bool:
    """``any(_same(v, w) for v in a for w in b)``, without trying every pair.

    Values compared by key share one when their key sets meet. Values compared by amount are
    ranges [amount, upper]: sorted by their lower ends, a value overlaps some earlier value of
    the other side exactly when it overlaps the one of them reaching furthest up, as the
    tolerance only grows with the ranges' ends (for amounts >= 0, which every finder reads).
    Anything else (never found by ``extract_values``) is compared pair by pair.
    """
    if all(v.amount is None or v.kind == "name" for v in a) or all(w.amount is None for w in b):
        return not {v.key for v in a}.isdisjoint(w.key for w in b)
    ranges_a, ranges_b = _amount_ranges(a), _amount_ranges(b)
    if ranges_a is not None and ranges_b is not None and all(v.kind != "name" for v in a):
        # (lower end, upper end, side, value): side 0 is ``a``, whose value goes first to _same.
        ranges = sorted(
            [(lo, hi, 0, v) for lo, hi, v in ranges_a] + [(lo, hi, 1, w) for lo, hi, w in ranges_b],
            key=lambda item: item[0],
        )
        reach: list[tuple[float, Value] | None] = [None, None]  # per side: the furthest up
        for _, hi, side, value in ranges:
            other = reach[1 - side]
            if other is not None and (
                _same(value, other[1]) if side == 0 else _same(other[1], value)
            ):
                return True
            mine = reach[side]
            if mine is None or hi > mine[0]:
                reach[side] = (hi, value)
        return False
    return any(_same(v, w) for v in a for w in b)


def _amount_ranges(values: list[Value]) -> list[tuple[float, float, Value]] | None:
    """(amount, upper, value) of each value; None unless each has 0 <= amount <= upper."""
    out = []
    for v in values:
        if v.amount is None:
            return None
        upper = v.upper if v.upper is not None else v.amount
        if not 0 <= v.amount <= upper:
            return None
        out.append((v.amount, upper, v))
    return out


def compare_samples(samples: Sequence[str], *, language: str) -> Comparison:
    """Extract each sample's values and apply the comparison rule (package docstring)."""
    values = [extract_values(text, language=language) for text in samples]
    # Each sample's values by dimension, read once: filtering them all again for every
    # dimension was quadratic ("count:<noun>" is a dimension for every noun counted).
    by_dimension: dict[str, list[list[Value]]] = {}
    for i, vs in enumerate(values):
        for v in vs:
            by_dimension.setdefault(v.dimension, [[] for _ in samples])[i].append(v)
    dimensions = [d for d in by_dimension if _category(d) != "never"]
    evading = [any(v.kind == "evasion" for v in vs) for vs in values]
    highlight: list[set[tuple[int, int]]] = [set() for _ in samples]
    conflicting: list[str] = []
    for dimension in dimensions:
        per_sample = by_dimension[dimension]
        having = [i for i, vs in enumerate(per_sample) if vs]
        # Two samples that share no value contradict; their values there are what differs.
        flagged: set[tuple[int, int]] = {  # (sample, index into per_sample[sample])
            (i, k)
            for i in having for j in having
            if i != j and not _share(per_sample[i], per_sample[j])
            for k in range(len(per_sample[i]))
        }
        evaders = [
            i for i, vs in enumerate(per_sample)
            if not vs and evading[i] and _category(dimension) == "number"
            and 2 * len(having) >= len(samples)
        ]
        if not flagged and not evaders:
            continue
        conflicting.append(dimension)
        if evaders:  # every figure is what the evading sample declined to give
            flagged |= {(i, k) for i in having for k in range(len(per_sample[i]))}
        for i, k in flagged:
            highlight[i].add((per_sample[i][k].start, per_sample[i][k].end))
        for i in evaders:
            highlight[i] |= {(v.start, v.end) for v in values[i] if v.kind == "evasion"}
    reason = ""
    if conflicting:
        reason = reason_text(_category(conflicting[0]), _conflict_detail(values, conflicting[0]),
                             language)
    return Comparison(
        agree=not conflicting,
        has_values=any(values),
        dimension=conflicting[0] if conflicting else None,
        reason=reason,
        values=values,
        differing=[sorted(spans) for spans in highlight],
        conflicting=conflicting,
        unshared_names=_unshared_names(values),
    )


def _conflict_detail(values: list[list[Value]], dimension: str) -> str:
    return " / ".join(_shown(vs, dimension) for vs in values)


def _shown(values: list[Value], dimension: str) -> str:
    """A sample's surfaces in ``dimension``, else its evasion, else a dash."""
    for wanted in (dimension, "evasion"):
        found = [v.text for v in values if v.dimension == wanted]
        if found:
            return ", ".join(found)
    return "—"


def _unshared_names(values: list[list[Value]]) -> list[list[tuple[int, int]]]:
    """Per sample, the names that another sample naming anyone does not name."""
    named = [{v.key for v in vs if v.dimension == "name"} for vs in values]
    return [
        [(v.start, v.end) for v in vs if v.dimension == "name"
         and any(other and v.key not in other for j, other in enumerate(named) if j != i)]
        for i, vs in enumerate(values)
    ]


def needs_judge(comparison: Comparison) -> bool:
    """True when the values do not already settle it: they agree, or there are none."""
    return comparison.agree


_WORDS = {
    "de": {
        "judge": "Inhaltlicher Widerspruch laut Prüfmodell",
        "agree": "Konsistent: Werte stimmen überein ({})",
        "none": "Konsistent: keine Werte, kein inhaltlicher Widerspruch",
        "undecided": "Unentschieden: Antwort des Prüfmodells zweimal nicht lesbar",
    },
    "en": {
        "judge": "Content contradiction according to the judge model",
        "agree": "Consistent: values agree ({})",
        "none": "Consistent: no values, no content contradiction",
        "undecided": "Undecided: the judge model's reply was unreadable twice",
    },
}


# What a reason can say: values of a category conflict ("number", "date", "detail"), the judge
# found a contradiction ("judge"), values agree ("agree"), there are none and no contradiction
# ("none"), the judge's reply was unreadable ("undecided").
REASON_KINDS = (*_PREFIXES, *_WORDS["de"])


def reason_text(kind: str, detail: str, language: str) -> str:
    """A verdict's reason in ``language`` ("de"/"en", else German) from its `Verdict.kind` and
    `Verdict.detail`: how a page shows it in its reader's language."""
    language = language if language in _WORDS else "de"
    if kind in _PREFIXES:
        return _PREFIXES[kind][language] + detail
    words = _WORDS[language]
    if kind == "judge":
        return words["judge"] + (f": {detail}" if detail else "")
    if kind == "agree":
        return words["agree"].format(detail)
    if kind in words:
        return words[kind]
    raise ValueError(f"unknown reason kind {kind!r}")


def decide(
    comparison: Comparison, contradiction: ContradictionReply | None, *, language: str
) -> Verdict:
    """The question's verdict: conflicting values decide alone, otherwise the judge does.

    ``contradiction`` is the judge's reply after the one retry; an unreadable one makes the
    question undecided (None), never consistent by default.
    """
    if not comparison.agree:
        kind = _category(comparison.conflicting[0])
        detail = _conflict_detail(comparison.values, comparison.conflicting[0])
        return _verdict(False, "values", kind, detail, language)
    if contradiction is None:
        raise ValueError("the values agree or there are none: the judge's reply is needed")
    if contradiction.contradiction is None:
        return _verdict(None, "judge", "undecided", "", language)
    if contradiction.contradiction:
        return _verdict(False, "judge", "judge", contradiction.reason or "", language)
    shown = next((
        [v.text for v in vs if _category(v.dimension) != "never"]
        for vs in comparison.values if any(_category(v.dimension) != "never" for v in vs)
    ), [])
    if shown:
        return _verdict(True, "judge", "agree", ", ".join(shown), language)
    return _verdict(True, "judge", "none", "", language)


def _verdict(consistent: bool | None, source: str, kind: str, detail: str, language: str
             ) -> Verdict:
    return Verdict(consistent, reason_text(kind, detail, language), source, kind, detail)
