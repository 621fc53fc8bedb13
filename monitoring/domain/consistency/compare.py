"""Self-consistency's comparison of samples and the question's verdict.

``compare_samples`` applies the comparison rule (the package docstring) to the values
``values`` extracts; ``needs_judge`` says whether the judge must be asked; ``decide`` turns the
comparison and the judge's reply into the verdict.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from monitoring.domain.consistency.prompt import ContradictionReply
from monitoring.domain.consistency.values import Value, extract_values

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
    reason: str
    source: str  # "values" | "judge"


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


def compare_samples(samples: Sequence[str], *, language: str) -> Comparison:
    """Extract each sample's values and apply the comparison rule (package docstring)."""
    values = [extract_values(text, language=language) for text in samples]
    dimensions = list(dict.fromkeys(
        v.dimension for vs in values for v in vs if _category(v.dimension) != "never"
    ))
    evading = [any(v.kind == "evasion" for v in vs) for vs in values]
    highlight: list[set[tuple[int, int]]] = [set() for _ in samples]
    conflicting: list[str] = []
    for dimension in dimensions:
        per_sample = [[v for v in vs if v.dimension == dimension] for vs in values]
        having = [i for i, vs in enumerate(per_sample) if vs]
        # Two samples that share no value contradict; their values there are what differs.
        flagged: set[tuple[int, int]] = {  # (sample, index into per_sample[sample])
            (i, k)
            for i in having for j in having
            if i != j and not any(_same(v, w) for v in per_sample[i] for w in per_sample[j])
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
        reason = _PREFIXES[_category(conflicting[0])][language] + " / ".join(
            _shown(vs, conflicting[0]) for vs in values
        )
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


def decide(
    comparison: Comparison, contradiction: ContradictionReply | None, *, language: str
) -> Verdict:
    """The question's verdict: conflicting values decide alone, otherwise the judge does.

    ``contradiction`` is the judge's reply after the one retry; an unreadable one makes the
    question undecided (None), never consistent by default.
    """
    words = _WORDS[language]
    if not comparison.agree:
        return Verdict(False, comparison.reason, "values")
    if contradiction is None:
        raise ValueError("the values agree or there are none: the judge's reply is needed")
    if contradiction.contradiction is None:
        return Verdict(None, words["undecided"], "judge")
    if contradiction.contradiction:
        reason = words["judge"] + (f": {contradiction.reason}" if contradiction.reason else "")
        return Verdict(False, reason, "judge")
    shown = next((
        [v.text for v in vs if _category(v.dimension) != "never"]
        for vs in comparison.values if any(_category(v.dimension) != "never" for v in vs)
    ), [])
    reason = words["agree"].format(", ".join(shown)) if shown else words["none"]
    return Verdict(True, reason, "judge")
