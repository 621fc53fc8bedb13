"""The answer explorer: filters, sort orders and paging on the list page, and the CSV and XLSX
exports of the filtered set — their content, their guard against spreadsheet formulas, their
streaming, and who gets which rows.

The answers are built by hand (not through the ingest) so that every figure a filter looks at is
set on purpose: score, status, chunk count, best similarity, time.
"""

import csv
import io
import re
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any
from unittest import mock
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db.models import F
from django.db.models.query import QuerySet
from django.http import FileResponse, StreamingHttpResponse
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from dashboard.domain import xlsx_export
from dashboard.domain.csv_export import csv_text
from monitoring.models import Answer, RollupDay, Service, UseCase
from monitoring.services.use_cases import service_create, use_case_create
from tests.support.shared_world import built_once, no_server
from tests.support.world import WorldBuilder
from tests.support.xlsx import HOSTILE, HOSTILE_IDS, Cell, Sheet, read_sheet

INVALID_NOTE = "Einige Filter waren ungültig und wurden ignoriert."
HEADER = [
    "id", "created_at", "use_case", "service", "external_id", "question", "answer", "model",
    "flagged", "sampled", "sample_reason", "inclusion_probability", "status", "score",
    "abstention", "chunk_count", "best_chunk_score", "logprobs_status", "uncertain_words",
]


def list_url() -> str:
    return reverse("monitoring:answer_list")


def export_url() -> str:
    return reverse("monitoring:answer_export")


def xlsx_url() -> str:
    return reverse("monitoring:answer_export_xlsx")


def shown(html: str) -> list[int]:
    """Primary keys of the answers a list page links to, in page order."""
    return [int(pk) for pk in re.findall(r'href="/answers/(\d+)/"', html)]


def parse_csv(response: Any) -> list[list[str]]:
    assert isinstance(response, StreamingHttpResponse)
    body = response.getvalue().decode("utf-8")  # the streamed content, joined
    return list(csv.reader(io.StringIO(body, newline="")))


def exported_ids(response: Any) -> list[int]:
    rows = parse_csv(response)
    assert rows[0] == HEADER
    return [int(row[0]) for row in rows[1:]]


XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
BERLIN = ZoneInfo("Europe/Berlin")


def parse_xlsx(response: Any) -> Sheet:
    assert response.status_code == 200
    assert isinstance(response, FileResponse)
    assert response["Content-Type"] == XLSX
    sheet = read_sheet(response.getvalue())
    assert sheet.values()[0] == HEADER
    return sheet


def as_csv(cell: Cell | None, column: str) -> str:
    """A workbook cell as the CSV spells it, to compare the two exports value by value."""
    if cell is None:
        return ""
    if column == "created_at":
        # The CSV writes the stored UTC time with its offset; Excel has no time zones, so the
        # workbook holds the site's wall-clock time.
        local = cell.as_datetime().replace(tzinfo=BERLIN)
        return local.astimezone(UTC).isoformat()
    if cell.kind == "bool":
        return str(cell.value)
    if cell.kind == "number":
        assert column in NUMERIC, column
        return str(int(cell.value)) if column in INTEGERS else repr(cell.value)
    assert cell.kind == "text", cell
    return csv_text(cell.value)


INTEGERS = {"id", "chunk_count"}
NUMERIC = INTEGERS | {"inclusion_probability", "score", "best_chunk_score"}


