"""The README's examples (docs/api.md) against the demo's own logic, in seconds: the curl
example's answer and the Python example's answers, made by the demo's model, are judged by the
demo's judge as the demo judges them (its use cases, batched, the word check for sentences
without a human label), and the OpenTelemetry example names a use case the demo has, so its
spans are not refused. tests/integration/test_readme_examples.py runs the examples themselves
against a running demo; this is what they should come to.

The word check reads German numbers: "Alle 5 Jahre." is the passage's "5 Jahre", "fünf" is 5,
"1.250,00 €" is 1250 (and a stump "1." of it is not), and the chunk ranks the judge prompt puts
before each passage ("[1] ") are no numbers of the passages.
"""

import ast
import functools
import json
import shlex
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client, override_settings
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ingest import services
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from judging.domain.judge_parse import Label
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, JudgeMode, JudgeRun, Service, UseCase
from monitoring.services.use_cases import service_create, use_case_create
from tests.integration.test_readme_examples import (
    CURL_INGEST,
    EXAMPLES,
    PYTHON_INSTRUMENT,
    tagged,
)
from tests.traces.otlp import PROTOBUF, URL, rag_spans, request, trace_id
from treue_demo.answers import load_answers
from treue_demo.data import DEMO_JUDGE_MODEL, USE_CASES
from treue_demo.generator import rag_reply
from treue_demo.judge import DemoJudge
from treue_demo.management.commands.seed_demo import DEMO_SERVICE
from treue_demo.server import DemoJudgeServer
from treue_demo.word_check import word_check

pytestmark = pytest.mark.usefixtures("demo_app")

DEMO_SLUGS = {case.slug for case in USE_CASES}


# --- the examples, read from docs/api.md -------------------------------------------------------


def curl_body() -> dict[str, Any]:
    """The JSON the curl example posts (its -d argument)."""
    words = shlex.split(tagged(CURL_INGEST).code.replace("\\\n", " "))
    return json.loads(words[words.index("-d") + 1])


def python_example() -> tuple[list[dict[str, Any]], dict[str, str], str]:
    """The Python example's chunks (what `retrieve` returns), its questions by request id and
    its system message."""
    tree = ast.parse(tagged(PYTHON_INSTRUMENT).code)
    retrieve = next(n for n in ast.walk(tree)
                    if isinstance(n, ast.FunctionDef) and n.name == "retrieve")
    returned = next(n for n in ast.walk(retrieve) if isinstance(n, ast.Return))
    assert returned.value is not None
    chunks = ast.literal_eval(returned.value)
    questions = next(
        ast.literal_eval(n.value) for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "questions" for t in n.targets)
    )
    system = next(
        ast.literal_eval(d.values[1]) for d in ast.walk(tree) if isinstance(d, ast.Dict)
        and [ast.literal_eval(k) for k in d.keys if k is not None] == ["role", "content"]
        and ast.literal_eval(d.values[0]) == "system"
    )
    return chunks, questions, system


def otel_resource() -> dict[str, str]:
    """The OpenTelemetry example's OTEL_RESOURCE_ATTRIBUTES."""
    line = next(line for line in EXAMPLES.read_text().splitlines()
                if "OTEL_RESOURCE_ATTRIBUTES=" in line)
    value = line.split("OTEL_RESOURCE_ATTRIBUTES=", 1)[1].split()[0]
    return dict(pair.split("=", 1) for pair in value.split(","))


# --- the demo ------------------------------------------------------------------------------------


@functools.cache
def _judge() -> DemoJudge:
    return DemoJudge(load_answers())


@pytest.fixture
def demo_judge() -> Iterator[DemoJudgeServer]:
    server = DemoJudgeServer(port=0, judge=_judge()).start()
    try:
        with override_settings(TREUE_JUDGE_BASE_URL=server.base_url,
                               TREUE_JUDGE_MODEL=DEMO_JUDGE_MODEL, TREUE_JUDGE_API_KEY="demo"):
            yield server
    finally:
        server.stop()


@pytest.fixture
def demo(db: None) -> tuple[dict[str, UseCase], Service, str]:
    """The demo's use cases as seed_demo makes them (batched, English prompts), every answer
    sampled here, and its service with its key."""
    use_cases = {
        case.slug: use_case_create(slug=case.slug, name=case.name, language="en",
                                   sample_rate=1.0, judge_mode=JudgeMode.BATCHED)
        for case in USE_CASES
    }
    service, key = service_create(name=DEMO_SERVICE, use_cases=list(use_cases.values()))
    return use_cases, service, key


def judged(service: Service, body: dict[str, Any]) -> Answer:
    """The answer ingested as the API would, and judged by the demo judge."""
    result = services.answer_ingest(service=service, payload=AnswerIn.model_validate(body),
                                    raw=body)
    assert result.outcome is IngestOutcome.CREATED, result.errors
    assert result.answer is not None and result.answer.sampled
    run = JudgeRun.objects.get(answer=result.answer)
    assert judge_run_execute(run_id=run.pk) == "scored"
    return Answer.objects.get(pk=result.answer.pk)


def labels(answer: Answer) -> list[tuple[str, str]]:
    assert answer.current_run is not None
    return [(c.text, c.label) for c in answer.current_run.claims.order_by("position")]


