"""Reads an XLSX workbook's first sheet back with the standard library (zipfile and ElementTree;
openpyxl is not a requirement): cells with their type, number format, quote prefix and
boldness, and the sheet's frozen rows, autofilter and column widths. Enough for the workbooks
the answer export writes, and strict where they are concerned: an unknown cell type fails.

No Django here: the domain tests use it too.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

M = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"

# Text a spreadsheet would read as a formula (the CSV and the XLSX export must defuse each).
HOSTILE = [
    "=HYPERLINK(\"http://evil.example\",\"klick\")",
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1:A9)",
    "\t=1+1",
    "\r=1+1",
]
HOSTILE_IDS = ["eq", "plus", "minus", "at", "tab", "cr"]
SHEET = "xl/worksheets/sheet1.xml"
# Excel's day 0 for the 1900 date system, as every reader counts it past February 1900.
EPOCH = datetime(1899, 12, 30)
# Number formats Excel knows by id without listing them in styles.xml (those the export could
# meet: general, and the built-in date formats).
BUILTIN_FORMATS = {0: "General", 14: "mm-dd-yy", 22: "m/d/yy h:mm"}


@dataclass(frozen=True)
class Cell:
    kind: str  # "number", "bool", "text", "formula"
    value: Any  # float, bool or str; a formula's text for "formula"
    raw: str  # the text of <v> (numbers and booleans) or of the string
    number_format: str = "General"
    quote_prefix: bool = False
    bold: bool = False

    @property
    def is_date(self) -> bool:
        return self.kind == "number" and bool(re.search(r"[yd]", self.number_format))

    def as_datetime(self) -> datetime:
        """A date cell's value as a naive datetime, to the millisecond (Excel's precision)."""
        assert self.is_date, self
        return EPOCH + timedelta(milliseconds=round(self.value * 86_400_000))


@dataclass
class Sheet:
    rows: list[list[Cell | None]]  # every row padded to the widest; None for an empty cell
    frozen_rows: int
    autofilter: str | None
    widths: dict[int, float]  # zero-based column -> width in characters
    parts: list[str]  # the names in the zip
    xml: str  # the sheet's own XML
    shared_strings: list[str] = field(default_factory=list)

    def values(self) -> list[list[Any]]:
        """The cells' values: numbers, booleans, text, datetimes for date cells, None."""
        return [
            [None if c is None else c.as_datetime() if c.is_date else c.value for c in row]
            for row in self.rows
        ]

    def text(self) -> str:
        """Every cell as text, in the CSV's spelling as far as it goes (numbers as stored,
        dates in ISO 8601, True/False), one row a line: for looking for a value anywhere."""
        def spelled(cell: Cell | None) -> str:
            if cell is None:
                return ""
            if cell.is_date:
                return cell.as_datetime().isoformat()
            return str(cell.value) if cell.kind in ("bool", "text") else cell.raw

        return "\n".join(",".join(spelled(c) for c in row) for row in self.rows)


def unescape(text: str) -> str:
    """Excel's _xHHHH_ escapes (control characters; "_x005F_" for a literal underscore)."""
    return re.sub(r"_x([0-9A-Fa-f]{4})_", lambda m: chr(int(m[1], 16)), text)


def _string(element: ET.Element) -> str:
    # <is>/<si> hold one <t>, or runs <r> of one <t> each.
    return unescape("".join(t.text or "" for t in element.iter(f"{M}t")))


def _column(ref: str) -> int:
    letters = re.match(r"[A-Z]+", ref)
    assert letters is not None, ref
    index = 0
    for letter in letters[0]:
        index = index * 26 + ord(letter) - ord("A") + 1
    return index - 1


def _styles(archive: zipfile.ZipFile) -> list[tuple[str, bool, bool]]:
    """Per cell style index: (number format, quote prefix, bold)."""
    root = ET.fromstring(archive.read("xl/styles.xml"))
    formats = dict(BUILTIN_FORMATS)
    for fmt in root.iter(f"{M}numFmt"):
        formats[int(fmt.attrib["numFmtId"])] = fmt.attrib["formatCode"]
    fonts_element = root.find(f"{M}fonts")
    assert fonts_element is not None
    bold_fonts = [font.find(f"{M}b") is not None for font in fonts_element]
    cell_xfs = root.find(f"{M}cellXfs")
    assert cell_xfs is not None
    return [
        (
            formats[int(xf.attrib.get("numFmtId", 0))],
            xf.attrib.get("quotePrefix") == "1",
            bold_fonts[int(xf.attrib.get("fontId", 0))],
        )
        for xf in cell_xfs
    ]


def read_sheet(source: bytes | str | Path) -> Sheet:
    """The first sheet of the workbook in ``source`` (its bytes or a path)."""
    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    archive = zipfile.ZipFile(io.BytesIO(data))
    styles = _styles(archive)
    shared: list[str] = []
    if "xl/sharedStrings.xml" in archive.namelist():
        shared = [_string(si) for si in ET.fromstring(archive.read("xl/sharedStrings.xml"))]
    xml = archive.read(SHEET).decode("utf-8")
    root = ET.fromstring(xml)
    rows: list[list[Cell | None]] = []
    for row in root.iter(f"{M}row"):
        number = int(row.attrib["r"])
        while len(rows) < number:
            rows.append([])
        cells: list[Cell | None] = []
        for c in row.iter(f"{M}c"):
            column = _column(c.attrib["r"])
            cells.extend([None] * (column + 1 - len(cells)))
            number_format, quote_prefix, bold = styles[int(c.attrib.get("s", 0))]
            kind = c.attrib.get("t", "n")
            v = c.find(f"{M}v")
            f = c.find(f"{M}f")
            raw = (v.text or "") if v is not None else ""
            if f is not None:
                cell = Cell("formula", f.text or "", raw)
            elif kind == "n":
                cell = Cell("number", float(raw), raw)
            elif kind == "b":
                cell = Cell("bool", raw == "1", raw)
            elif kind == "inlineStr":
                inline = c.find(f"{M}is")
                assert inline is not None
                text = _string(inline)
                cell = Cell("text", text, text)
            elif kind == "s":
                text = shared[int(raw)]
                cell = Cell("text", text, text)
            else:
                raise AssertionError(f"cell {c.attrib['r']}: unknown type {kind!r}")
            cells[column] = Cell(
                cell.kind, cell.value, cell.raw, number_format, quote_prefix, bold
            )
        rows[number - 1] = cells
    width = max((len(r) for r in rows), default=0)
    rows = [r + [None] * (width - len(r)) for r in rows]
    pane = root.find(f"{M}sheetViews/{M}sheetView/{M}pane")
    frozen = (
        int(float(pane.attrib.get("ySplit", 0)))
        if pane is not None and pane.attrib.get("state") == "frozen"
        else 0
    )
    autofilter = root.find(f"{M}autoFilter")
    widths: dict[int, float] = {}
    for col in root.iter(f"{M}col"):
        for index in range(int(col.attrib["min"]) - 1, int(col.attrib["max"])):
            widths[index] = float(col.attrib["width"])
    return Sheet(
        rows=rows,
        frozen_rows=frozen,
        autofilter=autofilter.attrib["ref"] if autofilter is not None else None,
        widths=widths,
        parts=archive.namelist(),
        xml=xml,
        shared_strings=shared,
    )
