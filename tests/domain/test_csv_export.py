"""The export's CSV dialects, without Django: the same rows as text, in two spellings."""

import csv
import io
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from dashboard.domain.csv_export import DIALECTS, csv_chunks

ROWS = [(1, "Antwort. Mit Punkt", 0.25, True, None), (2, "„Zitat“; mit Semikolon", 1.0, False, 3)]


def test_standard_is_plain_csv() -> None:
    text = "".join(csv_chunks(("id", "text", "score", "flag", "n"), ROWS))
    assert not text.startswith("\ufeff")
    assert list(csv.reader(io.StringIO(text, newline=""))) == [
        ["id", "text", "score", "flag", "n"],
        ["1", "Antwort. Mit Punkt", "0.25", "True", ""],
        ["2", "„Zitat“; mit Semikolon", "1.0", "False", "3"],
    ]


def test_excel_de_has_a_bom_semicolons_and_decimal_commas_only_in_numbers() -> None:
    text = "".join(csv_chunks(("id", "text", "score", "flag", "n"), ROWS, dialect="excel-de"))
    assert text.startswith("\ufeffid;text;score;flag;n\r\n")
    assert list(csv.reader(io.StringIO(text[1:], newline=""), delimiter=";")) == [
        ["id", "text", "score", "flag", "n"],
        ["1", "Antwort. Mit Punkt", "0,25", "WAHR", ""],
        ["2", "„Zitat“; mit Semikolon", "1,0", "FALSCH", "3"],
    ]


def test_times_iso_in_standard_and_local_without_offset_in_excel_de() -> None:
    when = datetime(2026, 12, 4, 17, 30, 5, tzinfo=UTC)
    rows = [(when,)]
    assert "".join(csv_chunks(("t",), rows)).splitlines()[1] == "2026-12-04T17:30:05+00:00"
    berlin = "".join(csv_chunks(("t",), rows, dialect="excel-de", zone=ZoneInfo("Europe/Berlin")))
    # 17:30 UTC is 18:30 in Berlin in December: what German Excel reads as a date and time.
    assert berlin.splitlines()[1] == "2026-12-04 18:30:05"


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_rows_come_in_pieces_and_the_bom_only_once(dialect: str) -> None:
    rows = [(n, n / 8) for n in range(5)]
    pieces = list(csv_chunks(("n", "x"), rows, dialect=dialect, rows_per_chunk=2))
    assert len(pieces) == 3
    assert "".join(pieces).count("\ufeff") == (dialect == "excel-de")
    style = DIALECTS[dialect]
    assert "".join(pieces).splitlines()[1:] == [
        style.delimiter.join((str(n), repr(n / 8).replace(".", style.decimal))) for n in range(5)
    ]
