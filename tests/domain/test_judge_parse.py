"""Reading judge replies (judging.domain.judge_parse): verdict labels and claim lists."""

import pytest

from judging.domain.judge_parse import LABEL_POINTS, MAX_CLAIMS, Label, parse_claims, parse_verdict

G, T, U, X = Label.GEDECKT, Label.TEILWEISE, Label.UNGEDECKT, Label.UNPARSEABLE

# (reply, expected label)
VERDICT_CASES = [
    # The three words as asked.
    ("GEDECKT", G),
    ("TEILWEISE", T),
    ("UNGEDECKT", U),
    # Case and whitespace.
    ("gedeckt", G),
    ("Teilweise", T),
    ("uNgEdEcKt", U),
    ("  GEDECKT\n", G),
    ("\tTEILWEISE \r\n", T),
    ("\u00a0UNGEDECKT\u00a0", U),
    # Trailing punctuation.
    ("GEDECKT.", G),
    ("Ungedeckt!", U),
    ("TEILWEISE:", T),
    ("GEDECKT.\n", G),
    ("GEDECKT!!", G),
    # Quotes, backticks, markdown bold and italics, code fences, combined.
    ('"GEDECKT"', G),
    ("'teilweise'", T),
    ("„UNGEDECKT“", U),
    ("«GEDECKT»", G),
    ("`GEDECKT`", G),
    ("**TEILWEISE**", T),
    ("*UNGEDECKT*", U),
    ("_gedeckt_", G),
    ("**GEDECKT**.", G),
    ('"GEDECKT."', G),
    ("```\nGEDECKT\n```", G),
    ("\ufeffGEDECKT", G),
    # Anything that is not exactly one of the three words.
    ("", X),
    ("   ", X),
    ("...", X),
    ("**", X),
    ("GEDECKT, weil der Kontext es sagt", X),
    ("GEDECKT — die Aussage folgt direkt aus dem Kontext", X),
    ("NICHT GEDECKT", X),
    ("nicht gedeckt", X),
    ("gedeckt teilweise", X),
    ("GEDECKT TEILWEISE UNGEDECKT", X),
    ("GEDECKT\nTEILWEISE", X),
    ("Antwort: GEDECKT", X),
    ("Die Aussage ist GEDECKT.", X),
    ("GEDECKT?", X),
    ("GEDECKT,", X),
    ("GEDECK", X),
    ("GEDECKTT", X),
    ("TEIL-WEISE", X),
    ("UN GEDECKT", X),
    ("SUPPORTED", X),
    ("supported", X),
    ("partially", X),
    ("not supported", X),
    ("yes", X),
    ("0", X),
    ("1.0", X),
    ("UNPARSEABLE", X),
    ("unparseable", X),
    ('{"label": "GEDECKT"}', X),
]


@pytest.mark.parametrize(
    ("reply", "expected"), VERDICT_CASES, ids=[repr(c[0]) for c in VERDICT_CASES]
)
def test_parse_verdict(reply, expected):
    assert parse_verdict(reply) is expected


def test_enough_verdict_cases():
    assert len(VERDICT_CASES) >= 25


def test_labels_and_points():
    assert [label.value for label in Label] == ["GEDECKT", "TEILWEISE", "UNGEDECKT", "UNPARSEABLE"]
    assert LABEL_POINTS == {G: 1.0, T: 0.5, U: 0.0}
    # UNPARSEABLE has no points: it can never be scored, not even as 0.
    assert X not in LABEL_POINTS
    assert Label("GEDECKT") is G and G == "GEDECKT"


