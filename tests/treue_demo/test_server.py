"""The demo judge: an OpenAI-compatible server whose verdicts are RAGTruth's human labels.

Everything goes through the real ``openai`` client against the server on a free loopback port,
with the prompts the worker really sends (``judge_prompt``) and the parsers that really read the
replies (``judge_parse``); the last tests run the whole tier-2 pipeline from ingest to score.

The same server plays the demo's generator for self-consistency investigations: the tests at the
end re-ask it with the messages the demo ingests, as ``GeneratorClient`` does, and check that an
investigation over demo answers finds inconsistency exactly where humans labelled invented
content.
"""

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import openai
import pytest
from django.test import override_settings

from ingest import services
from ingest.services import IngestOutcome
from investigations.domain.consistency import compare as consistency_compare
from investigations.domain.consistency import prompt as consistency_prompt
from judging.client import JudgeClient, JudgeConfig, JudgeMisconfigured
from judging.domain import single
from judging.domain.batch_reading import read_batch
from judging.domain.batched import (
    batch_schema,
    claim_ids,
    correction_messages,
    verify_batch_messages,
)
from judging.domain.judge_parse import Label, parse_claims, parse_verdict
from judging.domain.judge_prompt import (
    decompose_messages,
    decompose_retry_messages,
    format_context,
    verify_messages,
    verify_retry_messages,
)
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, JudgeEndpoint, JudgeMode, JudgeRun
from monitoring.services.use_cases import service_create, use_case_create
from treue_demo.answers import LENIENT_TYPES, expert_labels, load_answers
from treue_demo.data import DEMO_JUDGE_MODEL, answer_body, answer_logprobs, load_rows
from treue_demo.data import demo_messages as demo_messages_for
from treue_demo.generator import vary
from treue_demo.judge import DemoJudge
from treue_demo.server import DemoJudgeServer

pytestmark = pytest.mark.usefixtures("demo_app")

ROWS = {row["id"]: row for row in load_rows()}
# Every 12th answer of RAGTruth QA: 330, 128 of them labelled, about the demo's first sample;
# what the slower checks go through.
SAMPLE = list(ROWS.values())[::12]

# 14090: two "Evident Baseless Info" spans, each exactly one sentence.
TRACT = ROWS["14090"]
TRACT_INVENTED = 'For example, someone could "tract along" their thoughts in a conversation.'
TRACT_SUPPORTED = "In contemporary usage, a duct is a pipe or tube that carries a fluid or gas."
# 13757: one span over the second half of a sentence, "Subtle Baseless Info": the lenient
# judge passes over it, the experts do not.
FRONTS = ROWS["13757"]
FRONTS_CLAIMS = [
    "A cold front is the transition zone where a cold air mass is replacing a warmer air mass, "
    "while a warm front is the transition zone where a warm air mass is replacing a colder air "
    "mass.",
    "Cold fronts generally move from northwest to southeast, while warm fronts move in the "
    "opposite direction.",
    "The movement of these fronts is driven by the interaction between different air masses, "
    "with the cold air mass pushing the warm air mass ahead of it.",
    "In summary, cold fronts are characterized by a transition from warm to cold air, while warm "
    "fronts involve a transition from cold to warm air.",
]
# 12794: no labels; a numbered list after an introduction.
EXHAUST = ROWS["12794"]
# 11889: "Evident Baseless Info" over a part of a sentence (a keyboard shortcut).
ROWS_WORD = ROWS["11889"]
SHORTCUT = ('Alternatively, you can use the keyboard shortcut "Ctrl + Shift + Delete" to delete '
            'the row.')

UNKNOWN_ANSWER = (
    "Der Druckbehälter wird alle 5 Jahre geprüft. Änderungen gibt die Sicherheitsfachkraft frei. "
    "Ich hoffe, das hilft!"
)


@pytest.fixture(scope="module")
def demo_judge() -> Iterator[DemoJudgeServer]:
    server = DemoJudgeServer(port=0).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def judge_api(demo_judge: DemoJudgeServer) -> Iterator[openai.OpenAI]:
    api = openai.OpenAI(base_url=demo_judge.base_url, api_key="demo", max_retries=0, timeout=10)
    try:
        yield api
    finally:
        api.close()


def ask(api: openai.OpenAI, messages: list[dict[str, str]], **extra: Any) -> Any:
    return api.chat.completions.create(
        model=DEMO_JUDGE_MODEL,
        messages=messages,  # type: ignore[arg-type]  # plain message dicts
        temperature=0,
        max_tokens=extra.pop("max_tokens", 1500),
        **extra,
    )


def decompose(api: openai.OpenAI, row: dict[str, Any], language: str = "en") -> list[str] | None:
    messages = decompose_messages(question=row["question"], answer=row["response"],
                                  language=language)
    return parse_claims(ask(api, messages).choices[0].message.content)


def verify(api: openai.OpenAI, row: dict[str, Any], claim: str, language: str = "en") -> Label:
    messages = verify_messages(context=format_context(row["passages"]), claim=claim,
                               language=language)
    return parse_verdict(ask(api, messages, max_tokens=16).choices[0].message.content)


