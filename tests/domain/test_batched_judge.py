"""Batched verification (monitoring.judging.domain.batched): the prompt's layout, the split into
calls, and the reading of a reply - complete, shuffled, partial, with extra text, unreadable, out
of range, a claim answered twice - with the judge's evidence per claim."""

import pytest

from monitoring.judging.domain.batched import (
    BATCHED_PROMPT_VERSION,
    MAX_REASON,
    BatchReading,
    Evidence,
    batches,
    parse_batch,
    texts_hash,
    verify_batch_messages,
)
from monitoring.judging.domain.judge_parse import Label

G, T, U = Label.GEDECKT, Label.TEILWEISE, Label.UNGEDECKT

# One hash per released wording: changed a batched prompt? Bump the version and pin the hash.
RELEASED = {"2026-12-b1": "ee9bfcfbe4affedbeea6c89005d922b0f3fd4a06f097468ed57d8d669f5716df"}


def test_the_wording_is_pinned_to_its_version() -> None:
    assert RELEASED[BATCHED_PROMPT_VERSION] == texts_hash()


def test_instructions_first_then_the_context_then_the_claims() -> None:
    messages = verify_batch_messages(
        chunks=["Prüfintervall: 5 Jahre.", "  ", "Kosten: 1.250 €."],
        claims=["Der Behälter wird alle\n5 Jahre geprüft.", "Die Prüfung kostet 1.250 €."],
        language="de",
    )
    system, user = messages
    assert system["role"] == "system" and user["role"] == "user"
    # The system message is the same for every answer (a provider caches it as the prefix).
    assert system == verify_batch_messages(chunks=["x"], claims=["y"], language="de")[0]
    assert "<Nummer der Aussage>: <WORT>" in system["content"]
    body = user["content"]
    # The context before the claims: an answer's calls share the prefix up to its claim list.
    assert body.index("[1] Prüfintervall") < body.index("[3] Kosten") < body.index("Aussagen:")
    assert "[2]" not in body, "a blank chunk is left out but keeps its number"
    # Numbered claims, one line each (a claim's own line break would read as a second line).
    assert body.endswith(
        "Aussagen:\n1. Der Behälter wird alle 5 Jahre geprüft.\n2. Die Prüfung kostet 1.250 €.")


def test_english_and_no_context() -> None:
    [system, user] = verify_batch_messages(chunks=[], claims=["It rains."], language="en")
    assert "three German words" in system["content"]
    assert user["content"] == "Context:\n(no context retrieved)\n\nClaims:\n1. It rains."
    with pytest.raises(ValueError, match="language"):
        verify_batch_messages(chunks=[], claims=["x"], language="fr")
    with pytest.raises(ValueError, match="at least one claim"):
        verify_batch_messages(chunks=["x"], claims=[], language="de")


def test_long_answers_are_split_into_calls() -> None:
    claims = [f"Aussage {i}" for i in range(23)]
    assert [len(b) for b in batches(claims, 10)] == [10, 10, 3]
    assert [c for b in batches(claims, 10) for c in b] == claims
    assert batches([], 10) == []
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError):
            batches(claims, bad)  # type: ignore[arg-type]


def test_a_complete_reply_with_evidence() -> None:
    reply = (
        "1: GEDECKT [2] Abschnitt 2 nennt das Intervall von 5 Jahren.\n"
        "2: UNGEDECKT [] Kein Abschnitt nennt eine Frist für Änderungen.\n"
        "3: TEILWEISE [1, 3] Der Betrag steht dort, die Währung nicht."
    )
    assert parse_batch(reply, 3) == BatchReading({
        1: Evidence(G, (2,), "Abschnitt 2 nennt das Intervall von 5 Jahren."),
        2: Evidence(U, (), "Kein Abschnitt nennt eine Frist für Änderungen."),
        3: Evidence(T, (1, 3), "Der Betrag steht dort, die Währung nicht."),
    }, ())