def make_answer_row(
    *, use_case: UseCase, service: Service, external_id: str, created_at: datetime,
    **fields: Any,
) -> Answer:
    """An unsaved answer with plain defaults; keyword arguments set the figures under test."""
    values: dict[str, Any] = {
        "content_hash": "0" * 64,
        "question": f"Frage {external_id}?",
        "text": f"Antwort {external_id}.",
        "model": "gpt-4o-mini",
        "logprobs_status": Answer.LogprobsStatus.OK,
        "logprob_threshold": 0.5,
        "flagged": False,
        "sampled": True,
        "in_random_sample": True,
        "sample_reason": Answer.SampleReason.RANDOM,
        "inclusion_probability": 0.05,
        "status": Answer.Status.JUDGED,
        "chunk_count": 3,
        "best_chunk_score": 0.8,
    }
    values.update(fields)
    return Answer(
        use_case=use_case, service=service, external_id=external_id, created_at=created_at,
        **values,
    )


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def build(world_builder: WorldBuilder) -> tuple[User, dict[str, Answer]]:
    """The lead, seven answers the lead may see (in "a", which they lead, and "b", where they
    are expert) and one in "fremd", which they may not. 2025-W10 runs from Monday 3 March to
    Sunday 9 March. Multi-part: "good" and "queued" (and "foreign"); "bad" is single-part; the
    rest undetected.
    """
    lead = User.objects.create_user("teamleitung")
    a = world_builder.use_case("a", "A")
    b = world_builder.use_case("b", "B")
    fremd = world_builder.use_case("fremd", "Fremd")
    a.team_leads.add(lead)
    b.experts.add(lead)
    service, _ = world_builder.service("rag-bot", a, b, fremd)
    flagged = {"flagged": True, "sample_reason": Answer.SampleReason.FLAGGED,
               "inclusion_probability": 1.0, "in_random_sample": False}

    def add(name: str, use_case: UseCase, when: datetime, **fields: Any) -> Answer:
        answer = make_answer_row(
            use_case=use_case, service=service, external_id=name, created_at=when, **fields
        )
        answer.save()
        return answer

    return lead, {
        "good": add("good", a, utc(2025, 3, 3, 8), score=0.95, chunk_count=3,
                    best_chunk_score=0.8, multi_part=True),
        "bad": add("bad", a, utc(2025, 3, 5, 8), score=0.2, chunk_count=12,
                   best_chunk_score=0.3, multi_part=False, **flagged),
        # Sunday 23:30 in Berlin: still 2025-W10.
        "abst": add("abst", b, utc(2025, 3, 9, 22, 30), score=1.0, abstention=True,
                    chunk_count=2, best_chunk_score=0.45),
        # Monday 00:30 in Berlin, though still Sunday in UTC: 2025-W11.
        "queued": add("queued", b, utc(2025, 3, 9, 23, 30), status=Answer.Status.QUEUED,
                      score=None, chunk_count=0, best_chunk_score=None, multi_part=True,
                      **flagged),
        "notsamp": add("notsamp", a, utc(2025, 3, 12, 8), sampled=False,
                       in_random_sample=False, sample_reason=Answer.SampleReason.NOT_SAMPLED,
                       inclusion_probability=0.05, status=Answer.Status.NOT_SAMPLED,
                       score=None, chunk_count=5, best_chunk_score=0.6,
                       logprobs_status=Answer.LogprobsStatus.NONE),
        "failed": add("failed", b, utc(2025, 2, 20, 8), status=Answer.Status.FAILED,
                      score=None, chunk_count=11, best_chunk_score=0.49,
                      logprobs_status=Answer.LogprobsStatus.UNALIGNED, **flagged),
        "mid": add("mid", a, utc(2025, 3, 4, 8), score=0.5, chunk_count=10,
                   best_chunk_score=0.5),
        "foreign": add("foreign", fremd, utc(2025, 3, 4, 9), score=0.1, chunk_count=0,
                       best_chunk_score=None, multi_part=True, **flagged),
    }


@pytest.fixture(scope="module")
def built(django_db_setup: None, django_db_blocker: Any) -> Iterator[tuple[int, dict[str, int]]]:
    """The world, built once for the module (tests/support/shared_world.py): the lead's and
    the answers' keys."""

    def build_rows() -> tuple[int, dict[str, int]]:
        lead, answers = build(WorldBuilder(settings, server=no_server))
        return lead.pk, {name: answer.pk for name, answer in answers.items()}

    with built_once(django_db_blocker, build_rows) as keys:
        yield keys


@pytest.fixture(autouse=True)
def lead(built: tuple[int, dict[str, int]], db: None) -> User:
    """Every test here runs on the module's world (whether or not it asks for it), so that none
    sees other rows for having run after another."""
    return User.objects.get(pk=built[0])


@pytest.fixture
def world(built: tuple[int, dict[str, int]], lead: User) -> dict[str, Answer]:
    """The world's answers, read again for this test."""
    answers = Answer.objects.in_bulk(built[1].values())
    return {name: answers[pk] for name, pk in built[1].items()}


@pytest.fixture
def lead_client(client: Client, lead: User, world: dict[str, Answer]) -> Client:
    client.force_login(lead)
    return client


def pks(world: dict[str, Answer], names: Any) -> list[int]:
    return [world[n].pk for n in names]


