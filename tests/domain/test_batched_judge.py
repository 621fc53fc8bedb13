"""Batched verification (judging.domain.batched): the prompt's layout, the claims'
ids, the split into calls, the correction, the schema, and the reading of a reply — complete,
shuffled, partial, with extra text, unreadable, renumbered, echoed, a claim answered twice —
with the judge's evidence per claim. The same shapes served through the real client are in
tests/judging/test_reply_corpus.py."""

import json

import pytest

from judging.domain.batch_reading import read_batch, verdict_phrase
from judging.domain.batched import (
    BATCHED_PROMPT_VERSION,
    MAX_REASON,
    BatchReading,
    Evidence,
    batch_schema,
    batches,
    claim_ids,
    correction_messages,
    texts_hash,
    verify_batch_messages,
)
from judging.domain.judge_parse import Label

G, T, U = Label.GEDECKT, Label.TEILWEISE, Label.UNGEDECKT

# One hash per released wording: changed a batched prompt? Bump the version and pin the hash.
RELEASED = {
    "2026-12-b1": "ee9bfcfbe4affedbeea6c89005d922b0f3fd4a06f097468ed57d8d669f5716df",
    "2026-12-b2": "a8ad89489dea771ccbe70579b84c868aaa91afe44e1d2d1e15ed89a84be3b14a",
}

CLAIMS = [
    "Der Behälter wird alle 5 Jahre geprüft.",
    "Teilweise werden die Kosten erstattet.",
    "Änderungen gibt die Sicherheitsfachkraft frei.",
]
A, B, C = claim_ids(CLAIMS)


def read(reply: str, *, cut: bool = False, chunk_count: int | None = None) -> BatchReading:
    return read_batch(reply, CLAIMS, cut=cut, chunk_count=chunk_count)


def labels(reading: BatchReading) -> dict[int, Label]:
    return {n: e.label for n, e in reading.verdicts.items()}


def test_the_wording_is_pinned_to_its_version() -> None:
    assert RELEASED[BATCHED_PROMPT_VERSION] == texts_hash()


def test_ids_are_unique_stable_and_no_count() -> None:
    claims = [f"Aussage Nummer {i}." for i in range(30)]
    ids = claim_ids(claims)
    assert len(set(ids)) == 30
    assert ids == claim_ids(claims), "the same claims get the same ids"
    assert claim_ids(claims[5:])[0] == ids[5], "a claim's id does not depend on its place"
    assert all(len(i) == 2 and i[0].isalpha() and i[1] in "23456789" for i in ids)
    assert not {"1", "2", "3"} & set(ids)
    # Neighbours are not consecutive ids: counting along the list never yields the next one.
    consecutive = sum(
        a[0] == b[0] and int(b[1]) == int(a[1]) + 1 for a, b in zip(ids, ids[1:], strict=False)
    )
    assert consecutive <= 2
    with pytest.raises(ValueError):
        claim_ids([str(i) for i in range(193)])


def test_instructions_first_then_the_context_then_the_claims_under_their_ids() -> None:
    messages = verify_batch_messages(
        chunks=["Prüfintervall: 5 Jahre.", "  ", "Kosten: 1.250 €."],
        claims=["Der Behälter wird alle\n5 Jahre geprüft.", "Die Prüfung kostet 1.250 €."],
        language="de",
    )
    system, user = messages
    assert system["role"] == "system" and user["role"] == "user"
    # The system message is the same for every answer (a provider caches it as the prefix).
    assert system == verify_batch_messages(chunks=["x"], claims=["y"], language="de")[0]
    # The article's three words with their definitions, and the line format by id.
    assert "TEILWEISE — Teile folgen, andere nicht" in system["content"]
    assert system["content"].endswith("K7: GEDECKT [2] Abschnitt 2 nennt die 5 Jahre.")
    body = user["content"]
    assert body.index("[1] Prüfintervall") < body.index("[3] Kosten") < body.index("Aussagen")
    assert "[2]" not in body, "a blank chunk is left out but keeps its number"
    x, y = claim_ids(["Der Behälter wird alle\n5 Jahre geprüft.", "Die Prüfung kostet 1.250 €."])
    # The count stated, one line per claim under its id (a claim's line break is joined).
    assert body.endswith(
        f"Aussagen (2):\n{x}: Der Behälter wird alle 5 Jahre geprüft.\n"
        f"{y}: Die Prüfung kostet 1.250 €.")


