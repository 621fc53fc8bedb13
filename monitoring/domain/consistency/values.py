"""Self-consistency (method 2): do three answers to the same question state the same facts?

The generator is asked the same stored question several times at a temperature above zero.
Where it found a figure in the context it repeats it; where it guessed, the samples drift apart:
the article's "5 Jahre" / "alle zwei Jahre" / "je nach Behältergröße". This module reads the
factual values out of each sample (numbers with units, intervals, dates, references, codes,
names, evasions) and compares them; only where the values agree, or there are none, is a judge
model asked whether the samples contradict each other in content (``consistency_prompt``).

Comparison rule, per dimension (what a value measures: "time", "money:EUR", "date", ...):

* Values are equal when their normalised amounts agree within a relative 1e-9 ("24 Monate" ==
  "alle zwei Jahre" == "zweijährlich": all 730 days, a month being 365/12 days so that twelve
  months make a year exactly). A range ("3–5 Jahre", "zwischen 3 und 5 Jahren") equals any value
  inside it and any overlapping range: the sample that says "4 Jahre" is more specific, not
  contradicting; the judge still reads the content. Amount-less values (references, codes)
  compare by their key ("§ 4a", "DIN 4102").
* A dimension conflicts when two samples that both have values in it share none: one sample
  naming an extra fact ({5 Jahre} vs {5 Jahre, 10 Jahre bei Gefahrgut}) is not a contradiction,
  two samples committing to different figures are.
* An evasion ("je nach Behältergröße", "it depends on …") conflicts with a figure when the
  evading sample gives no value in that dimension and at least half the samples do: then the
  figure is the answer's point and one run declined to commit to it, which is what guessing
  looks like. A sample that gives the figure *and* hedges ("5 Jahre, je nach Behälter auch
  länger") does not evade it; a figure only one sample in three mentions is an aside. The rule
  only covers measures (time, money, counts, …), not dates, references or codes.
* Names (people, companies, authorities) never conflict on their own: paraphrases name the
  same body differently, so differing names are listed (``unshared_names``) and the judge
  decides. Codes and references with numbers ("DIN 4102" vs "DIN 4108", "§ 4" vs "§ 5") do
  conflict. Bare numbers without a unit or noun ("Schritt 3") are shown but never compared:
  without a unit there is no telling what they count.

Extraction is regular expressions, not a parser: it aims at the figures answers about rules,
deadlines and fees contain, in German and English, and prefers missing a value (the judge
still reads the content) to inventing a conflict. Known limits, all shown to the team lead with
the samples rather than hidden: values are compared per dimension, not per subject, so "innere
Prüfung alle 5 Jahre" in one sample and "Festigkeitsprüfung alle 10 Jahre" in another conflict;
qualifiers ("mindestens", "ca.", "up to") are not read, so "ca. 4 Wochen" and "etwa einen Monat"
(28 vs 30.4 days) conflict; numeric US dates (03/01/2026) are not read.
"""

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date

from monitoring.domain.consistency_prompt import (
    PROMPT_VERSION,
    ContradictionReply,
    contradiction_messages,
    contradiction_retry_messages,
    parse_contradiction,
)

__all__ = [
    "PROMPT_VERSION",
    "Comparison",
    "ContradictionReply",
    "Value",
    "Verdict",
    "compare_samples",
    "contradiction_messages",
    "contradiction_retry_messages",
    "decide",
    "extract_values",
    "needs_judge",
    "parse_contradiction",
]

REL_TOL = 1e-9


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


# --- Vocabulary ---------------------------------------------------------------------------

_YEAR, _MONTH, _WEEK, _DAY = 365.0, 365.0 / 12, 7.0, 1.0
_UNITS: dict[str, tuple[str, float]] = {}


def _units(dimension: str, factor: float, *names: str) -> None:
    for name in names:
        _UNITS[name] = (dimension, factor)