VISIBLE = {"good", "bad", "abst", "queued", "notsamp", "failed", "mid"}
JUDGED = {"good", "bad", "abst", "mid"}
FILTER_CASES = [
    ({}, VISIBLE),
    ({"use_case": "a"}, {"good", "bad", "notsamp", "mid"}),
    ({"use_case": "b"}, {"abst", "queued", "failed"}),
    ({"week": "2025-W10"}, {"good", "bad", "abst", "mid"}),
    ({"week": "2025-w10"}, {"good", "bad", "abst", "mid"}),
    ({"week": "2025-W11"}, {"queued", "notsamp"}),
    ({"week": "2025-W08"}, {"failed"}),
    ({"week": "2025-W20"}, set()),
    ({"flagged": "1"}, {"bad", "queued", "failed"}),
    ({"flagged": "0"}, {"good", "abst", "notsamp", "mid"}),
    ({"sampled": "0"}, {"notsamp"}),
    ({"sampled": "1"}, VISIBLE - {"notsamp"}),
    ({"status": "judged"}, JUDGED),
    ({"status": "queued"}, {"queued"}),
    ({"status": "failed"}, {"failed"}),
    ({"status": "not_sampled"}, {"notsamp"}),
    ({"score_min": "0.5"}, {"good", "abst", "mid"}),
    ({"score_max": "0.5"}, {"bad", "mid"}),
    ({"score_min": "0.3", "score_max": "0.96"}, {"good", "mid"}),
    ({"score_min": "0", "score_max": "1"}, JUDGED),
    ({"score_min": "0.5", "score_max": "0.5"}, {"mid"}),
    ({"cause": "low_similarity"}, {"bad", "abst", "failed"}),
    ({"cause": "low_similarity", "similarity_below": "0.7"},
     {"bad", "abst", "failed", "mid", "notsamp"}),
    ({"cause": "low_similarity", "similarity_below": "0.3"}, set()),
    ({"similarity_below": "0.7"}, VISIBLE),  # a threshold alone filters nothing
    ({"cause": "no_chunks"}, {"queued"}),
    ({"cause": "many_chunks"}, {"bad", "failed"}),
    ({"cause": "no_logprobs"}, {"notsamp"}),
    ({"cause": "abstention"}, {"abst"}),
    # Not yet detected (None) is not multi-part.
    ({"cause": "multi_part"}, {"good", "queued"}),
    ({"date_from": "2025-03-10"}, {"queued", "notsamp"}),
    ({"date_to": "2025-03-09"}, {"good", "bad", "abst", "failed", "mid"}),
    ({"use_case": "a", "flagged": "1", "status": "judged"}, {"bad"}),
    ({"week": "2025-W10", "cause": "low_similarity", "use_case": "b"}, {"abst"}),
    ({"sort": "score", "flagged": "0"}, {"good", "abst", "notsamp", "mid"}),
    ({"page": "1", "use_case": "b"}, {"abst", "queued", "failed"}),
]
FILTER_IDS = ["&".join(f"{k}={v}" for k, v in p.items()) or "none" for p, _ in FILTER_CASES]


@pytest.mark.parametrize(("params", "expected"), FILTER_CASES, ids=FILTER_IDS)
def test_each_filter_narrows_the_list(
    lead_client: Client, world: dict[str, Answer], params: dict[str, str], expected: set[str]
) -> None:
    response = lead_client.get(list_url(), params)
    assert response.status_code == 200
    html = response.content.decode()
    assert INVALID_NOTE not in html
    assert set(shown(html)) == set(pks(world, expected))
    count = len(expected)
    assert f"{count} Antwort{'' if count == 1 else 'en'}</p>" in html


@pytest.mark.parametrize(("params", "expected"), FILTER_CASES, ids=FILTER_IDS)
def test_the_count_from_the_rollups_is_the_answers(
    lead_client: Client, world: dict[str, Answer], params: dict[str, str], expected: set[str]
) -> None:
    """With the rollups whole, a list filtered only by use case, week, flag and dates takes
    its count from the day rollups (the local day of created_at): the same count."""
    call_command("rebuild_rollups", stdout=StringIO())
    html = lead_client.get(list_url(), params).content.decode()
    assert set(shown(html)) == set(pks(world, expected))
    count = len(expected)
    assert f"{count} Antwort{'' if count == 1 else 'en'}</p>" in html


def test_the_rollups_count_where_they_can_and_the_answers_elsewhere(
    lead_client: Client, world: dict[str, Answer]
) -> None:
    call_command("rebuild_rollups", stdout=StringIO())
    RollupDay.objects.update(answers=F("answers") + 100)  # a count that can only be theirs
    html = lead_client.get(list_url(), {"use_case": "a"}).content.decode()
    assert "404 Antworten</p>" in html  # 4 answers on 4 days of "a"
    html = lead_client.get(list_url(), {"use_case": "a", "status": "judged"}).content.decode()
    assert "3 Antworten</p>" in html  # counted from the answers


@pytest.mark.parametrize(("params", "expected"), FILTER_CASES, ids=FILTER_IDS)
def test_export_holds_exactly_the_filtered_answers(
    lead_client: Client, world: dict[str, Answer], params: dict[str, str], expected: set[str]
) -> None:
    response = lead_client.get(export_url(), params)
    assert response.status_code == 200
    ids = exported_ids(response)
    assert len(ids) == len(set(ids)), "no answer twice"
    assert set(ids) == set(pks(world, expected))


@pytest.mark.parametrize(("params", "expected"), FILTER_CASES, ids=FILTER_IDS)
def test_xlsx_holds_exactly_the_rows_of_the_csv(
    lead_client: Client, world: dict[str, Answer], params: dict[str, str], expected: set[str]
) -> None:
    csv_rows = parse_csv(lead_client.get(export_url(), params))
    sheet = parse_xlsx(lead_client.get(xlsx_url(), params))
    assert len(sheet.rows) == len(csv_rows) == len(expected) + 1
    xlsx_rows = [
        [as_csv(c, h) for c, h in zip(row, HEADER, strict=True)] for row in sheet.rows[1:]
    ]
    assert xlsx_rows == csv_rows[1:]
    assert {int(row[0]) for row in xlsx_rows} == set(pks(world, expected))


