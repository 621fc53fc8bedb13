"""The judge's wording (tier 2): decomposing an answer into claims, verifying one claim.

The prompt text lives here, apart from the client and the orchestration, so that it can be read,
reviewed and tested on its own. Every stored verdict carries ``PROMPT_VERSION``: scores from
different wordings are not comparable, so the version changes with every wording change (a test
pins the texts by hash and fails when they change without a new version).

The German verification prompt is the article's ``PRUEF_PROMPT``, word for word. The English one
asks for the same three German words, so that parsing, storage and the review screens know one
vocabulary whatever the use case's language.
"""

from collections.abc import Mapping, Sequence

PROMPT_VERSION = "2026-12-v2"

SUPPORTED_LANGUAGES = ("de", "en")

# --- Decomposition: answer -> claims -------------------------------------------------------

DECOMPOSE_SYSTEM_DE = """\
Zerlege die Antwort eines Assistenten in Aussagen, die einzeln gegen die Quellen geprüft werden.
- Je Aussage genau eine Tatsache, ohne die anderen verständlich (Pronomen und Verweise ersetzt).
- Zahlen bleiben mit Einheit und Einschränkung („mindestens 5 Jahre“).
- Nur was die Antwort behauptet, nichts hinzufügen, weglassen oder bewerten; eine knappe \
Antwort („Ja.“) mit der Frage ergänzen.
- Keine Aussagen für Begrüßungen, Überleitungen, Rückfragen, Unsicherheit; weiß die Antwort es \
nicht: [].
- In der Sprache der Antwort.
Gib nur ein JSON-Array von Zeichenketten aus.
Beispiel: „Er wird alle 5 Jahre geprüft. Ich hoffe, das hilft!“ (zum Druckbehälter) → \
["Der Druckbehälter wird alle 5 Jahre geprüft."]"""

DECOMPOSE_USER_DE = """\
Frage:
{question}

Antwort:
{answer}

Aussagen als JSON-Array:"""

DECOMPOSE_SYSTEM_EN = """\
Split an assistant's answer into claims that are each checked against the sources.
- Each claim one fact, understandable without the others (pronouns and references replaced).
- Keep numbers with their unit and qualifier ("at least 5 years").
- Only what the answer asserts, add, leave out or judge nothing; complete a short answer \
("Yes.") from the question.
- No claims for greetings, transitions, follow-up questions, uncertainty; if the answer does \
not know: [].
- In the language of the answer.
Output only a JSON array of strings.
Example: "It is inspected every 5 years. Hope this helps!" (on the pressure vessel) → \
["The pressure vessel is inspected every 5 years."]"""

DECOMPOSE_USER_EN = """\
Question:
{question}

Answer:
{answer}

Claims as a JSON array:"""

# Sent after an unparseable decomposition, with that reply as the assistant's turn: at
# temperature 0 the same request would most likely get the same reply again.
DECOMPOSE_RETRY_DE = (
    "Das war kein JSON-Array von Zeichenketten. Gib nur das JSON-Array der Aussagen aus, "
    "ohne weiteren Text, oder [] wenn die Antwort keine Aussagen enthält."
)
DECOMPOSE_RETRY_EN = (
    "That was not a JSON array of strings. Output only the JSON array of claims, with no other "
    "text, or [] if the answer contains no claims."
)

# --- Verification: one claim against the context --------------------------------------------

VERIFY_SYSTEM_DE = (
    "Du bist ein sorgfältiger Prüfer. Du beurteilst nur, ob eine Aussage durch den gegebenen "
    "Kontext gedeckt ist, nicht, ob sie wahr ist. Du antwortest mit genau einem Wort."
)

# The article's PRUEF_PROMPT, unchanged (placeholders included).
VERIFY_USER_DE = """Du prüfst, ob eine Aussage durch den Kontext gedeckt ist.

Kontext:
{kontext}

Aussage: {aussage}

Antworte mit genau einem Wort:
GEDECKT   — die Aussage folgt direkt aus dem Kontext
TEILWEISE — Teile folgen, andere nicht
UNGEDECKT — die Aussage steht nicht im Kontext oder widerspricht ihm"""

VERIFY_SYSTEM_EN = (
    "You are a careful checker. You only judge whether a claim is supported by the given "
    "context, not whether it is true. You answer with exactly one word, and that word is always "
    "one of the three German labels you are given."
)

VERIFY_USER_EN = """You check whether a claim is supported by the context.

Context:
{context}

Claim: {claim}

Answer with exactly one word, one of these three German words:
GEDECKT   — (supported) the claim follows directly from the context
TEILWEISE — (partly) some parts follow, others do not
UNGEDECKT — (not supported) the claim is not in the context or contradicts it"""

VERIFY_RETRY_DE = (
    "Das war nicht eines der drei Wörter. Antworte mit genau einem Wort: "
    "GEDECKT, TEILWEISE oder UNGEDECKT."
)
VERIFY_RETRY_EN = (
    "That was not one of the three words. Answer with exactly one word: "
    "GEDECKT, TEILWEISE or UNGEDECKT."
)