_units("time", _YEAR, "Jahr", "Jahre", "Jahren", "Jahres", "Jahrs", "year", "years", "yr", "yrs")
_units("time", _MONTH, "Monat", "Monate", "Monaten", "Monats", "month", "months")
_units("time", _YEAR / 4, "Quartal", "Quartale", "Quartalen", "quarter", "quarters")
_units("time", _WEEK, "Woche", "Wochen", "week", "weeks")
_units("time", _DAY, "Tag", "Tage", "Tagen", "Tages", "day", "days")
_units("time", 1 / 24, "Stunde", "Stunden", "Std.", "h", "hour", "hours", "hr", "hrs")
_units("time", 1 / 1440, "Minute", "Minuten", "Min.", "min", "minute", "minutes")
_units("workdays", 1, "Werktag", "Werktage", "Werktagen", "Arbeitstag", "Arbeitstage",
       "Arbeitstagen", "business day", "business days", "working day", "working days")
_units("money:EUR", 1, "€", "EUR", "Euro", "euro", "euros")
_units("money:EUR", 0.01, "Cent", "cent", "cents", "ct")
_units("money:USD", 1, "$", "USD", "Dollar", "dollar", "dollars")
_units("money:CHF", 1, "CHF", "Franken")
_units("money:GBP", 1, "£", "GBP")
_units("percent", 1, "%", "Prozent", "percent", "per cent")
_units("length", 0.001, "mm", "Millimeter", "millimetre", "millimetres", "millimeter",
       "millimeters")
_units("length", 0.01, "cm", "Zentimeter", "centimetre", "centimetres", "centimeter",
       "centimeters")
_units("length", 1, "m", "Meter", "Metern", "metre", "metres", "meter", "meters")
_units("length", 1000, "km", "Kilometer", "Kilometern", "kilometre", "kilometres", "kilometer",
       "kilometers")
_units("area", 1, "m²", "m2", "qm", "Quadratmeter", "Quadratmetern", "square metre",
       "square metres", "square meter", "square meters", "sq m")
_units("area", 1e-4, "cm²")
_units("area", 1e6, "km²")
_units("area", 1e4, "ha", "Hektar", "hectare", "hectares")
_units("volume", 1, "l", "L", "Liter", "Litern", "litre", "litres", "liter", "liters")
_units("volume", 0.001, "ml", "Milliliter", "millilitre", "millilitres")
_units("volume", 100, "hl", "Hektoliter")
_units("volume", 1000, "m³", "m3", "cbm", "Kubikmeter", "Kubikmetern", "cubic metre",
       "cubic metres", "cubic meter", "cubic meters")
_units("mass", 1e-6, "mg")
_units("mass", 0.001, "g", "Gramm", "gram", "grams")
_units("mass", 1, "kg", "Kilogramm", "kilogram", "kilograms")
_units("mass", 1000, "t", "Tonne", "Tonnen", "tonne", "tonnes", "ton", "tons")
_units("pressure", 1, "bar")
_units("pressure", 0.001, "mbar")
_units("temperature:C", 1, "°C", "Grad Celsius", "Grad", "degrees Celsius")
_units("power", 1, "W")
_units("power", 1000, "kW")
_units("power", 1e6, "MW")
_units("energy", 1, "kWh")
_units("energy", 1000, "MWh")

_CURRENCY_CODES = {"EUR", "USD", "CHF", "GBP"}
_SCALES = {"tsd": 1e3, "tausend": 1e3, "thousand": 1e3, "mio": 1e6, "million": 1e6,
           "millionen": 1e6, "mrd": 1e9, "milliarde": 1e9, "milliarden": 1e9, "billion": 1e9}


def _alternation(words) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


_END = r"(?![\w²³])"
_UNIT = rf"(?:{_alternation(_UNITS)}){_END}"
_TIME_UNIT = rf"(?:{_alternation(u for u, (d, _) in _UNITS.items() if d == 'time')}){_END}"
_SCALE = r"(?:\s*(?:Tsd\.|Mio\.|Mrd\.|Millionen|Million|Milliarden|Milliarde|Tausend|million"
_SCALE += r"|billion|thousand)(?!\w))?"
_DIGITS = r"\d{1,3}(?:[.,]\d{3})+(?:[.,]\d+)?(?!\d)|\d+(?:[.,]\d+)?(?!\d)"
_WORD = r"[A-Za-zÄÖÜäöüß]+"
_NUM = rf"(?:{_DIGITS}|(?:ein(?:es|em|en)?\s+)?halbe[nsm]?\b|{_WORD}(?:\s+and\s+a\s+half)?)"
_START = r"(?<![\w.,§$€£/])"
# Between a number and its unit: nothing after digits ("5%", "40€"), a space or hyphen after a
# word ("fünf Jahre"), so that "Jahr" is never read as the number "Ja" and the unit "hr".
_SEP = r"(?:(?<=\d)\s*-?\s*|\s*-\s*|\s+)"

