"""Reading a batched reply (judging/domain/batched.py asks): each verdict found under its claim's
id (or, in JSON, its exact text), in whatever shape real models write it: JSON with or without
fences, lines in any order, tables, bold, bullets, the claim echoed, reasoning blocks. What cannot
be read for certain (a verdict negated or qualified, two verdicts on a line, positions instead of
ids, a cut-off last line) stays open and is asked again. Linear in the reply."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from judging.domain.batched import MAX_REASON, BatchReading, Evidence, claim_ids
from judging.domain.judge_parse import Label, strip_wrapping

# Every phrase that names one verdict for certain, longest first where one starts another.
_PHRASES: tuple[tuple[str, Label], ...] = (
    ("NICHT GEDECKT", Label.UNGEDECKT),
    ("TEILWEISE GEDECKT", Label.TEILWEISE),
    ("UNGEDECKT", Label.UNGEDECKT),
    ("TEILWEISE", Label.TEILWEISE),
    ("GEDECKT", Label.GEDECKT),
    ("NOT SUPPORTED", Label.UNGEDECKT),
    ("PARTIALLY SUPPORTED", Label.TEILWEISE),
    ("PARTLY SUPPORTED", Label.TEILWEISE),
    ("UNSUPPORTED", Label.UNGEDECKT),
    ("SUPPORTED", Label.GEDECKT),
)


_PHRASE = re.compile(
    "(" + "|".join(p.replace(" ", r"[ \t]++") for p, _ in _PHRASES) + r")(?![A-Za-zÄÖÜäöüß])",
    re.IGNORECASE,
)


_PHRASE_LABEL = {p.replace(" ", ""): label for p, label in _PHRASES}


_MARKUP = str.maketrans("", "", "*`")


_WRAP = "\"'_„“”‚‘’«»‹›\u200b\ufeff"


# What may follow a verdict word: the end, the evidence, a parenthesis, a separator. A letter
# after a blank is the rest of a sentence ("Teilweise werden …"), so no verdict.
_AFTER = frozenset("[(:;,.!–—-|/")


# "K7", also "Aussage K7", "Claim K7", "ID K7", "(K7)", "[K7]", "#K7", then a separator.
_ID_AT_START = re.compile(
    r"(?:(?:aussage|claim|kennung|id|nr\.?)[ \t]*+)?+[(\[#]?+([A-Za-z][0-9])[)\]]?"
    r"[ \t]*+(?:[:.)=|–—-]|->|→)[ \t]*+",
    re.IGNORECASE,
)


_THINK_ENDS = ("</think>", "</thinking>", "[/THINK]", "</reasoning>")


_THINK_STARTS = ("<think>", "<thinking>", "[think]", "<reasoning>")


# An id anywhere on a line, and a verdict in capitals anywhere: a line that names a claim and
# a verdict other than the one read for it ("Wait – X5 is NOT SUPPORTED") leaves it in doubt.
_ANY_ID = re.compile(r"(?<![A-Za-z0-9])([A-Za-z][0-9])(?![A-Za-z0-9])")


# A number before an id, as in a numbered list of lines: "1. K7: GEDECKT".
_LIST_NUMBER = re.compile(r"\d{1,3}[.)][ \t]++(?=[A-Za-z][0-9])")


# Every word that names a verdict (or a part of one), for the conflict check: "GEDECKT
# (teilweise)", "SUPPORTED / PARTIALLY SUPPORTED", "GEDECKT – nein, eher TEILWEISE".
_VERDICT_WORDS = re.compile(
    "(?<![A-Za-zÄÖÜäöüß])(" + "|".join(p.replace(" ", r"[ \t]++") for p, _ in _PHRASES)
    + r"|PARTIALLY|PARTLY|PARTIAL)(?![A-Za-zÄÖÜäöüß])",
    re.IGNORECASE,
)


def verdict_phrase(text: str, *, capitals_only: bool = False) -> tuple[Label, str] | None:
    """The verdict a text starts with, and what follows it; None unless the text starts with a
    verdict phrase that stands alone. In capitals, as asked for, it may be followed by evidence,
    a separator or a sentence of reason ("UNGEDECKT Kein Abschnitt …"); in other case only by
    its end or evidence ("gedeckt [2]"), since "Teilweise, bis 500 € …" is a sentence. Either
    way not by a word that negates or qualifies it ("GEDECKT ist das nicht", "Supported: no",
    "GEDECKT nur zum Teil", "SUPPORTED in part")."""
    text = text.lstrip(_WRAP + "*` \t")
    match = _PHRASE.match(text)
    if match is None:
        return None
    rest = text[match.end():].lstrip(_WRAP + "*`")
    after = rest.lstrip(" \t")
    capitals = match.group(1).isupper()
    if capitals_only and not capitals:
        return None
    if capitals:
        if rest and not (rest[0] in _AFTER or after == "" or after[0] in _AFTER
                         or rest[0] in " \t"):
            return None
    elif after.rstrip(".!") and after[0] != "[":
        return None
    key = re.sub(r"[ \t]++", "", match.group(1)).upper()
    label = _PHRASE_LABEL[key]
    head = after.lstrip(_SEPARATORS)
    for qualifier, spares in _QUALIFIERS:
        if qualifier.match(head) and label is not spares:
            return None
    return label, after


def _words(*words: str) -> re.Pattern[str]:
    return re.compile("(?:" + "|".join(words) + ")(?![A-Za-zÄÖÜäöüß])", re.IGNORECASE)


# What turns a verdict into its opposite or a part of it when it follows the word, with the
# verdict it agrees with: "UNGEDECKT – nicht im Kontext" and "TEILWEISE – nur die Zahl" are
# reasons, "GEDECKT – nein" and "GEDECKT nur zum Teil" are doubt.
_QUALIFIERS: tuple[tuple[re.Pattern[str], Label | None], ...] = (
    (_words("nein", "no", "not", "nicht", "false", "falsch", "wrong", r"kein\w*", "none"),
     Label.UNGEDECKT),
    (_words("nur", "only", "aber", "but", "except", "außer", "bis", "zum", "teils", "eher",
            "rather", r"in[ \t]++part", "partly", "partially", "teilweise", "mostly", "largely",
            "überwiegend", "größtenteils"), Label.TEILWEISE),
    (_words("ist", "is", "isn't", "wäre", "would", "war", "was", r"\?"), None),
)


_SEPARATORS = " \t:;,.–—-=>→|/(\"'„“”"


def read_batch(
    reply: str,
    claims: Sequence[str],
    *,
    ids: Sequence[str] | None = None,
    cut: bool = False,
    chunk_count: int | None = None,
) -> BatchReading:
    """The verdicts a batched reply ties to ``claims`` (by their ``ids``, default
    `claim_ids(claims)`), and the claims it leaves open.

    ``cut``: the reply was cut off by its token limit, so its last line may be a stump and is
    not read. ``chunk_count``: chunk ranks above it are dropped from the evidence.
    """
    if ids is None:
        ids = claim_ids(claims)
    if len(ids) != len(claims) or not claims:
        raise ValueError("one id per claim, and at least one claim")
    number = {id_.upper(): n for n, id_ in enumerate(ids, 1)}
    echoes = {n: _fold(claim) for n, claim in enumerate(claims, 1)}
    folded = [echo for echo in echoes.values()]
    # Two claims that read alike are tied by their ids only.
    by_text = {echo: n for n, echo in echoes.items() if folded.count(echo) == 1}
    # Claims that start with a verdict word ("Teilweise, nämlich …"): there a verdict at the
    # start of the line counts only in capitals, as asked for, since the judge may have begun
    # to write the claim's text.
    wordy = {n for n, claim in enumerate(claims, 1) if _PHRASE.match(claim.lstrip(_WRAP))}
    text = reply
    end_at, end = max((text.rfind(end), end) for end in _THINK_ENDS)
    if end_at >= 0:
        text = text[end_at + len(end):]
    elif text.lstrip().lower().startswith(_THINK_STARTS):
        text = ""  # all reasoning, never finished
    found: dict[int, list[Evidence]] = {}
    doubts: dict[int, set[Label]] = {}
    values, outside = _json_parts(text)
    for value in values:
        for key, item in _json_items(value):
            n = _json_claim(key, item, number, by_text)
            evidence = json_evidence(item, chunk_count)
            if n is not None and evidence is not None:
                found.setdefault(n, []).append(evidence)
    form = "json" if found else ""
    lines = outside.splitlines()
    if cut:
        while lines and not lines[-1].strip():
            lines.pop()
        lines = lines[:-1]
    for line in lines:
        read = _read_line(line, number, echoes, wordy, chunk_count, by_text)
        if read is not None:
            found.setdefault(read[0], []).append(read[1])
            form = form or "lines"
        _doubt(line, number, None if read is None else read[0], doubts)
    verdicts = {}
    for n, given in found.items():
        labels = {e.label for e in given}
        # Lines or items that disagree, or a line elsewhere that names another verdict beside
        # the claim's id: no verdict is certain.
        if len(labels) == 1 and doubts.get(n, labels) <= labels:
            verdicts[n] = given[0]
    missing = tuple(n for n in range(1, len(claims) + 1) if n not in verdicts)
    return BatchReading(dict(sorted(verdicts.items())), missing, form if verdicts else "")


def _doubt(
    line: str, number: Mapping[str, int], read: int | None, doubts: dict[int, set[Label]]
) -> None:
    """The verdicts in capitals a line names beside ids other than the one it gave a verdict
    for (all its ids, if it gave none): each such claim is in doubt unless it agrees."""
    words = [m for m in _VERDICT_WORDS.finditer(line) if m.group(1).isupper()]
    if not words:
        return
    labels = {_PHRASE_LABEL.get(re.sub(r"[ \t]++", "", m.group(1)).upper(), Label.TEILWEISE)
              for m in words}
    for match in _ANY_ID.finditer(line):
        n = number.get(match.group(1).upper())
        if n is not None and n != read:
            doubts.setdefault(n, set()).update(labels)


def _json_claim(
    key: object, item: object, number: Mapping[str, int], by_text: Mapping[str, int]
) -> int | None:
    """The claim an item is tied to: by its id (or text) as key, and where the item names an
    id or a claim's text as well, only if that is the same claim."""
    if not isinstance(key, str):
        return None
    n = number.get(key.upper()) or by_text.get(_fold(key))
    if n is None or not isinstance(item, dict):
        return n
    for k, v in item.items():
        if not isinstance(k, str) or not isinstance(v, str):
            continue
        other = number.get(v.upper()) if k.lower() in _ID_KEYS else (
            by_text.get(_fold(v)) if k.lower() in _TEXT_KEYS else None)
        if other is not None and other != n:
            return None  # the id says one claim, the text another
    return n