def test_formats_by_evidence_and_structure() -> None:
    def system(**kwargs: bool) -> str:
        return verify_batch_messages(chunks=["x"], claims=["y"], language="de",
                                     **kwargs)[0]["content"]

    assert system(evidence=False).endswith("K7: GEDECKT")
    assert "Begründung" in system(structured=True)
    assert "Begründung" not in system(structured=True, evidence=False)
    assert len({system(), system(evidence=False), system(structured=True),
                system(structured=True, evidence=False)}) == 4


def test_english_and_no_context() -> None:
    [system, user] = verify_batch_messages(chunks=[], claims=["It rains."], language="en")
    assert "German words" in system["content"]
    [id_] = claim_ids(["It rains."])
    assert user["content"] == f"Context:\n(no context retrieved)\n\nClaims (1):\n{id_}: It rains."
    with pytest.raises(ValueError, match="language"):
        verify_batch_messages(chunks=[], claims=["x"], language="fr")
    with pytest.raises(ValueError, match="at least one claim"):
        verify_batch_messages(chunks=["x"], claims=[], language="de")


def test_long_answers_are_split_into_calls() -> None:
    claims = [f"Aussage {i}" for i in range(23)]
    assert [len(b) for b in batches(claims, 10)] == [10, 10, 3]
    assert [c for b in batches(claims, 10) for c in b] == claims
    assert [len(b) for b in batches(claims)] == [23], "by default all claims in one call"
    assert batches([], 10) == []
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError):
            batches(claims, bad)  # type: ignore[arg-type]  # wrong sizes, on purpose


def test_a_complete_reply_with_evidence() -> None:
    reply = (
        f"{A}: GEDECKT [2] Abschnitt 2 nennt das Intervall von 5 Jahren.\n"
        f"{B}: UNGEDECKT [] Kein Abschnitt nennt eine Erstattung.\n"
        f"{C}: TEILWEISE [1, 3] Die Fachkraft steht dort, die Freigabe nicht."
    )
    assert read(reply) == BatchReading({
        1: Evidence(G, (2,), "Abschnitt 2 nennt das Intervall von 5 Jahren."),
        2: Evidence(U, (), "Kein Abschnitt nennt eine Erstattung."),
        3: Evidence(T, (1, 3), "Die Fachkraft steht dort, die Freigabe nicht."),
    }, (), "lines")


def test_shuffled_with_text_around_and_markdown() -> None:
    reply = (
        "Hier sind meine Urteile:\n\n"
        f"**{C}: gedeckt** [1]\n"
        f"- {A}. TEILWEISE – nur die Zahl stimmt\n"
        f'{B}) "UNGEDECKT."\n'
        "Ich hoffe, das hilft."
    )
    reading = read(reply)
    assert labels(reading) == {1: T, 2: U, 3: G}
    assert reading.missing == ()
    assert reading.verdicts[3].chunks == (1,)
    assert reading.verdicts[1].reason == "nur die Zahl stimmt"