_DE_UNITS = {"null": 0, "ein": 1, "eins": 1, "eine": 1, "einen": 1, "einem": 1, "einer": 1,
             "zwei": 2, "drei": 3, "vier": 4, "fünf": 5, "sechs": 6, "sieben": 7, "acht": 8,
             "neun": 9, "zehn": 10, "elf": 11, "zwölf": 12, "sechzehn": 16, "siebzehn": 17}
_DE_TENS = {"zwanzig": 20, "dreißig": 30, "dreissig": 30, "vierzig": 40, "fünfzig": 50,
            "sechzig": 60, "siebzig": 70, "achtzig": 80, "neunzig": 90}
_EN_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
             "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
             "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
             "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40,
             "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
             "hundred": 100, "thousand": 1000, "a": 1, "an": 1, "half a": 0.5, "half an": 0.5}
# Articles count as 1 only before a unit word ("ein Jahr", "a year"), never on their own.
_ARTICLES = {"ein", "eine", "einen", "einem", "einer", "eines", "a", "an"}


def _de_word(word: str) -> float | None:
    """A German number word: "vierundzwanzig" 24, "dreihundert" 300, "dreieinhalb" 3.5."""
    w = word.lower()
    if w in ("anderthalb", "halb", "halbe", "halben", "halbes"):
        return 1.5 if w == "anderthalb" else 0.5
    if w.endswith("einhalb") and len(w) > 7:
        whole = _de_word(w[:-7])
        return None if whole is None else whole + 0.5
    for big, factor in (("tausend", 1000), ("hundert", 100)):
        if big in w:
            left, _, right = w.partition(big)
            lv = _de_word(left) if left else 1
            rv = _de_word(right) if right else 0
            return None if lv is None or rv is None else lv * factor + rv
    if w in _DE_UNITS:
        return _DE_UNITS[w]
    if w in _DE_TENS:
        return _DE_TENS[w]
    if w.endswith("zehn") and w[:-4] in ("drei", "vier", "fünf", "acht", "neun"):
        return _DE_UNITS[w[:-4]] + 10
    if "und" in w:
        unit, _, tens = w.partition("und")
        if unit in _DE_UNITS and tens in _DE_TENS and _DE_UNITS[unit] < 10:
            return _DE_UNITS[unit] + _DE_TENS[tens]
    return None


def _number(raw: str, language: str) -> float | None:
    """A numeral or number word in ``language``; None if it is not one."""
    raw = re.sub(r"\s+", " ", raw.strip())
    if raw[0].isdigit():
        if re.fullmatch(r"\d{1,3}(?:[.,]\d{3})+(?:[.,]\d+)?", raw) and (
            re.fullmatch(r"\d{1,3}(?:\.\d{3})+(?:,\d+)?", raw) if language == "de"
            else re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", raw)
        ):
            return float(raw.replace("." if language == "de" else ",", "").replace(",", "."))
        # One separator not grouping thousands is a decimal mark, whichever the language:
        # "3,5" (de) and "3.5" (en) and the odd "2.5 Jahre" in German all mean 3.5 and 2.5.
        return float(raw.replace(",", ".")) if raw.count(",") + raw.count(".") <= 1 else None
    low = raw.lower()
    if language == "de" and low.split()[0] in _ARTICLES:  # "ein halbes Jahr"
        low = low.split()[-1]
    if low.endswith(" and a half"):
        base = _number(low[: -len(" and a half")], language)
        return None if base is None else base + 0.5
    found = _de_word(low) if language == "de" else _EN_WORDS.get(low)
    return None if found is None else float(found)