def _fold(text: str) -> str:
    """A claim's text as compared with what the judge wrote of it: blanks, case and the closing
    mark ignored."""
    return " ".join(text.split()).casefold().rstrip(".!?;:")


def _read_line(
    line: str, number: Mapping[str, int], echoes: Mapping[int, str], wordy: set[int],
    chunk_count: int | None, by_text: Mapping[str, int],
) -> tuple[int, Evidence] | None:
    line = strip_wrapping(line.translate(_MARKUP), "").lstrip("-•–>+ \t")
    numbered = _LIST_NUMBER.match(line)
    if numbered is not None:
        line = line[numbered.end():]
    if line.count("|") >= 2:
        return _read_row(line, number, wordy, chunk_count, by_text)
    match = _ID_AT_START.match(line)
    if match is None:
        return None
    n = number.get(match.group(1).upper())
    if n is None:
        return None
    given = line[match.end():]
    rest = _without_echo(given, echoes[n])
    read = verdict_phrase(rest, capitals_only=n in wordy and rest is given)
    if read is None:
        return None
    label, after = read
    if _conflicts(label, after):
        return None
    chunks, reason = _evidence_text(after, chunk_count)
    return n, Evidence(label, chunks, reason)


def _conflicts(label: Label, after: str) -> bool:
    """Whether what follows a verdict names another one: anywhere before the evidence, or in
    capitals after it ("GEDECKT (teilweise) [2]", "GEDECKT [2] eher TEILWEISE"). A reason that
    uses the words in lower case ("… nicht durch den Kontext gedeckt") is a reason."""
    bracket = after.find("[")
    head = after if bracket < 0 else after[:bracket]
    tail = "" if bracket < 0 else after[bracket:]
    for part, any_case in ((head, True), (tail, False)):
        for match in _VERDICT_WORDS.finditer(part):
            word = match.group(1)
            if not any_case and not word.isupper():
                continue
            key = re.sub(r"[ \t]++", "", word).upper()
            if _PHRASE_LABEL.get(key, Label.TEILWEISE) is not label:
                return True
    return False