def test_lists_the_demo_judge_and_the_replayed_generators(judge_api: openai.OpenAI) -> None:
    models = judge_api.models.list().data
    generators = sorted({row["model"] for row in ROWS.values()})
    variants = [f"{DEMO_JUDGE_MODEL}-strict", f"{DEMO_JUDGE_MODEL}-lenient"]
    assert [m.id for m in models] == [DEMO_JUDGE_MODEL, *variants, "treue-demo-rag", *generators]
    assert {m.owned_by for m in models[4:]} == {"treue-demo-replay"}


def test_the_rag_stand_in_answers_from_the_sources(judge_api: openai.OpenAI) -> None:
    messages = [
        {"role": "system", "content": "Answer only from the sources."},
        {"role": "user", "content": "Sources:\nDer Behälter wird alle 5 Jahre geprüft. Die "
         "Prüfung kostet 250 Euro.\n\nQuestion: Was kostet die Prüfung?"},
    ]
    reply = judge_api.chat.completions.create(
        model="treue-demo-rag", messages=messages,  # type: ignore[arg-type]  # plain message dicts
        logprobs=True, temperature=0.7, max_tokens=100,
    )
    choice = reply.choices[0]
    assert choice.message.content == "Die Prüfung kostet 250 Euro."
    assert choice.logprobs is not None and choice.logprobs.content is not None
    tokens = choice.logprobs.content
    assert "".join(t.token for t in tokens) == choice.message.content


def test_the_variants_judge_with_a_bias_for_the_judge_comparison(
    judge_api: openai.OpenAI,
) -> None:
    """Candidates to compare in the demo: the lenient variant calls an unsupported claim
    partly supported, the strict one leaves a supported claim alone."""
    messages = verify_messages(context=format_context(TRACT["passages"]), claim=TRACT_INVENTED,
                               language="en")

    def label(model: str) -> Label:
        reply = judge_api.chat.completions.create(
            model=model, messages=messages, temperature=0, max_tokens=16,  # type: ignore[arg-type]  # plain message dicts
        )
        content = reply.choices[0].message.content
        assert content is not None
        return parse_verdict(content)

    assert label(DEMO_JUDGE_MODEL) == Label.UNGEDECKT
    assert label(f"{DEMO_JUDGE_MODEL}-lenient") == Label.TEILWEISE
    assert label(f"{DEMO_JUDGE_MODEL}-strict") == Label.UNGEDECKT
    supported = verify_messages(context=format_context(TRACT["passages"]),
                                claim=TRACT_SUPPORTED, language="en")
    reply = judge_api.chat.completions.create(
        model=f"{DEMO_JUDGE_MODEL}-strict", messages=supported,  # type: ignore[arg-type]  # plain message dicts
        temperature=0, max_tokens=16,
    )
    content = reply.choices[0].message.content
    assert content is not None
    assert parse_verdict(content) == Label.GEDECKT


def test_listens_on_loopback_only(demo_judge: DemoJudgeServer) -> None:
    assert demo_judge._httpd.server_address[0] == "127.0.0.1"


@pytest.mark.parametrize("language", ["en", "de"])
def test_decomposition_of_a_demo_answer_gives_its_sentences(
    judge_api: openai.OpenAI, language: str
) -> None:
    assert decompose(judge_api, FRONTS, language) == FRONTS_CLAIMS


def test_decomposition_drops_framing_introductions_and_list_markers(
    judge_api: openai.OpenAI,
) -> None:
    claims = decompose(judge_api, EXHAUST)
    assert claims is not None
    assert claims[:2] == [
        "Determine the angle of the header collector flanges.",
        "Both the passenger and driver sides should point straight back and parallel to the "
        "ground.",
    ]
    assert not any(c.endswith("follow these steps:") for c in claims)
    tract = decompose(judge_api, TRACT)
    assert tract is not None and tract[0].startswith("it is difficult to provide")
    assert TRACT_INVENTED in tract and TRACT_SUPPORTED in tract


def test_an_answer_that_cannot_answer_has_no_claims(judge_api: openai.OpenAI) -> None:
    row = {"question": "how to make a hickey go away",
           "response": "Unable to answer based on given passages."}
    assert decompose(judge_api, row) == []


@pytest.mark.parametrize(
    ("row", "claim", "label"),
    [
        (TRACT, TRACT_INVENTED, Label.UNGEDECKT),  # the sentence is a labelled span
        (TRACT, TRACT_SUPPORTED, Label.GEDECKT),  # no label touches it
        (ROWS_WORD, SHORTCUT, Label.TEILWEISE),  # an evident span over a part of it
        (FRONTS, FRONTS_CLAIMS[1], Label.GEDECKT),  # a subtle span: passed over (lenient)
        (FRONTS, FRONTS_CLAIMS[0], Label.GEDECKT),
        (EXHAUST, "Install the mufflers on either end of the exhaust pipe.", Label.GEDECKT),
    ],
)
@pytest.mark.parametrize("language", ["en", "de"])
def test_verification_replays_the_human_labels(
    judge_api: openai.OpenAI, row: dict[str, Any], claim: str, label: Label, language: str
) -> None:
    assert verify(judge_api, row, claim, language) is label