def _span(kind, dimension, amount, m, start_group=0, *, upper=None, key="") -> Value:
    start, end = m.span(start_group)
    return Value(kind, dimension, amount, m.string[start:end], start, end, upper, key)


# --- Finders, in priority order: an earlier finder's span wins an overlap -------------------

_MONTHS = {"januar": 1, "jänner": 1, "january": 1, "jan": 1, "februar": 2, "february": 2,
           "feb": 2, "märz": 3, "maerz": 3, "march": 3, "mär": 3, "mrz": 3, "mar": 3,
           "april": 4, "apr": 4, "mai": 5, "may": 5, "juni": 6, "june": 6, "jun": 6,
           "juli": 7, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9, "sep": 9,
           "sept": 9, "oktober": 10, "october": 10, "okt": 10, "oct": 10, "november": 11,
           "nov": 11, "dezember": 12, "december": 12, "dez": 12, "dec": 12}
_MON = rf"(?P<mon>{_alternation(m.capitalize() for m in _MONTHS)})\.?(?!\w)"
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


def _dates(text: str, language: str):
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
    rf"(?P<sign>§§?|\b(?:{_alternation(s for s in _REF_SIGNS if s[0] != '§')}))\s*"
    r"(?P<n>\d+(?:\.\d+)*)(?P<sfx>[a-z]?)(?![\w,.]\d)"
    r"(?:\s*(?:Abs\.|Absatz|para\.)\s*\d+)?(?:\s*(?:S\.|Satz)\s*\d+)?(?:\s*Nr\.\s*\d+)?" + _LAW
)


def _refs(text: str, language: str):
    for m in _REF.finditer(text):
        sign = _REF_SIGNS[m["sign"]]
        # The law is part of the dimension: "§ 257 HGB" and "§ 147 AO" are two rules a correct
        # answer may cite either of, not two guesses at one.
        dimension = f"ref:{sign}" + (f" {m['law']}" if m["law"] else "")
        key = f"{sign}{m['n']}{m['sfx']}"
        yield _span("name", dimension, float(m["n"].split(".")[0]), m, key=key)


_CODE = re.compile(
    r"\b(?P<prefix>[A-ZÄÖÜ]{2,}(?:[ /][A-ZÄÖÜ]{2,})*)[ -](?P<n>\d+)(?:[-:./]\d+)*(?!\w|[.,]\d)"
)


def _codes(text: str, language: str):
    for m in _CODE.finditer(text):
        if m["prefix"].split()[0] in _CURRENCY_CODES:
            continue
        # The main number decides ("DIN 4102-1" and "DIN 4102" name the same standard).
        yield _span("name", f"code:{m['prefix']}", None, m, key=f"{m['prefix']} {m['n']}")


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


def _evasions(text: str, language: str):
    for m in _EVASIONS[language].finditer(text):
        yield _span("evasion", "evasion", None, m, key="evasion")


_ADVERBS = {  # period in days; adjective endings ("jährliche Prüfung") are allowed
    "jährlich": _YEAR, "monatlich": _MONTH, "wöchentlich": _WEEK, "täglich": _DAY,
    "stündlich": 1 / 24, "quartalsweise": _YEAR / 4, "annually": _YEAR, "annual": _YEAR,
    "yearly": _YEAR, "biennially": 2 * _YEAR, "biennial": 2 * _YEAR, "semiannually": _YEAR / 2,
    "semi-annually": _YEAR / 2, "half-yearly": _YEAR / 2, "biannually": _YEAR / 2,
    "quarterly": _YEAR / 4, "monthly": _MONTH, "fortnightly": 14.0, "weekly": _WEEK,
    "daily": _DAY, "hourly": 1 / 24,
}
_ADVERB = rf"(?i:{_alternation(_ADVERBS)})(?:e[nmrs]?)?(?!\w)"
_TIMES = (r"(?P<times>(?i:once|twice|thrice|doppelt)"
          r"|(?P<tn>\d+|[A-Za-zÄÖÜäöüß]+?)\s*-?\s*(?:mal|x|times))")
