"""The English catalogue: complete, not fuzzy, placeholders intact, and compiled.

The .po is read by the small reader below (polib is not a requirement), the .mo through
Python's gettext, the way Django reads it. After `makemessages` a new string arrives with an
empty msgstr and an old guess arrives fuzzy; either fails here until it is translated and
`compilemessages` has run.
"""

from __future__ import annotations

import gettext
import re
import string
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

LC_MESSAGES = Path(__file__).resolve().parents[2] / "locale/en/LC_MESSAGES"
PO = LC_MESSAGES / "django.po"
MO = LC_MESSAGES / "django.mo"


# --- a small .po reader -------------------------------------------------------------------------


@dataclass
class Entry:
    line: int
    msgctxt: str | None = None
    msgid: str = ""
    msgid_plural: str | None = None
    msgstr: str | None = None
    msgstr_plural: dict[int, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)

    def __str__(self) -> str:
        context = f" (msgctxt {self.msgctxt!r})" if self.msgctxt is not None else ""
        return f"django.po:{self.line}: {self.msgid!r}{context}"

    def translations(self) -> list[str]:
        if self.msgid_plural is None:
            return [self.msgstr or ""]
        return [self.msgstr_plural[i] for i in sorted(self.msgstr_plural)]


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b",
            "f": "\f", "v": "\v"}
_KEYWORD = re.compile(r'^(msgctxt|msgid|msgid_plural|msgstr(?:\[(\d+)\])?)\s+(".*")$')


def _unquote(quoted: str, line: int) -> str:
    if len(quoted) < 2 or not (quoted.startswith('"') and quoted.endswith('"')):
        raise ValueError(f"django.po:{line}: not a quoted string: {quoted}")

    def escape(match: re.Match[str]) -> str:
        if match[1] not in _ESCAPES:
            raise ValueError(f"django.po:{line}: unknown escape \\{match[1]}")
        return _ESCAPES[match[1]]

    return re.sub(r"\\(.)", escape, quoted[1:-1])


def _entry(block: list[tuple[int, str]]) -> Entry | None:
    if any(text.startswith("#~") for _, text in block):
        return None  # obsolete: gettext ignores it
    entry = Entry(line=block[0][0])
    key: str | None = None
    for number, text in block:
        if text.startswith("#,"):
            entry.flags |= {f.strip() for f in text[2:].split(",") if f.strip()}
        elif text.startswith("#"):
            continue
        elif match := _KEYWORD.match(text):
            key, index, value = match[1], match[2], _unquote(match[3], number)
            if index is not None:
                entry.msgstr_plural[int(index)] = value
            else:
                setattr(entry, key, value)
        elif text.startswith('"') and key is not None:
            value = _unquote(text, number)
            if key.startswith("msgstr["):
                index = int(key[7:-1])
                entry.msgstr_plural[index] += value
            else:
                setattr(entry, key, getattr(entry, key) + value)
        else:
            raise ValueError(f"django.po:{number}: cannot read {text!r}")
    if key is None:
        return None  # comments only
    return entry


@cache
def catalogue() -> tuple[Entry, list[Entry]]:
    """The header entry and the messages of django.po."""
    entries: list[Entry] = []
    block: list[tuple[int, str]] = []
    lines = PO.read_text(encoding="utf-8").splitlines()
    for number, raw in enumerate([*lines, ""], start=1):
        text = raw.strip()
        if text:
            block.append((number, text))
        elif block:
            if (entry := _entry(block)) is not None:
                entries.append(entry)
            block = []
    header = [e for e in entries if e.msgid == "" and e.msgctxt is None]
    assert len(header) == 1, "django.po needs exactly one header entry"
    return header[0], [e for e in entries if e is not header[0]]


def messages() -> list[Entry]:
    return catalogue()[1]


# --- placeholders --------------------------------------------------------------------------------

# A %-conversion as Python's "%" operator reads it, "%%" included.
_PERCENT = re.compile(
    r"%(?:\((?P<name>[^)]*)\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?"
    r"(?P<type>[diouxXeEfFgGcrsa%])"
)


def percent_placeholders(text: str) -> tuple[set[str], list[str], str]:
    """Named conversions (whole, e.g. "%(bias)+.2f"), unnamed ones in order, and what is left."""
    named: set[str] = set()
    unnamed: list[str] = []
    for match in _PERCENT.finditer(text):
        if match["type"] == "%":
            continue
        (named.add if match["name"] is not None else unnamed.append)(match[0])
    return named, unnamed, _PERCENT.sub("", text)


def brace_fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


# --- the tests -----------------------------------------------------------------------------------


