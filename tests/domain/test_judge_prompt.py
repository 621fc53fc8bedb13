"""The judge's wording (judging.domain.judge_prompt): languages, placeholders, version
pin."""

import hashlib
import json

import pytest

from judging.domain import judge_prompt
from judging.domain.judge_prompt import (
    NO_CONTEXT_DE,
    NO_CONTEXT_EN,
    PROMPT_TEXTS,
    PROMPT_VERSION,
    VERIFY_RETRY_DE,
    VERIFY_RETRY_EN,
    decompose_messages,
    decompose_retry_messages,
    format_context,
    verify_messages,
    verify_retry_messages,
)

# One hash per released wording. Changed a prompt? Bump PROMPT_VERSION and add its hash here:
# stored scores carry the version, and scores of different wordings must not be mixed unseen.
PINNED = {
    "2026-12-v1": "48ba97dec4756f9d2164ed7f738c2a307fbf71cfa7bb22939c05826ceeb98705",
    "2026-12-v2": "b2987a4ecd01a685189d0e6f5a18834259970c6d023d29a1a45c2587638083fd",
}

# The article's PRUEF_PROMPT (../shared/000_0c5f82130b2317d6.txt), copied here because a clone
# of the repository has no ../shared.
ARTICLE_PRUEF_PROMPT = """Du prüfst, ob eine Aussage durch den Kontext gedeckt ist.

Kontext:
{kontext}

Aussage: {aussage}

Antworte mit genau einem Wort:
GEDECKT   — die Aussage folgt direkt aus dem Kontext
TEILWEISE — Teile folgen, andere nicht
UNGEDECKT — die Aussage steht nicht im Kontext oder widerspricht ihm"""

CONTEXT = "[1] Druckbehälter über 1.000 Liter werden alle 5 Jahre geprüft.\n\n[2] Die {Freigabe}"
CLAIM = "Der Druckbehälter wird alle 5 Jahre geprüft {sic}."


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
        name
        for name, value in vars(judge_prompt).items()
        if name.isupper() and isinstance(value, str) and name != "PROMPT_VERSION"
    }
    assert constants == set(PROMPT_TEXTS)
    assert all(PROMPT_TEXTS[name] is getattr(judge_prompt, name) for name in constants)


def test_the_pin_notices_a_one_character_change():
    changed = dict(PROMPT_TEXTS)
    changed["VERIFY_USER_DE"] = changed["VERIFY_USER_DE"].replace("genau", "genau ")
    assert _hash(changed) != _hash(PROMPT_TEXTS)


def test_german_verification_is_the_articles_prompt_word_for_word():
    messages = verify_messages(context=CONTEXT, claim=CLAIM, language="de")
    assert messages[1]["content"] == ARTICLE_PRUEF_PROMPT.format(kontext=CONTEXT, aussage=CLAIM)


@pytest.mark.parametrize("language", ["de", "en"])
def test_verification_shape_and_verbatim_inputs(language):
    messages = verify_messages(context=CONTEXT, claim=CLAIM, language=language)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    # Braces in the inputs survive untouched: str.format does not look inside values.
    assert CONTEXT in user
    assert CLAIM in user
    assert user.index(CONTEXT) < user.index(CLAIM)
    for word in ("GEDECKT", "TEILWEISE", "UNGEDECKT"):
        assert f"\n{word}" in user


def test_english_verification_asks_for_the_same_german_words_explained_in_english():
    user = verify_messages(context=CONTEXT, claim=CLAIM, language="en")[1]["content"]
    assert "Claim: " + CLAIM in user
    assert "Context:\n" + CONTEXT in user
    assert "exactly one word" in user
    assert "German" in user
    lines = {line.split()[0]: line for line in user.splitlines() if line[:1].isupper()}
    assert "follows directly from the context" in lines["GEDECKT"]
    assert "some parts follow, others do not" in lines["TEILWEISE"]
    assert "not in the context or contradicts it" in lines["UNGEDECKT"]
    assert "Aussage" not in user and "Kontext" not in user


@pytest.mark.parametrize(
    ("language", "marker", "word"),
    [("de", "Aussage:", "Kontext"), ("en", "Claim:", "Context")],
)
def test_language_switch(language, marker, word):
    verify = verify_messages(context=CONTEXT, claim=CLAIM, language=language)
    decompose = decompose_messages(question="Q?", answer="A.", language=language)
    assert marker in verify[1]["content"]
    assert word in verify[1]["content"]
    other = "en" if language == "de" else "de"
    assert verify != verify_messages(context=CONTEXT, claim=CLAIM, language=other)
    assert decompose != decompose_messages(question="Q?", answer="A.", language=other)


