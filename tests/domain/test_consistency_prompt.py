"""The self-consistency judge wording and its parsing (investigations.domain.consistency.prompt)."""

import hashlib
import json

import pytest

from investigations.domain.consistency import prompt
from investigations.domain.consistency.prompt import (
    MAX_REASON_CHARS,
    PROMPT_TEXTS,
    PROMPT_VERSION,
    RETRY_DE,
    RETRY_EN,
    ContradictionReply,
    contradiction_messages,
    contradiction_retry_messages,
    parse_contradiction,
)

# One hash per released wording. Changed the wording? Bump PROMPT_VERSION and pin the new hash:
# verdicts carry the version, and verdicts from different wordings must not be mixed unseen.
PINNED = {
    "consistency-2026-12-v1": "de13cb725ef6949cebe0e2094f9e6595f3cf61635fc9d879e27e11cf3e40fa50",
}

QUESTION = "Wie oft muss der Behälter {geprüft} werden?"
SAMPLES = ["Die Frist beträgt 5 Jahre.", "Alle zwei Jahre.", "Je nach Behältergröße."]


def _hash(texts):
    blob = json.dumps(dict(texts), sort_keys=True, ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


def test_wording_is_pinned_to_the_prompt_version():
    current = _hash(PROMPT_TEXTS)
    assert PINNED.get(PROMPT_VERSION) == current, (
        f"The prompt wording changed (sha256 {current}). Bump PROMPT_VERSION and pin the new "
        "hash in PINNED."
    )


def test_every_wording_constant_is_covered_by_the_pin():
    constants = {
        name for name, value in vars(prompt).items()
        if name.isupper() and not name.startswith("_") and isinstance(value, str)
        and name != "PROMPT_VERSION"
    }
    assert constants == set(PROMPT_TEXTS)


@pytest.mark.parametrize(
    ("language", "one_word", "words", "label"),
    [
        ("de", "genau einem Wort", ("WIDERSPRUCH", "KONSISTENT"), "Antwort {}:"),
        ("en", "exactly one word", ("CONTRADICTION", "CONSISTENT"), "Answer {}:"),
    ],
)
def test_messages_hold_the_question_and_each_sample_numbered(language, one_word, words, label):
    messages = contradiction_messages(question=QUESTION, samples=SAMPLES, language=language)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert QUESTION in user and one_word in user
    assert all(word in user for word in words)
    positions = [user.index(f"{label.format(n)}\n{text}") for n, text in enumerate(SAMPLES, 1)]
    assert positions == sorted(positions)
    # Deterministic: the same input gives the same messages.
    assert messages == contradiction_messages(question=QUESTION, samples=SAMPLES,
                                              language=language)


def test_german_and_english_prompts_differ_in_language():
    de = contradiction_messages(question="Q", samples=["a", "b"], language="de")[1]["content"]
    en = contradiction_messages(question="Q", samples=["a", "b"], language="en")[1]["content"]
    assert "Frage:" in de and "Question:" not in de
    assert "Question:" in en and "Frage:" not in en


def test_blank_sample_is_shown_as_empty():
    user = contradiction_messages(question="Q", samples=["a", "  "], language="de")[1]["content"]
    assert "Antwort 2:\n(leere Antwort)" in user


def test_unknown_language_is_refused():
    with pytest.raises(ValueError, match="language"):
        contradiction_messages(question="Q", samples=["a"], language="fr")


@pytest.mark.parametrize(("language", "reminder"), [("de", RETRY_DE), ("en", RETRY_EN)])
def test_retry_repeats_the_ask_with_the_reply_and_a_reminder(language, reminder):
    messages = contradiction_retry_messages(question=QUESTION, samples=SAMPLES,
                                            language=language, reply="Vielleicht.")
    first = contradiction_messages(question=QUESTION, samples=SAMPLES, language=language)
    assert messages[:2] == first
    assert messages[2:] == [{"role": "assistant", "content": "Vielleicht."},
                            {"role": "user", "content": reminder}]


def test_retry_after_an_empty_reply_leaves_out_the_empty_turn():
    messages = contradiction_retry_messages(question="Q", samples=["a"], language="en",
                                            reply="  ")
    assert [m["role"] for m in messages] == ["system", "user", "user"]


# (reply, contradiction, reason)
PARSE_CASES = [
    ("WIDERSPRUCH", True, ""),
    ("KONSISTENT", False, ""),
    ("CONTRADICTION", True, ""),
    ("CONSISTENT", False, ""),
    ("widerspruch", True, ""),
    ("Konsistent", False, ""),
    ("  consistent \n", False, ""),
    ("WIDERSPRUCH.", True, ""),
    ("KONSISTENT!", False, ""),
    ("**WIDERSPRUCH**", True, ""),
    ("`CONSISTENT`", False, ""),
    ("„KONSISTENT“", False, ""),
    ("# CONTRADICTION", True, ""),
    ("```\nWIDERSPRUCH\n```", True, ""),
    ("WIDERSPRUCH\nAntwort 1 nennt 5 Jahre, Antwort 2 zwei Jahre.", True,
     "Antwort 1 nennt 5 Jahre, Antwort 2 zwei Jahre."),
    ("KONSISTENT\nGrund: Alle nennen das Bauamt.", False, "Alle nennen das Bauamt."),
    ("CONTRADICTION\n\n*Answer 3 says it depends.*", True, "Answer 3 says it depends."),
    ("WIDERSPRUCH: Antwort 3 weicht aus.", True, "Antwort 3 weicht aus."),
    ("**CONTRADICTION** — answer 2 names another office", True,
     "answer 2 names another office"),
    # The other language's words count too.
    ("CONTRADICTION", True, ""),
    ("konsistent", False, ""),
    # Negated and inverse forms that cannot be misread.
    ("KEIN WIDERSPRUCH", False, ""),
    ("No contradiction.", False, ""),
    ("INKONSISTENT", True, ""),
    # Anything else is unparseable, never a guess.
    ("", None, ""),
    ("   \n ", None, ""),
    ("Ja", None, ""),
    ("Die Antworten widersprechen sich.", None, ""),
    ("WIDERSPRUCH, aber nur teilweise", None, ""),
    ("Antwort: WIDERSPRUCH", None, ""),
    ("GEDECKT", None, ""),
    ("maybe consistent", None, ""),
    ("WIDERSPRUCH KONSISTENT", None, ""),
]


@pytest.mark.parametrize(("reply", "contradiction", "reason"), PARSE_CASES)
def test_parse_contradiction(reply, contradiction, reason):
    assert parse_contradiction(reply) == ContradictionReply(contradiction, reason)


def test_kein_widerspruch_is_never_a_contradiction():
    assert parse_contradiction("kein Widerspruch").contradiction is False


def test_reason_is_capped():
    parsed = parse_contradiction("WIDERSPRUCH\n" + "x" * 2000)
    assert parsed.contradiction is True and len(parsed.reason) == MAX_REASON_CHARS
