"""CSV text for the answer export, in two dialects.

``standard`` is what the export has always been: commas, decimal points, no byte-order mark.
``excel-de`` is what German Excel reads by double-click: semicolons, decimal commas and a UTF-8
byte-order mark (without it Excel takes the file for Windows-1252 and garbles every umlaut);
times as "2026-12-04 18:30:00" in the site's time zone and yes/no as WAHR/FALSCH, which it reads
as dates and truth values (an ISO time with "+00:00", or True/False, it keeps as text).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any


@dataclass(frozen=True)
class CsvDialect:
    delimiter: str
    decimal: str
    bom: str
    # (true, false) as the spreadsheet writes them; None: Python's True/False.
    booleans: tuple[str, str] | None = None
    # Times in the given zone without an offset; False: ISO 8601 with the offset.
    local_times: bool = False


DIALECTS = {
    "standard": CsvDialect(delimiter=",", decimal=".", bom=""),
    "excel-de": CsvDialect(
        delimiter=";", decimal=",", bom="\ufeff", booleans=("WAHR", "FALSCH"), local_times=True
    ),
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
    zone: tzinfo | None = None,
) -> Iterator[str]:
    """The header and rows as CSV text, ``rows_per_chunk`` rows a piece, for streaming; times
    of a dialect with local times in ``zone`` (default: as they come)."""
    style = DIALECTS[dialect]
    buffer = io.StringIO()
    buffer.write(style.bom)
    writer = csv.writer(buffer, delimiter=style.delimiter)
    writer.writerow(header)
    for n, row in enumerate(rows, start=1):
        writer.writerow([_cell(c, style, zone) for c in row])
        if n % rows_per_chunk == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def _cell(value: Any, style: CsvDialect, zone: tzinfo | None) -> Any:
    if isinstance(value, bool):  # before numbers: a bool is an int
        return value if style.booleans is None else style.booleans[0 if value else 1]
    if isinstance(value, float):
        return repr(value).replace(".", style.decimal)
    if isinstance(value, datetime):
        if not style.local_times:
            return value.isoformat()
        return (value.astimezone(zone) if zone else value).strftime("%Y-%m-%d %H:%M:%S")
    return value
