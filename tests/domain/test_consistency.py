"""Self-consistency (investigations.domain.consistency): values, comparison, verdict."""

import random

import pytest

from investigations.domain.consistency.compare import (
    REASON_KINDS,
    Comparison,
    compare_samples,
    decide,
    needs_judge,
    reason_text,
)
from investigations.domain.consistency.prompt import ContradictionReply
from investigations.domain.consistency.values import Value, extract_values

Y, M = 365.0, 365.0 / 12

# (language, text, [(dimension, amount, surface), ...]): every value found, in text order.
EXTRACTION_CASES = [
    # Durations and intervals; duration and frequency share "time" (days).
    ("de", "Die Frist beträgt 5 Jahre.", [("time", 5 * Y, "5 Jahre")]),
    ("de", "Nach fünf Jahren ist Schluss.", [("time", 5 * Y, "fünf Jahren")]),
    ("de", "Die Prüfung ist alle zwei Jahre fällig.", [("time", 2 * Y, "alle zwei Jahre")]),
    ("de", "Geprüft wird alle 24 Monate.", [("time", 2 * Y, "alle 24 Monate")]),
    ("de", "Die Prüfung erfolgt zweijährlich.", [("time", 2 * Y, "zweijährlich")]),
    ("de", "Jedes Jahr eine Sichtprüfung.", [("time", Y, "Jedes Jahr")]),
    ("de", "Die jährliche Unterweisung ist Pflicht.", [("time", Y, "jährliche")]),
    ("de", "halbjährlich oder vierteljährlich", [("time", Y / 2, "halbjährlich"),
                                                 ("time", Y / 4, "vierteljährlich")]),
    ("de", "monatlich, wöchentlich, täglich", [("time", M, "monatlich"), ("time", 7, "wöchentlich"),
                                               ("time", 1, "täglich")]),
    ("de", "Zweimal im Jahr wird gewartet.", [("time", Y / 2, "Zweimal im Jahr")]),
    ("de", "Die Wartung ist 2x jährlich fällig.", [("time", Y / 2, "2x jährlich")]),
    ("de", "Binnen 14 Tagen oder 2 Wochen.", [("time", 14, "14 Tagen"), ("time", 14, "2 Wochen")]),
    ("de", "Das dauert ein Jahr und einen Monat.", [("time", Y, "ein Jahr"),
                                                    ("time", M, "einen Monat")]),
    ("de", "vierundzwanzig Monate", [("time", 2 * Y, "vierundzwanzig Monate")]),
    ("de", "ein halbes Jahr, anderthalb Jahre, dreieinhalb Jahre",
     [("time", Y / 2, "ein halbes Jahr"), ("time", 1.5 * Y, "anderthalb Jahre"),
      ("time", 3.5 * Y, "dreieinhalb Jahre")]),
    ("de", "Die Frist liegt bei 3,5 Jahren.", [("time", 3.5 * Y, "3,5 Jahren")]),
    ("de", "Die Frist beträgt 3–5 Jahre.", [("time", 3 * Y, "3–5 Jahre")]),
    ("de", "zwischen 3 und 5 Jahren", [("time", 3 * Y, "zwischen 3 und 5 Jahren")]),
    ("de", "Antwort binnen 10 Werktagen.", [("workdays", 10, "10 Werktagen")]),
    # Money and percent.
    ("de", "Die Gebühr beträgt 1.250,00 €.", [("money:EUR", 1250, "1.250,00 €")]),
    ("de", "Die Gebühr beträgt € 1.250 netto.", [("money:EUR", 1250, "€ 1.250")]),
    ("de", "Es kostet EUR 40 oder 40 Euro.", [("money:EUR", 40, "EUR 40"),
                                             ("money:EUR", 40, "40 Euro")]),
    ("de", "Förderung bis 1,5 Mio. €", [("money:EUR", 1.5e6, "1,5 Mio. €")]),
    ("de", "Die Gebühr beträgt 40,- €.", [("money:EUR", 40, "40,- €")]),
    ("de", "Der Zuschlag beträgt 5 %, nicht 5% oder fünf Prozent.",
     [("percent", 5, "5 %"), ("percent", 5, "5%"), ("percent", 5, "fünf Prozent")]),
    ("en", "The fee is $40 or 1,250.00 EUR.", [("money:USD", 40, "$40"),
                                               ("money:EUR", 1250, "1,250.00 EUR")]),
    ("en", "A surcharge of 2.5 percent applies.", [("percent", 2.5, "2.5 percent")]),
    # Length, area, volume, mass, pressure.
    ("de", "Abstand 250 cm, also 2,5 m; Leitung 12 km.",
     [("length", 2.5, "250 cm"), ("length", 2.5, "2,5 m"), ("length", 12000, "12 km")]),
    ("de", "Lagerfläche 10 m² bzw. 10 qm", [("area", 10, "10 m²"), ("area", 10, "10 qm")]),
    ("de", "Behälter über 1.000 Liter oder 1 m³", [("volume", 1000, "1.000 Liter"),
                                                   ("volume", 1000, "1 m³")]),
    ("de", "Höchstens 3 t, also 3.000 kg", [("mass", 3000, "3 t"), ("mass", 3000, "3.000 kg")]),
    ("de", "Prüfdruck 3,5 bar", [("pressure", 3.5, "3,5 bar")]),
    # Counts: a number before a noun counts that noun.
    ("de", "Es gibt 3 Prüfstufen.", [("count:prufstuf", 3, "3 Prüfstufen")]),
    ("de", "Es gibt drei Prüfstufen.", [("count:prufstuf", 3, "drei Prüfstufen")]),
    ("en", "There are three inspections.", [("count:inspection", 3, "three inspections")]),
    # Dates, months, years, references.
    ("de", "Gültig ab 1. März 2026.", [("date", 739676, "1. März 2026")]),
    ("de", "Gültig ab 01.03.2026.", [("date", 739676, "01.03.2026")]),
    ("de", "Stichtag 2026-03-01", [("date", 739676, "2026-03-01")]),
    ("en", "Valid from March 1, 2026.", [("date", 739676, "March 1, 2026")]),
    ("en", "Valid from 1 March 2026.", [("date", 739676, "1 March 2026")]),
    ("de", "Seit März 2026 gilt das.", [("month", 2026 * 12 + 2, "März 2026")]),
    ("de", "Seit 2020 gilt das.", [("year", 2020, "2020")]),
    ("de", "Geregelt in § 4 und Art. 5 DSGVO.", [("ref:§", 4, "§ 4"),
                                                 ("ref:Art DSGVO", 5, "Art. 5 DSGVO")]),
    ("de", "Das steht in § 147 Abs. 1 AO.", [("ref:§ AO", 147, "§ 147 Abs. 1 AO")]),
    # Codes and names.
    ("de", "Brandschutz nach DIN 4102 und ISO 9001:2015.",
     [("code:DIN", None, "DIN 4102"), ("code:ISO", None, "ISO 9001:2015")]),
    ("de", "Zuständig ist die Müller GmbH, Ansprechpartner Dr. Schmidt.",
     [("name", None, "Müller GmbH"), ("name", None, "Dr. Schmidt")]),
    ("de", "Die Prüfung macht der TÜV nach BetrSichV.", [("name", None, "TÜV"),
                                                        ("name", None, "BetrSichV")]),
    ("en", "Ask Mr Smith at Acme Ltd.", [("name", None, "Mr Smith"), ("name", None, "Acme Ltd.")]),
    ("en", "Contact the Health and Safety Executive.",
     [("name", None, "Health and Safety Executive")]),
    # English intervals.
    ("en", "It is inspected every two years.", [("time", 2 * Y, "every two years")]),
    ("en", "every 6 months, every other year", [("time", Y / 2, "every 6 months"),
                                                ("time", 2 * Y, "every other year")]),
    ("en", "once a year or twice a year", [("time", Y, "once a year"),
                                           ("time", Y / 2, "twice a year")]),
    ("en", "annually, quarterly, monthly, weekly, daily",
     [("time", Y, "annually"), ("time", Y / 4, "quarterly"), ("time", M, "monthly"),
      ("time", 7, "weekly"), ("time", 1, "daily")]),
    ("en", "Keep records for 10 years, i.e. 120 months.", [("time", 10 * Y, "10 years"),
                                                           ("time", 10 * Y, "120 months")]),
    ("en", "Within a year or one and a half years.", [("time", Y, "a year"),
                                                      ("time", 1.5 * Y, "one and a half years")]),
    ("en", "between 3 and 5 years, 3-5 years", [("time", 3 * Y, "between 3 and 5 years"),
                                                ("time", 3 * Y, "3-5 years")]),
    # Evasions, with their object.
    ("de", "Das hängt je nach Behältergröße ab.", [("evasion", None, "je nach Behältergröße")]),
    ("de", "Abhängig von der Größe des Behälters.",
     [("evasion", None, "Abhängig von der Größe des Behälters")]),
    ("de", "Es hängt von der Nutzung ab.", [("evasion", None, "hängt von der Nutzung ab")]),
    ("de", "Je nachdem, wie groß der Behälter ist.",
     [("evasion", None, "Je nachdem, wie groß der Behälter ist")]),
    ("de", "Das wird von Fall zu Fall entschieden.", [("evasion", None, "von Fall zu Fall")]),
    ("de", "Das ist unterschiedlich und kann variieren.",
     [("evasion", None, "unterschiedlich"), ("evasion", None, "kann variieren")]),
    ("en", "It depends on the size of the container, but usually not.",
     [("evasion", None, "depends on the size of the container")]),
    ("en", "It varies by container size.", [("evasion", None, "varies by container size")]),
    ("en", "Depending on the tank, it may vary.",
     [("evasion", None, "Depending on the tank"), ("evasion", None, "may vary")]),
    # Negatives: articles, ordinary nouns, references are not numbers, names or years.
    ("de", "Ein Antrag ist einzureichen.", []),
    ("de", "Die Frist wird vom Amt gesetzt.", []),
    ("de", "Siehe § 4.", [("ref:§", 4, "§ 4")]),
    ("en", "Under Section 4 of the policy.", [("ref:Section", 4, "Section 4")]),
    ("de", "Der Antrag liegt im 3. Stock.", []),
    ("de", "Eine Prüfung ist nötig.", []),
    ("en", "A form is needed. The office decides.", []),
    ("en", "- Finance approves it.\n- Then the Board signs.", [("name", None, "Board")]),
    # Bare numbers are kept (shown) but have no dimension to compare in.
    ("de", "Siehe Seite 3.", [("number", 3, "3")]),
]