def test_the_excel_de_export_is_the_same_table_in_german_excels_dialect(
    lead_client: Client, world: dict[str, Answer]
) -> None:
    standard = parse_csv(lead_client.get(export_url()))
    response = lead_client.get(export_url(), {"dialect": "excel-de"})
    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)
    body = response.getvalue().decode("utf-8")
    assert body.startswith("\ufeff" + ";".join(HEADER))
    german = list(csv.reader(io.StringIO(body[1:], newline=""), delimiter=";"))
    assert len(german) == len(standard) > 2
    decimals = {HEADER.index(n) for n in ("inclusion_probability", "score", "best_chunk_score")}
    commas = truths = times = 0
    zone = timezone.get_current_timezone()
    for plain, de in zip(standard[1:], german[1:], strict=True):
        for column, (a, b) in enumerate(zip(plain, de, strict=True)):
            if column in decimals and a:
                assert b == a.replace(".", ",")
                commas += "," in b
            elif a in ("True", "False"):  # yes/no as German Excel reads truth values
                assert b == {"True": "WAHR", "False": "FALSCH"}[a]
                truths += 1
            elif re.fullmatch(r"\d{4}-\d\d-\d\dT.*[+-]\d\d:\d\d", a):  # a time, local
                local = datetime.fromisoformat(a).astimezone(zone)
                assert b == local.strftime("%Y-%m-%d %H:%M:%S")
                times += 1
            else:  # text (answers with full stops in them), ids: unchanged
                assert b == a
    assert commas >= 4 and truths >= 2 and times >= 2


