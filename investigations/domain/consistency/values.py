"""Self-consistency's value extraction: the factual values in one sample, in text order.

Numbers with units, intervals and frequencies, counts, dates, references, codes, names and
evasions, each found by regular expressions (see the package docstring for what is read and
its known limits); ``compare`` compares them across samples.

A sample is the generator's text, so extraction does work linear in its length whatever it
holds: no pattern tries every split of a blank run, a pattern that fails for one part of a
hyphenated word or a run of capitals is not tried again for each later part, nothing re-reads
the text before a match, and a value is checked against the spans already taken, not against
every value taken. A number word longer than 100 letters is not read as a number.
"""

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date

from investigations.domain.consistency.vocabulary import (
    ARTICLES,
    CURRENCY_CODES,
    DAY,
    DIGITS,
    MONTH,
    NUM,
    SCALE,
    SCALES,
    SEP,
    START,
    TIME_UNIT,
    UNIT,
    UNITS,
    WEEK,
    WORD,
    YEAR,
    alternation,
    number,
)


@dataclass(frozen=True)
class Value:
    """One factual value in a sample; ``sample[start:end] == text``.

    Kinds: "quantity" (a number with a unit or an interval: dimension "time" in days, "money:EUR",
    "percent", "length" m, "area" m², "volume" l, "mass" kg, "pressure" bar, "workdays", ...),
    "number" (a count before a noun, dimension "count:<noun stem>"; or a bare number, dimension
    "number", never compared), "date" ("date" as a proleptic ordinal day, "month" as
    year*12+month-1, "day-month" as month*100+day, "year"), "name" (people and bodies,
    dimension "name", never conflicting; references "ref:§", "ref:Art DSGVO", "ref:Section" and
    codes "code:DIN", compared by ``key``), "evasion" ("je nach …", "it depends on …").
    """

    kind: str  # "number" | "quantity" | "date" | "name" | "evasion"
    dimension: str  # the comparison category: "time" (days), "money:EUR", "date", "ref:§", ...
    amount: float | None  # in the dimension's base unit; a range's lower bound
    text: str
    start: int
    end: int
    upper: float | None = None  # a range's upper bound ("3–5 Jahre": amount 1095, upper 1825)
    key: str = ""  # what amount-less values compare by ("§4a", "DIN 4102", "evasion")


def _span(
    kind: str, dimension: str, amount: float | None, m: re.Match[str],
    start_group: int | str = 0, *, upper: float | None = None, key: str = "",
) -> Value:
    start, end = m.span(start_group)
    return Value(kind, dimension, amount, m.string[start:end], start, end, upper, key)


# --- Finders, in priority order: an earlier finder's span wins an overlap -------------------

_MONTHS = {"januar": 1, "jänner": 1, "january": 1, "jan": 1, "februar": 2, "february": 2,
           "feb": 2, "märz": 3, "maerz": 3, "march": 3, "mär": 3, "mrz": 3, "mar": 3,
           "april": 4, "apr": 4, "mai": 5, "may": 5, "juni": 6, "june": 6, "jun": 6,
           "juli": 7, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9, "sep": 9,
           "sept": 9, "oktober": 10, "october": 10, "okt": 10, "oct": 10, "november": 11,
           "nov": 11, "dezember": 12, "december": 12, "dez": 12, "dec": 12}
_MON = rf"(?P<mon>{alternation(m.capitalize() for m in _MONTHS)})\.?(?!\w)"
_ORD = r"(?:\.|st|nd|rd|th)?"
_DATE_PATTERNS = [
    re.compile(r"(?<![\d.])(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})(?!\d)"),
    re.compile(r"(?<![\d.])(?P<d>\d{1,2})\.\s?(?P<m>\d{1,2})\.\s?(?P<y>\d{4}|\d{2})(?![\d.]\d)"),
    re.compile(rf"(?<![\d.])(?P<d>\d{{1,2}}){_ORD}\s+(?:of\s+)?{_MON}\s+(?P<y>\d{{4}})(?!\d)"),
    re.compile(rf"{_MON}\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{4}})(?!\d)"),
    re.compile(rf"(?<![\d.])(?P<d>\d{{1,2}}){_ORD}\s+(?:of\s+)?{_MON}"),
    re.compile(rf"{_MON}\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?![\d.,])"),
    re.compile(rf"{_MON}\s+(?P<y>\d{{4}})(?!\d)"),
]