def test_the_reader_sees_the_whole_catalogue() -> None:
    text = PO.read_text(encoding="utf-8")
    live_msgids = len(re.findall(r'^msgid "', text, flags=re.MULTILINE))
    assert live_msgids == len(messages()) + 1  # and the header
    assert len(messages()) > 400
    header, _ = catalogue()
    assert header.msgstr is not None
    assert "Language: en\n" in header.msgstr
    assert "Plural-Forms: nplurals=2; plural=(n != 1);\n" in header.msgstr


def test_every_message_is_translated() -> None:
    plural_forms = 2  # Plural-Forms: nplurals=2
    untranslated = []
    for entry in messages():
        forms = entry.translations()
        if entry.msgid_plural is not None and sorted(entry.msgstr_plural) != list(
            range(plural_forms)
        ):
            untranslated.append(f"{entry}: plural forms {sorted(entry.msgstr_plural)}")
        elif not all(form.strip() for form in forms):
            untranslated.append(str(entry))
    assert not untranslated, "untranslated:\n" + "\n".join(untranslated)


def test_no_message_is_fuzzy() -> None:
    # makemessages marks a guess from a similar old string as fuzzy; gettext skips those, so
    # the page shows German until someone checks the guess and removes the flag.
    fuzzy = [str(e) for e in messages() if "fuzzy" in e.flags]
    assert not fuzzy, "fuzzy:\n" + "\n".join(fuzzy)


def test_python_format_placeholders_are_kept() -> None:
    problems = []
    for entry in messages():
        if "python-format" not in entry.flags:
            continue
        singular = percent_placeholders(entry.msgid)
        plural = percent_placeholders(entry.msgid_plural or entry.msgid)
        allowed = singular[0] | plural[0]
        for index, form in enumerate(entry.translations()):
            named, unnamed, rest = percent_placeholders(form)
            source = singular if index == 0 else plural
            if not source[0] <= named:
                problems.append(f"{entry}: [{index}] lacks {sorted(source[0] - named)}")
            if not named <= allowed:
                problems.append(f"{entry}: [{index}] has unknown {sorted(named - allowed)}")
            if unnamed != source[1]:
                problems.append(f"{entry}: [{index}] has {unnamed}, expected {source[1]}")
            if "%" in rest:
                problems.append(f"{entry}: [{index}] has a lone % (write %%)")
    assert not problems, "\n".join(problems)


def test_python_brace_format_fields_are_kept() -> None:
    problems = []
    for entry in messages():
        if "python-brace-format" not in entry.flags:
            continue
        for index, form in enumerate(entry.translations()):
            try:
                fields = brace_fields(form)
            except ValueError as e:
                problems.append(f"{entry}: [{index}] {e}")
                continue
            if fields != brace_fields(entry.msgid):
                problems.append(f"{entry}: [{index}] has {sorted(fields)}")
    assert not problems, "\n".join(problems)


class _Missing(gettext.NullTranslations):
    """The .mo's fallback: a message the .mo lacks comes back marked."""

    MARK = "\x00missing from django.mo\x00"

    def gettext(self, message: str) -> str:
        return self.MARK

    def ngettext(self, msgid1: str, msgid2: str, n: int) -> str:
        return self.MARK

    def pgettext(self, context: str, message: str) -> str:
        return self.MARK

    def npgettext(self, context: str, msgid1: str, msgid2: str, n: int) -> str:
        return self.MARK


def test_the_compiled_catalogue_matches_the_po() -> None:
    with MO.open("rb") as f:
        compiled = gettext.GNUTranslations(f)
    compiled.add_fallback(_Missing())
    header, entries = catalogue()
    assert header.msgstr is not None
    assert f"Plural-Forms: {compiled.info()['plural-forms']}\n" in header.msgstr

    stale = []
    for entry in entries:
        expected = entry.translations()
        if entry.msgid_plural is None:
            found = [compiled.gettext(entry.msgid) if entry.msgctxt is None
                     else compiled.pgettext(entry.msgctxt, entry.msgid)]
        else:
            # n = 1 picks form 0 and n = 2 form 1 under plural=(n != 1).
            found = [
                compiled.ngettext(entry.msgid, entry.msgid_plural, n) if entry.msgctxt is None
                else compiled.npgettext(entry.msgctxt, entry.msgid, entry.msgid_plural, n)
                for n in (1, 2)
            ]
        if found != expected:
            stale.append(f"{entry}: .mo has {found!r}, .po has {expected!r}")
    assert not stale, "run manage.py compilemessages -l en:\n" + "\n".join(stale)