@pytest.mark.parametrize(("reply", "verdicts", "missing"), [
    # Partial: the second claim has no line; it is asked again.
    (f"{A}: GEDECKT\n{C}: GEDECKT", {1: G, 3: G}, (2,)),
    # Renumbered: the judge counts instead of copying ids. Nothing is tied to a claim.
    ("1: GEDECKT\n2: UNGEDECKT\n3: TEILWEISE", {}, (1, 2, 3)),
    ("Aussage 1: GEDECKT\nAussage 2: UNGEDECKT", {}, (1, 2, 3)),
    # The claim's text where the verdict belongs: "Teilweise werden …" is no TEILWEISE.
    (f"{B}: Teilweise werden die Kosten erstattet.", {}, (1, 2, 3)),
    (f"{B}: Teilweise werden die Kosten erstattet", {}, (1, 2, 3)),
    # … but echoed before its verdict, the verdict counts.
    (f"{B}: Teilweise werden die Kosten erstattet: UNGEDECKT [] nichts dazu", {2: U}, (1, 3)),
    (f'{A}: "Der Behälter wird alle 5 Jahre geprüft" – GEDECKT', {1: G}, (2, 3)),
    # Phrases that name one verdict for certain.
    (f"{A}: NICHT GEDECKT\n{B}: TEILWEISE GEDECKT\n{C}: Supported", {1: U, 2: T, 3: G}, ()),
    # The second claim starts with "Teilweise": there only capitals are a verdict.
    (f"{A}: nicht gedeckt\n{B}: teilweise gedeckt", {1: U}, (2, 3)),
    (f"{B}: Teilweise, nämlich … – GEDECKT [1]", {}, (1, 2, 3)),
    # A second verdict on the line, before the evidence or in capitals after it: none certain.
    (f"{A}: GEDECKT (teilweise) [2]\n{B}: SUPPORTED / PARTIALLY SUPPORTED", {}, (1, 2, 3)),
    (f"{A}: GEDECKT [2] eher TEILWEISE\n{C}: UNGEDECKT [] nicht durch den Kontext gedeckt",
     {3: U}, (1, 2)),
    (f"{A}: GEDECKT, {B}: UNGEDECKT, {C}: TEILWEISE", {}, (1, 2, 3)),
    # A numbered list of lines with ids: the ids count.
    (f"1. {A}: GEDECKT\n2. {B}: UNGEDECKT", {1: G, 2: U}, (3,)),
    (f"{A}: NOT SUPPORTED\n{B}: PARTIALLY SUPPORTED\n{C}: UNSUPPORTED", {1: U, 2: T, 3: U}, ()),
    # Words that name none: asked again. A word in capitals may run on into its reason.
    (f"{A}: GEDECKTE\n{B}: NICHT\n{C}: GEDECKT weil Abschnitt 2 es nennt", {3: G}, (1, 2)),
    (f"{A}: Gedeckt ist nur der Behälter\n{B}: teilweise werden", {}, (1, 2, 3)),
    # An id not in the call is ignored.
    (f"Z9: GEDECKT\n{B}: GEDECKT", {2: G}, (1, 3)),
    # Answered twice alike: one verdict; differently: the judge contradicted itself.
    (f"{A}: GEDECKT\n{A}: GEDECKT [2]\n{B}: GEDECKT\n{B}: UNGEDECKT", {1: G}, (2, 3)),
    # Reasoning on the verdict's line: the verdict is not where it belongs.
    (f"{A}: Abschnitt 2 nennt 5 Jahre, also GEDECKT", {}, (1, 2, 3)),
    # A <think> block: only what follows it counts; an unfinished one holds nothing.
    (f"<think>{A}: UNGEDECKT\n{B}: GEDECKT</think>\n{A}: GEDECKT", {1: G}, (2, 3)),
    (f"<think>{A}: GEDECKT", {}, (1, 2, 3)),
    # Nothing readable at all.
    ("Ich kann das nicht beurteilen.", {}, (1, 2, 3)),
    ("", {}, (1, 2, 3)),
    (f"Die Aussage {A} ist GEDECKT.", {}, (1, 2, 3)),
])
def test_what_is_not_tied_for_certain_is_asked_again(
    reply: str, verdicts: dict[int, Label], missing: tuple[int, ...]
) -> None:
    reading = read(reply)
    assert labels(reading) == verdicts
    assert reading.missing == missing