def _dates(text: str, language: str) -> Iterator[Value]:
    for pattern in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            g = m.groupdict()
            month = _MONTHS[g["mon"].lower()] if g.get("mon") else int(g["m"])
            year = g.get("y")
            if year is not None and len(year) == 2:
                year = "20" + year
            try:
                if year and g.get("d"):
                    when = date(int(year), month, int(g["d"]))
                    yield _span("date", "date", float(when.toordinal()), m)
                elif year:
                    yield _span("date", "month", float(int(year) * 12 + month - 1), m)
                else:
                    date(2024, month, int(g["d"]))  # validates, leap day included
                    yield _span("date", "day-month", float(month * 100 + int(g["d"])), m)
            except ValueError:
                continue


_LAW = r"(?:\s+(?P<law>[A-ZÄÖÜ][A-Za-zÄÖÜäöü]*[A-ZÄÖÜ][A-Za-zÄÖÜäöü]*))?"
_REF_SIGNS = {"§": "§", "§§": "§", "Art.": "Art", "Artikel": "Art", "Article": "Art",
              "Abschnitt": "Abschnitt", "Kapitel": "Kapitel", "Ziffer": "Ziffer",
              "Section": "Section", "Chapter": "Chapter", "Clause": "Clause"}
_REF = re.compile(
    rf"(?P<sign>§§?|\b(?:{alternation(s for s in _REF_SIGNS if s[0] != '§')}))\s*"
    r"(?P<n>\d+(?:\.\d+)*)(?P<sfx>[a-z]?)(?![\w,.]\d)"
    r"(?:\s*(?:Abs\.|Absatz|para\.)\s*\d+)?(?:\s*(?:S\.|Satz)\s*\d+)?(?:\s*Nr\.\s*\d+)?" + _LAW
)


def _refs(text: str, language: str) -> Iterator[Value]:
    for m in _REF.finditer(text):
        sign = _REF_SIGNS[m["sign"]]
        # The law is part of the dimension: "§ 257 HGB" and "§ 147 AO" are two rules a correct
        # answer may cite either of, not two guesses at one.
        dimension = f"ref:{sign}" + (f" {m['law']}" if m["law"] else "")
        key = f"{sign}{m['n']}{m['sfx']}"
        yield _span("name", dimension, float(m["n"].split(".")[0]), m, key=key)


# A code is a prefix of capitalised words ("DIN", "ISO/IEC", "VDE AR") and its number
# ("DIN 4102-1"). Matched as one pattern, a chain of n capitalised words without a number was
# tried from each of its words again: quadratic. A prefix can only end where its chain of
# capitals ends (a word stops at the first non-capital, the chain at the first word not joined
# by " " or "/"), so each chain is read once and the number looked for after it; a start inside
# a chain would end at the same place and fail or succeed alike.
_CODE_PREFIX = re.compile(r"\b[A-ZÄÖÜ]{2,}+(?:[ /][A-ZÄÖÜ]{2,}+)*+")
_CODE_NUMBER = re.compile(r"[ -](?P<n>\d+)(?:[-:./]\d+)*(?!\w|[.,]\d)")


def _codes(text: str, language: str) -> Iterator[Value]:
    for prefix in _CODE_PREFIX.finditer(text):
        number = _CODE_NUMBER.match(text, prefix.end())
        if number is None or prefix.group().split()[0] in CURRENCY_CODES:
            continue
        start, end, name = prefix.start(), number.end(), prefix.group()
        # The main number decides ("DIN 4102-1" and "DIN 4102" name the same standard).
        yield Value("name", f"code:{name}", None, text[start:end], start, end,
                    key=f"{name} {number['n']}")