def _read_row(
    line: str, number: Mapping[str, int], wordy: set[int], chunk_count: int | None,
    by_text: Mapping[str, int],
) -> tuple[int, Evidence] | None:
    """A markdown table row: | K7 | GEDECKT | [2] | reason |, the claim's text allowed as a
    cell. The verdict is the one cell that holds a verdict alone (with its chunks at most); a
    row with two such cells that disagree, or none, is no verdict."""
    cells = [c.strip(_WRAP + " \t") for c in line.strip("| \t").split("|")]
    head = _ID_AT_START.match(cells[0] + ":")
    n = number.get(head.group(1).upper()) if head is not None else None
    if n is None or head is None or head.end() < len(cells[0]):
        return None
    if any(by_text.get(_fold(cell), n) != n for cell in cells[1:]):
        return None  # the id says one claim, a cell's text another
    verdict_cells = []
    for index, cell in enumerate(cells[1:], 1):
        read = verdict_phrase(cell, capitals_only=n in wordy)
        if read is not None and (not read[1] or _RANKS.fullmatch(read[1].strip())):
            verdict_cells.append((index, read))
    if len({read[0] for _, read in verdict_cells}) != 1:
        return None
    index, (label, ranks) = verdict_cells[0]
    after = [c for c in cells[index + 1:] if c and verdict_phrase(c) is None]
    if after and _BARE_RANKS.fullmatch(after[0]) and not _RANKS.match(after[0]):
        after[0] = f"[{after[0]}]"  # a table's chunk cell: "2, 3"
    rest = " ".join([ranks, *after]).strip()
    if _conflicts(label, rest):
        return None
    chunks, reason = _evidence_text(rest, chunk_count)
    return n, Evidence(label, chunks, reason)