# A second reading of the change found these; each once tied a verdict the judge did not mean.
@pytest.mark.parametrize(("reply", "verdicts"), [
    # A verdict negated or qualified by what follows it.
    (f"{A}: GEDECKT ist das nicht, Abschnitt 1 nennt 3 Jahre.", {}),
    (f"{A}: GEDECKT wäre falsch", {}),
    (f"{A}: SUPPORTED is too strong; chunk 1 says 3 years.", {}),
    (f"{A}: UNGEDECKT wäre zu streng [1]", {}),
    (f"{A}: GEDECKT nur zum Teil [1]", {}),
    (f"{A}: SUPPORTED in part [1]", {}),
    (f"{A}: GEDECKT bis auf die Frist, die fehlt", {}),
    (f"{A}: Supported: No", {}),
    (f"{A}: Gedeckt: nein", {}),
    (f"{A}: SUPPORTED - no, chunk 1 says 3 years", {}),
    (f"{A}: GEDECKT (nicht) [1]", {}),
    # … while a reason that agrees is a reason.
    (f"{A}: UNGEDECKT – nicht im Kontext\n{C}: TEILWEISE – nur die Fachkraft", {1: U, 3: T}),
    # A table row names a second verdict.
    (f"| {A} | GEDECKT | [1] | eigentlich nur TEILWEISE |", {}),
    # The id says one claim, the text another.
    (f"| {A} | {CLAIMS[2]} | UNGEDECKT |", {}),
    (json.dumps([{"id": A, "claim": CLAIMS[2], "verdict": "UNGEDECKT"}]), {}),
    (json.dumps({A: {"id": C, "verdict": "GEDECKT"}}), {}),
    # Keys given twice: which one the judge meant is a guess.
    (f'{{"{A}": "GEDECKT", "{A}": "UNGEDECKT"}}', {}),
    (f'[{{"id": "{A}", "verdict": "GEDECKT", "Verdict": "UNGEDECKT"}}]', {}),
    (f'[{{"id": "{A}", "id": "{C}", "verdict": "GEDECKT"}}]', {}),
    # Lines and a fence, or two fences, that disagree.
    (f'{A}: UNGEDECKT\n```json\n{{"{A}": "GEDECKT"}}\n```', {}),
    (f'```json\n{{"{A}": "GEDECKT"}}\n```\nKorrektur:\n```json\n{{"{A}": "UNGEDECKT"}}\n```',
     {}),
    (f'```json\n{{"{A}": "GEDECKT"}}\n```\n```json\n{{"{C}": "UNGEDECKT"}}\n```', {1: G, 3: U}),
    # Other reasoning blocks, and a correction in prose.
    (f"[THINK]\n{C}: GEDECKT\n[/THINK]\n{C}: Abschnitt 2 nennt 1.000 €, also UNGEDECKT", {}),
    (f"<reasoning>{C}: GEDECKT</reasoning>\n{C}: UNGEDECKT", {3: U}),
    (f"{C}: SUPPORTED [2]\n\nWait - on re-reading chunk 2, {C} is NOT SUPPORTED.", {}),
    # A paraphrase starting with a verdict word, in other case than the verdicts.
    (f"{C}: Teilweise, nämlich die Fachkraft, gibt Änderungen frei.\nUrteil: GEDECKT [2]", {}),
])
def test_what_the_second_reading_found_is_left_open(
    reply: str, verdicts: dict[int, Label]
) -> None:
    assert labels(read(reply)) == verdicts


def test_chunks_that_are_no_numbers_are_no_crash() -> None:
    for chunks in (["²"], ["①"], ["9" * 5000], [10**400]):
        reply = json.dumps({A: {"verdict": "GEDECKT", "chunks": chunks}})
        assert read(reply, chunk_count=3).verdicts[1].chunks == ()
    assert read(f"{A}: GEDECKT [²] x").verdicts[1].chunks == ()