@pytest.mark.parametrize(("language", "marker"), [("de", NO_CONTEXT_DE), ("en", NO_CONTEXT_EN)])
@pytest.mark.parametrize("context", ["", "  \n "])
def test_empty_context_is_said_rather_than_left_blank(language, marker, context):
    user = verify_messages(context=context, claim=CLAIM, language=language)[1]["content"]
    assert marker in user


@pytest.mark.parametrize(
    ("language", "words"),
    [
        ("de", ["JSON-Array", "Pronomen", "Einheit", "[]", "genau eine Tatsache"]),
        ("en", ["JSON array", "pronouns", "unit", "[]", "one fact"]),
    ],
)
def test_decomposition_prompt(language, words):
    question = "Wie oft wird geprüft und wer gibt {frei}?"
    answer = "Alle 5 Jahre.\nDie Sicherheitsfachkraft gibt frei."
    messages = decompose_messages(question=question, answer=answer, language=language)
    assert [m["role"] for m in messages] == ["system", "user"]
    for word in words:
        assert word in messages[0]["content"]
    user = messages[1]["content"]
    assert question in user
    assert answer in user
    assert user.index(question) < user.index(answer)


@pytest.mark.parametrize("language", ["fr", "DE", "de-DE", "", " de", None])
def test_unknown_language_raises(language):
    with pytest.raises(ValueError, match="language"):
        verify_messages(context=CONTEXT, claim=CLAIM, language=language)
    with pytest.raises(ValueError, match="language"):
        decompose_messages(question="Q?", answer="A.", language=language)
    with pytest.raises(ValueError, match="language"):
        verify_retry_messages(context=CONTEXT, claim=CLAIM, language=language, previous_reply="x")
    with pytest.raises(ValueError, match="language"):
        decompose_retry_messages(question="Q?", answer="A.", language=language, previous_reply="x")


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ([], ""),
        (["eins"], "[1] eins"),
        (["eins", "zwei", "drei"], "[1] eins\n\n[2] zwei\n\n[3] drei"),
        # Rank order is kept, not sorted.
        (["b", "a"], "[1] b\n\n[2] a"),
        # A blank chunk is left out but keeps its rank number.
        (["eins", "  ", "drei"], "[1] eins\n\n[3] drei"),
        (["  eins\n", "zwei\nmit Zeile"], "[1] eins\n\n[2] zwei\nmit Zeile"),
        (("tuple", "geht"), "[1] tuple\n\n[2] geht"),
    ],
)
def test_format_context(chunks, expected):
    assert format_context(chunks) == expected


@pytest.mark.parametrize(
    ("language", "reminder"), [("de", VERIFY_RETRY_DE), ("en", VERIFY_RETRY_EN)]
)
def test_verify_retry_repeats_the_request_with_the_reply_and_a_reminder(language, reminder):
    first = verify_messages(context=CONTEXT, claim=CLAIM, language=language)
    retry = verify_retry_messages(
        context=CONTEXT, claim=CLAIM, language=language, previous_reply="Gedeckt, weil"
    )
    assert retry[:2] == first
    assert retry[2] == {"role": "assistant", "content": "Gedeckt, weil"}
    assert retry[3] == {"role": "user", "content": reminder}
    for word in ("GEDECKT", "TEILWEISE", "UNGEDECKT"):
        assert word in reminder


@pytest.mark.parametrize("language", ["de", "en"])
def test_decompose_retry_repeats_the_request_with_the_reply_and_a_reminder(language):
    first = decompose_messages(question="Q?", answer="A.", language=language)
    retry = decompose_retry_messages(
        question="Q?", answer="A.", language=language, previous_reply="Sure! Here they are"
    )
    assert retry[:2] == first
    assert retry[2] == {"role": "assistant", "content": "Sure! Here they are"}
    assert retry[3]["role"] == "user"
    assert "JSON" in retry[3]["content"] and "[]" in retry[3]["content"]


def test_a_blank_previous_reply_is_not_sent_as_an_empty_assistant_turn():
    retry = verify_retry_messages(context=CONTEXT, claim=CLAIM, language="de", previous_reply=" ")
    assert [m["role"] for m in retry] == ["system", "user", "user"]
    retry = decompose_retry_messages(question="Q", answer="A", language="en", previous_reply="")
    assert [m["role"] for m in retry] == ["system", "user", "user"]


def test_version_is_a_plain_string():
    assert isinstance(PROMPT_VERSION, str) and PROMPT_VERSION.strip() == PROMPT_VERSION
    assert 0 < len(PROMPT_VERSION) <= 50  # the runs' prompt_version column