_NP_DE = (
    r"(?:(?:der|die|das|des|dem|den|ihrer|seiner|jeweiligen?)\s+)?(?:[a-zäöüß]+e[nrsm]?\s+)?"
    r"[A-ZÄÖÜ][\w-]*(?:\s+(?:und|oder)\s+[A-ZÄÖÜ][\w-]*)?"
    r"(?:\s+(?:des|der|vom|von)\s+(?:[a-zäöüß]+e[nrsm]?\s+)?[A-ZÄÖÜ][\w-]*)?"
)
_STOP_EN = (r"(?:and|but|or|so|because|which|that|while|whereas|although|if|when|it|is|are|"
            r"was|were|may|can|will|could|should|must|you|we|they)\b")
_NP_EN = rf"(?!{_STOP_EN})[\w'-]+(?:\s+(?!{_STOP_EN})[\w'-]+){{0,5}}"
_EVASIONS = {
    "de": re.compile(
        rf"\b(?i:je)\s+nach\s+{_NP_DE}|\b(?i:je)\s+nachdem\b(?:,?\s+[^.,;:!?\n]{{1,60}})?"
        rf"|\b(?i:abhängig)\s+(?:von|vom)\s+{_NP_DE}|\b(?i:von)\s+Fall\s+zu\s+Fall\b"
        rf"|\b(?:von|vom)\s+{_NP_DE}\s+abhängig|\bhängt\s+(?:\w+\s+){{0,3}}?(?:von|vom)\s+"
        rf"{_NP_DE}\s+ab\b|\bhängt\s+(?:\w+\s+){{0,2}}?davon\s+ab\b"
        rf"|\bkommt\s+(?:ganz\s+)?(?:auf\s+{_NP_DE}|darauf)\s+an\b"
        r"|\b(?i:unterschiedlich)(?:e[nrsm]?)?\b|\b(?:kann|können)\s+(?:\w+\s+)?variieren\b"
        r"|\bvariier(?:t|en)\b"
    ),
    "en": re.compile(
        rf"\bvar(?:y|ies)\s+(?:by|with|according\s+to|depending\s+on)\s+{_NP_EN}"
        rf"|\bdepend(?:s|ing)?\s+(?:on|upon)\s+{_NP_EN}|\bit\s+depends\b(?!\s+(?:on|upon)\b)"
        r"|\b(?:may|can|might|will)\s+vary\b|\bvaries\b|\bcase[- ]by[- ]case\b",
        re.IGNORECASE,
    ),
}


def _evasions(text: str, language: str) -> Iterator[Value]:
    for m in _EVASIONS[language].finditer(text):
        yield _span("evasion", "evasion", None, m, key="evasion")


_ADVERBS = {  # period in days; adjective endings ("jährliche Prüfung") are allowed
    "jährlich": YEAR, "monatlich": MONTH, "wöchentlich": WEEK, "täglich": DAY,
    "stündlich": 1 / 24, "quartalsweise": YEAR / 4, "annually": YEAR, "annual": YEAR,
    "yearly": YEAR, "biennially": 2 * YEAR, "biennial": 2 * YEAR, "semiannually": YEAR / 2,
    "semi-annually": YEAR / 2, "half-yearly": YEAR / 2, "biannually": YEAR / 2,
    "quarterly": YEAR / 4, "monthly": MONTH, "fortnightly": 14.0, "weekly": WEEK,
    "daily": DAY, "hourly": 1 / 24,
}
_ADVERB = rf"(?i:{alternation(_ADVERBS)})(?:e[nmrs]?)?(?!\w)"
_TIMES = (r"(?P<times>(?i:once|twice|thrice|doppelt)"
          r"|(?P<tn>\d+|[A-Za-zÄÖÜäöüß]+?)\s*+(?:-\s*+)?(?:mal|x|times))")
_FREQUENCY = re.compile(
    rf"{START}(?:"
    rf"(?i:alle|every|each|jede[nsm]?)\s+(?:(?P<other>other)\s+|(?P<n>{NUM}){SEP})?"
    rf"(?P<unit>{TIME_UNIT})"
    rf"|{_TIMES}\s+(?:(?:pro|im|je|in\s+der|in\s+einem|a|an|per|each|every)\s+"
    rf"(?P<punit>{TIME_UNIT})|(?P<padv>{_ADVERB}))"
    rf"|(?P<mult>\d+-|(?i:zwei|drei|vier|fünf|sechs|zehn|halb|viertel)(?=\w))?(?P<adv>{_ADVERB})"
    rf"|(?P<tage>\d+-|[A-Za-zäöüß]+?)tägig(?:e[nmrs]?)?(?!\w))"
)


