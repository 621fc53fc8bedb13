"""Reading the lines of an expert-label file (review.domain.imports), without Django."""

import pytest

from review.domain.imports import LabelLine, LineError, parse_line, parse_lines


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"external_id": "a", "score": 0}', LabelLine(1, "a", score=0.0)),
        ('{"external_id": "a", "score": 1}', LabelLine(1, "a", score=1.0)),
        ('{"external_id": "a", "score": 0.75}', LabelLine(1, "a", score=0.75)),
        ('{"external_id": "a", "labels": ["GEDECKT", " teilweise ", "UNGEDECKT"]}',
         LabelLine(1, "a", labels=("GEDECKT", "TEILWEISE", "UNGEDECKT"))),
        ('{"external_id": "a", "labels": []}', LabelLine(1, "a", labels=())),
    ],
)
def test_readable_lines(text: str, expected: LabelLine) -> None:
    assert parse_line(text, 1) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ('{"external_id": "a", "score": NaN}', "not valid JSON"),
        ('{"external_id": "a", "score": Infinity}', "not valid JSON"),
        ("[]", "expected a JSON object"),
        ('{"score": 1}', "external_id: a non-empty string"),
        ('{"external_id": "  ", "score": 1}', "external_id: a non-empty string"),
        ('{"external_id": 5, "score": 1}', "external_id: a non-empty string"),
        ('{"external_id": "' + "x" * 201 + '", "score": 1}', "longer than 200"),
        ('{"external_id": "a"}', "either score or labels"),
        ('{"external_id": "a", "score": 1, "labels": []}', "either score or labels"),
        ('{"external_id": "a", "score": 1, "extra": 1}', "unknown field 'extra'"),
        ('{"external_id": "a", "score": true}', "score: a number"),
        ('{"external_id": "a", "score": null}', "score: a number"),
        ('{"external_id": "a", "score": -0.1}', "-0.1 is not between 0 and 1"),
        ('{"external_id": "a", "score": 1e308}', "is not between 0 and 1"),
        ('{"external_id": "a", "labels": "GEDECKT"}', "labels: a list"),
        ('{"external_id": "a", "labels": ["GEDECKT", 1]}', "labels[2]: '1'"),
        ('{"external_id": "a", "labels": ["JA"]}', "labels[1]: 'JA' is not one of"),
        ("[" * 100_000, "not valid JSON"),
        ('{"external_id": "a", "score": ' + "1" * 200_000 + "}", "longer than 100000"),
    ],
)
def test_unreadable_lines_say_why(text: str, message: str) -> None:
    result = parse_line(text, 7)
    assert isinstance(result, LineError), result
    assert result.line == 7 and message in result.message


def test_lines_are_numbered_as_an_editor_shows_them_and_blank_ones_skipped() -> None:
    lines = ['{"external_id": "a", "score": 1}\n', "\n", "   \n", "oops\n",
             '{"external_id": "b", "score": 0}']
    results = list(parse_lines(lines))
    assert [r.line for r in results] == [1, 4, 5]
    assert isinstance(results[1], LineError)


@pytest.mark.parametrize("text", [
    '{"external_id": "a\\u0000", "score": 1}',
    '{"external_id": "\\ud800", "score": 1}',
    '{"external_id": "a\\udfffb", "score": 1}',
])
def test_an_id_no_answer_can_have_is_refused(text: str) -> None:
    result = parse_line(text, 3)
    assert isinstance(result, LineError) and result.line == 3
    assert result.message == ("external_id: contains a NUL character or an unpaired surrogate")


def test_lines_from_a_file_are_decoded_one_by_one() -> None:
    lines = [
        '\ufeff{"external_id": "a", "score": 1}\n'.encode(),  # a byte order mark first
        b'{"external_id": "b\xe4", "score": 1}\n',  # Latin-1
        '{"external_id": "ä", "score": 0.5}\n'.encode(),
        '\ufeff{"external_id": "c", "score": 1}\n'.encode(),  # not first: part of the line
    ]
    first, second, third, fourth = parse_lines(lines)
    assert first == LabelLine(1, "a", score=1.0)
    assert second == LineError(2, "not UTF-8: byte 0xe4 at position 19 (save the file as UTF-8)")
    assert third == LabelLine(3, "ä", score=0.5)
    assert isinstance(fourth, LineError) and "not valid JSON" in fourth.message