def test_claims_that_read_alike_are_tied_by_id_only() -> None:
    claims = ["Die Frist beträgt 14 Tage.", "Die Frist beträgt 14 Tage"]
    x, y = claim_ids(claims)
    reading = read_batch(json.dumps([{"claim": claims[0], "verdict": "GEDECKT"},
                                     {"id": y, "verdict": "UNGEDECKT"}]), claims)
    assert labels(reading) == {2: U}


def test_a_table() -> None:
    reply = (
        "| Kennung | Aussage | Urteil | Abschnitte |\n|---|---|---|---|\n"
        f"| {A} | Der Behälter wird alle 5 Jahre geprüft. | **GEDECKT** | 2 |\n"
        f"| {B} | Teilweise werden die Kosten erstattet. | NICHT GEDECKT | |\n"
        f"| 3 | Änderungen gibt die Sicherheitsfachkraft frei. | GEDECKT | 1 |\n"
    )
    reading = read(reply)
    assert labels(reading) == {1: G, 2: U}
    assert reading.verdicts[1].chunks == (2,)
    assert reading.missing == (3,), "a row by number is not tied"


@pytest.mark.parametrize("reply", [
    json.dumps({"verdicts": [{"id": A, "verdict": "GEDECKT", "chunks": [2], "reason": "r"},
                             {"id": B, "verdict": "UNGEDECKT", "chunks": [], "reason": ""}]}),
    json.dumps({A: {"verdict": "GEDECKT", "chunks": [2], "reason": "r"}, B: "UNGEDECKT"}),
    "```json\n" + json.dumps([{"id": A, "verdict": "gedeckt", "chunks": [2, 9],
                               "reason": "r"}, {"id": B, "verdict": "NICHT GEDECKT"}]) + "\n```",
    "Hier:\n```\n" + json.dumps({"verdicts": {A: {"urteil": "GEDECKT", "chunks": [2],
                                                   "reason": "r"}, B: "UNGEDECKT"}}) + "\n```",
    # Tied by the claim's own text instead of an id.
    json.dumps([{"claim": CLAIMS[0], "verdict": "GEDECKT", "chunks": [2], "reason": "r"},
                {"claim": CLAIMS[1].upper(), "verdict": "UNGEDECKT"}]),
])
def test_json_shapes(reply: str) -> None:
    reading = read(reply, chunk_count=3)
    assert labels(reading) == {1: G, 2: U}
    assert reading.verdicts[1].chunks == (2,)
    assert reading.missing == (3,)
    assert reading.form == "json"


@pytest.mark.parametrize("reply", [
    json.dumps(["GEDECKT", "UNGEDECKT", "TEILWEISE"]),
    json.dumps({"verdicts": ["GEDECKT", "UNGEDECKT", "TEILWEISE"]}),
    json.dumps([{"verdict": "GEDECKT"}, {"verdict": "UNGEDECKT"}]),
    json.dumps({"1": "GEDECKT", "2": "UNGEDECKT", "3": "GEDECKT"}),
    json.dumps({A: "Teilweise werden", B: ["GEDECKT"], C: {"verdict": "GEDECKT",
                                                           "urteil": "UNGEDECKT"}}),
])
def test_json_by_position_or_unclear_ties_nothing(reply: str) -> None:
    assert labels(read(reply)) == {}


def test_a_reply_cut_off_loses_its_last_line() -> None:
    reply = f"{A}: GEDECKT [2] Abschnitt 2 nennt\n{B}: TEILWEISE [1] Abschn"
    assert labels(read(reply, cut=True)) == {1: G}
    assert labels(read(reply)) == {1: G, 2: T}
    # Trailing blank lines are not the stump.
    assert labels(read(f"{A}: GEDECKT\n{B}: UNGE\n\n", cut=True)) == {1: G}
    # A whole JSON value is whole, even at the limit; a cut one is unreadable.
    whole = json.dumps({A: "GEDECKT"})
    assert labels(read(whole, cut=True)) == {1: G}
    assert labels(read(whole[:-3], cut=True)) == {}