def _frequencies(text: str, language: str) -> Iterator[Value]:
    for m in _FREQUENCY.finditer(text):
        if m["unit"]:
            n = 2.0 if m["other"] else number(m["n"], language) if m["n"] else 1.0
            period = None if n is None else n * UNITS[m["unit"]][1]
        elif m["times"]:
            times: float | None = {"once": 1, "twice": 2, "thrice": 3, "doppelt": 2}.get(
                m["times"].lower()
            )
            if times is None:
                times = number(m["tn"], language)
            base = UNITS[m["punit"]][1] if m["punit"] else _adverb_period(m["padv"])
            period = None if not times else base / times
        elif m["adv"]:
            mult = m["mult"].rstrip("-") if m["mult"] else ""
            factor = {"halb": 0.5, "viertel": 0.25}.get(mult.lower()) or (
                number(mult, "de") if mult else 1.0
            )
            period = None if factor is None else factor * _adverb_period(m["adv"])
        else:
            days = number(m["tage"].rstrip("-"), "de")
            period = days
        if period is not None and period > 0:
            yield _span("quantity", "time", period, m)


def _adverb_period(word: str) -> float:
    word = word.lower()
    return _ADVERBS.get(word) or _ADVERBS[re.sub(r"e[nmrs]?$", "", word)]


_RANGE = re.compile(
    rf"{START}(?:(?i:zwischen|between)\s+(?P<a>{NUM})\s+(?:und|and)\s+(?P<b>{NUM})"
    rf"|(?P<c>{NUM})\s*(?:–|—|-|\sbis\s|\sto\s)\s*(?P<d>{NUM})){SCALE}{SEP}"
    rf"(?P<unit>{UNIT})"
)
_PREFIX_MONEY = re.compile(rf"(?P<unit>€|EUR|USD|\$|£|CHF|GBP)\s*(?P<n>{DIGITS}){SCALE}")
_QUANTITY = re.compile(  # ",-" as in "40,- €"
    rf"{START}(?P<n>{NUM}|(?i:half)\s+an?)(?:,[-–]{{1,2}})?{SCALE}{SEP}(?P<unit>{UNIT})"
)


def _unit(surface: str) -> tuple[str, float]:
    return UNITS.get(surface) or UNITS[surface.lower()]


def _scale(m: re.Match[str]) -> float:
    found = re.search(r"(Tsd|Mio|Mrd|Millionen|Million|Milliarden|Milliarde|Tausend|million|"
                      r"billion|thousand)(?!\w)", m.group(0))
    return SCALES[found.group(1).lower()] if found else 1.0


def _ranges(text: str, language: str) -> Iterator[Value]:
    for m in _RANGE.finditer(text):
        lo = number(m["a"] or m["c"], language)
        hi = number(m["b"] or m["d"], language)
        if lo is None or hi is None or lo >= hi or _is_article(m["a"] or m["c"]):
            continue
        dimension, factor = _unit(m["unit"])
        factor *= _scale(m)
        yield _span("quantity", dimension, lo * factor, m, upper=hi * factor)


def _is_article(word: str) -> bool:
    return word.lower() in ARTICLES


def _quantities(text: str, language: str) -> Iterator[Value]:
    for m in _PREFIX_MONEY.finditer(text):
        amount = number(m["n"], language)
        if amount is not None:
            dimension, factor = _unit(m["unit"])
            yield _span("quantity", dimension, amount * factor * _scale(m), m)
    for m in _QUANTITY.finditer(text):
        raw, unit = m["n"], m["unit"]
        amount = 0.5 if raw.lower().startswith("half") else number(raw, language)
        # "ein"/"a" is 1 only before a unit word ("ein Jahr"), not a symbol ("ein m").
        if amount is None or (not raw[0].isdigit() and len(unit) < 3 and unit != "qm"):
            continue
        dimension, factor = _unit(unit)
        yield _span("quantity", dimension, amount * factor * _scale(m), m)