@pytest.mark.parametrize(("language", "text", "expected"), EXTRACTION_CASES,
                         ids=[c[1][:40] for c in EXTRACTION_CASES])
def test_extract_values(language, text, expected):
    found = extract_values(text, language=language)
    assert [(v.dimension, v.text) for v in found] == [(d, s) for d, _, s in expected]
    for value, (_, amount, _) in zip(found, expected, strict=True):
        assert value.amount == (None if amount is None else pytest.approx(amount, rel=1e-9))
        assert text[value.start:value.end] == value.text


def test_ranges_carry_their_upper_bound():
    (value,) = extract_values("zwischen 3 und 5 Jahren", language="de")
    assert (value.amount, value.upper) == (pytest.approx(3 * Y), pytest.approx(5 * Y))


def test_decimal_marks_by_language():
    def amount(text, language):
        return extract_values(text, language=language)[0].amount

    assert amount("3,5 Jahre", "de") == amount("3.5 years", "en") == amount("dreieinhalb Jahre",
                                                                             "de")
    assert amount("1.250 €", "de") == amount("€1,250", "en") == 1250
    assert amount("1,250 €", "de") == 1.25


def test_extraction_never_raises_and_spans_always_match():
    # A crash here would fail a worker's question; spans that miss would highlight nonsense.
    rng = random.Random(7)
    words = ["5", "Jahre", "alle", "zwei", "je", "nach", "€", "1.250,00", "ein", "halbes", "§",
             "Art.", "DIN", "4102", "März", "2026", "01.03.", "every", "other", "twice", "a",
             "depends", "on", "-", "–", "bis", "zwischen", "und", "3,5", "%", "Mio.", "14-",
             "tägig", "Mr", "Ltd.", "\n-", "1.", "half", "an", "hour", ",-", "x", "mal", "ISO/IEC"]
    for _ in range(300):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 20)))
        for language in ("de", "en"):
            for value in extract_values(text, language=language):
                assert text[value.start:value.end] == value.text