# (id, reply, expected claims; None = nothing readable)
CLAIM_CASES = [
    (
        "de json array",
        '["Der Druckbehälter wird alle 5 Jahre geprüft.", "Die Sicherheitsfachkraft gibt '
        'Änderungen frei."]',
        [
            "Der Druckbehälter wird alle 5 Jahre geprüft.",
            "Die Sicherheitsfachkraft gibt Änderungen frei.",
        ],
    ),
    (
        "en json array",
        '["The vessel is inspected every 5 years.", "The safety officer approves changes."]',
        ["The vessel is inspected every 5 years.", "The safety officer approves changes."],
    ),
    (
        "json fence",
        '```json\n[\n  "Das Intervall beträgt 5 Jahre.",\n  "Es gilt ab 1.000 Liter."\n]\n```',
        ["Das Intervall beträgt 5 Jahre.", "Es gilt ab 1.000 Liter."],
    ),
    (
        "text around the array",
        'Here are the claims:\n["The limit is 3.5 bar."]\nLet me know if you need more.',
        ["The limit is 3.5 bar."],
    ),
    (
        "unicode escapes in json",
        '["Die Pr\\u00fcfung erfolgt j\\u00e4hrlich."]',
        ["Die Prüfung erfolgt jährlich."],
    ),
    (
        "strip, drop empties and duplicates, keep order",
        '["  B gilt. ", "", "A gilt.", "B gilt.", "   ", "A gilt."]',
        ["B gilt.", "A gilt."],
    ),
    ("explicit empty array", "[]", []),
    ("empty array in a fence", "```json\n[]\n```", []),
    ("empty array after words", "Die Antwort enthält keine Aussagen: []", []),
    (
        "citation brackets before the array are skipped",
        'Laut [1] und [2]:\n["Der Grenzwert liegt bei 50 mg/l."]',
        ["Der Grenzwert liegt bei 50 mg/l."],
    ),
    (
        "array nested in an object",
        '{"claims": ["Die Frist beträgt 14 Tage."]}',
        ["Die Frist beträgt 14 Tage."],
    ),
    (
        "de numbered lines with dot",
        "Aussagen:\n1. Die Frist beträgt 14 Tage.\n2. Die Frist gilt ab Zugang des Bescheids.",
        ["Die Frist beträgt 14 Tage.", "Die Frist gilt ab Zugang des Bescheids."],
    ),
    (
        "en numbered lines with parenthesis",
        "1) The fee is 20 euros.\n2) The fee is due within 30 days.\n",
        ["The fee is 20 euros.", "The fee is due within 30 days."],
    ),
    (
        "de bullet lines",
        "- Der Antrag ist schriftlich zu stellen.\n- Der Antrag kostet 15 Euro.",
        ["Der Antrag ist schriftlich zu stellen.", "Der Antrag kostet 15 Euro."],
    ),
    (
        "en star bullets with quotes and commas",
        '* "The office opens at 8 am.",\n* "The office closes at 4 pm."',
        ["The office opens at 8 am.", "The office closes at 4 pm."],
    ),
    (
        "a decimal at the start of a line is not a list marker",
        "1.5 Jahre beträgt die Frist.\n- Die Frist beträgt 1,5 Jahre.",
        ["Die Frist beträgt 1,5 Jahre."],
    ),
    (
        "duplicate lines",
        "1. Der Bescheid ist gültig.\n2. Der Bescheid ist gültig.\n3. Er gilt 2 Jahre.",
        ["Der Bescheid ist gültig.", "Er gilt 2 Jahre."],
    ),
    ("de prose only", "Die Antwort enthält keine überprüfbaren Aussagen.", None),
    ("en prose only", "I cannot split this answer.", None),
    ("empty reply", "", None),
    ("truncated json", '["Die Frist beträgt 14 Tage.", "Die Frist gilt ab', None),
    ("array of numbers", "[1, 2, 3]", None),
    ("array of objects", '[{"claim": "Die Frist beträgt 14 Tage."}]', None),
    ("array of blanks is not an abstention", '["", "  "]', None),
    ("a json object without an array", '{"claim": "Die Frist beträgt 14 Tage."}', None),
    # An empty array is an abstention only where it ends the reply, alone.
    (
        "empty array as the item of a garbled list",
        '["Die Frist gilt.", "Das ist FALSCH.", []]',
        None,
    ),
    ("empty array nested in arrays", "[" * 50 + "]" * 50, None),
    (
        "a preamble that mentions the empty array",
        "Gäbe es keine Aussagen, schriebe ich []. Hier sind sie:\n"
        "1. Die Frist gilt.\n2. Sie gilt ab heute.",
        ["Die Frist gilt.", "Sie gilt ab heute."],
    ),
    (
        "a preamble that mentions the empty array before the array",
        'Ohne Aussagen wäre es []; hier: ["Die Frist gilt."]',
        ["Die Frist gilt."],
    ),
    (
        "a preamble that mentions the empty array and prose",
        "Ich gebe [] aus, wenn nichts da ist. Es ist etwas da.",
        None,
    ),
    (
        "list lines beside a closing empty array",
        "- Die Frist gilt.\nSonst: []",
        ["Die Frist gilt."],
    ),
    ("empty array closing with a full stop", "Keine Aussagen: [].", []),
    ("empty array opening an explanation", "[]\nDie Antwort ist nur eine Rückfrage.", []),
    ("garbled list without a comma before []", '["Die Frist gilt.", "Das ist FALSCH." []', None),
    ("garbled list, [] on a line of its own", '["Die Frist gilt.", "FALSCH."\n[]', None),
    ("unclosed brackets before []", "[[[ x []", None),
    ("a list with an array inside", '["x", ["Die Frist gilt."]', None),
    (
        "an object with the claims and a count",
        '{"claims": ["A gilt.", "B gilt."], "anzahl": 2}',
        ["A gilt.", "B gilt."],
    ),
    ("an object with no claims", '{"claims": []}', []),
    ("an object in an object", '{"result": {"claims": ["A gilt."]}}', ["A gilt."]),
    ("prose and a comma before the array", 'Aussagen, ["A gilt."]', ["A gilt."]),
    ("a comma after the array", '["A gilt."],', ["A gilt."]),
    ("an array over several lines", '[\n  "A gilt.",\n  "B gilt."\n]', ["A gilt.", "B gilt."]),
    ("a string array inside an array is no claim list", '[["Die Frist gilt."], 3]', None),
]


@pytest.mark.parametrize(
    ("reply", "expected"), [c[1:] for c in CLAIM_CASES], ids=[c[0] for c in CLAIM_CASES]
)
def test_parse_claims(reply, expected):
    assert parse_claims(reply) == expected


def test_enough_claim_cases():
    assert len(CLAIM_CASES) >= 12


def test_claims_are_capped():
    reply = "[" + ", ".join(f'"Aussage {i}."' for i in range(MAX_CLAIMS + 12)) + "]"
    claims = parse_claims(reply)
    assert claims is not None
    assert len(claims) == MAX_CLAIMS
    assert claims[0] == "Aussage 0." and claims[-1] == f"Aussage {MAX_CLAIMS - 1}."


def test_cap_counts_claims_after_dropping_duplicates():
    reply = "\n".join(f"- Aussage {i % 5}." for i in range(MAX_CLAIMS * 2))
    assert parse_claims(reply) == [f"Aussage {i}." for i in range(5)]
