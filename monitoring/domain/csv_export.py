"""CSV text for the answer export, in two dialects.

``standard`` is what the export has always been: commas, decimal points, no byte-order mark.
``excel-de`` is what German Excel reads by double-click: semicolons, decimal commas and a UTF-8
byte-order mark (without it Excel takes the file for Windows-1252 and garbles every umlaut).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CsvDialect:
    delimiter: str
    decimal: str
    bom: str


DIALECTS = {
    "standard": CsvDialect(delimiter=",", decimal=".", bom=""),
    "excel-de": CsvDialect(delimiter=";", decimal=",", bom="\ufeff"),
}

# A spreadsheet reads a cell that starts with one of these as a formula (tab and CR too, which
# some programs strip before looking). Questions, answers and ids come from the RAG services, so
# from whoever typed the question: "=HYPERLINK(...)" in a question must stay text when a lead
# opens the export in Excel. The apostrophe is what spreadsheets themselves use to say "text".
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_text(value: str) -> str:
    """A text cell that a spreadsheet will not evaluate."""
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def csv_chunks(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    dialect: str = "standard",
    rows_per_chunk: int = 2000,
) -> Iterator[str]:
    """The header and rows as CSV text, ``rows_per_chunk`` rows a piece, for streaming."""
    style = DIALECTS[dialect]
    buffer = io.StringIO()
    buffer.write(style.bom)
    writer = csv.writer(buffer, delimiter=style.delimiter)
    writer.writerow(header)
    for n, row in enumerate(rows, start=1):
        writer.writerow(row if style.decimal == "." else [_decimal(c, style) for c in row])
        if n % rows_per_chunk == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def _decimal(value: Any, style: CsvDialect) -> Any:
    # bool is an int, not a float: it stays True/False.
    if isinstance(value, float):
        return repr(value).replace(".", style.decimal)
    return value