def _without_echo(rest: str, echo: str) -> str:
    """``rest`` after the claim's own text, where the judge wrote it before the verdict; the
    claim's text alone ("Teilweise werden …") is no verdict."""
    bare = rest.lstrip(_WRAP + " \t")
    if echo and _fold(bare[:len(echo) * 2]).startswith(echo):
        # Skip as many words as the claim has, then what separates them from the verdict.
        words = len(echo.split())
        parts = bare.split(None, words)
        tail = parts[words] if len(parts) > words else ""
        tail = tail.lstrip(_WRAP + " \t:=–—->→|")
        return tail if tail else "\x00"  # the echo alone: nothing to read
    return rest


_RANKS = re.compile(r"\[([0-9 ,;]{0,200}+)\]")


_BARE_RANKS = re.compile(r"[0-9][0-9 ,;]{0,200}+")


def _evidence_text(text: str, chunk_count: int | None) -> tuple[tuple[int, ...], str]:
    text = text.strip()
    ranks: tuple[int, ...] = ()
    match = _RANKS.match(text)
    if match is not None:
        ranks = _ranks(re.findall(r"[0-9]{1,6}", match.group(1)), chunk_count)
        text = text[match.end():]
    return ranks, _reason(text)


def _ranks(values: Sequence[object], chunk_count: int | None) -> tuple[int, ...]:
    ranks = []
    for value in values:
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 6:
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1 and (
            chunk_count is None or value <= chunk_count
        ):
            ranks.append(value)
    return tuple(dict.fromkeys(ranks))