_FREQUENCY = re.compile(
    rf"{_START}(?:"
    rf"(?i:alle|every|each|jede[nsm]?)\s+(?:(?P<other>other)\s+|(?P<n>{_NUM}){_SEP})?"
    rf"(?P<unit>{_TIME_UNIT})"
    rf"|{_TIMES}\s+(?:(?:pro|im|je|in\s+der|in\s+einem|a|an|per|each|every)\s+"
    rf"(?P<punit>{_TIME_UNIT})|(?P<padv>{_ADVERB}))"
    rf"|(?P<mult>\d+-|(?i:zwei|drei|vier|fünf|sechs|zehn|halb|viertel)(?=\w))?(?P<adv>{_ADVERB})"
    rf"|(?P<tage>\d+-|[A-Za-zäöüß]+?)tägig(?:e[nmrs]?)?(?!\w))"
)


def _frequencies(text: str, language: str):
    for m in _FREQUENCY.finditer(text):
        if m["unit"]:
            n = 2.0 if m["other"] else _number(m["n"], language) if m["n"] else 1.0
            period = None if n is None else n * _UNITS[m["unit"]][1]
        elif m["times"]:
            times = {"once": 1, "twice": 2, "thrice": 3, "doppelt": 2}.get(m["times"].lower())
            if times is None:
                times = _number(m["tn"], language)
            base = _UNITS[m["punit"]][1] if m["punit"] else _adverb_period(m["padv"])
            period = None if not times else base / times
        elif m["adv"]:
            mult = m["mult"].rstrip("-") if m["mult"] else ""
            factor = {"halb": 0.5, "viertel": 0.25}.get(mult.lower()) or (
                _number(mult, "de") if mult else 1.0
            )
            period = None if factor is None else factor * _adverb_period(m["adv"])
        else:
            days = _number(m["tage"].rstrip("-"), "de")
            period = days
        if period is not None and period > 0:
            yield _span("quantity", "time", period, m)


def _adverb_period(word: str) -> float:
    word = word.lower()
    return _ADVERBS.get(word) or _ADVERBS[re.sub(r"e[nmrs]?$", "", word)]


_RANGE = re.compile(
    rf"{_START}(?:(?i:zwischen|between)\s+(?P<a>{_NUM})\s+(?:und|and)\s+(?P<b>{_NUM})"
    rf"|(?P<c>{_NUM})\s*(?:–|—|-|\sbis\s|\sto\s)\s*(?P<d>{_NUM})){_SCALE}{_SEP}"
    rf"(?P<unit>{_UNIT})"
)
_PREFIX_MONEY = re.compile(rf"(?P<unit>€|EUR|USD|\$|£|CHF|GBP)\s*(?P<n>{_DIGITS}){_SCALE}")
_QUANTITY = re.compile(  # ",-" as in "40,- €"
    rf"{_START}(?P<n>{_NUM}|(?i:half)\s+an?)(?:,[-–]{{1,2}})?{_SCALE}{_SEP}(?P<unit>{_UNIT})"
)


def _unit(surface: str) -> tuple[str, float]:
    return _UNITS.get(surface) or _UNITS[surface.lower()]


def _scale(m) -> float:
    found = re.search(r"(Tsd|Mio|Mrd|Millionen|Million|Milliarden|Milliarde|Tausend|million|"
                      r"billion|thousand)(?!\w)", m.group(0))
    return _SCALES[found.group(1).lower()] if found else 1.0


def _ranges(text: str, language: str):
    for m in _RANGE.finditer(text):
        lo = _number(m["a"] or m["c"], language)
        hi = _number(m["b"] or m["d"], language)
        if lo is None or hi is None or lo >= hi or _is_article(m["a"] or m["c"]):
            continue
        dimension, factor = _unit(m["unit"])
        factor *= _scale(m)
        yield _span("quantity", dimension, lo * factor, m, upper=hi * factor)


def _is_article(word: str) -> bool:
    return word.lower() in _ARTICLES