def test_unknown_language_is_refused():
    with pytest.raises(ValueError, match="language"):
        extract_values("5 Jahre", language="fr")


ARTICLE = [
    "Die Frist beträgt 5 Jahre.",
    "Die Prüfung ist alle zwei Jahre fällig.",
    "Das hängt je nach Behältergröße ab.",
]

# (language, samples, agree, dimension, reason): reason None = not checked beyond the prefix.
COMPARISON_CASES = [
    # The article's triple: guessed.
    ("de", ARTICLE, False, "time",
     "Zahlen widersprechen sich: 5 Jahre / alle zwei Jahre / je nach Behältergröße"),
    # Agreeing, the same figure three times, in different words.
    ("de", ["Die Aufbewahrungsfrist beträgt 10 Jahre.", "Rechnungen sind zehn Jahre "
            "aufzubewahren.", "Aufbewahrung: 10 Jahre ab Ende des Kalenderjahres."],
     True, None, ""),
    ("de", ["Die Prüfung ist alle 24 Monate fällig.", "Geprüft wird alle zwei Jahre.",
            "Die Prüfung erfolgt zweijährlich."], True, None, ""),
    ("en", ["The tank is inspected every two years.", "Inspections are due every 24 months.",
            "It must be inspected biennially."], True, None, ""),
    ("de", ["Die Wartung ist halbjährlich fällig.", "Gewartet wird zweimal im Jahr.",
            "Alle 6 Monate wird gewartet."], True, None, ""),
    # Numerically contradicting.
    ("de", ["Die Gebühr beträgt 40 €.", "Die Gebühr beträgt 45 Euro.",
            "Es werden 40 € fällig."], False, "money:EUR",
     "Zahlen widersprechen sich: 40 € / 45 Euro / 40 €"),
    ("en", ["Records are kept for 6 years.", "Records are kept for 10 years.",
            "Keep them for ten years."], False, "time",
     "Numbers contradict each other: 6 years / 10 years / ten years"),
    ("de", ["Der Zuschlag beträgt 5 %.", "Der Zuschlag beträgt fünf Prozent.",
            "Der Zuschlag beträgt 7 %."], False, "percent",
     "Zahlen widersprechen sich: 5 % / fünf Prozent / 7 %"),
    ("de", ["Es gibt 3 Prüfstufen.", "Es gibt drei Prüfstufen.", "Es gibt vier Prüfstufen."],
     False, "count:prufstuf", "Zahlen widersprechen sich: 3 Prüfstufen / drei Prüfstufen / "
     "vier Prüfstufen"),
    # An extra fact is not a contradiction.
    ("de", ["Die Frist beträgt 5 Jahre.", "Die Frist beträgt 5 Jahre, bei Gefahrgut 10 Jahre.",
            "Es gilt eine Frist von fünf Jahren."], True, None, ""),
    ("en", ["The fee is €40.", "The fee is €40; a reminder costs €5.", "It costs 40 euros."],
     True, None, ""),
    # Evasions.
    ("de", ["Die Frist beträgt 5 Jahre.", "Die Frist beträgt fünf Jahre.",
            "Das ist je nach Behälter unterschiedlich."], False, "time",
     "Zahlen widersprechen sich: 5 Jahre / fünf Jahre / je nach Behälter, unterschiedlich"),
    ("de", ["Die Frist beträgt 5 Jahre.", "Die Frist beträgt fünf Jahre.",
            "Die Frist beträgt 5 Jahre, je nach Behälter auch länger."], True, None, ""),
    ("en", ["Inspections are due every 5 years.", "It depends on the size of the tank.",
            "It varies by tank size."], True, None, ""),
    ("en", ["The fee is $40.", "The fee is $40.", "It depends on the district."],
     False, "money:USD", "Numbers contradict each other: $40 / $40 / depends on the district"),
    # No values at all.
    ("de", ["Zuständig ist das Bauamt.", "Das Bauamt ist zuständig.",
            "Wenden Sie sich an das Bauamt."], True, None, ""),
    # Ranges: a value inside the range agrees.
    ("de", ["Die Frist beträgt 3–5 Jahre.", "Die Frist liegt zwischen 3 und 5 Jahren.",
            "In der Regel 4 Jahre."], True, None, ""),
    ("de", ["Die Frist beträgt 3–5 Jahre.", "Die Frist beträgt 6 Jahre.",
            "Die Frist beträgt 3–5 Jahre."], False, "time",
     "Zahlen widersprechen sich: 3–5 Jahre / 6 Jahre / 3–5 Jahre"),
    # Dates.
    ("de", ["Die Regel gilt ab 1. März 2026.", "Sie gilt ab dem 01.03.2026.",
            "Stichtag ist der 2026-03-01."], True, None, ""),
    ("en", ["The rule applies from March 1, 2026.", "It applies from 1 April 2026.",
            "From March 1, 2026."], False, "date",
     "Dates contradict each other: March 1, 2026 / 1 April 2026 / March 1, 2026"),
    # Names differ: shown, never a conflict on their own. Codes and references do conflict.
    ("de", ["Zuständig ist Herr Meier.", "Zuständig ist Frau Schulz.",
            "Das macht die Müller GmbH."], True, None, ""),
    ("de", ["Es gilt DIN 4102.", "Es gilt DIN 4108.", "Maßgeblich ist DIN 4102."],
     False, "code:DIN", "Angaben widersprechen sich: DIN 4102 / DIN 4108 / DIN 4102"),
    ("de", ["Geregelt in § 4.", "Geregelt in § 5.", "Siehe § 4."], False, "ref:§",
     "Angaben widersprechen sich: § 4 / § 5 / § 4"),
    ("en", ["Under Art. 5 GDPR.", "Under Article 5 GDPR.", "See Art. 6 GDPR."],
     False, "ref:Art GDPR", "Details contradict each other: Art. 5 GDPR / Article 5 GDPR / "
     "Art. 6 GDPR"),
    # Bare numbers without unit or noun are never compared.
    ("de", ["Das steht auf Seite 3.", "Siehe Seite 4.", "Das steht unter 7."], True, None, ""),
    ("de", ["Siehe Abschnitt 3.2 des Handbuchs.", "Siehe Abschnitt 3.4.", "Abschnitt 3.2."],
     False, "ref:Abschnitt", "Angaben widersprechen sich: Abschnitt 3.2 / Abschnitt 3.4 / "
     "Abschnitt 3.2"),
    # A missing figure in one sample only: the dash.
    ("de", ["Die Frist beträgt 5 Jahre.", "Die Frist beträgt 2 Jahre.", "Es gibt eine Frist."],
     False, "time", "Zahlen widersprechen sich: 5 Jahre / 2 Jahre / —"),
]


