"""Does a question ask for several things? A heuristic for German and English.

Multi-part questions are a known cause of invented content: the retrieval finds material for
one half and the model makes up the other. The dashboard compares the faithfulness of
multi-part and single questions, so it needs to tell them apart for every stored question,
cheaply and without a model.

The heuristic counts interrogative clauses, not question words or "und"s:

- every sentence that asks (ends with "?", starts with a question word, a verb-first question,
  an imperative such as "Erkläre"/"Explain", or holds "ich möchte wissen"/"I'd like to know")
  is one ask;
- a coordinating connector ("und", "sowie", "außerdem", "and", "as well as", "also", ...)
  starts another ask only when an interrogative clause follows it: a question word ("und wann
  ..."), "ob"/"whether", or a verb-first clause with its own subject ("und gibt es ...", "and
  is there ..."). So "Was kostet Strom und Gas?" and "Wer ist für Einkauf und Vertrieb
  zuständig?" stay one question: "und" joins nouns there;
- enumerations ("1) ... 2) ...", "a) ... b)", bullet lines, "erstens ... zweitens",
  "firstly ... secondly") count their items.

The result is the larger of the ask count and the enumeration count. It errs toward "one
question" on unusual grammar, since a false "multi-part" would blame question style for
failures it did not cause.

It runs at ingest for every answer, on whatever question the API was sent (up to 50,000
characters), so its work is linear in the question's length: every character is read a bounded
number of times (a skipped full stop, as in "z. B.", does not make the sentence so far be read
again), and the word lists are looked up once a token rather than scanned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_WORD_RE = re.compile(r"[^\W\d_][^\W_]*(?:['’][^\W_]+)*|\d+")
# Sentence ends: ? ! ; newlines, and ". " / ": " (a full stop after an abbreviation or an
# ordinal number is skipped below).
_BREAK_RE = re.compile(r"[?!;\n]+|[.:](?=\s)")
# Enumerated items: "1)", "(2)", "a)" anywhere after a space; "1." only at a line start or
# after a sentence end, as "am 1. und 2. Mai" is a date, not a list.
_ITEM_RE = re.compile(
    r"(?:^|(?<=[\s:;?!.]))\(?(\d{1,2}|[a-h])\)(?=\s)|(?:^|(?<=[\n:;?!]))[ \t]*(\d{1,2})\.(?=\s)",
    re.MULTILINE,
)
_BULLET_RE = re.compile(r"^[ \t]*[-*•–][ \t]+\S", re.MULTILINE)
_LABEL_RE = re.compile(r"^\s*(?:\(?(?:\d{1,2}|[a-h])[).]|[-*•–])\s+")


@dataclass(frozen=True, slots=True)
class _Lexicon:
    question_words: frozenset[str]
    whether: frozenset[str]  # "ob", "whether": an embedded question
    verbs: frozenset[str]  # finite verbs that open a verb-first question
    subjects: frozenset[str]  # what may follow such a verb as its subject
    pronouns: frozenset[str]  # personal pronouns: make any lowercase word a verb-first opener
    capitalised_subjects: bool  # English: a capitalised word after the verb is a name
    imperatives: frozenset[str]
    requests: tuple[tuple[str, ...], ...]
    connectors: tuple[tuple[str, ...], ...]
    fillers: frozenset[str]  # skipped after a connector: "und außerdem wann ..."
    pairs: frozenset[str]  # "zwischen", "between": the next connector belongs to them
    not_verbs: frozenset[str]  # lowercase words that are never a verb before a pronoun
    ordinals: tuple[str, ...]  # patterns for "first", "second", ... in order
    abbreviations: frozenset[str]
    tags: frozenset[str]  # one-word tag questions that ask nothing new: "Oder?", "Right?"
    # Derived once from the above, for _sentence_asks, which runs for every sentence: words a
    # sentence may lead with, connectors by their first word, the ordinal patterns compiled.
    leading: frozenset[str] = field(init=False, compare=False)
    connectors_by_first: dict[str, list[tuple[str, ...]]] = field(init=False, compare=False)
    leading_ordinals: tuple[re.Pattern[str], ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        by_first: dict[str, list[tuple[str, ...]]] = {}
        for phrase in self.connectors:
            by_first.setdefault(phrase[0], []).append(phrase)
        derived = {
            "leading": self.fillers | {c[0] for c in self.connectors if len(c) == 1},
            "connectors_by_first": by_first,
            "leading_ordinals": tuple(
                re.compile(rf"^\s*(?:{pattern})[\s,]*", re.IGNORECASE) for pattern in self.ordinals
            ),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)  # frozen


_GERMAN = _Lexicon(
    question_words=frozenset(
        "wer wen wem wessen was wann wo wohin woher wie warum weshalb wieso weswegen welche "
        "welcher welches welchen welchem wieviel wieviele womit wofür worauf worüber wozu "
        "wodurch woran worin wovon".split()
    ),
    whether=frozenset({"ob"}),
    verbs=frozenset(
        "ist sind bin bist seid war waren wäre wären wird werden wirst wurde wurden würde "
        "würden hat haben habe hast hatte hätte hätten kann können kannst könnte könnten muss "
        "müssen musst müsste muß darf dürfen darfst dürfte soll sollen sollte sollten sollst "
        "will wollen willst möchte möchten mag gibt gab gilt gelten geht gehen kommt kommen "
        "brauche braucht brauchen benötige benötigt bekomme bekommt bekommen erhalte erhält "
        "erhalten zahlt zahle zahlen bezahle bezahlt übernimmt übernehmen deckt reicht läuft "
        "fällt fallen kostet kosten steht stehen gehört gehören bleibt bleiben lässt weiß mache "
        "macht machen tut tun finde findet liegt dauert endet beginnt verfällt zählt hilft "
        "betrifft melde meldet bleibt".split()
    ),
    subjects=frozenset(
        "ich du er sie es man wir ihr der die das den dem des ein eine einen einem einer mein "
        "meine meinen dein deine sein seine unser unsere euer eure dieser diese dieses jemand "
        "mir mich".split()
    ),
    pronouns=frozenset("ich du er es man wir ihr".split()),
    capitalised_subjects=False,  # every German noun is capitalised: "und hat Prokura"
    imperatives=frozenset(
        "nenne nennen erkläre erklären erklär beschreibe beschreiben liste gib geben zeige "
        "zeigen fasse vergleiche vergleichen sag sage sagen schreibe prüfe prüfen berechne "
        "berechnen schildere".split()
    ),
    requests=(
        ("möchte", "wissen"),
        ("möchten", "wissen"),
        ("gern", "wissen"),
        ("gerne", "wissen"),
        ("wüsste", "gern"),
        ("wüsste", "gerne"),
        ("interessiert", "mich"),
        ("frage", "mich"),
        ("bitte", "um"),
    ),
    connectors=(
        ("sowie",),
        ("und",),
        ("außerdem",),
        ("zudem",),
        ("ferner",),
        ("plus",),
        ("weiterhin",),
    ),
    fillers=frozenset("außerdem zudem auch noch dann bitte ferner weiterhin danach".split()),
    pairs=frozenset({"zwischen"}),
    not_verbs=frozenset(
        "und oder aber dann auch noch nur wenn dass weil ob für mit von zu bei nach aus auf an "
        "in über unter vor hinter zwischen durch gegen ohne um seit bis ab als wie so".split()
    ),
    ordinals=(
        r"\b(?:erstens|zum einen)\b",
        r"\b(?:zweitens|zum anderen|zum andern)\b",
        r"\bdrittens\b",
        r"\bviertens\b",
        r"\bfünftens\b",
    ),
    abbreviations=frozenset(
        "z b d h u a bzw ca nr usw etc ggf evtl inkl vgl abs str dr max min mio mrd s o "
        "tel".split()
    ),
    tags=frozenset({"oder", "richtig", "stimmt's", "ja", "nein", "ok", "okay", "gell", "ne"}),
)

_ENGLISH = _Lexicon(
    question_words=frozenset(
        "what when where who whom whose which why how what's who's where's how's when's "
        "why's".split()
    ),
    whether=frozenset({"whether"}),
    verbs=frozenset(
        "is are was were am do does did can could should would will shall may might must has "
        "have had isn't aren't wasn't weren't don't doesn't didn't can't couldn't shouldn't "
        "wouldn't won't hasn't haven't hadn't mustn't".split()
    ),
    subjects=frozenset(
        "i you he she it we they there this that these those the a an my your his her its our "
        "their any some someone anyone anybody somebody".split()
    ),
    pronouns=frozenset(),  # English verb-first questions always start with an auxiliary
    capitalised_subjects=True,  # "and is VAT included": a name is the subject
    imperatives=frozenset(
        "explain list describe tell give show summarize summarise compare name calculate "
        "provide outline state".split()
    ),
    requests=(
        ("want", "to", "know"),
        ("like", "to", "know"),
        ("wondering",),
        ("tell", "me"),
        ("let", "me", "know"),
    ),
    connectors=(
        ("as", "well", "as"),
        ("and",),
        ("plus",),
        ("also",),
        ("additionally",),
        ("furthermore",),
        ("moreover",),
    ),
    fillers=frozenset("also then please additionally furthermore moreover".split()),
    pairs=frozenset({"between", "both"}),
    not_verbs=frozenset(),
    # "first" alone is common ("the first payment"); as a list word it has a comma or -ly.
    ordinals=(
        r"\bfirst(?:ly\b|\s*,)",
        r"\bsecond(?:ly\b|\s*,)",
        r"\bthird(?:ly\b|\s*,)",
        r"\bfourth(?:ly\b|\s*,)",
    ),
    abbreviations=frozenset("e g i etc vs dr mr mrs ms no st approx incl".split()),
    tags=frozenset({"or", "right", "ok", "okay", "yes", "no", "correct", "true"}),
)


def _merge(a: _Lexicon, b: _Lexicon) -> _Lexicon:
    return _Lexicon(
        question_words=a.question_words | b.question_words,
        whether=a.whether | b.whether,
        verbs=a.verbs | b.verbs,
        subjects=a.subjects | b.subjects,
        pronouns=a.pronouns | b.pronouns,
        capitalised_subjects=False,
        imperatives=a.imperatives | b.imperatives,
        requests=a.requests + b.requests,
        connectors=a.connectors + b.connectors,
        fillers=a.fillers | b.fillers,
        pairs=a.pairs | b.pairs,
        not_verbs=a.not_verbs | b.not_verbs,
        ordinals=tuple(f"{x}|{y}" for x, y in zip(a.ordinals, b.ordinals, strict=False)),
        abbreviations=a.abbreviations | b.abbreviations,
        tags=a.tags | b.tags,
    )


# Other languages get both word lists: the product runs German and English use cases, and a
# guess from both is better than none.
_BOTH = _merge(_GERMAN, _ENGLISH)


def _lexicon(language: str) -> _Lexicon:
    code = (language or "").lower().replace("_", "-").split("-")[0]
    return {"de": _GERMAN, "en": _ENGLISH}.get(code, _BOTH)


def is_multi_part(question: str, language: str = "de") -> bool:
    """True when the question asks for two or more things."""
    return question_parts(question, language) >= 2


def question_parts(question: str, language: str = "de") -> int:
    """Estimated number of sub-questions in ``question`` (at least 1)."""
    lex = _lexicon(language)
    text = question.replace("’", "'").strip()
    asks = sum(_sentence_asks(sentence, ended, lex) for sentence, ended in _sentences(text, lex))
    return max(1, asks, _enumerated(text, lex))


def _sentences(text: str, lex: _Lexicon) -> list[tuple[str, bool]]:
    """(sentence, ends with "?") pieces of the text."""
    out = []
    start = 0
    # The last word of the sentence so far, and where the text after it begins. Only the text
    # since the previous break is read for it (a word never spans a break), so each character
    # is read once however many full stops are skipped: "a. " * 16000 was quadratic.
    last, read = "", 0
    for m in _BREAK_RE.finditer(text):
        if m.group() == ".":
            words = _WORD_RE.findall(text, read, m.start())
            if words:
                last = words[-1].lower()
            read = m.end()
            if not last or last.isdigit() or len(last) == 1 or last in lex.abbreviations:
                continue  # "z. B.", "1. Januar", "No. 5": not the end of a sentence
        out.append((text[start : m.start()], "?" in m.group()))
        start = read = m.end()
        last = ""
    out.append((text[start:], False))
    return [(s, ended) for s, ended in out if s.strip()]


def _enumerated(text: str, lex: _Lexicon) -> int:
    """Items of an explicit enumeration (numbered, lettered, bullets, ordinal words); 0 if none."""
    best = 0
    labels = [a or b for a, b in _ITEM_RE.findall(text)]
    for first in ("1", "a"):
        # The longest run 1, 2, 3, ... (or a, b, c, ...) in text order.
        expected, run = first, 0
        for label in labels:
            if label.lower() == expected:
                run += 1
                expected = str(int(expected) + 1) if expected.isdigit() else chr(ord(expected) + 1)
        if run >= 2:
            best = max(best, run)
    bullets = len(_BULLET_RE.findall(text))
    if bullets >= 2:
        best = max(best, bullets)
    lowered = text.lower()
    found = 0
    for pattern in lex.ordinals:
        if not re.search(pattern, lowered):
            break
        found += 1
    if found >= 2:
        best = max(best, found)
    return best


def _sentence_asks(sentence: str, ended_with_question_mark: bool, lex: _Lexicon) -> int:
    # An enumeration label, a bullet, an ordinal or a leading connector ("Und wann ...?")
    # does not change what a sentence asks.
    sentence = _LABEL_RE.sub("", sentence, count=1)
    for ordinal in lex.leading_ordinals:
        sentence = ordinal.sub("", sentence)
    tokens = _WORD_RE.findall(sentence)
    skipped = 0
    while skipped < len(tokens) and tokens[skipped].lower() in lex.leading:
        skipped += 1
    tokens = tokens[skipped:]
    if not tokens:
        return 0
    lower = [t.lower() for t in tokens]
    imperative = lower[0] in lex.imperatives
    if ended_with_question_mark:
        # "Warum?" asks; "Oder?", "Right?" only seek agreement.
        asks = len(tokens) >= 2 or lower[0] not in lex.tags
    else:
        asks = imperative or _opens_question(tokens, lower, 0, lex) or _has_phrase(
            lower, lex.requests
        )
    count = 1 if asks else 0

    segment_start = 0  # where the current clause began, for the "at least two words" rule
    pair_open = False  # "zwischen A und B", "between X and Y": that "und" joins the pair
    i = 0
    while i < len(lower):
        if lower[i] in lex.pairs:
            pair_open = True
        # Only a connector whose first word is the token can start at it (in lexicon order).
        connector = next(
            (c for c in lex.connectors_by_first.get(lower[i], ()) if _phrase_at(lower, i, c)),
            None,
        )
        if connector is None or i == 0:
            i += 1
            continue
        j = i + len(connector)
        while j < len(lower) and lower[j] in lex.fillers:
            j += 1
        if pair_open and connector[0] in ("und", "and"):
            pair_open = False
            i = j
            continue
        # "Wie und wann ...", "How and when ...": one clause with two question words.
        long_enough = i - segment_start >= 2
        if long_enough and j < len(lower) and (
            _opens_question(tokens, lower, j, lex)
            or (imperative and lower[j] in lex.imperatives)
        ):
            count += 1
            segment_start = j
        i = j
    return count


def _opens_question(tokens: list[str], lower: list[str], j: int, lex: _Lexicon) -> bool:
    """Does an interrogative clause start at token j?"""
    if j >= len(lower):
        return False
    word = lower[j]
    if word in lex.question_words or word in lex.whether:
        return True
    if j + 1 >= len(lower):
        return False
    following, original = lower[j + 1], tokens[j + 1]
    if word in lex.verbs:
        if following in lex.subjects:
            return True
        return lex.capitalised_subjects and original[:1].isupper()
    # A German verb not in the list, followed by a personal pronoun: "und melde ich mich".
    return (
        following in lex.pronouns
        and tokens[j].islower()
        and word not in lex.not_verbs
        and word not in lex.subjects
        and word not in lex.fillers
    )


def _phrase_at(lower: list[str], i: int, phrase: tuple[str, ...]) -> bool:
    return tuple(lower[i : i + len(phrase)]) == phrase


def _has_phrase(lower: list[str], phrases: tuple[tuple[str, ...], ...]) -> bool:
    """Does any of ``phrases`` occur in ``lower``? Each token is looked at once."""
    firsts = {phrase[0] for phrase in phrases}
    return any(
        _phrase_at(lower, i, phrase)
        for i, word in enumerate(lower)
        if word in firsts
        for phrase in phrases
        if phrase[0] == word
    )
