"""The answer export as an Excel workbook (XLSX), written row by row to a file.

XlsxWriter's constant_memory mode flushes each row to a scratch file as soon as the next row
begins and zips the sheet at the end, so a workbook of a million answers never holds more than
one row in memory. Rows must therefore come in order, top to bottom, as they do here; the
scratch files live in a temporary folder of their own that is removed whatever happens.

A cell's type follows its value: int and float as numbers, bool as TRUE/FALSE, datetimes as
Excel dates (Excel has no time zones: an aware datetime is written as the wall-clock time in
``tz``), None and "" as empty cells, anything else as text. Text goes in through write_string,
never write(), which would take "=HYPERLINK(...)" for a formula. Text that a spreadsheet reads
as a formula once someone edits the cell (csv_export.FORMULA_STARTS) also gets Excel's quote
prefix: the workbook's own way of saying what the CSV's leading apostrophe says, without
changing the text.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from os import PathLike
from typing import IO, Any

import xlsxwriter

from dashboard.domain.csv_export import FORMULA_STARTS

CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
# Excel's limits: rows in a sheet (the header is one of them) and characters in a cell, which
# Excel counts in UTF-16 units. An answer may have 100 kB of text; the cell gets the first
# 32,766 units and TRUNCATED, so that a cut text says so.
MAX_ROWS = 1_048_576
MAX_CELL_UNITS = 32_767
TRUNCATED = "…"
DATETIME_FORMAT = "yyyy-mm-dd hh:mm:ss"
DATE_FORMAT = "yyyy-mm-dd"
# Column widths in characters, from the longest value: at least a short word, at most so wide
# that a column of answers still leaves the next one on the screen. Numbers are shown with
# about 11 significant digits whatever their repr; a header needs room for the filter button.
MIN_WIDTH = 6
MAX_WIDTH = 60
NUMBER_WIDTH = 12
FILTER_BUTTON_WIDTH = 3


class TooManyRows(ValueError):
    """More rows than an Excel sheet holds below its header."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} rows")
        self.limit = limit


@dataclass(frozen=True)
class _Formats:
    datetime: Any
    date: Any
    quoted: Any
    plain: Any


def xlsx_write(
    target: str | PathLike[str] | IO[bytes],
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    tz: tzinfo,
    sheet_name: str = "answers",
) -> int:
    """Writes the header (bold, frozen, with an autofilter) and the rows as one sheet to
    ``target``, a path or a binary file open for writing; returns the number of rows.

    Raises TooManyRows, having read one row past the limit, when the rows do not fit; the
    target is then left unfinished.
    """
    with tempfile.TemporaryDirectory(prefix="treue-xlsx-") as scratch:
        workbook = xlsxwriter.Workbook(
            target,
            # NaN or infinity, which a FloatField can hold, as Excel's #NUM!/#DIV/0! rather
            # than an exception in the middle of an export.
            {"constant_memory": True, "tmpdir": scratch, "nan_inf_to_errors": True},
        )
        sheet = workbook.add_worksheet(sheet_name)
        formats = _Formats(
            datetime=workbook.add_format({"num_format": DATETIME_FORMAT}),
            date=workbook.add_format({"num_format": DATE_FORMAT}),
            quoted=workbook.add_format({"quote_prefix": True}),
            plain=workbook.add_format(),
        )
        bold = workbook.add_format({"bold": True})
        widths = [len(name) + FILTER_BUTTON_WIDTH for name in header]
        for col, name in enumerate(header):
            sheet.write_string(0, col, name, bold)
        count = 0
        for count, row in enumerate(rows, start=1):
            if count >= MAX_ROWS:
                raise TooManyRows(MAX_ROWS - 1)
            if len(row) != len(header):
                raise ValueError(f"row {count} has {len(row)} cells, the header {len(header)}")
            for col, value in enumerate(row):
                width = _write_cell(sheet, count, col, value, tz=tz, formats=formats)
                if width > widths[col]:
                    widths[col] = width
        # Column widths, panes and filter are written when the workbook is closed, so they can
        # follow the rows even in constant_memory mode.
        for col, width in enumerate(widths):
            sheet.set_column(col, col, min(max(width + 1, MIN_WIDTH), MAX_WIDTH))
        sheet.freeze_panes(1, 0)
        if header:
            sheet.autofilter(0, 0, count, len(header) - 1)
        workbook.close()
    return count


def cell_text(text: str) -> str:
    """The text as an Excel cell holds it: cut to MAX_CELL_UNITS UTF-16 units, ending in
    TRUNCATED when cut."""
    # A text of at most half the limit in characters is within it in UTF-16 units too, so the
    # common case costs no encoding.
    if len(text) <= MAX_CELL_UNITS // 2:
        return text
    units = text.encode("utf-16-le")
    if len(units) <= 2 * MAX_CELL_UNITS:
        return text
    # A cut through a surrogate pair leaves half a character, which the decoder drops.
    kept = units[: 2 * (MAX_CELL_UNITS - len(TRUNCATED))].decode("utf-16-le", errors="ignore")
    return kept + TRUNCATED


def _write_cell(
    sheet: Any, row: int, col: int, value: Any, *, tz: tzinfo, formats: _Formats
) -> int:
    """Writes one value with the write method of its type; returns its width in characters."""
    if value is None or (isinstance(value, str) and not value):
        return 0
    if isinstance(value, bool):  # before int: a bool is an int
        sheet.write_boolean(row, col, value)
        return len("FALSE")
    if isinstance(value, int | float):
        sheet.write_number(row, col, value)
        return min(len(str(value)), NUMBER_WIDTH)
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(tz).replace(tzinfo=None)
        sheet.write_datetime(row, col, value, formats.datetime)
        return len(DATETIME_FORMAT)
    if isinstance(value, date):
        sheet.write_datetime(row, col, value, formats.date)
        return len(DATE_FORMAT)
    text = cell_text(str(value))
    if text.startswith("<r>") and text.endswith("</r>"):
        # XlsxWriter's constant_memory mode copies a string of this shape into the sheet
        # unescaped, taking it for a rich string of its own making: "<r>…</r></is></c><c><f>…"
        # in a question would plant cells, formulas too. As a rich string of two runs it is
        # escaped like any other text. (Control characters in such a text show as Excel's
        # _xHHHH_ escapes: XlsxWriter escapes a rich string's twice.)
        sheet.write_rich_string(row, col, text[:1], formats.plain, text[1:])
    else:
        quoted = formats.quoted if text.startswith(FORMULA_STARTS) else None
        sheet.write_string(row, col, text, quoted)
    return min(len(text), MAX_WIDTH)
