"""The demo judge: an OpenAI-compatible server whose verdicts are RAGTruth's human labels.

Everything goes through the real ``openai`` client against the server on a free loopback port,
with the prompts the worker really sends (``judge_prompt``) and the parsers that really read the
replies (``judge_parse``); the last tests run the whole tier-2 pipeline from ingest to score.
"""

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from django.test import override_settings
from django.utils import timezone

from monitoring import services
from monitoring.demo import DEMO_JUDGE_MODEL, SAMPLE_FILE, demo_answers
from monitoring.demo_judge import DemoJudge, DemoJudgeServer, load_answers
from monitoring.domain.judge_parse import Label, parse_claims, parse_verdict
from monitoring.domain.judge_prompt import (
    decompose_messages,
    decompose_retry_messages,
    format_context,
    verify_messages,
    verify_retry_messages,
)
from monitoring.judge_client import JudgeClient, JudgeConfig, JudgeMisconfigured
from monitoring.models import Answer, JudgeRun
from monitoring.services.judging import judge_run_execute

ROWS = {row["id"]: row for row in map(json.loads, SAMPLE_FILE.read_text("utf-8").splitlines())}

# 14090: two "Evident Baseless Info" spans, each exactly one sentence.
TRACT = ROWS["14090"]
TRACT_INVENTED = 'For example, someone could "tract along" their thoughts in a conversation.'
TRACT_SUPPORTED = "In contemporary usage, a duct is a pipe or tube that carries a fluid or gas."
# 13757: one span over the second half of a sentence.
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
        messages=messages,  # type: ignore[arg-type]
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


def test_lists_only_the_demo_model(judge_api: openai.OpenAI) -> None:
    assert [m.id for m in judge_api.models.list()] == [DEMO_JUDGE_MODEL]


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
        (FRONTS, FRONTS_CLAIMS[1], Label.TEILWEISE),  # a span over its second half
        (FRONTS, FRONTS_CLAIMS[0], Label.GEDECKT),
        (EXHAUST, "Install the mufflers on either end of the exhaust pipe.", Label.GEDECKT),
    ],
)
@pytest.mark.parametrize("language", ["en", "de"])
def test_verification_replays_the_human_labels(
    judge_api: openai.OpenAI, row: dict[str, Any], claim: str, label: Label, language: str
) -> None:
    assert verify(judge_api, row, claim, language) is label


def test_retries_get_the_same_reply(judge_api: openai.OpenAI) -> None:
    context = format_context(TRACT["passages"])
    retry = verify_retry_messages(context=context, claim=TRACT_INVENTED, language="de",
                                  previous_reply="Vielleicht")
    assert ask(judge_api, retry, max_tokens=16).choices[0].message.content == "UNGEDECKT"
    retry = decompose_retry_messages(question=FRONTS["question"], answer=FRONTS["response"],
                                     language="en", previous_reply="Sure, here they are")
    assert parse_claims(ask(judge_api, retry).choices[0].message.content) == FRONTS_CLAIMS


def test_unknown_text_gets_a_well_formed_fallback(judge_api: openai.OpenAI) -> None:
    row = {"question": "Wie oft wird geprüft?", "response": UNKNOWN_ANSWER,
           "passages": ["Prüfintervall: 5 Jahre."]}
    assert decompose(judge_api, row, "de") == [
        "Der Druckbehälter wird alle 5 Jahre geprüft.",
        "Änderungen gibt die Sicherheitsfachkraft frei.",
    ]
    assert verify(judge_api, row, "Der Druckbehälter wird alle 5 Jahre geprüft.", "de") is (
        Label.GEDECKT
    )
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


def test_every_demo_answer_agrees_with_its_labels() -> None:
    """Over the whole sample, without HTTP: an answer with a human hallucination label gets at
    least one claim below GEDECKT, an answer without labels none (320 of 320 agree)."""
    judge = DemoJudge(load_answers())
    disagree = []
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
        if bool(row["labels"]) != bool(labels - {Label.GEDECKT}):
            disagree.append(row["id"])
    assert disagree == []


@pytest.mark.django_db
def test_ingest_to_score_through_the_pipeline(demo_judge: DemoJudgeServer) -> None:
    """Demo answers ingested as the demo does, each run executed as the worker does."""
    use_case = services.use_case_create(slug="demo", name="Demo", language="en", sample_rate=1.0)
    service, _ = services.service_create(name="demo-rag", use_cases=[use_case])
    bodies = list(demo_answers(use_case=use_case.slug, now=timezone.now()))
    labelled = [b for b in bodies if b["metadata"]["human_labels"]][::16]  # 8 of 128
    clean = [b for b in bodies if not b["metadata"]["human_labels"]][::24]  # 8 of 192
    with override_settings(TREUE_JUDGE_BASE_URL=demo_judge.base_url,
                           TREUE_JUDGE_MODEL=DEMO_JUDGE_MODEL, TREUE_JUDGE_API_KEY="demo"):
        results = services.answer_ingest_batch(service=service, items=labelled + clean)
        assert [r.status for r in results] == [201] * len(results)
        runs = JudgeRun.objects.filter(answer__use_case=use_case).order_by("pk")
        assert runs.count() == 16
        assert {run.judge_model for run in runs} == {DEMO_JUDGE_MODEL}
        outcomes = [judge_run_execute(run_id=run.pk) for run in runs]
    assert outcomes == ["scored"] * 16

    scores = dict(
        Answer.objects.filter(use_case=use_case).values_list("external_id", "score")
    )
    below = [b["external_id"] for b in labelled if scores[b["external_id"]] < 1]
    perfect = [b["external_id"] for b in clean if scores[b["external_id"]] == 1.0]
    # Measured: 8 of 8 labelled answers score below 1, 8 of 8 unlabelled score 1.0.
    assert (len(below), len(perfect)) == (8, 8)

    run = JudgeRun.objects.filter(answer__use_case=use_case, score__lt=1).first()
    assert run is not None
    assert run.status == JudgeRun.Status.SUCCEEDED
    assert run.calls == 1 + run.claims.count()
    assert run.prompt_tokens > 0 and run.completion_tokens > 0
    assert {c.judge_model for c in run.claims.all()} == {DEMO_JUDGE_MODEL}
    assert set(run.claims.values_list("label", flat=True)) - {"GEDECKT"}