def test_the_experts_count_the_spans_the_judge_passes_over() -> None:
    """The demo's experts label with every span; the judge leaves out Subtle Baseless Info."""
    answers = {a.id: a for a in load_answers()}
    assert expert_labels(answers["13757"], FRONTS_CLAIMS) == [
        Label.GEDECKT, Label.TEILWEISE, Label.GEDECKT, Label.GEDECKT,
    ]
    assert expert_labels(answers["14090"], [TRACT_INVENTED, TRACT_SUPPORTED]) == [
        Label.UNGEDECKT, Label.GEDECKT,
    ]
    assert expert_labels(answers["11889"], [SHORTCUT]) == [Label.TEILWEISE]


def test_retries_get_the_same_reply(judge_api: openai.OpenAI) -> None:
    context = format_context(TRACT["passages"])
    retry = verify_retry_messages(context=context, claim=TRACT_INVENTED, language="de",
                                  previous_reply="Vielleicht")
    assert ask(judge_api, retry, max_tokens=16).choices[0].message.content == "UNGEDECKT"
    retry = decompose_retry_messages(question=FRONTS["question"], answer=FRONTS["response"],
                                     language="en", previous_reply="Sure, here they are")
    assert parse_claims(ask(judge_api, retry).choices[0].message.content) == FRONTS_CLAIMS


def test_unknown_text_gets_a_well_formed_reply_and_a_word_check(judge_api: openai.OpenAI) -> None:
    row = {"question": "Wie oft wird geprüft?", "response": UNKNOWN_ANSWER,
           "passages": ["Prüfintervall: Der Druckbehälter wird alle 5 Jahre geprüft."]}
    assert decompose(judge_api, row, "de") == [
        "Der Druckbehälter wird alle 5 Jahre geprüft.",
        "Änderungen gibt die Sicherheitsfachkraft frei.",
    ]
    # No human label for these sentences: the word check decides, so a hand-sent answer that
    # contradicts its passage is not scored 1.0.
    for claim, label in [
        ("Der Druckbehälter wird alle 5 Jahre geprüft.", Label.GEDECKT),
        ("Der Druckbehälter wird alle 10 Jahre geprüft.", Label.UNGEDECKT),  # another number
        ("Der Druckbehälter wird nicht geprüft.", Label.UNGEDECKT),  # a negation added
        ("Der Druckbehälter wird jährlich vom Hersteller geprüft.", Label.TEILWEISE),  # 3 of 5
        ("Änderungen gibt die Sicherheitsfachkraft frei.", Label.UNGEDECKT),  # not in it
    ]:
        assert verify(judge_api, row, claim, "de") is label, claim
    # Not a judge prompt at all: still a reply the parsers can read.
    reply = ask(judge_api, [{"role": "user", "content": "Hello. Are you there?"}])
    assert parse_claims(reply.choices[0].message.content) == ["Hello.", "Are you there?"]