@pytest.mark.parametrize(("language", "samples", "agree", "dimension", "reason"),
                         COMPARISON_CASES, ids=[c[1][0][:30] for c in COMPARISON_CASES])
def test_compare_samples(language, samples, agree, dimension, reason):
    comparison = compare_samples(samples, language=language)
    assert (comparison.agree, comparison.dimension, comparison.reason) == (agree, dimension,
                                                                           reason)
    assert needs_judge(comparison) is agree
    if agree:
        assert comparison.differing == [[] for _ in samples]


def test_no_values_needs_the_judge():
    comparison = compare_samples(["Ja.", "Das ist so.", "Genau."], language="de")
    assert (comparison.has_values, comparison.agree, needs_judge(comparison)) == (False, True,
                                                                                   True)


def _highlighted(samples, comparison):
    return [[text[a:b] for a, b in spans] for text, spans in zip(samples, comparison.differing,
                                                                  strict=True)]


def test_differing_spans_point_at_the_conflicting_values():
    comparison = compare_samples(ARTICLE, language="de")
    assert _highlighted(ARTICLE, comparison) == [["5 Jahre"], ["alle zwei Jahre"],
                                                 ["je nach Behältergröße"]]


def test_differing_spans_leave_out_shared_values_and_other_dimensions():
    samples = ["Die Gebühr beträgt 40 € und die Frist 14 Tage.",
               "Die Gebühr beträgt 45 € und die Frist zwei Wochen.",
               "Die Gebühr: 40 €, bei Eilanträgen zusätzlich 45 €; Frist 14 Tage."]
    comparison = compare_samples(samples, language="de")
    assert not comparison.agree
    assert comparison.conflicting == ["money:EUR"]
    assert _highlighted(samples, comparison) == [["40 €"], ["45 €"], []]