# --- the tests -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_curl_example_is_supported_in_full(
    demo: tuple[dict[str, UseCase], Service, str], demo_judge: DemoJudgeServer
) -> None:
    """"Alle 5 Jahre." against "Prüfintervall: 5 Jahre." (it scored 0.5, TEILWEISE: "alle"
    was not in the passage)."""
    body = curl_body()
    assert body["use_case"] in DEMO_SLUGS
    answer = judged(demo[1], body)
    assert labels(answer) == [("Alle 5 Jahre.", Label.GEDECKT.value)]
    assert answer.score == 1.0


@pytest.mark.django_db
def test_the_python_example_answers_in_full_and_is_judged_on_its_numbers(
    demo: tuple[dict[str, UseCase], Service, str], demo_judge: DemoJudgeServer
) -> None:
    """The demo model answers with whole sentences, "1.250,00 €" included (it cut the sentence
    at the thousands point: "Die Prüfung kostet 1."), and the judge calls each supported; the
    stump, sent by hand, is not (the "1" was found in the prompt's chunk rank "[1]")."""
    chunks, questions, system = python_example()
    sources = "\n\n".join(chunk["text"] for chunk in chunks)
    replies = {}
    for request_id, question in questions.items():
        messages = [{"role": "system", "content": system},
                    {"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {question}"}]
        text, _, _ = rag_reply(messages)
        replies[request_id] = text
        answer = judged(demo[1], {
            "external_id": request_id, "use_case": "demo-kundenservice", "question": question,
            "answer": text, "model": "treue-demo-rag", "chunks": chunks,
        })
        assert answer.score == 1.0, (text, labels(answer))
    assert "Die Prüfung kostet 1.250,00 € je Behälter." in replies.values()
    assert "Prüfintervall: Behälter werden alle 5 Jahre geprüft." in replies.values()

    stump = judged(demo[1], {
        "external_id": "stump", "use_case": "demo-kundenservice",
        "question": "Was kostet die Prüfung?", "answer": "Die Prüfung kostet 1.",
        "model": "treue-demo-rag", "chunks": chunks,
    })
    assert labels(stump) == [("Die Prüfung kostet 1.", Label.UNGEDECKT.value)]
    assert stump.score == 0.0


@pytest.mark.django_db
def test_the_opentelemetry_example_names_a_use_case_the_demo_has(
    demo: tuple[dict[str, UseCase], Service, str], client: Client
) -> None:
    """Its `treue.use_case=kundenservice` was refused as one rejectedSpans, which the SDK
    reports as a success."""
    resource = otel_resource()
    assert resource["treue.use_case"] in DEMO_SLUGS
    response = client.generic(
        "POST", URL, request(rag_spans(trace_id(41)), resource=resource).SerializeToString(),
        content_type=PROTOBUF, HTTP_AUTHORIZATION=f"Bearer {demo[2]}",
    )
    assert response.status_code == 200
    answer = trace_service_pb2.ExportTraceServiceResponse.FromString(response.content)
    assert not answer.HasField("partial_success"), answer.partial_success.error_message


@pytest.mark.parametrize(("claim", "context", "label"), [
    ("Alle 5 Jahre.", "Prüfintervall: 5 Jahre.", Label.GEDECKT),
    ("Alle fünf Jahre.", "Prüfintervall: 5 Jahre.", Label.GEDECKT),
    ("Alle 5 Jahre.", "Der Behälter wird alle fünf Jahre geprüft.", Label.GEDECKT),
    ("Alle sechs Jahre.", "Prüfintervall: 5 Jahre.", Label.UNGEDECKT),
    ("Alle 6 Jahre.", "Prüfintervall: 5 Jahre.", Label.UNGEDECKT),
    ("Nach 5 Jahren.", "Prüfintervall: 5 Jahre.", Label.GEDECKT),  # by its stem
    ("Die Prüfung kostet 1.250,00 €.", "[1] Die Prüfung kostet 1.250,00 € je Behälter.",
     Label.GEDECKT),
    ("Die Prüfung kostet 1.250 €.", "[1] Die Prüfung kostet 1.250,00 € je Behälter.",
     Label.GEDECKT),
    ("Die Prüfung kostet 1,250.00 EUR.", "[1] Die Prüfung kostet 1.250,00 € je Behälter.",
     Label.GEDECKT),  # 3 of 3 content words: "prüfung", "kostet"; "EUR" is short
    ("Die Prüfung kostet 1.", "[1] Die Prüfung kostet 1.250,00 € je Behälter.",
     Label.UNGEDECKT),
    ("Die Prüfung kostet 2.250,00 €.", "[1] Die Prüfung kostet 1.250,00 € je Behälter.",
     Label.UNGEDECKT),
    ("Der Anteil liegt bei 0,5.", "Der Anteil liegt bei 0.5 Prozent.", Label.GEDECKT),
    ("Der Behälter wird nicht geprüft.", "Der Behälter wird alle 5 Jahre geprüft.",
     Label.UNGEDECKT),
])
def test_the_word_check_reads_german_numbers(claim: str, context: str, label: Label) -> None:
    assert word_check(claim, context) is label