def test_an_unknown_export_dialect_is_a_400_that_names_the_known_ones(
    lead_client: Client, world: dict[str, Answer]
) -> None:
    response = lead_client.get(export_url(), {"dialect": "lotus"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "lotus" in body and "excel-de" in body and "standard" in body


# --- sort ------------------------------------------------------------------------------------

NEWEST_FIRST = ["notsamp", "queued", "abst", "bad", "mid", "good", "failed"]
SORT_CASES = [
    (None, NEWEST_FIRST),
    ("-time", NEWEST_FIRST),
    ("time", NEWEST_FIRST[::-1]),
    # Unscored answers last in both directions, newest (highest id) first among them.
    ("score", ["bad", "mid", "good", "abst", "failed", "notsamp", "queued"]),
    ("-score", ["abst", "good", "mid", "bad", "failed", "notsamp", "queued"]),
    ("similarity", ["bad", "abst", "failed", "mid", "notsamp", "good", "queued"]),
    ("-similarity", ["good", "notsamp", "mid", "failed", "abst", "bad", "queued"]),
    ("chunks", ["queued", "abst", "good", "notsamp", "mid", "failed", "bad"]),
    ("-chunks", ["bad", "failed", "mid", "notsamp", "good", "abst", "queued"]),
]


@pytest.mark.parametrize(("sort", "expected"), SORT_CASES,
                         ids=[s or "default" for s, _ in SORT_CASES])
def test_sort_orders_on_page_and_in_export(
    lead_client: Client, world: dict[str, Answer], sort: str | None, expected: list[str]
) -> None:
    params = {"sort": sort} if sort else {}
    html = lead_client.get(list_url(), params).content.decode()
    assert INVALID_NOTE not in html
    assert shown(html) == pks(world, expected)
    assert exported_ids(lead_client.get(export_url(), params)) == pks(world, expected)
    sheet = parse_xlsx(lead_client.get(xlsx_url(), params))
    assert [int(row[0]) for row in sheet.values()[1:]] == pks(world, expected)


@pytest.mark.parametrize("sort", ["id", "-question", "created_at", "score; DROP TABLE x", "?"])
def test_unknown_sort_is_an_error_and_the_default_order_stays(
    lead_client: Client, world: dict[str, Answer], sort: str
) -> None:
    response = lead_client.get(list_url(), {"sort": sort})
    assert response.status_code == 200
    html = response.content.decode()
    assert INVALID_NOTE in html
    assert shown(html) == pks(world, NEWEST_FIRST)


def test_paging_keeps_sort_and_filters(lead_client: Client, world: dict[str, Answer]) -> None:
    service = world["good"].service
    use_case = world["good"].use_case
    start = utc(2025, 6, 1)
    Answer.objects.bulk_create([
        make_answer_row(use_case=use_case, service=service, external_id=f"p-{i}",
                        created_at=start + timedelta(minutes=i), score=i / 100)
        for i in range(60)
    ])
    first = lead_client.get(list_url(), {"sort": "score", "week": "2025-W22"}).content.decode()
    assert "60 Antworten" in first and "Seite 1 von 2" in first
    link = re.search(r'<a href="\?([^"]*)" rel="next"', first)
    assert link is not None
    query = link.group(1).replace("&amp;", "&")
    assert sorted(query.split("&")) == ["page=2", "sort=score", "week=2025-W22"]
    second = lead_client.get(f"{list_url()}?{query}").content.decode()
    scores = dict(Answer.objects.values_list("pk", "score"))
    order = shown(first) + shown(second)
    assert [scores[pk] for pk in order] == [i / 100 for i in range(60)]


# --- bad input -------------------------------------------------------------------------------

BAD_PARAMS = [
    ("week", "2025-W53"),  # 2025 has 52 ISO weeks
    ("week", "2025-W00"),
    ("week", "1999-W10"),
    ("week", "2025-10"),
    ("week", "garbage"),
    ("week", "x" * 5000),
    ("flagged", "x"),
    ("sampled", "maybe"),
    ("status", "bogus"),
    ("status", "JUDGED"),
    ("score_min", "-0.1"),
    ("score_max", "1.5"),
    ("score_min", "abc"),
    ("score_min", "nan"),
    ("score_max", "inf"),
    ("score_min", "1e309"),
    ("cause", "bogus"),
    ("similarity_below", "2"),
    ("similarity_below", "-1"),
    ("sort", "-id"),
    ("date_from", "2025-02-30"),
]


@pytest.mark.parametrize(("field", "value"), BAD_PARAMS,
                         ids=[f"{f}={v[:12]}" for f, v in BAD_PARAMS])
def test_bad_filter_value_shows_an_error_on_the_page_and_is_ignored(
    lead_client: Client, world: dict[str, Answer], field: str, value: str
) -> None:
    response = lead_client.get(list_url(), {field: value, "use_case": "b"})
    assert response.status_code == 200
    html = response.content.decode()
    assert INVALID_NOTE in html
    assert re.search(rf'<(input|select)[^>]*name="{field}"[^>]*aria-invalid="true"', html)
    # The bad filter is dropped; the valid one still narrows the list.
    assert set(shown(html)) == set(pks(world, ["abst", "queued", "failed"]))
    assert "CSV exportieren" not in html, "no link to an export that would be refused"
    assert "Excel (XLSX)" not in html


@pytest.mark.parametrize(("field", "value"), BAD_PARAMS,
                         ids=[f"{f}={v[:12]}" for f, v in BAD_PARAMS])
def test_bad_filter_value_refuses_the_export_with_400(
    lead_client: Client, world: dict[str, Answer], field: str, value: str
) -> None:
    response = lead_client.get(export_url(), {field: value})
    assert response.status_code == 400
    assert not isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    body = response.content.decode()
    assert body.startswith("Ungültige Filter:") and field in body


@pytest.mark.parametrize(("field", "value"), BAD_PARAMS,
                         ids=[f"{f}={v[:12]}" for f, v in BAD_PARAMS])
def test_bad_filter_value_refuses_the_xlsx_export_with_400(
    lead_client: Client, world: dict[str, Answer], field: str, value: str
) -> None:
    response = lead_client.get(xlsx_url(), {field: value})
    assert response.status_code == 400
    assert not isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    body = response.content.decode()
    assert body.startswith("Ungültige Filter:") and field in body


def test_reversed_score_range_is_an_error_on_both_ends(
    lead_client: Client, world: dict[str, Answer]
) -> None:
    html = lead_client.get(list_url(), {"score_min": "0.8", "score_max": "0.2"}).content.decode()
    assert INVALID_NOTE in html
    assert "„Treue ab“ darf nicht über „Treue bis“ liegen." in html
    for field in ("score_min", "score_max"):
        assert re.search(rf'<input[^>]*name="{field}"[^>]*aria-invalid="true"', html)
    assert set(shown(html)) == set(pks(world, VISIBLE))
    response = lead_client.get(export_url(), {"score_min": "0.8", "score_max": "0.2"})
    assert response.status_code == 400


def test_week_that_does_not_exist_is_named_in_the_error(
    lead_client: Client, world: dict[str, Answer]
) -> None:
    html = lead_client.get(list_url(), {"week": "2025-W53"}).content.decode()
    assert "Das Jahr 2025 hat keine Kalenderwoche 53." in html


# --- permissions -----------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_the_login(client: Client, world: dict[str, Answer]) -> None:
    for url in (list_url(), f"{export_url()}?flagged=1", f"{xlsx_url()}?flagged=1"):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login") + "?next=")


def test_export_never_holds_a_foreign_answer(
    lead_client: Client, world: dict[str, Answer]
) -> None:
    ids = exported_ids(lead_client.get(export_url()))
    assert world["foreign"].pk not in ids
    assert set(ids) == set(pks(world, VISIBLE))


def test_foreign_use_case_filter_is_404_for_the_export_and_an_error_on_the_page(
    lead_client: Client, world: dict[str, Answer]
) -> None:
    for slug in ("fremd", "gibt-es-nicht"):  # the same answer: existence is not revealed
        assert lead_client.get(export_url(), {"use_case": slug}).status_code == 404
        assert lead_client.get(xlsx_url(), {"use_case": slug}).status_code == 404
        html = lead_client.get(list_url(), {"use_case": slug}).content.decode()
        assert INVALID_NOTE in html
        assert world["foreign"].pk not in shown(html)


def test_user_without_use_cases_exports_only_the_header(
    client: Client, world: dict[str, Answer]
) -> None:
    client.force_login(User.objects.create_user("niemand"))
    response = client.get(export_url())
    assert response.status_code == 200
    assert parse_csv(response) == [HEADER]
    assert client.get(export_url(), {"use_case": "a"}).status_code == 404
    assert parse_xlsx(client.get(xlsx_url())).values() == [HEADER]
    assert client.get(xlsx_url(), {"use_case": "a"}).status_code == 404


def test_staff_export_holds_every_use_case(client: Client, world: dict[str, Answer]) -> None:
    client.force_login(User.objects.create_user("verwaltung", is_staff=True))
    assert set(exported_ids(client.get(export_url()))) == {a.pk for a in world.values()}
    sheet = parse_xlsx(client.get(xlsx_url()))
    assert {int(row[0]) for row in sheet.values()[1:]} == {a.pk for a in world.values()}


# --- the CSV file ----------------------------------------------------------------------------


def test_export_is_a_streamed_csv_attachment(lead_client: Client, world: dict[str, Answer]) -> None:
    response = lead_client.get(export_url(), {"use_case": "a"})
    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == (
        f'attachment; filename="treue-answers-{timezone.localdate().isoformat()}.csv"'
    )


def test_export_row_holds_every_column(lead_client: Client, world: dict[str, Answer]) -> None:
    good = world["good"]
    good.uncertain_tokens = [
        {"token": "Behälter", "probability": 0.3, "position": 4, "end": 12},
        {"token": "5", "probability": 0.2, "position": 22, "end": 23},
    ]
    good.save(update_fields=["uncertain_tokens"])
    rows = parse_csv(lead_client.get(export_url(), {"use_case": "a", "sort": "time"}))
    assert rows[0] == HEADER
    assert rows[1] == [
        str(good.pk), "2025-03-03T08:00:00+00:00", "a", "rag-bot", "good", "Frage good?",
        "Antwort good.", "gpt-4o-mini", "False", "True", "random", "0.05", "judged", "0.95",
        "False", "3", "0.8", "ok", "Behälter 5",
    ]
    queued = next(r for r in parse_csv(lead_client.get(export_url())) if r[4] == "queued")
    # Missing figures are empty cells, not "None".
    assert queued[HEADER.index("score")] == ""
    assert queued[HEADER.index("best_chunk_score")] == ""
    assert queued[HEADER.index("use_case")] == "b"


@pytest.mark.parametrize("value", HOSTILE, ids=HOSTILE_IDS)
def test_export_defuses_spreadsheet_formulas(
    lead_client: Client, world: dict[str, Answer], value: str
) -> None:
    Answer.objects.filter(pk=world["good"].pk).update(
        question=value, text=value, external_id=value, model=value,
        uncertain_tokens=[{"token": value, "probability": 0.1, "position": 0, "end": 1}],
    )
    rows = parse_csv(lead_client.get(export_url(), {"use_case": "a", "sort": "time"}))
    row = dict(zip(HEADER, rows[1], strict=True))
    for column in ("question", "answer", "external_id", "model", "uncertain_words"):
        assert row[column] == "'" + value, column


def test_harmless_text_is_exported_unchanged(
    lead_client: Client, world: dict[str, Answer]
) -> None:
    text = 'Laut "Anlage 2", Zeile 3; a=b\nzweite Zeile -1 und ein Komma, ja'
    Answer.objects.filter(pk=world["good"].pk).update(text=text)
    rows = parse_csv(lead_client.get(export_url(), {"use_case": "a", "sort": "time"}))
    assert rows[1][HEADER.index("answer")] == text


def test_page_links_the_export_with_its_filters(
    lead_client: Client, world: dict[str, Answer]
) -> None:
    params = {"flagged": "1", "sort": "chunks", "page": "1"}
    html = lead_client.get(list_url(), params).content.decode()
    link = re.search(r'<a href="([^"]*)"[^>]*>CSV exportieren</a>', html)
    assert link is not None
    href = link.group(1).replace("&amp;", "&")
    path, _, query = href.partition("?")
    assert path == export_url()
    assert sorted(query.split("&")) == ["flagged=1", "sort=chunks"]
    assert exported_ids(lead_client.get(href)) == shown(html)


# --- the XLSX file ---------------------------------------------------------------------------


def test_xlsx_is_a_workbook_attachment_streamed_from_a_file_that_is_gone_after(
    lead_client: Client, world: dict[str, Answer], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    opened: list[Any] = []
    original_temporary_file = tempfile.TemporaryFile

    def recorded(*args: Any, **kwargs: Any) -> Any:
        opened.append(original_temporary_file(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(tempfile, "TemporaryFile", recorded)
    response = lead_client.get(xlsx_url(), {"use_case": "a"})
    assert response.status_code == 200
    assert isinstance(response, FileResponse)
    assert response["Content-Type"] == XLSX
    assert response["Content-Disposition"] == (
        f'attachment; filename="treue-answers-{timezone.localdate().isoformat()}.xlsx"'
    )
    # The workbook is in a file without a name on disk; nothing of it is in the folder.
    assert list(tmp_path.iterdir()) == []
    pieces = list(response.streaming_content)
    assert len(pieces) > 1 and all(len(p) <= response.block_size for p in pieces)
    body = b"".join(pieces)
    assert int(response["Content-Length"]) == len(body)
    assert body.startswith(b"PK")
    # The test client closes the response at the end of its content, as a WSGI server does.
    assert len(opened) == 1 and opened[0].closed
    assert {int(row[0]) for row in read_sheet(body).values()[1:]} == set(
        pks(world, ["good", "bad", "notsamp", "mid"])
    )


def test_xlsx_cells_are_typed(lead_client: Client, world: dict[str, Answer]) -> None:
    good = world["good"]
    good.uncertain_tokens = [{"token": "Behälter", "probability": 0.3, "position": 4, "end": 12}]
    good.save(update_fields=["uncertain_tokens"])
    sheet = parse_xlsx(lead_client.get(xlsx_url(), {"use_case": "a", "sort": "time"}))
    assert sheet.values()[1] == [
        # 08:00 UTC is 09:00 in Berlin in March.
        good.pk, datetime(2025, 3, 3, 9), "a", "rag-bot", "good", "Frage good?",
        "Antwort good.", "gpt-4o-mini", False, True, "random", 0.05, "judged", 0.95,
        False, 3, 0.8, "ok", "Behälter",
    ]
    row = dict(zip(HEADER, sheet.rows[1], strict=True))
    kinds = {name: cell.kind for name, cell in row.items() if cell is not None}
    assert kinds == {
        "id": "number", "created_at": "number", "use_case": "text", "service": "text",
        "external_id": "text", "question": "text", "answer": "text", "model": "text",
        "flagged": "bool", "sampled": "bool", "sample_reason": "text",
        "inclusion_probability": "number", "status": "text", "score": "number",
        "abstention": "bool", "chunk_count": "number", "best_chunk_score": "number",
        "logprobs_status": "text", "uncertain_words": "text",
    }
    assert row["created_at"] is not None and row["created_at"].is_date
    assert all(cell is not None and cell.bold for cell in sheet.rows[0])
    assert sheet.frozen_rows == 1
    assert sheet.autofilter == "A1:S5"
    assert all(6 <= sheet.widths[i] <= 61 for i in range(len(HEADER)))
    # Missing figures are empty cells.
    queued = next(r for r in parse_xlsx(lead_client.get(xlsx_url())).rows if r[4]
                  and r[4].value == "queued")
    assert queued[HEADER.index("score")] is None
    assert queued[HEADER.index("best_chunk_score")] is None


@pytest.mark.parametrize("value", HOSTILE, ids=HOSTILE_IDS)
def test_xlsx_keeps_formula_looking_text_as_text(
    lead_client: Client, world: dict[str, Answer], value: str
) -> None:
    Answer.objects.filter(pk=world["good"].pk).update(
        question=value, text=value, external_id=value, model=value,
        uncertain_tokens=[{"token": value, "probability": 0.1, "position": 0, "end": 1}],
    )
    sheet = parse_xlsx(lead_client.get(xlsx_url(), {"use_case": "a", "sort": "time"}))
    row = dict(zip(HEADER, sheet.rows[1], strict=True))
    for column in ("question", "answer", "external_id", "model", "uncertain_words"):
        cell = row[column]
        assert cell is not None, column
        assert (cell.kind, cell.value, cell.quote_prefix) == ("text", value, True), column
    assert row["use_case"] is not None and not row["use_case"].quote_prefix
    assert "<f>" not in sheet.xml


def test_xlsx_refuses_more_answers_than_a_sheet_holds(
    lead_client: Client, world: dict[str, Answer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(xlsx_export, "MAX_ROWS", 4)  # the header and 3 answers
    assert len(parse_xlsx(lead_client.get(xlsx_url(), {"use_case": "b"})).rows) == 4
    response = lead_client.get(xlsx_url(), {"use_case": "a"})
    assert response.status_code == 400
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode().startswith("Mehr als 3 Antworten passen nicht")


def test_page_links_the_xlsx_export_with_its_filters(
    lead_client: Client, world: dict[str, Answer]
) -> None:
    params = {"flagged": "1", "sort": "chunks", "page": "1"}
    html = lead_client.get(list_url(), params).content.decode()
    link = re.search(r'<a href="([^"]*)"[^>]*>Excel \(XLSX\)</a>', html)
    assert link is not None
    href = link.group(1).replace("&amp;", "&")
    path, _, query = href.partition("?")
    assert path == xlsx_url()
    assert sorted(query.split("&")) == ["flagged=1", "sort=chunks"]
    assert [int(row[0]) for row in parse_xlsx(lead_client.get(href)).values()[1:]] == shown(html)
    unfiltered = lead_client.get(list_url()).content.decode()
    assert f'<a href="{xlsx_url()}" download>Excel (XLSX)</a>' in unfiltered


# --- streaming at size -----------------------------------------------------------------------


@pytest.fixture
def five_thousand(lead: User) -> UseCase:
    use_case = use_case_create(slug="gross", name="Groß")
    use_case.team_leads.add(lead)
    service, _ = service_create(name="bulk-bot", use_cases=[use_case])
    start = utc(2025, 1, 6)
    Answer.objects.bulk_create(
        [
            make_answer_row(use_case=use_case, service=service, external_id=f"b-{i:05d}",
                            created_at=start + timedelta(seconds=i), score=(i % 101) / 100)
            for i in range(5000)
        ],
        batch_size=1000,
    )
    return use_case


def test_export_streams_five_thousand_rows_in_batches_without_loading_them_all(
    client: Client, lead: User, five_thousand: UseCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    client.force_login(lead)
    iterator_calls: list[dict[str, Any]] = []
    original_iterator: Callable[..., Any] = QuerySet.iterator

    def spy(self: QuerySet, *args: Any, **kwargs: Any) -> Any:
        iterator_calls.append(kwargs)
        return original_iterator(self, *args, **kwargs)

    monkeypatch.setattr(QuerySet, "iterator", spy)
    response = client.get(export_url(), {"use_case": "gross"})
    assert isinstance(response, StreamingHttpResponse)

    # From here on, a queryset that loads all its rows at once fails the test.
    def refuse(self: QuerySet) -> None:
        raise AssertionError(f"queryset loaded whole: {self.query}")

    with mock.patch.object(QuerySet, "_fetch_all", refuse):
        pieces = [p.decode("utf-8") for p in response.streaming_content]

    assert iterator_calls == [{"chunk_size": 2000}]
    # 2,000 rows per piece: the file reaches the client while later rows are still read.
    assert len(pieces) == 3
    rows = list(csv.reader(io.StringIO("".join(pieces), newline="")))
    assert rows[0] == HEADER
    assert len(rows) == 5001
    assert [r[4] for r in rows[1:3]] == ["b-04999", "b-04998"]
    assert len({r[0] for r in rows[1:]}) == 5000


def test_xlsx_of_five_thousand_rows_reads_them_in_batches_without_loading_them_all(
    client: Client, lead: User, five_thousand: UseCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    client.force_login(lead)
    iterator_calls: list[dict[str, Any]] = []
    original_iterator: Callable[..., Any] = QuerySet.iterator
    original_fetch_all: Callable[..., Any] = QuerySet._fetch_all
    largest: list[int] = [0]

    def spy(self: QuerySet, *args: Any, **kwargs: Any) -> Any:
        iterator_calls.append(kwargs)
        return original_iterator(self, *args, **kwargs)

    def counting(self: QuerySet) -> None:
        original_fetch_all(self)
        largest[0] = max(largest[0], len(self._result_cache or ()))

    monkeypatch.setattr(QuerySet, "iterator", spy)
    monkeypatch.setattr(QuerySet, "_fetch_all", counting)
    sheet = parse_xlsx(client.get(xlsx_url(), {"use_case": "gross"}))

    assert iterator_calls == [{"chunk_size": 2000}]
    assert largest[0] < 100, "no queryset loaded whole"
    assert len(sheet.rows) == 5001
    values = sheet.values()
    assert [r[4] for r in values[1:3]] == ["b-04999", "b-04998"]
    assert len({r[0] for r in values[1:]}) == 5000
    assert "xl/sharedStrings.xml" not in sheet.parts  # constant_memory: inline strings


def test_the_sample_column_says_what_pi_is(lead_client: Client, world: dict[str, Answer]) -> None:
    # Issue 41: "π=1,00" stood unexplained; a legend below the table says it in words.
    html = lead_client.get(list_url()).content.decode()
    assert "π=" in html
    legend = html.split('id="pi-legend"')[1].split("</p>")[0]
    assert "Wahrscheinlichkeit" in legend and "Stichprobe" in legend


def test_english_says_not_flagged(lead_client: Client, world: dict[str, Answer]) -> None:
    # Issue 41: "inconspicuous" for an answer stage 1 did not flag.
    html = lead_client.get(list_url(), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "not flagged" in html
    assert "inconspicuous" not in html