def test_differing_names_are_shown_not_judged():
    samples = ["Zuständig ist Herr Meier.", "Zuständig ist Herr Meier.", "Zuständig ist der TÜV."]
    comparison = compare_samples(samples, language="de")
    assert comparison.agree
    assert [[t[a:b] for a, b in spans] for t, spans in zip(samples, comparison.unshared_names,
                                                           strict=True)] == [
        ["Herr Meier"], ["Herr Meier"], ["TÜV"]]


def test_two_samples_evasion_against_a_figure():
    comparison = compare_samples(["Alle 5 Jahre.", "Je nach Behälter."], language="de")
    assert comparison.reason == "Zahlen widersprechen sich: Alle 5 Jahre / Je nach Behälter"


def _comparison(samples, language="de"):
    return compare_samples(samples, language=language)


AGREEING = ["Die Frist beträgt 5 Jahre.", "Es sind fünf Jahre.", "5 Jahre."]
NO_VALUES = ["Zuständig ist das Bauamt.", "Das Bauamt.", "Beim Bauamt."]

# (samples, judge reply, language, consistent, source, reason)
DECIDE_CASES = [
    (ARTICLE, None, "de", False, "values",
     "Zahlen widersprechen sich: 5 Jahre / alle zwei Jahre / je nach Behältergröße"),
    (ARTICLE, ContradictionReply(False, ""), "de", False, "values",
     "Zahlen widersprechen sich: 5 Jahre / alle zwei Jahre / je nach Behältergröße"),
    (AGREEING, ContradictionReply(False, ""), "de", True, "judge",
     "Konsistent: Werte stimmen überein (5 Jahre)"),
    (NO_VALUES, ContradictionReply(False, "Alle nennen das Bauamt."), "de", True, "judge",
     "Konsistent: keine Werte, kein inhaltlicher Widerspruch"),
    (AGREEING, ContradictionReply(True, "Antwort 2 nennt eine andere Behörde."), "de", False,
     "judge", "Inhaltlicher Widerspruch laut Prüfmodell: Antwort 2 nennt eine andere Behörde."),
    (AGREEING, ContradictionReply(True, ""), "de", False, "judge",
     "Inhaltlicher Widerspruch laut Prüfmodell"),
    (AGREEING, ContradictionReply(None, ""), "de", None, "judge",
     "Unentschieden: Antwort des Prüfmodells zweimal nicht lesbar"),
    (["Every 5 years.", "Every five years.", "5 years."], ContradictionReply(False, ""), "en",
     True, "judge", "Consistent: values agree (Every 5 years)"),
    (["Ask the council.", "The council.", "The council decides."], ContradictionReply(False, ""),
     "en", True, "judge", "Consistent: no values, no content contradiction"),
    (["Every 5 years.", "Every five years.", "5 years."], ContradictionReply(True, "Scope"),
     "en", False, "judge", "Content contradiction according to the judge model: Scope"),
    (["Every 5 years.", "Every five years.", "5 years."], ContradictionReply(None, ""), "en",
     None, "judge", "Undecided: the judge model's reply was unreadable twice"),
]