def test_replies_are_shaped_like_openai_and_deterministic(judge_api: openai.OpenAI) -> None:
    messages = decompose_messages(question=TRACT["question"], answer=TRACT["response"],
                                  language="en")
    first, second = ask(judge_api, messages), ask(judge_api, messages)
    assert first.model == DEMO_JUDGE_MODEL
    assert first.object == "chat.completion"
    assert first.choices[0].finish_reason == "stop"
    assert first.choices[0].message.content == second.choices[0].message.content
    prompt_chars = sum(len(m["content"]) for m in messages)
    assert first.usage is not None
    assert prompt_chars / 5 < first.usage.prompt_tokens < prompt_chars / 3
    assert first.usage.completion_tokens == -(-len(first.choices[0].message.content) // 4)
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens


def test_max_tokens_truncates_the_reply(judge_api: openai.OpenAI) -> None:
    messages = decompose_messages(question=TRACT["question"], answer=TRACT["response"],
                                  language="en")
    reply = ask(judge_api, messages, max_tokens=5)
    assert reply.choices[0].finish_reason == "length"
    assert len(reply.choices[0].message.content) == 20
    assert reply.usage is not None and reply.usage.completion_tokens == 5


def test_another_model_name_is_refused_as_misconfiguration(demo_judge: DemoJudgeServer) -> None:
    """Replayed labels must not be stored under a real model's name: 404, as OpenAI answers
    for a model it does not have, which the client treats as not worth retrying."""
    with override_settings(TREUE_JUDGE_BASE_URL=demo_judge.base_url, TREUE_JUDGE_API_KEY="demo"):
        client = JudgeClient(JudgeConfig.from_settings(model="gpt-4o"))
    try:
        with pytest.raises(JudgeMisconfigured, match="404.*treue-demo-judge"):
            client.call([{"role": "user", "content": "Hi."}], max_tokens=16)
    finally:
        client.close()


# A sweep over the whole corpus: seconds, so the fast part leaves it to CI.
@pytest.mark.integration
def test_every_demo_answer_agrees_with_its_labels() -> None:
    """Over all 3,956 answers, without HTTP: an answer without labels gets no claim below
    GEDECKT, nor does one whose only labels are Subtle Baseless Info (the judge is lenient);
    an answer with another label gets at least one. Measured: all 2,349 and 377 of the first
    two kinds; 1,222 of 1,230 of the third (the other 8 have their spans in text that is no
    claim, such as "Based on the passages," or a sentence that another model's answer to the
    same question says unlabelled)."""
    judge = DemoJudge(load_answers())
    marked: dict[str, list[bool]] = {"none": [], "subtle only": [], "other": []}
    for row in ROWS.values():
        reply, _ = judge.reply(decompose_messages(question=row["question"],
                                                  answer=row["response"], language="en"))
        claims = parse_claims(reply)
        assert claims is not None
        context = format_context(row["passages"])
        labels = {
            parse_verdict(judge.reply(verify_messages(context=context, claim=c,
                                                      language="en"))[0])
            for c in claims
        }
        assert Label.UNPARSEABLE not in labels
        types = {label["label_type"] for label in row["labels"]}
        kind = "none" if not types else "subtle only" if types <= LENIENT_TYPES else "other"
        marked[kind].append(bool(labels - {Label.GEDECKT}))
    assert not any(marked["none"]) and not any(marked["subtle only"])
    assert len(marked["none"]) > 2000 and len(marked["subtle only"]) > 300
    assert sum(marked["other"]) >= 0.99 * len(marked["other"])


@pytest.mark.django_db
def test_ingest_to_score_through_the_pipeline(demo_judge: DemoJudgeServer) -> None:
    """Demo answers ingested as the demo does, each run executed as the worker does."""
    use_case = use_case_create(slug="demo", name="Demo", language="en", sample_rate=1.0)
    service, _ = service_create(name="demo-rag", use_cases=[use_case])
    bodies = demo_bodies(use_case.slug, SAMPLE)
    labelled = [b for b in bodies if b["metadata"]["human_labels"]][::16]  # 8 of 128
    clean = [b for b in bodies if not b["metadata"]["human_labels"]][::26]  # 8 of 202
    with override_settings(TREUE_JUDGE_BASE_URL=demo_judge.base_url,
                           TREUE_JUDGE_MODEL=DEMO_JUDGE_MODEL, TREUE_JUDGE_API_KEY="demo"):
        results = services.answer_ingest_batch(service=service, items=labelled + clean)
        assert [r.outcome for r in results] == [IngestOutcome.CREATED] * len(results)
        runs = JudgeRun.objects.filter(answer__use_case=use_case).order_by("pk")
        assert runs.count() == 16
        assert {run.judge_model for run in runs} == {DEMO_JUDGE_MODEL}
        outcomes = [judge_run_execute(run_id=run.pk) for run in runs]
    assert outcomes == ["scored"] * 16

    stored_scores = dict(
        Answer.objects.filter(use_case=use_case).values_list("external_id", "score")
    )
    scores = {ext: score for ext, score in stored_scores.items() if score is not None}
    assert scores == stored_scores  # every answer scored
    below = [b["external_id"] for b in labelled if scores[b["external_id"]] < 1]
    perfect = [b["external_id"] for b in clean if scores[b["external_id"]] == 1.0]
    # Measured: 7 of 8 labelled answers score below 1 (the 8th has only a subtle span, which
    # the lenient judge passes over), 8 of 8 unlabelled score 1.0.
    assert (len(below), len(perfect)) == (7, 8)

    run = JudgeRun.objects.filter(answer__use_case=use_case, score__lt=1).first()
    assert run is not None
    assert run.status == JudgeRun.Status.SUCCEEDED
    assert run.calls == 1 + run.claims.count()
    assert run.prompt_tokens > 0 and run.completion_tokens > 0
    assert {c.judge_model for c in run.claims.all()} == {DEMO_JUDGE_MODEL}
    assert set(run.claims.values_list("label", flat=True)) - {"GEDECKT"}


# --- The demo generator (self-consistency investigations) -----------------------------------

# 12219: one labelled span with a number ("Passage 3 does not provide instructions ...").
QUILT = ROWS["12219"]


def demo_bodies(use_case: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ingest bodies of `rows` as the demo makes them, one each."""
    created = datetime(2026, 11, 2, 9, tzinfo=UTC)
    return [answer_body(row, use_case=use_case, external_id=f"ragtruth-{row['id']}",
                        created=created) for row in rows]


def demo_messages(row: dict[str, Any]) -> list[dict[str, str]]:
    return demo_messages_for(row["question"], row["passages"])


def generate(
    api: openai.OpenAI, row: dict[str, Any], *, temperature: float = 0.7, logprobs: bool = False,
    messages: list[dict[str, str]] | None = None,
) -> Any:
    return api.chat.completions.create(
        model=row["model"],
        messages=messages or demo_messages(row),  # type: ignore[arg-type]  # plain message dicts
        temperature=temperature,
        max_tokens=1500,
        logprobs=logprobs,
    )


@pytest.fixture
def fresh_api(demo_judge: DemoJudgeServer) -> Iterator[openai.OpenAI]:
    """A server of its own: the generator counts identical requests, so tests must not share.
    Its judge (the demo answers, read once) is the module's: it keeps no state of requests."""
    server = DemoJudgeServer(port=0, judge=demo_judge.judge).start()
    api = openai.OpenAI(base_url=server.base_url, api_key="demo", max_retries=0, timeout=10)
    try:
        yield api
    finally:
        api.close()
        server.stop()


def test_demo_answers_carry_the_rag_prompt_that_produced_them() -> None:
    [body] = demo_bodies("demo", [FRONTS])
    system, user = body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    assert FRONTS["question"] in user["content"]
    assert all(p in user["content"] for p in FRONTS["passages"])
    assert body["logprobs"] == answer_logprobs(FRONTS)


def test_the_generator_replays_a_demo_answer_with_its_logprobs(fresh_api: openai.OpenAI) -> None:
    completion = generate(fresh_api, EXHAUST, logprobs=True)
    choice = completion.choices[0]
    assert completion.model == EXHAUST["model"]
    assert choice.message.content == EXHAUST["response"]
    assert choice.logprobs is not None and choice.logprobs.content is not None
    assert "".join(t.token for t in choice.logprobs.content) == EXHAUST["response"]
    # The very probabilities the demo ingested with the answer.
    assert choice.logprobs.model_dump(mode="json")["content"] == (
        answer_logprobs(EXHAUST)["content"]
    )
    assert generate(fresh_api, EXHAUST).choices[0].logprobs is None  # only when asked


def test_an_unlabelled_answer_is_the_same_every_time(fresh_api: openai.OpenAI) -> None:
    texts = [generate(fresh_api, EXHAUST).choices[0].message.content for _ in range(3)]
    assert texts == [EXHAUST["response"]] * 3


def test_a_labelled_answer_varies_in_its_labelled_spans(fresh_api: openai.OpenAI) -> None:
    completions = [generate(fresh_api, TRACT, logprobs=True) for _ in range(3)]
    texts = [c.choices[0].message.content for c in completions]
    assert texts[0] == TRACT["response"]
    assert len(set(texts)) == 3
    # Version 1 leaves the invented sentences out, version 2 hedges instead; the rest stays.
    assert TRACT_INVENTED not in texts[1] and TRACT_INVENTED not in texts[2]
    assert all(TRACT_SUPPORTED in t for t in texts)
    assert "The passages do not say more about this." in texts[2]
    for completion, text in zip(completions, texts, strict=True):
        content = completion.choices[0].logprobs.content
        assert "".join(t.token for t in content) == text
    # A number in a labelled span is shifted: the value comparison sees it.
    quilt = [generate(fresh_api, QUILT).choices[0].message.content for _ in range(3)]
    assert [("Passage 3 does not" in t, "Passage 4 does not" in t, "Passage 5 does not" in t)
            for t in quilt] == [(True, False, False), (False, True, False), (False, False, True)]


def test_the_same_investigation_twice_gets_the_same_samples(fresh_api: openai.OpenAI) -> None:
    first = [generate(fresh_api, TRACT).choices[0].message.content for _ in range(3)]
    second = [generate(fresh_api, TRACT).choices[0].message.content for _ in range(3)]
    assert first == second


def test_at_temperature_zero_the_answer_is_replayed(fresh_api: openai.OpenAI) -> None:
    texts = {generate(fresh_api, TRACT, temperature=0).choices[0].message.content
             for _ in range(3)}
    assert texts == {TRACT["response"]}


def test_other_messages_are_refused_not_invented(fresh_api: openai.OpenAI) -> None:
    other = [{"role": "user", "content": "Wie oft wird der Behälter geprüft?"}]
    with pytest.raises(openai.BadRequestError, match="replays only the demo answers"):
        generate(fresh_api, TRACT, messages=other)
    with pytest.raises(openai.NotFoundError):
        fresh_api.chat.completions.create(
            model="gpt-4o", messages=demo_messages(TRACT)  # type: ignore[arg-type]  # plain message dicts
        )


def contradiction(api: openai.OpenAI, row: dict[str, Any], samples: list[str],
                  language: str) -> consistency_prompt.ContradictionReply:
    messages = consistency_prompt.contradiction_messages(question=row["question"], samples=samples,
                                                  language=language)
    return consistency_prompt.parse_contradiction(
        ask(api, messages, max_tokens=200).choices[0].message.content
    )


@pytest.mark.parametrize("language", ["de", "en"])
def test_the_judge_answers_the_contradiction_check(
    fresh_api: openai.OpenAI, language: str
) -> None:
    same = [EXHAUST["response"]] * 3
    reply = contradiction(fresh_api, EXHAUST, same, language)
    assert reply.contradiction is False and reply.reason
    varied = [generate(fresh_api, TRACT).choices[0].message.content for _ in range(3)]
    reply = contradiction(fresh_api, TRACT, varied, language)
    assert reply.contradiction is True
    assert ("Antwort 2" if language == "de" else "Answer 2") in reply.reason
    # The retry prompt (after an unreadable reply) is answered the same way.
    retry = consistency_prompt.contradiction_retry_messages(
        question=TRACT["question"], samples=varied, language=language, reply="Hmm"
    )
    assert consistency_prompt.parse_contradiction(
        ask(fresh_api, retry, max_tokens=200).choices[0].message.content
    ).contradiction is True
    # Answers the demo does not know: a well-formed fallback, never an unreadable reply.
    unknown = contradiction(
        fresh_api, {"question": "Wie oft?"}, ["Alle 5 Jahre.", "Jährlich."], language
    )
    assert unknown.contradiction is False


# A sweep over the whole corpus: seconds, so the fast part leaves it to CI.
@pytest.mark.integration
def test_every_labelled_answer_is_inconsistent_and_no_other() -> None:
    """Over the sample (every 12th answer; all 3,956 take 100 s and agree as well), without
    HTTP: the three versions, compared as an investigation compares them (values first, then
    the judge), are inconsistent exactly for the answers with human labels, of any kind."""
    judge = DemoJudge(load_answers())
    sample = {row["id"] for row in SAMPLE}
    wrong = []
    for answer in (a for a in judge.answers if a.id in sample):
        samples = [vary(answer, version)[0] for version in range(3)]
        comparison = consistency_compare.compare_samples(samples, language="en")
        reply = None
        if consistency_compare.needs_judge(comparison):
            messages = consistency_prompt.contradiction_messages(question=answer.question,
                                                          samples=samples, language="en")
            reply = consistency_prompt.parse_contradiction(judge.reply(messages)[0])
        verdict = consistency_compare.decide(comparison, reply, language="en")
        if verdict.consistent is not (not answer.spans):
            wrong.append(answer.id)
    assert wrong == []


@pytest.mark.django_db
def test_an_investigation_over_demo_answers(
    monkeypatch: pytest.MonkeyPatch, demo_judge: DemoJudgeServer,
) -> None:
    """Demo answers ingested as the demo does, an investigation started and each question
    executed as the worker does, against one demo server as generator and judge: inconsistent
    exactly where humans labelled invented content, and the same again on a second run."""
    from django.contrib.auth.models import User

    from investigations import selectors as investigation_selectors
    from investigations import services as investigation_services
    from investigations import tasks as investigation_tasks
    from investigations.models import Investigation

    monkeypatch.setattr(investigation_tasks.investigate_question, "apply_async",
                        lambda *args, **kwargs: None)
    use_case = use_case_create(slug="demo", name="Demo", language="en", sample_rate=0.01)
    service, _ = service_create(name="demo-rag", use_cases=[use_case])
    bodies = demo_bodies(use_case.slug, SAMPLE)
    labelled = [b for b in bodies if b["metadata"]["human_labels"]][::32]  # 4 of 128
    clean = [b for b in bodies if not b["metadata"]["human_labels"]][::51]  # 4 of 202
    results = services.answer_ingest_batch(service=service, items=labelled + clean)
    assert [r.outcome for r in results] == [IngestOutcome.CREATED] * len(results)
    lead = User.objects.create_user("lead")
    use_case.team_leads.add(lead)
    server = DemoJudgeServer(port=0, judge=demo_judge.judge).start()
    try:
        with override_settings(
            TREUE_GENERATOR_BASE_URL=server.base_url, TREUE_GENERATOR_API_KEY="demo",
            TREUE_JUDGE_BASE_URL=server.base_url, TREUE_JUDGE_API_KEY="demo",
            TREUE_JUDGE_MODEL=DEMO_JUDGE_MODEL,
        ):
            verdicts = []
            for _ in range(2):
                plan = investigation_selectors.investigation_plan(
                    use_case=use_case, selection="latest", n=8, samples=3, temperature=0.7
                )
                assert plan.skipped == []
                investigation = investigation_services.investigation_start(plan=plan, user=lead)
                outcomes = [
                    investigation_services.question_execute(question_id=q.pk)
                    for q in investigation.questions.all()
                ]
                assert outcomes == ["done"] * 8
                investigation.refresh_from_db()
                assert investigation.status == Investigation.Status.FINISHED
                verdicts.append({
                    q.answer.external_id: q.consistent
                    for q in investigation.questions.select_related("answer")
                })
    finally:
        server.stop()
    expected = {b["external_id"]: not b["metadata"]["human_labels"] for b in labelled + clean}
    assert verdicts == [expected, expected]
    question = investigation.questions.filter(consistent=True).first()
    assert question is not None
    assert question.generator_calls == 3 and question.judge_calls == 1
    assert all(s["logprobs"] and s["model"] == question.answer.model
               for s in question.sample_data)


# --- Batched and one-call judging (judging/domain/batched.py, single.py) ---------

TRACT_CLAIMS = [TRACT_INVENTED, TRACT_SUPPORTED]


def batch_reply(api: openai.OpenAI, messages: list[dict[str, str]], **extra: Any) -> str:
    return ask(api, messages, max_tokens=800, **extra).choices[0].message.content


@pytest.mark.parametrize("language", ["en", "de"])
def test_a_batched_request_gets_a_line_per_claim_under_its_id(
    judge_api: openai.OpenAI, language: str
) -> None:
    """The demo judge answers batched verification too: the same labels as one by one, each
    under its claim's id with the chunk sharing most of its words (none for an unsupported
    claim) and where the verdict came from."""
    messages = verify_batch_messages(chunks=TRACT["passages"], claims=TRACT_CLAIMS,
                                     language=language)
    reply = batch_reply(judge_api, messages)
    ids = claim_ids(TRACT_CLAIMS)
    assert [line.split(":")[0] for line in reply.splitlines()] == ids  # ids, not positions
    reading = read_batch(reply, TRACT_CLAIMS)
    assert reading.missing == () and reading.form == "lines"
    labels = [reading.verdicts[n].label for n in (1, 2)]
    assert labels == [verify(judge_api, TRACT, c, language) for c in TRACT_CLAIMS]
    assert labels == [Label.UNGEDECKT, Label.GEDECKT]
    assert reading.verdicts[1].chunks == ()
    assert len(reading.verdicts[2].chunks) == 1
    assert 1 <= reading.verdicts[2].chunks[0] <= len(TRACT["passages"])
    assert reading.verdicts[2].reason.startswith(
        "The human annotators" if language == "en" else "Die menschlichen")
    assert reading.verdicts[2].reason.endswith(".")  # one sentence


def test_a_batched_request_without_evidence_gets_the_words_alone(
    judge_api: openai.OpenAI,
) -> None:
    messages = verify_batch_messages(chunks=TRACT["passages"], claims=TRACT_CLAIMS,
                                     language="de", evidence=False)
    ids = claim_ids(TRACT_CLAIMS)
    assert batch_reply(judge_api, messages) == f"{ids[0]}: UNGEDECKT\n{ids[1]}: GEDECKT"


def test_the_claims_are_read_after_the_last_list_header(judge_api: openai.OpenAI) -> None:
    """A passage that holds a list header and id-like lines itself is context, not claims."""
    chunks = ["Claims (2):\nZ9: not a claim\n" + TRACT["passages"][0], *TRACT["passages"][1:]]
    messages = verify_batch_messages(chunks=chunks, claims=[TRACT_SUPPORTED], language="en")
    reply = batch_reply(judge_api, messages)
    assert reply.startswith(f"{claim_ids([TRACT_SUPPORTED])[0]}: GEDECKT")
    assert "Z9" not in reply


@pytest.mark.parametrize("evidence", [True, False])
@pytest.mark.parametrize("language", ["en", "de"])
def test_a_batched_request_with_a_schema_gets_json_in_it(
    judge_api: openai.OpenAI, language: str, evidence: bool
) -> None:
    """Structured output: with a response_format the reply is the schema's object, its items
    with the schema's fields, and the schema is billed as prompt tokens."""
    messages = verify_batch_messages(chunks=TRACT["passages"], claims=TRACT_CLAIMS,
                                     language=language, evidence=evidence, structured=True)
    ids = claim_ids(TRACT_CLAIMS)
    schema = batch_schema(evidence=evidence)
    structured = ask(judge_api, messages, max_tokens=800, response_format=schema)
    body = json.loads(structured.choices[0].message.content)
    fields = ["id", "verdict", "chunks", "reason"] if evidence else ["id", "verdict"]
    assert [list(item) for item in body["verdicts"]] == [fields, fields]
    assert [item["id"] for item in body["verdicts"]] == ids
    reading = read_batch(structured.choices[0].message.content, TRACT_CLAIMS)
    assert reading.form == "json" and reading.missing == ()
    assert [reading.verdicts[n].label for n in (1, 2)] == [Label.UNGEDECKT, Label.GEDECKT]
    if evidence:
        assert reading.verdicts[2].chunks and reading.verdicts[2].reason
    # The same messages without the schema: the format in words still asks for JSON, and the
    # schema's JSON is what the prompt tokens differ by.
    plain = ask(judge_api, messages, max_tokens=800)
    assert plain.choices[0].message.content == structured.choices[0].message.content
    assert structured.usage is not None and plain.usage is not None
    schema_chars = len(json.dumps(schema, ensure_ascii=False, separators=(",", ":")))
    assert structured.usage.prompt_tokens - plain.usage.prompt_tokens == -(-schema_chars // 4)


def test_a_response_format_of_an_unknown_type_is_refused(demo_judge: DemoJudgeServer) -> None:
    messages = verify_batch_messages(chunks=TRACT["passages"], claims=TRACT_CLAIMS,
                                     language="en")
    for response_format in ({"type": "xml"}, {"type": "json_schema"}, "json"):
        status, body = demo_judge.completion({"model": DEMO_JUDGE_MODEL, "messages": messages,
                                              "response_format": response_format})
        assert status == 400 and "response_format" in body["error"]["message"]


@pytest.mark.parametrize("structured", [False, True])
@pytest.mark.parametrize("language", ["en", "de"])
def test_a_correction_is_answered_for_the_ids_it_names(
    judge_api: openai.OpenAI, language: str, structured: bool
) -> None:
    """The product's one correction in the same conversation: only the claims it names."""
    claims = [*TRACT_CLAIMS, SHORTCUT]
    ids = claim_ids(claims)
    messages = verify_batch_messages(chunks=TRACT["passages"], claims=claims, language=language,
                                     structured=structured)
    missing = [ids[2], ids[0]]
    again = correction_messages(messages, f"{ids[1]}: GEDECKT\n1: UNGEDECKT", missing,
                                language=language, structured=structured)
    extra = {"response_format": batch_schema()} if structured else {}
    reply = batch_reply(judge_api, again, **extra)
    reading = read_batch(reply, [claims[2], claims[0]], ids=missing)
    assert reading.missing == ()
    assert reading.form == ("json" if structured else "lines")
    assert reading.verdicts[2].label is Label.UNGEDECKT  # TRACT_INVENTED, in its own passages
    assert ids[1] not in reply  # answered already


@pytest.mark.parametrize("structured", [False, True])
@pytest.mark.parametrize("language", ["en", "de"])
def test_a_one_call_request_gets_the_claims_with_their_verdicts(
    judge_api: openai.OpenAI, language: str, structured: bool
) -> None:
    """One call: the claims as the decomposition gives them, each with the verdict one by one
    gives it, as JSON (in the schema where one is sent)."""
    messages = single.single_messages(question=TRACT["question"], answer=TRACT["response"],
                                      chunks=TRACT["passages"], language=language)
    extra = {"response_format": single.single_schema()} if structured else {}
    reply = ask(judge_api, messages, max_tokens=3000, **extra).choices[0].message.content
    reading = single.read_single(reply, chunk_count=len(TRACT["passages"]))
    claims = decompose(judge_api, TRACT, language)
    assert reading.claims == claims and claims is not None
    assert sorted(reading.verdicts) == list(range(len(claims)))
    assert [reading.verdicts[n].label for n in range(len(claims))] == [
        verify(judge_api, TRACT, c, language) for c in claims]
    supported = reading.verdicts[claims.index(TRACT_SUPPORTED)]
    assert supported.chunks and supported.reason.endswith(".")
    assert reading.verdicts[claims.index(TRACT_INVENTED)].chunks == ()
    # The correction (the reply again, and a reminder of the format) gets the same reply.
    again = single.correction_messages(messages, "Sure!", language=language)
    assert ask(judge_api, again, max_tokens=3000, **extra).choices[0].message.content == reply


def test_a_one_call_request_without_evidence_and_an_abstention(
    judge_api: openai.OpenAI,
) -> None:
    messages = single.single_messages(question=FRONTS["question"], answer=FRONTS["response"],
                                      chunks=FRONTS["passages"], language="en", evidence=False)
    reply = ask(judge_api, messages, max_tokens=3000,
                response_format=single.single_schema(evidence=False)).choices[0].message.content
    assert json.loads(reply) == {"claims": [{"claim": c, "verdict": "GEDECKT"}
                                            for c in FRONTS_CLAIMS]}
    messages = single.single_messages(
        question="how to make a hickey go away",
        answer="Unable to answer based on given passages.", chunks=["Ice helps."], language="de")
    assert json.loads(ask(judge_api, messages).choices[0].message.content) == {"claims": []}


def test_the_variants_bias_only_the_verdicts_of_a_one_call_reply(
    judge_api: openai.OpenAI,
) -> None:
    messages = single.single_messages(question=TRACT["question"], answer=TRACT["response"],
                                      chunks=TRACT["passages"], language="en")
    reply = judge_api.chat.completions.create(
        model=f"{DEMO_JUDGE_MODEL}-lenient", messages=messages,  # type: ignore[arg-type]  # plain message dicts
        temperature=0, max_tokens=3000,
    ).choices[0].message.content
    assert reply is not None
    reading = single.read_single(reply)
    assert reading.claims is not None and TRACT_INVENTED in reading.claims
    assert reading.verdicts[reading.claims.index(TRACT_INVENTED)].label is Label.TEILWEISE


@pytest.mark.django_db
@pytest.mark.parametrize(("mode", "calls", "path"), [
    (JudgeMode.BATCHED, 2, "batched"), (JudgeMode.SINGLE, 1, "single"),
])
def test_batched_and_one_call_runs_through_the_pipeline(
    demo_judge: DemoJudgeServer, mode: str, calls: int, path: str
) -> None:
    """As the worker runs them: the product asks with a schema, the demo judge keeps to it,
    and the product remembers that it does; every claim's verdict comes from the first reply."""
    use_case = use_case_create(slug=f"demo-{mode}", name="Demo", language="en",
                                        sample_rate=1.0, judge_mode=mode)
    service, _ = service_create(name=f"demo-rag-{mode}", use_cases=[use_case])
    bodies = demo_bodies(use_case.slug, [TRACT, FRONTS])
    with override_settings(TREUE_JUDGE_BASE_URL=demo_judge.base_url,
                           TREUE_JUDGE_MODEL=DEMO_JUDGE_MODEL, TREUE_JUDGE_API_KEY="demo",
                           TREUE_JUDGE_BATCH_SIZE=30):
        services.answer_ingest_batch(service=service, items=bodies)
        runs = JudgeRun.objects.filter(answer__use_case=use_case).order_by("pk")
        assert [judge_run_execute(run_id=run.pk) for run in runs] == ["scored"] * 2
    assert JudgeEndpoint.objects.get(model=DEMO_JUDGE_MODEL).structured_output is True
    for run in runs.all():
        assert (run.calls, run.verify_path) == (calls, path)
        assert run.claims.exclude(evidence_chunks=[]).exists()
        assert not run.claims.filter(reason="").exists()
    tract = runs.get(answer__external_id=f"ragtruth-{TRACT['id']}")
    assert tract.claims.get(text=TRACT_INVENTED).label == Label.UNGEDECKT