def test_a_claim_answered_twice_alike_keeps_its_first_evidence() -> None:
    reading = read(f"{A}: GEDECKT [2] erst\n{A}: GEDECKT [3] dann")
    assert reading.verdicts[1] == Evidence(G, (2,), "erst")


def test_evidence_is_read_with_care() -> None:
    reading = read(f"{A}: GEDECKT [3; 1, 3, 0, 7] Grund\n{B}: UNGEDECKT Grund ohne Abschnitt",
                   chunk_count=5)
    assert reading.verdicts[1].chunks == (3, 1), "ranks 1..chunks, each once, as given"
    assert reading.verdicts[2] == Evidence(U, (), "Grund ohne Abschnitt")
    long = read(f"{A}: GEDECKT [1] " + "sehr " * 200).verdicts[1].reason
    assert len(long) == MAX_REASON and long.endswith("…")


def test_verdict_phrase_stands_alone() -> None:
    assert verdict_phrase("GEDECKT") == (G, "")
    assert verdict_phrase("**Teilweise** [1] x") == (T, "[1] x")
    assert verdict_phrase("NICHT  GEDECKT.") == (U, ".")
    assert verdict_phrase("Teilweise werden …") is None
    assert verdict_phrase("GEDECKTER Bereich") is None
    assert verdict_phrase("Gedeckt ist nur …") is None


def test_the_correction_names_the_open_claims_in_the_same_conversation() -> None:
    messages = verify_batch_messages(chunks=["x"], claims=CLAIMS, language="de")
    again = correction_messages(messages, "1: GEDECKT", [B, C], language="de")
    assert again[:2] == messages
    assert again[2] == {"role": "assistant", "content": "1: GEDECKT"}
    assert again[3]["role"] == "user"
    assert f"{B}, {C}" in again[3]["content"]
    assert again[3]["content"].endswith(f"{B}: GEDECKT [2] Abschnitt 2 nennt die 5 Jahre.")
    # An empty reply is no assistant turn (some servers refuse one).
    assert len(correction_messages(messages, " ", [A], language="en")) == 3


def test_the_schema() -> None:
    schema = batch_schema()["json_schema"]
    assert schema["strict"] is True
    item = schema["schema"]["properties"]["verdicts"]["items"]
    # The ids stand in the prompt beside their claims; an unknown one is ignored when read.
    assert item["properties"]["id"] == {"type": "string"}
    assert item["properties"]["verdict"]["enum"] == ["GEDECKT", "TEILWEISE", "UNGEDECKT"]
    assert item["required"] == ["id", "verdict", "chunks", "reason"]
    bare = batch_schema(evidence=False)["json_schema"]["schema"]
    assert bare["properties"]["verdicts"]["items"]["required"] == ["id", "verdict"]


@pytest.mark.parametrize("reply", [
    f"{A}: GEDECKT [" + "1," * 100_000,
    f"{A}:" + " " * 200_000 + "x",
    f"{A}: GEDECKT " + "[" * 200_000,
    (f"{A}: GEDECKT [1] " + "a" * 60 + "\n") * 20_000,
    "*" * 200_000 + f"{A}: GEDECKT",
    "|" * 200_000,
    (f"| {A} " * 50_000) + "|",
    f"{B}: " + "Teilweise werden die Kosten erstattet " * 10_000,
    "{" * 100_000,
    "```" * 100_000,
    "<think>" * 50_000,
])
def test_hostile_replies_are_read_whole(reply: str) -> None:
    # Text from outside: whatever it holds, a reading in time linear in its length.
    reading = read(reply)
    assert set(reading.verdicts) | set(reading.missing) == {1, 2, 3}