_COUNT = {
    "de": re.compile(rf"{START}(?P<n>{DIGITS}|{WORD})\s+(?P<noun>[A-ZÄÖÜ][\wäöüß-]+)"),
    "en": re.compile(rf"{START}(?P<n>{DIGITS}|{WORD})\s+(?P<noun>[a-z][a-z-]+)"),
}
_NOT_NOUNS = {"and", "or", "to", "of", "the", "in", "on", "at", "by", "for", "with", "per",
              "more", "less", "times", "is", "are", "was", "were", "be", "x"}


def _counts(text: str, language: str) -> Iterator[Value]:
    for m in _COUNT[language].finditer(text):
        raw, noun = m["n"], m["noun"]
        amount = number(raw, language)
        if (amount is None or _is_article(raw) or noun.lower() in _NOT_NOUNS
                or noun.lower() in _MONTHS or _year_like(raw)):
            continue
        yield _span("number", f"count:{_stem(noun)}", amount, m)


def _stem(noun: str) -> str:
    """A crude singular so that "Prüfungen" counts what "Prüfung" counts, "Anträge" "Antrag"."""
    word = noun.lower().translate(str.maketrans("äöü", "aou"))
    for ending in ("en", "e", "n", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)]
    return word


_TITLE = r"(?:Herrn?|Frau|Mrs?\.?|Ms\.?|Dr\.?|Prof\.?)"
_CAP = r"[A-ZÄÖÜ][\wäöüß-]+"
_LEGAL = r"(?:GmbH\s*&\s*Co\.\s*KG|gGmbH|GmbH|AG|KGaA|KG|OHG|UG|SE|e\.\s?V\.|Inc\.?|Ltd\.?|LLC|plc)"
_NAMES = [
    re.compile(rf"\b(?:{_CAP}\s+(?:&\s+|und\s+)?){{1,4}}{_LEGAL}(?![\w])"),
    re.compile(rf"\b{_TITLE}(?:\s+{_TITLE})*\s+{_CAP}(?:\s+{_CAP})?"),
    re.compile(r"\b(?:[A-ZÄÖÜ]{2,6}|[A-ZÄÖÜ][a-zäöü]*[A-ZÄÖÜ][A-Za-zÄÖÜäöü]{0,10})\b"),
]
_LEADING = {"Die", "Der", "Das", "Den", "Dem", "Des", "Ein", "Eine", "Einen", "Einem", "Einer",
            "The", "A", "An", "Bei", "Von", "Vom", "Für", "Mit", "Durch", "Laut", "Gemäß",
            "Nach", "Zur", "Zum", "For", "By", "With", "At", "From", "Ihre", "Ihr", "Your", "Our"}
_NOT_NAMES = CURRENCY_CODES | {"OK", "PS", "ODER", "UND", "AND", "NOT", "NICHT", "CO", "KW"}
_EN_CAPS = re.compile(r"\b[A-Z][a-zA-Z-]+(?:\s+(?:(?:and|of|for)\s+)?[A-Z][a-zA-Z-]+)*")
_CAP_START = re.compile(r"\b[A-ZÄÖÜ]")
_CAP_RUN = re.compile(r"[\w-]+")


def _company_names(text: str) -> Iterator[re.Match[str]]:
    """``_NAMES[0].finditer(text)``, but a word that fails is not tried again from each of its
    hyphen-joined parts ("A-A-A-…" took quadratic time): from any of them the first word runs to
    the end of the whole word (it must be followed by a blank), and the rest is the same."""
    pos = 0
    while (start := _CAP_START.search(text, pos)) is not None:
        m = _NAMES[0].match(text, start.start())
        if m is None:
            run = _CAP_RUN.match(text, start.start())
            assert run is not None  # it starts at the capital, itself a word character
            pos = run.end()
            continue
        yield m
        pos = m.end()


