"""The export's workbook, without Django: typed cells, the header's look, text that stays text,
Excel's limits, and nothing left behind in the temporary folder. Read back with
tests/support/xlsx.py (zipfile and ElementTree)."""

import math
import tempfile
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from dashboard.domain import xlsx_export
from dashboard.domain.xlsx_export import (
    DATETIME_FORMAT,
    MAX_CELL_UNITS,
    MAX_WIDTH,
    MIN_WIDTH,
    TRUNCATED,
    TooManyRows,
    cell_text,
    xlsx_write,
)
from tests.support.xlsx import HOSTILE, HOSTILE_IDS, Sheet, read_sheet

BERLIN = ZoneInfo("Europe/Berlin")
HEADER = ("id", "created_at", "text", "score", "flag", "n")


@pytest.fixture(autouse=True)
def _own_temp_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tempfile's folder for the test alone, so what a write leaves there can be seen."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def written(rows: list[tuple[Any, ...]], header: tuple[str, ...] = HEADER, **options: Any) -> Sheet:
    with tempfile.TemporaryFile() as target:
        count = xlsx_write(target, header, rows, tz=BERLIN, **options)
        assert count == len(rows)
        target.seek(0)
        return read_sheet(target.read())


def test_cells_have_the_type_of_their_value() -> None:
    sheet = written([
        (1, datetime(2025, 3, 9, 23, 30, tzinfo=UTC), "Antwort.", 0.25, True, None),
        (2, datetime(2025, 7, 1, 12, 0, 0, 500_000, tzinfo=UTC), "", 1.0, False, 3),
    ])
    assert sheet.values() == [
        list(HEADER),
        # UTC to Berlin's wall clock: winter (+1, across midnight) and summer time (+2).
        [1.0, datetime(2025, 3, 10, 0, 30), "Antwort.", 0.25, True, None],
        [2.0, datetime(2025, 7, 1, 14, 0, 0, 500_000), None, 1.0, False, 3.0],
    ]
    first, second = sheet.rows[1], sheet.rows[2]
    assert [c.kind if c else None for c in first] == [
        "number", "number", "text", "number", "bool", None,
    ]
    assert first[1] is not None and first[1].number_format == DATETIME_FORMAT
    assert second[5] is not None and second[5].kind == "number"


def test_naive_datetimes_and_dates_are_written_as_they_are() -> None:
    sheet = written(
        [(datetime(2025, 1, 2, 3, 4, 5), date(2025, 12, 31))], header=("when", "day")
    )
    when, day = sheet.rows[1]
    assert when is not None and when.as_datetime() == datetime(2025, 1, 2, 3, 4, 5)
    assert day is not None and day.number_format == "yyyy-mm-dd"
    assert day.as_datetime() == datetime(2025, 12, 31)


def test_numbers_keep_their_digits() -> None:
    values = [0.95, 1 / 7, 1e-9, 123456789, 0.0, -2.5]
    sheet = written([(v,) for v in values], header=("x",))
    # XlsxWriter writes 16 significant digits; Excel itself shows 15.
    assert all(
        math.isclose(row[0], v, rel_tol=1e-15)
        for row, v in zip(sheet.values()[1:], values, strict=True)
    )


def test_nan_and_infinity_are_error_cells_not_a_failed_export() -> None:
    sheet = written([(math.nan,), (math.inf,), (2.0,)], header=("x",))
    assert [row[0].raw for row in sheet.rows[1:3] if row[0]] == ["#NUM!", "#DIV/0!"]
    assert sheet.values()[3] == [2.0]


def test_header_is_bold_frozen_and_filtered() -> None:
    sheet = written([(n, None, "x", 0.5, False, n) for n in range(3)])
    assert all(c is not None and c.bold and c.kind == "text" for c in sheet.rows[0])
    assert not any(c and c.bold for row in sheet.rows[1:] for c in row)
    assert sheet.frozen_rows == 1
    assert sheet.autofilter == "A1:F4"


def test_an_empty_selection_is_the_header_alone() -> None:
    sheet = written([])
    assert sheet.values() == [list(HEADER)]
    assert sheet.autofilter == "A1:F1"


def test_column_widths_follow_the_values_within_bounds() -> None:
    short = written([(1, datetime(2025, 1, 1, tzinfo=UTC), "kurz", 0.5, True, 2)]).widths
    long = written([(1, datetime(2025, 1, 1, tzinfo=UTC), "lang " * 100, 0.5, True, 2)]).widths
    # XlsxWriter stores a width with Excel's few hundredths of padding.
    assert int(short[0]) == MIN_WIDTH
    assert int(short[1]) >= len("2025-01-01 00:00:00")
    assert MIN_WIDTH <= int(short[2]) < 20
    assert int(long[2]) == MAX_WIDTH
    assert long[0] == short[0]