def test_shuffled_with_text_around_and_markdown() -> None:
    reply = (
        "Hier sind meine Urteile:\n\n"
        "**3: gedeckt** [1]\n"
        "- 1. TEILWEISE – nur die Zahl stimmt\n"
        '2) "UNGEDECKT."\n'
        "Ich hoffe, das hilft."
    )
    reading = parse_batch(reply, 3)
    assert {n: e.label for n, e in reading.verdicts.items()} == {1: T, 2: U, 3: G}
    assert reading.missing == ()
    assert reading.verdicts[3].chunks == (1,)
    assert reading.verdicts[1].reason == "nur die Zahl stimmt"


@pytest.mark.parametrize(("reply", "verdicts", "missing"), [
    # Partial: claim 2 has no line; it is asked again on its own.
    ("1: GEDECKT\n3: GEDECKT", {1: G, 3: G}, (2,)),
    # Unreadable words are not guessed at: "NICHT GEDECKT", "SUPPORTED", "GEDECKTE".
    ("1: NICHT GEDECKT\n2: SUPPORTED\n3: GEDECKTE", {}, (1, 2, 3)),
    # A number out of range is ignored, also one that looks like a claim of the next call.
    ("0: GEDECKT\n4: GEDECKT\n2: GEDECKT", {2: G}, (1, 3)),
    # Answered twice alike: one verdict; differently: the judge contradicted itself.
    ("1: GEDECKT\n1: GEDECKT [2]\n2: GEDECKT\n2: UNGEDECKT", {1: G}, (2, 3)),
    # Nothing readable at all.
    ("Ich kann das nicht beurteilen.", {}, (1, 2, 3)),
    ("", {}, (1, 2, 3)),
    # A verdict word elsewhere on a line is not a verdict line.
    ("Die Aussage 1 ist GEDECKT.", {}, (1, 2, 3)),
])
def test_what_is_missing_is_asked_again(
    reply: str, verdicts: dict[int, Label], missing: tuple[int, ...]
) -> None:
    reading = parse_batch(reply, 3)
    assert {n: e.label for n, e in reading.verdicts.items()} == verdicts
    assert reading.missing == missing


def test_a_claim_answered_twice_alike_keeps_its_first_evidence() -> None:
    reading = parse_batch("1: GEDECKT [2] erst\n1: GEDECKT [3] dann", 1)
    assert reading.verdicts[1] == Evidence(G, (2,), "erst")


def test_evidence_is_read_with_care() -> None:
    reading = parse_batch("1: GEDECKT [3; 1, 3, 0] Grund\n2: UNGEDECKT Grund ohne Abschnitt", 2)
    assert reading.verdicts[1].chunks == (3, 1), "ranks from 1, each once, in the judge's order"
    assert reading.verdicts[2] == Evidence(U, (), "Grund ohne Abschnitt")
    long = parse_batch("1: GEDECKT [1] " + "sehr " * 200, 1).verdicts[1].reason
    assert len(long) == MAX_REASON and long.endswith("…")


def test_count_must_be_positive() -> None:
    for bad in (0, -2, True, 1.5):
        with pytest.raises(ValueError, match="count"):
            parse_batch("1: GEDECKT", bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("reply", [
    "1: GEDECKT [" + "1," * 100_000,
    "1:" + " " * 200_000 + "x",
    "1: GEDECKT " + "[" * 200_000,
    ("1: GEDECKT [1] " + "a" * 60 + "\n") * 20_000,
    "*" * 200_000 + "1: GEDECKT",
])
def test_hostile_replies_are_read_whole(reply: str) -> None:
    # Text from outside: whatever it holds, a reading (each line is matched once, no
    # backtracking over it); the last case is one long line that is still a verdict line.
    reading = parse_batch(reply, 3)
    assert set(reading.verdicts) | set(reading.missing) == {1, 2, 3}