@pytest.mark.parametrize(("samples", "reply", "language", "consistent", "source", "reason"),
                         DECIDE_CASES)
def test_decide(samples, reply, language, consistent, source, reason):
    verdict = decide(_comparison(samples, language), reply, language=language)
    assert (verdict.consistent, verdict.source, verdict.reason) == (consistent, source, reason)


# The same verdicts read in the other language: the words follow the reader, the values and
# the judge's own words stay as they are.
OTHER_LANGUAGE = {
    "Zahlen widersprechen sich: 5 Jahre / alle zwei Jahre / je nach Behältergröße":
        "Numbers contradict each other: 5 Jahre / alle zwei Jahre / je nach Behältergröße",
    "Konsistent: Werte stimmen überein (5 Jahre)": "Consistent: values agree (5 Jahre)",
    "Konsistent: keine Werte, kein inhaltlicher Widerspruch":
        "Consistent: no values, no content contradiction",
    "Inhaltlicher Widerspruch laut Prüfmodell: Antwort 2 nennt eine andere Behörde.":
        "Content contradiction according to the judge model: Antwort 2 nennt eine andere "
        "Behörde.",
    "Inhaltlicher Widerspruch laut Prüfmodell": "Content contradiction according to the judge "
                                                "model",
    "Unentschieden: Antwort des Prüfmodells zweimal nicht lesbar":
        "Undecided: the judge model's reply was unreadable twice",
    "Consistent: values agree (Every 5 years)": "Konsistent: Werte stimmen überein (Every 5 "
                                                "years)",
    "Consistent: no values, no content contradiction":
        "Konsistent: keine Werte, kein inhaltlicher Widerspruch",
    "Content contradiction according to the judge model: Scope":
        "Inhaltlicher Widerspruch laut Prüfmodell: Scope",
    "Undecided: the judge model's reply was unreadable twice":
        "Unentschieden: Antwort des Prüfmodells zweimal nicht lesbar",
}