# Stands in for an empty context, so the judge does not read the blank as a formatting slip.
NO_CONTEXT_DE = "(kein Kontext abgerufen)"
NO_CONTEXT_EN = "(no context retrieved)"

# Every piece of wording, by name: the version pin hashes this mapping.
PROMPT_TEXTS: Mapping[str, str] = {
    "DECOMPOSE_SYSTEM_DE": DECOMPOSE_SYSTEM_DE,
    "DECOMPOSE_USER_DE": DECOMPOSE_USER_DE,
    "DECOMPOSE_SYSTEM_EN": DECOMPOSE_SYSTEM_EN,
    "DECOMPOSE_USER_EN": DECOMPOSE_USER_EN,
    "DECOMPOSE_RETRY_DE": DECOMPOSE_RETRY_DE,
    "DECOMPOSE_RETRY_EN": DECOMPOSE_RETRY_EN,
    "VERIFY_SYSTEM_DE": VERIFY_SYSTEM_DE,
    "VERIFY_USER_DE": VERIFY_USER_DE,
    "VERIFY_SYSTEM_EN": VERIFY_SYSTEM_EN,
    "VERIFY_USER_EN": VERIFY_USER_EN,
    "VERIFY_RETRY_DE": VERIFY_RETRY_DE,
    "VERIFY_RETRY_EN": VERIFY_RETRY_EN,
    "NO_CONTEXT_DE": NO_CONTEXT_DE,
    "NO_CONTEXT_EN": NO_CONTEXT_EN,
}

_TEXTS = {
    "de": {
        "decompose_system": DECOMPOSE_SYSTEM_DE,
        "decompose_user": DECOMPOSE_USER_DE,
        "decompose_retry": DECOMPOSE_RETRY_DE,
        "verify_system": VERIFY_SYSTEM_DE,
        "verify_user": VERIFY_USER_DE,
        "verify_retry": VERIFY_RETRY_DE,
        "no_context": NO_CONTEXT_DE,
    },
    "en": {
        "decompose_system": DECOMPOSE_SYSTEM_EN,
        "decompose_user": DECOMPOSE_USER_EN,
        "decompose_retry": DECOMPOSE_RETRY_EN,
        "verify_system": VERIFY_SYSTEM_EN,
        "verify_user": VERIFY_USER_EN,
        "verify_retry": VERIFY_RETRY_EN,
        "no_context": NO_CONTEXT_EN,
    },
}


def _texts(language: str) -> dict[str, str]:
    try:
        return _TEXTS[language]
    except (KeyError, TypeError):
        raise ValueError(
            f"no judge prompt for language {language!r}; supported: "
            + ", ".join(SUPPORTED_LANGUAGES)
        ) from None


def format_context(chunks: Sequence[str]) -> str:
    """The retrieved chunks as one context, numbered by rank: "[1] …\\n\\n[2] …".

    A blank chunk is left out but keeps its number, so "[3]" is always the third-ranked chunk,
    as the RAG service and the answer page count.
    """
    return "\n\n".join(
        f"[{rank}] {chunk.strip()}" for rank, chunk in enumerate(chunks, 1) if chunk.strip()
    )


def decompose_messages(*, question: str, answer: str, language: str) -> list[dict[str, str]]:
    """Chat messages asking the judge to split ``answer`` into claims (a JSON array)."""
    texts = _texts(language)
    # str.format does not look inside the substituted values, so braces in them are safe.
    user = texts["decompose_user"].format(question=question.strip(), answer=answer.strip())
    return [
        {"role": "system", "content": texts["decompose_system"]},
        {"role": "user", "content": user},
    ]


def decompose_retry_messages(
    *, question: str, answer: str, language: str, previous_reply: str
) -> list[dict[str, str]]:
    """The decomposition again, with the unparseable reply and a reminder of the format."""
    texts = _texts(language)
    return [
        *decompose_messages(question=question, answer=answer, language=language),
        *_previous(previous_reply),
        {"role": "user", "content": texts["decompose_retry"]},
    ]


def verify_messages(*, context: str, claim: str, language: str) -> list[dict[str, str]]:
    """Chat messages asking the judge whether ``claim`` is supported by ``context``."""
    texts = _texts(language)
    shown = context if context.strip() else texts["no_context"]
    # Both names are passed so the German template keeps the article's placeholders.
    user = texts["verify_user"].format(kontext=shown, aussage=claim, context=shown, claim=claim)
    return [
        {"role": "system", "content": texts["verify_system"]},
        {"role": "user", "content": user},
    ]


def verify_retry_messages(
    *, context: str, claim: str, language: str, previous_reply: str
) -> list[dict[str, str]]:
    """The verification again, with the unparseable reply and a reminder of the three words."""
    texts = _texts(language)
    return [
        *verify_messages(context=context, claim=claim, language=language),
        *_previous(previous_reply),
        {"role": "user", "content": texts["verify_retry"]},
    ]


def _previous(reply: str) -> list[dict[str, str]]:
    # Some OpenAI-compatible servers reject an empty assistant turn; the reminder alone is
    # enough then.
    return [{"role": "assistant", "content": reply}] if reply.strip() else []