def _reason(text: str) -> str:
    reason = strip_wrapping(text, "").lstrip("-–—:.,; \t)").strip()
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 1].rstrip() + "…"


_FENCE_OPEN = re.compile(r"```[A-Za-z]*+[ \t]*+\n?")


def json_value(text: str) -> object:
    """The reply as one JSON object or array (alone, or in its only code fence, with text
    around the fence allowed); None if it is none."""
    values, _ = _json_parts(text)
    return values[0] if len(values) == 1 else None


def _json_parts(text: str) -> tuple[list[object], str]:
    """The JSON objects and arrays of a reply, and the text outside them: the whole reply if it
    is one, else each code fence that holds one (the text between and around the fences is
    returned to be read as lines). Duplicate keys make a value unreadable: which one the judge
    meant is a guess."""
    whole = _loads(text.strip())
    if whole is not None:
        return [whole], ""
    values: list[object] = []
    outside: list[str] = []
    at = 0
    while True:
        start = text.find("```", at)
        opened = _FENCE_OPEN.match(text, start) if start >= 0 else None
        end = text.find("```", opened.end()) if opened is not None else -1
        if opened is None or end < 0:
            outside.append(text[at:])
            return values, "\n".join(outside)
        outside.append(text[at:start])
        value = _loads(text[opened.end():end].strip())
        if value is None:
            outside.append(text[opened.end():end])
        else:
            values.append(value)
        at = end + 3


def _loads(body: str) -> object:
    if body[:1] not in ("{", "["):
        return None
    try:
        value = json.loads(body, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict | list) else None


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [key.casefold() for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key given twice")
    return dict(pairs)


_ITEM_LISTS = ("verdicts", "urteile", "claims", "aussagen", "results", "ergebnisse")


_ID_KEYS = ("id", "kennung", "claim_id")


# A claim's own text ties an item to it as well as its id (compared as `_fold` compares).
_TEXT_KEYS = ("claim", "aussage", "text")


_VERDICT_KEYS = ("verdict", "urteil", "label")


def _json_items(value: object) -> list[tuple[object, object]]:
    """(id, item) pairs of a JSON reply: a list of objects with an id (also under "verdicts"),
    or an object keyed by id. A bare list of words ties nothing to a claim: no pairs."""
    if isinstance(value, dict):
        lists = [value[k] for k in value if isinstance(k, str) and k.lower() in _ITEM_LISTS]
        if len(lists) == 1 and isinstance(lists[0], dict):
            return list(lists[0].items())
        if len(lists) == 1 and isinstance(lists[0], list):
            value = lists[0]
        else:
            return list(value.items())
    if not isinstance(value, list):
        return []
    pairs: list[tuple[object, object]] = []
    for item in value:
        if isinstance(item, dict):
            keys = [k for k in item if isinstance(k, str) and k.lower() in _ID_KEYS]
            if not keys:
                keys = [k for k in item if isinstance(k, str) and k.lower() in _TEXT_KEYS]
            if len(keys) == 1:
                pairs.append((item[keys[0]], item))
    return pairs


def json_evidence(item: object, chunk_count: int | None) -> Evidence | None:
    if isinstance(item, str):
        read = verdict_phrase(item)
        return Evidence(read[0], (), "") if read is not None and not read[1] else None
    if not isinstance(item, dict):
        return None
    fields = {k.lower(): v for k, v in item.items() if isinstance(k, str)}
    words = [fields[k] for k in _VERDICT_KEYS if k in fields]
    if len(words) != 1 or not isinstance(words[0], str):
        return None
    read = verdict_phrase(words[0])
    if read is None or read[1]:
        return None
    chunks = fields.get("chunks", fields.get("abschnitte", []))
    reason = fields.get("reason", fields.get("begründung", ""))
    return Evidence(
        read[0],
        _ranks(chunks if isinstance(chunks, list) else [], chunk_count),
        _reason(reason) if isinstance(reason, str) else "",
    )