@pytest.mark.parametrize(("samples", "reply", "language", "consistent", "source", "reason"),
                         DECIDE_CASES)
def test_a_verdicts_reason_reads_in_either_language(samples, reply, language, consistent,
                                                   source, reason):
    verdict = decide(_comparison(samples, language), reply, language=language)
    assert verdict.kind in REASON_KINDS
    assert reason_text(verdict.kind, verdict.detail, language) == reason
    other = "en" if language == "de" else "de"
    assert reason_text(verdict.kind, verdict.detail, other) == OTHER_LANGUAGE[reason]
    assert reason_text(verdict.kind, verdict.detail, "fr") == reason_text(
        verdict.kind, verdict.detail, "de")


def test_an_unknown_reason_kind_is_refused():
    with pytest.raises(ValueError, match="reason kind"):
        reason_text("weather", "", "de")


def test_decide_refuses_to_call_agreeing_values_consistent_without_the_judge():
    with pytest.raises(ValueError, match="judge"):
        decide(_comparison(AGREEING), None, language="de")


def test_interface_fields():
    value = Value("quantity", "time", 1825.0, "5 Jahre", 0, 7)
    assert (value.upper, value.key) == (None, "")
    comparison = Comparison(True, False, None, "", [[]], [[]])
    assert comparison.conflicting == [] and comparison.unshared_names == []


@pytest.mark.parametrize("language", ["de", "en"])
def test_concentration_ranges_are_read_whole(language):
    # Issue 41: "0-1 / 1-2 / 2-3 ng/mL" was summarised as "1 ng / 2 ng / 3 ng", a count of "ng".
    samples = [f"{'Der Wert' if language == 'de' else 'The level'} {r} ng/mL." for r in
               ("0-1", "1-2", "2-3")]
    comparison = compare_samples(samples, language=language)
    assert comparison.agree is False
    assert comparison.dimension == "concentration"
    assert comparison.reason.endswith("0-1 ng/mL / 1-2 ng/mL / 2-3 ng/mL")


def test_concentrations_compare_across_units():
    same = compare_samples(["The limit is 1 µg/mL.", "The limit is 1000 ng/mL."], language="en")
    assert same.agree is True