@pytest.mark.parametrize("value", HOSTILE, ids=HOSTILE_IDS)
def test_formula_looking_text_stays_text_and_carries_the_quote_prefix(value: str) -> None:
    sheet = written([(value, "harmlos")], header=("a", "b"))
    hostile, harmless = sheet.rows[1]
    assert hostile is not None and harmless is not None
    assert (hostile.kind, hostile.value, hostile.quote_prefix) == ("text", value, True)
    assert (harmless.kind, harmless.quote_prefix) == ("text", False)
    assert "<f>" not in sheet.xml


def test_numbers_as_text_stay_text() -> None:
    sheet = written([("00123", "1e5", "TRUE")], header=("a", "b", "c"))
    assert [(c.kind, c.value) for c in sheet.rows[1] if c] == [
        ("text", "00123"), ("text", "1e5"), ("text", "TRUE"),
    ]


MARKUP = (
    '<r><t>a</t></r></is></c><c r="B2"><f>HYPERLINK("http://evil.example","klick")</f></c>'
    '<c r="C2" t="inlineStr"><is><r><t>b</t></r>'
)


def test_text_shaped_like_xlsxwriters_own_markup_cannot_plant_cells() -> None:
    sheet = written([(MARKUP, 1)], header=("question", "n"))
    assert sheet.values()[1] == [MARKUP, 1.0]
    assert "<f>" not in sheet.xml
    assert sheet.xml.count("<c ") == 4  # two header cells, two data cells


@pytest.mark.parametrize(
    "text",
    [
        "  vorne und hinten  ",
        "Zeile 1\nZeile 2\r\nZeile 3",
        "Steuerzeichen \x01\x02\x1f bleiben",
        "wörtlich _x0041_ und _x005F_",
        "a < b & c > d \"zitiert\" 'so'",
        "Emoji 😀 und ein Strich ‐",
    ],
    ids=["spaces", "newlines", "control", "escape-lookalike", "xml", "astral"],
)
def test_text_comes_back_unchanged(text: str) -> None:
    assert written([(text,)], header=("t",)).values()[1] == [text]


def test_long_text_is_cut_to_excels_limit_and_says_so() -> None:
    at_limit = "a" * MAX_CELL_UNITS
    assert cell_text(at_limit) == at_limit
    cut = cell_text("a" * 100_000)
    assert len(cut) == MAX_CELL_UNITS and cut.endswith(TRUNCATED) and cut[:-1] == "a" * 32_766
    # Astral characters are two UTF-16 units each, as Excel counts: half as many fit, and the
    # cut never splits a pair.
    emoji = cell_text("😀" * 20_000)
    assert len(emoji.encode("utf-16-le")) // 2 <= MAX_CELL_UNITS
    assert emoji == "😀" * 16_383 + TRUNCATED
    sheet = written([("b" * 100_000,)], header=("t",))
    assert sheet.values()[1] == ["b" * 32_766 + TRUNCATED]


def test_the_sheet_is_written_in_constant_memory_mode() -> None:
    # XlsxWriter writes inline strings, and no shared-string table, only in constant_memory
    # mode, where each row goes to disk as the next one begins.
    sheet = written([(1, None, "Antwort", 0.5, False, 2), (2, None, "Antwort", 0.5, False, 2)])
    assert "xl/sharedStrings.xml" not in sheet.parts
    assert sheet.xml.count('t="inlineStr"') == len(HEADER) + 2


def test_nothing_is_left_in_the_temporary_folder(_own_temp_folder: Path) -> None:
    target = _own_temp_folder.parent / "out.xlsx"
    xlsx_write(target, HEADER, [(1, None, "x", 0.5, True, 2)] * 3, tz=BERLIN)
    assert read_sheet(target).values()[1] == [1.0, None, "x", 0.5, True, 2.0]
    assert list(_own_temp_folder.iterdir()) == []


def test_more_rows_than_a_sheet_holds_are_refused_and_leave_nothing_behind(
    _own_temp_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(xlsx_export, "MAX_ROWS", 4)
    read = []

    def rows() -> Any:
        for n in range(10):
            read.append(n)
            yield (n,)

    target = _own_temp_folder.parent / "fits.xlsx"
    assert xlsx_write(target, ("n",), [(n,) for n in range(3)], tz=BERLIN) == 3
    assert read_sheet(target).values() == [["n"], [0.0], [1.0], [2.0]]
    with pytest.raises(TooManyRows) as refused:
        xlsx_write(_own_temp_folder.parent / "too-many.xlsx", ("n",), rows(), tz=BERLIN)
    assert refused.value.limit == 3
    assert read == [0, 1, 2, 3], "stops one row past the limit"
    assert list(_own_temp_folder.iterdir()) == []


def test_a_row_that_does_not_match_the_header_is_refused() -> None:
    with pytest.raises(ValueError, match="row 2 has 1 cells, the header 2"):
        written([(1, 2), (3,)], header=("a", "b"))