def _quantities(text: str, language: str):
    for m in _PREFIX_MONEY.finditer(text):
        amount = _number(m["n"], language)
        if amount is not None:
            dimension, factor = _unit(m["unit"])
            yield _span("quantity", dimension, amount * factor * _scale(m), m)
    for m in _QUANTITY.finditer(text):
        raw, unit = m["n"], m["unit"]
        amount = 0.5 if raw.lower().startswith("half") else _number(raw, language)
        # "ein"/"a" is 1 only before a unit word ("ein Jahr"), not a symbol ("ein m").
        if amount is None or (not raw[0].isdigit() and len(unit) < 3 and unit != "qm"):
            continue
        dimension, factor = _unit(unit)
        yield _span("quantity", dimension, amount * factor * _scale(m), m)


_COUNT = {
    "de": re.compile(rf"{_START}(?P<n>{_DIGITS}|{_WORD})\s+(?P<noun>[A-ZÄÖÜ][\wäöüß-]+)"),
    "en": re.compile(rf"{_START}(?P<n>{_DIGITS}|{_WORD})\s+(?P<noun>[a-z][a-z-]+)"),
}
_NOT_NOUNS = {"and", "or", "to", "of", "the", "in", "on", "at", "by", "for", "with", "per",
              "more", "less", "times", "is", "are", "was", "were", "be", "x"}


def _counts(text: str, language: str):
    for m in _COUNT[language].finditer(text):
        raw, noun = m["n"], m["noun"]
        amount = _number(raw, language)
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
_NOT_NAMES = _CURRENCY_CODES | {"OK", "PS", "ODER", "UND", "AND", "NOT", "NICHT", "CO", "KW"}
_EN_CAPS = re.compile(r"\b[A-Z][a-zA-Z-]+(?:\s+(?:(?:and|of|for)\s+)?[A-Z][a-zA-Z-]+)*")
_LIST_MARKER = re.compile(r"[-*•]|\d+[.)]")


def _sentence_initial(text: str, start: int) -> bool:
    """Whether ``text[start:]`` opens a sentence or list item, where English capitalises too."""
    prefix = text[:start].rstrip(" \t\"'„“(*_")
    if not prefix or prefix[-1] in ".!?:;\n":
        return True
    return bool(_LIST_MARKER.fullmatch(prefix.rsplit("\n", 1)[-1].strip()))


def _names(text: str, language: str):
    patterns = [*_NAMES, _EN_CAPS] if language == "en" else _NAMES
    for pattern in patterns:
        for m in pattern.finditer(text):
            start, end = m.span()
            words = m.group(0).split()
            while len(words) > 1 and (words[0] in _LEADING or words[0] in ("and", "of", "for")
                                      or (pattern is _EN_CAPS and _sentence_initial(text, start))):
                start = text.index(words[1], start + len(words[0]))
                words = words[1:]
            surface = text[start:end]
            if surface in _NOT_NAMES or surface.lower() in _MONTHS or surface == "I":
                continue
            if pattern is _EN_CAPS and (_sentence_initial(text, start)
                                        or surface in _LEADING):
                continue
            key = " ".join(surface.split()).casefold()
            yield Value("name", "name", None, surface, start, end, key=key)


_BARE = re.compile(rf"{_START}(?P<n>{_DIGITS})(?P<dot>\.\s+\w)?")


def _bare_numbers(text: str, language: str):
    for m in _BARE.finditer(text):
        raw = m["n"]
        line_start = text[: m.start()].rsplit("\n", 1)[-1].strip() == ""
        if _year_like(raw):
            yield _span("date", "year", float(raw), m, "n")
        elif not (m["dot"] and (language == "de" or line_start)):
            # "3. Stock" and list markers "1." are ordinals, not amounts.
            amount = _number(raw, language)
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
    for finder in _FINDERS:
        for value in finder(text, language):
            if value.amount is not None and not math.isfinite(value.amount):
                continue
            if all(value.end <= t.start or value.start >= t.end for t in taken):
                taken.append(value)
    return sorted(taken, key=lambda v: v.start)


# --- Comparison -----------------------------------------------------------------------------

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
    """Extract each sample's values and apply the comparison rule (module docstring)."""
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
