"""What self-consistency reads values with: units, scales, number words and numerals.

The vocabulary and regular-expression fragments ``values`` builds its finders from, and
``number``, which reads a numeral or number word in German or English.
"""

import re
from collections.abc import Iterable

YEAR, MONTH, WEEK, DAY = 365.0, 365.0 / 12, 7.0, 1.0
UNITS: dict[str, tuple[str, float]] = {}


def _units(dimension: str, factor: float, *names: str) -> None:
    for name in names:
        UNITS[name] = (dimension, factor)


_units("time", YEAR, "Jahr", "Jahre", "Jahren", "Jahres", "Jahrs", "year", "years", "yr", "yrs")
_units("time", MONTH, "Monat", "Monate", "Monaten", "Monats", "month", "months")
_units("time", YEAR / 4, "Quartal", "Quartale", "Quartalen", "quarter", "quarters")
_units("time", WEEK, "Woche", "Wochen", "week", "weeks")
_units("time", DAY, "Tag", "Tage", "Tagen", "Tages", "day", "days")
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
# Concentrations (laboratory values) in g/L, so that "1 µg/mL" and "1000 ng/mL" agree and
# "0-1 ng/mL" is one range, not the count "1 ng".
for _mass, _per_gram in (("g", 1.0), ("mg", 1e-3), ("µg", 1e-6), ("μg", 1e-6), ("ug", 1e-6),
                         ("ng", 1e-9), ("pg", 1e-12)):
    for _vol, _litres in (("L", 1.0), ("l", 1.0), ("dL", 0.1), ("dl", 0.1), ("mL", 1e-3),
                          ("ml", 1e-3)):
        _units("concentration", _per_gram / _litres, f"{_mass}/{_vol}")
for _mol, _per_mol in (("mol", 1.0), ("mmol", 1e-3), ("µmol", 1e-6), ("μmol", 1e-6),
                       ("nmol", 1e-9)):
    for _vol, _litres in (("L", 1.0), ("l", 1.0), ("mL", 1e-3), ("ml", 1e-3)):
        _units("molar", _per_mol / _litres, f"{_mol}/{_vol}")
_units("pressure", 1, "bar")
_units("pressure", 0.001, "mbar")
_units("temperature:C", 1, "°C", "Grad Celsius", "Grad", "degrees Celsius")
_units("power", 1, "W")
_units("power", 1000, "kW")
_units("power", 1e6, "MW")
_units("energy", 1, "kWh")
_units("energy", 1000, "MWh")

CURRENCY_CODES = {"EUR", "USD", "CHF", "GBP"}
SCALES = {"tsd": 1e3, "tausend": 1e3, "thousand": 1e3, "mio": 1e6, "million": 1e6,
           "millionen": 1e6, "mrd": 1e9, "milliarde": 1e9, "milliarden": 1e9, "billion": 1e9}


def alternation(words: Iterable[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


_END = r"(?![\w²³])"
UNIT = rf"(?:{alternation(UNITS)}){_END}"
TIME_UNIT = rf"(?:{alternation(u for u, (d, _) in UNITS.items() if d == 'time')}){_END}"
SCALE = r"(?:\s*(?:Tsd\.|Mio\.|Mrd\.|Millionen|Million|Milliarden|Milliarde|Tausend|million"
SCALE += r"|billion|thousand)(?!\w))?"
DIGITS = r"\d{1,3}(?:[.,]\d{3})+(?:[.,]\d+)?(?!\d)|\d+(?:[.,]\d+)?(?!\d)"
WORD = r"[A-Za-zÄÖÜäöüß]+"
NUM = rf"(?:{DIGITS}|(?:ein(?:es|em|en)?\s+)?halbe[nsm]?\b|{WORD}(?:\s+and\s+a\s+half)?)"
START = r"(?<![\w.,§$€£/])"
# Between a number and its unit: nothing after digits ("5%", "40€"), a space or hyphen after a
# word ("fünf Jahre"), so that "Jahr" is never read as the number "Ja" and the unit "hr".
# Possessive: no unit starts with a blank or "-", so giving back part of a blank run never
# helps, and trying every split of a long run between two "\s*" took quadratic time.
SEP = r"(?:(?<=\d)\s*+(?:-\s*+)?|\s*+-\s*+|\s++)"

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
ARTICLES = {"ein", "eine", "einen", "einem", "einer", "eines", "a", "an"}


# "siebenhundertsiebenundsiebzigtausendsiebenhundertsiebenundsiebzigeinhalb" has 72 letters.
# A longer word is no number; reading it would nest once per "hundert", "tausend" or "einhalb"
# in it (a RecursionError for "hundert" * 2000) and copy the rest at every level.
_MAX_NUMBER_WORD = 100


def _de_word(word: str) -> float | None:
    """A German number word: "vierundzwanzig" 24, "dreihundert" 300, "dreieinhalb" 3.5."""
    if len(word) > _MAX_NUMBER_WORD:
        return None
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


def number(raw: str, language: str) -> float | None:
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
    if language == "de" and low.split()[0] in ARTICLES:  # "ein halbes Jahr"
        low = low.split()[-1]
    if low.endswith(" and a half"):
        base = number(low[: -len(" and a half")], language)
        return None if base is None else base + 0.5
    found = _de_word(low) if language == "de" else _EN_WORDS.get(low)
    return None if found is None else float(found)
