"""Spans acknowledged are on disk: committed before the 200, found by an assembly in another
connection (a restarted process); and the beat sweep is scheduled and runs the assembly."""

from typing import Any

import pytest
from django.db import connection
from django.test import Client

from monitoring.models import Answer
from monitoring.services.use_cases import service_create, use_case_create
from tests.traces.conftest import OtlpClient
from tests.traces.otlp import ANSWER, rag_spans, request, trace_id
from traces.models import OtlpSpan
from traces.tasks import assemble_due_traces
from treue_site.celery import app


@pytest.mark.django_db(transaction=True)
def test_spans_survive_a_new_connection_and_are_assembled_by_the_beat_task(
    settings: Any,
) -> None:
    settings.TREUE_OTLP_QUIET_SECONDS = 0.0
    use_case = use_case_create(slug="kundenservice", name="K", language="de")
    _, key = service_create(name="rag-bot", use_cases=[use_case])
    trace = trace_id(99)
    response = OtlpClient(Client(), key).post(request(rag_spans(trace, with_root=False)))
    assert response.status_code == 200
    connection.close()  # what the web process committed, seen from a fresh connection
    assert OtlpSpan.objects.count() == 2

    OtlpClient(Client(), key).post(request(rag_spans(trace, with_retriever=False,
                                                     with_llm=False)))
    connection.close()
    assert assemble_due_traces.apply().get() == 1
    assert Answer.objects.get(external_id=trace).text == ANSWER
    assert not OtlpSpan.objects.exists()


def test_the_sweep_is_on_the_beat_schedule() -> None:
    entry = next(e for e in app.conf.beat_schedule.values()
                 if e["task"] == "traces.tasks.assemble_due_traces")
    assert entry["schedule"] == 10.0
    assert assemble_due_traces.name == "traces.tasks.assemble_due_traces"