def _sentence_initial(text: str, start: int) -> bool:
    """Whether ``text[start:]`` opens a sentence or list item, where English capitalises too.

    Reads back from ``start`` only as far as the answer needs (copying the text before every
    name and splitting it into lines was quadratic): past quotes, brackets and markup to a
    sentence end, or to a list marker ("-", "*", "•", "12.", "3)") alone on its line.
    """
    end = start
    while end and text[end - 1] in " \t\"'„“(*_":
        end -= 1
    if not end or text[end - 1] in ".!?:;\n":
        return True
    end = _blank_back(text, end)
    if not end or text[end - 1] == "\n":
        return False  # the line holds nothing but blanks
    marker = end - 1
    if text[marker] in ".)":
        while marker and text[marker - 1].isdecimal():  # what \d matches
            marker -= 1
        if marker == end - 1:
            return False
    elif text[marker] not in "-*•":
        return False
    line_start = _blank_back(text, marker)
    return not line_start or text[line_start - 1] == "\n"


def _blank_back(text: str, end: int) -> int:
    """Where the blanks (whitespace but a line feed) that end ``text[:end]`` begin."""
    while end and text[end - 1] != "\n" and text[end - 1].isspace():
        end -= 1
    return end


def _names(text: str, language: str) -> Iterator[Value]:
    patterns = [*_NAMES, _EN_CAPS] if language == "en" else _NAMES
    for pattern in patterns:
        found = _company_names(text) if pattern is _NAMES[0] else pattern.finditer(text)
        for m in found:
            start, end = m.span()
            words = m.group(0).split()
            first = 0  # leading words are dropped by counting, not by copying the list
            while len(words) - first > 1 and (
                words[first] in _LEADING or words[first] in ("and", "of", "for")
                or (pattern is _EN_CAPS and _sentence_initial(text, start))
            ):
                start = text.index(words[first + 1], start + len(words[first]))
                first += 1
            surface = text[start:end]
            if surface in _NOT_NAMES or surface.lower() in _MONTHS or surface == "I":
                continue
            if pattern is _EN_CAPS and (_sentence_initial(text, start)
                                        or surface in _LEADING):
                continue
            key = " ".join(surface.split()).casefold()
            yield Value("name", "name", None, surface, start, end, key=key)


_BARE = re.compile(rf"{START}(?P<n>{DIGITS})(?P<dot>\.\s+\w)?")


class _LineStart:
    """Whether only blanks stand between the last line break before a position and it.

    Asked for positions in increasing order, it reads each character once (splitting the text
    before every number into lines was quadratic).
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.read = 0  # characters before this are accounted for
        self.newline = -1  # the last "\n" among them
        self.mark = -1  # the last non-whitespace character among them

    def __call__(self, pos: int) -> bool:
        piece = self.text[self.read : pos]
        if (newline := piece.rfind("\n")) >= 0:
            self.newline = self.read + newline
        if kept := len(piece.rstrip()):
            self.mark = self.read + kept - 1
        self.read = pos
        return self.mark < self.newline or self.mark == -1


def _bare_numbers(text: str, language: str) -> Iterator[Value]:
    at_line_start = _LineStart(text)
    for m in _BARE.finditer(text):
        raw = m["n"]
        line_start = at_line_start(m.start())
        if _year_like(raw):
            yield _span("date", "year", float(raw), m, "n")
        elif not (m["dot"] and (language == "de" or line_start)):
            # "3. Stock" and list markers "1." are ordinals, not amounts.
            amount = number(raw, language)
            if amount is not None:
                yield _span("number", "number", amount, m, "n")


def _year_like(raw: str) -> bool:
    return bool(re.fullmatch(r"(?:19|20)\d{2}|2100", raw))


_FINDERS = (_dates, _refs, _codes, _evasions, _frequencies, _ranges, _quantities, _counts,
            _names, _bare_numbers)


def extract_values(text: str, *, language: str) -> list[Value]:
    """The factual values in one sample, in text order; earlier finders win overlaps."""
    if language not in _EVASIONS:
        raise ValueError(f"no value extraction for language {language!r}; supported: de, en")
    taken: list[Value] = []
    # Which characters the values taken cover: a value is tested against its own span, not
    # against every value taken (quadratic for a sample of many numbers). No value is empty.
    covered = bytearray(len(text))
    for finder in _FINDERS:
        for value in finder(text, language):
            if value.amount is not None and not math.isfinite(value.amount):
                continue
            if covered.find(1, value.start, value.end) == -1:
                taken.append(value)
                covered[value.start : value.end] = b"\x01" * (value.end - value.start)
    return sorted(taken, key=lambda v: v.start)
