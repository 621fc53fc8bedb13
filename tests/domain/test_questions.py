"""Multi-part question detector (ingest.domain.questions): tables of German and English
questions with the number of things they ask, including single questions that look multi-part
("und" inside a noun phrase, "between A and B", "Wie und wann")."""

import pytest

from ingest.domain.questions import is_multi_part, question_parts

# (question, expected number of parts)
GERMAN = [
    ("Wie hoch ist die Gebühr und wann wird sie fällig?", 2),
    ("Was kostet Strom und Gas?", 1),
    ("Wer ist für Einkauf und Vertrieb zuständig?", 1),
    ("Was ist der Unterschied zwischen Kündigung und Aufhebungsvertrag?", 1),
    ("Welche Unterlagen brauche ich und wo bekomme ich sie?", 2),
    ("Kann ich online bezahlen und bekomme ich eine Rechnung?", 2),
    ("Muss ich zahlen oder übernimmt das die Versicherung?", 1),
    ("Ich möchte wissen, wie hoch die Gebühr ist und ob ich sie in Raten zahlen kann.", 2),
    ("Bis wann muss ich den Antrag stellen und welche Unterlagen brauche ich?", 2),
    ("Wie und wann kann ich kündigen?", 1),
    ("Gilt die Regel für Mitarbeiter und Führungskräfte?", 1),
    ("Wie hoch sind die Kosten für Strom und Gas in Berlin und München?", 1),
    ("Erstens: Wie hoch ist die Miete? Zweitens: Wer zahlt die Nebenkosten?", 2),
    ("Erstens möchte ich wissen, wie hoch die Miete ist, zweitens, wer die Nebenkosten zahlt.", 2),
    ("1) Wie hoch ist die Miete 2) wer zahlt die Nebenkosten", 2),
    ("Wie hoch ist die Gebühr? Wann ist sie fällig? Kann ich in Raten zahlen?", 3),
    ("Welche Frist gilt, und was passiert, wenn ich sie verpasse?", 2),
    ("Was passiert, wenn ich krank bin und nicht arbeiten kann?", 1),
    ("Welche Leistungen übernimmt die Kasse sowie welche Zuzahlungen fallen an?", 2),
    ("Welche Leistungen sowie Zuzahlungen gibt es?", 1),
    ("Was kostet der Tarif, außerdem: gibt es einen Rabatt?", 2),
    ("Gibt es einen Rabatt für Studenten und Rentner?", 1),
    ("Ist der Tarif kündbar und gibt es eine Mindestlaufzeit?", 2),
    ("Kann ich das Formular online ausfüllen und unterschreiben?", 1),
    ("Hallo, ich habe eine Frage zur Rechnung. Warum ist der Betrag so hoch?", 1),
    ("Nenne mir die Frist und erkläre, wer zuständig ist.", 2),
    ("Erkläre mir den Unterschied zwischen Miete und Pacht.", 1),
    ("Was bedeutet Kurzarbeit und wie wird das Kurzarbeitergeld berechnet?", 2),
    ("Gilt die Frist ab dem 1. und 2. Mai, z. B. für Anträge?", 1),
    ("Wie lange dauert die Bearbeitung und muss ich dafür etwas bezahlen?", 2),
    ("Wer genehmigt Urlaub und Dienstreisen?", 1),
    ("Wie hoch ist die Gebühr? Oder?", 1),
    ("Was kostet Strom? Und Gas?", 2),
    ("Was kostet Strom und was kostet Gas?", 2),
    ("Wie hoch ist die Pauschale und außerdem, wann wird sie ausgezahlt?", 2),
    ("Zum einen: Wer zahlt? Zum anderen: bis wann?", 2),
    ("Bitte beantworte:\n- Wie hoch ist die Miete?\n- Wer zahlt die Nebenkosten?", 2),
    ("Was muss ich tun, wenn ich krank bin, und wie melde ich mich?", 2),
    ("Sind Hunde und Katzen im Mietvertrag erlaubt?", 1),
]

ENGLISH = [
    ("What is the deadline and who approves it?", 2),
    ("What is the difference between a lease and a rental agreement?", 1),
    ("Who is responsible for purchasing and sales?", 1),
    ("How much do electricity and gas cost?", 1),
    ("What documents do I need and where do I get them?", 2),
    ("Can I pay online and do I get an invoice?", 2),
    ("Is the plan cancellable and is there a minimum term?", 2),
    ("Can I fill in the form online and sign it?", 1),
    ("How and when can I cancel?", 1),
    ("What are the fees as well as how long does it take?", 2),
    ("What are the fees as well as the deadlines?", 1),
    ("1) What is the rent? 2) Who pays the utilities?", 2),
    ("Firstly, what is the notice period; secondly, who do I send it to?", 2),
    ("What happens if I miss the deadline and can't pay?", 1),
    ("Explain the difference between A and B.", 1),
    ("Explain the notice period and list the required documents.", 2),
    ("When is the first payment due?", 1),
    ("Is it taxable or exempt?", 1),
    ("What is the rent? And who pays the utilities?", 2),
    ("I would like to know the deadline and also who approves the request.", 2),
    ("Which countries are covered and what does it cost?", 2),
    ("What does the insurance cover in case of fire and water damage?", 1),
    ("Does the policy cover theft and does it include my bike?", 2),
    ("What is the difference between what I pay and what I get?", 1),
    ("What's the fee and when's it due?", 2),
    ("Is VAT included and is Germany covered?", 2),
    ("Who signed the contract and when did it start?", 2),
    ("Why was my claim rejected?", 1),
    ("Is the deadline on 1. May?", 1),
    ("a) What is the fee? b) When is it due? c) Who collects it?", 3),
]


@pytest.mark.parametrize(("question", "parts"), GERMAN, ids=[q for q, _ in GERMAN])
def test_german(question, parts):
    assert question_parts(question, "de") == parts
    assert is_multi_part(question, "de") is (parts >= 2)


@pytest.mark.parametrize(("question", "parts"), ENGLISH, ids=[q for q, _ in ENGLISH])
def test_english(question, parts):
    assert question_parts(question, "en") == parts
    assert is_multi_part(question, "en") is (parts >= 2)


def test_tables_hold_both_kinds():
    for table in (GERMAN, ENGLISH):
        assert sum(parts == 1 for _, parts in table) >= 10
        assert sum(parts >= 2 for _, parts in table) >= 10


@pytest.mark.parametrize(
    ("question", "language", "parts"),
    [
        # Regional codes pick the same word lists.
        ("Ist der Tarif kündbar und gibt es eine Mindestlaufzeit?", "de-DE", 2),
        ("Is the plan cancellable and is there a minimum term?", "en_GB", 2),
        # The language matters: English "was" is a verb, German "was" asks.
        ("Who signed it and was it approved?", "en", 2),
        ("Which supplier was chosen and was responsible?", "en", 1),
        # Other languages get both lists.
        ("Wie viel kostet das Abo und gibt es Rabatte?", "fr", 2),
        ("What is the fee and when is it due?", "fr", 2),
        ("Was kostet Strom und Gas?", "fr", 1),
    ],
)
def test_languages(question, language, parts):
    assert question_parts(question, language) == parts


@pytest.mark.parametrize(
    ("question", "language", "parts"),
    [
        # Enumerations count even when the items are not questions themselves.
        ("Zwei Fragen:\n1. Höhe der Miete\n2. Fälligkeit der Nebenkosten", "de", 2),
        ("Bitte nenne a) die Frist b) die Kosten c) den Ansprechpartner", "de", 3),
        ("Key points: (1) the fee (2) the deadline", "en", 2),
        # Dates and legal references are not enumerations.
        ("Gilt das ab dem 1. und 2. Mai?", "de", 1),
        ("Gilt § 3 a) oder b)?", "de", 1),
    ],
)
def test_enumerations(question, language, parts):
    assert question_parts(question, language) == parts


@pytest.mark.parametrize("question", ["", "   ", "?", "und", "Danke!"])
def test_degenerate_input_is_one_part(question):
    assert question_parts(question) == 1
    assert is_multi_part(question) is False


def test_default_language_is_german():
    assert question_parts("Wie hoch ist die Gebühr und wann wird sie fällig?") == 2
