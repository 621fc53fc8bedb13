"""Weekly batch drawing and ISO-week arithmetic (review.domain.batches): plain Python tables."""

import random
from collections import Counter
from datetime import date, timedelta

import pytest

from common.domain.weeks import format_week, parse_week, shift_week, week_monday, week_of
from review.domain.batches import FLAGGED, RANDOM, Candidate, Drawn, draw_batch

# -- parse_week ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-W49", (2026, 49)),
        ("2026-W01", (2026, 1)),
        ("2026-W53", (2026, 53)),  # 2026 starts on a Thursday: 53 ISO weeks
        ("2020-W53", (2020, 53)),  # so does 2020 (a leap year starting on Wednesday)
        ("2015-W53", (2015, 53)),
        ("2027-W52", (2027, 52)),
    ],
)
def test_parse_week_accepts_iso_weeks(text: str, expected: tuple[int, int]) -> None:
    assert parse_week(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2026-W54",  # no year has 54 weeks
        "2025-W53",  # 2025 has 52
        "2027-W53",  # so has 2027
        "2021-W53",
        "2026-W00",
        "2026-49",
        "2026W49",
        "2026-w49",
        "2026-W4",
        "2026-W049",
        "26-W49",
        "2026-W49-1",
        "W49",
        "",
        "   ",
        "2026-W4a",
        "0001-W02",  # year 1: the week before and the weeks around are out of the calendar
        "0000-W10",
        "9999-W10",
    ],
)
def test_parse_week_refuses_everything_else(text: str) -> None:
    with pytest.raises(ValueError):
        parse_week(text)


@pytest.mark.parametrize("text", ["２０２６-W49", "٢٠٢٦-W49", "2026-W４９"])
def test_parse_week_refuses_non_ascii_digits(text: str) -> None:
    # \d matches every script's digits; int() reads them. Such a week would be stored as typed
    # and so name the same ISO week as "2026-W49" under another spelling.
    with pytest.raises(ValueError):
        parse_week(text)


# -- format_week, week_of, week_monday, shift_week ---------------------------------------------


@pytest.mark.parametrize(
    ("year", "week", "text"),
    [(2026, 1, "2026-W01"), (2026, 49, "2026-W49"), (2020, 53, "2020-W53"), (999, 2, "0999-W02")],
)
def test_format_week(year: int, week: int, text: str) -> None:
    assert format_week(year, week) == text


@pytest.mark.parametrize(
    ("day", "week"),
    [
        (date(2026, 12, 2), "2026-W49"),
        (date(2026, 12, 28), "2026-W53"),
        (date(2026, 12, 31), "2026-W53"),
        (date(2027, 1, 3), "2026-W53"),  # Sunday: still the last week of 2026
        (date(2027, 1, 4), "2027-W01"),  # Monday
        (date(2025, 12, 28), "2025-W52"),
        (date(2025, 12, 29), "2026-W01"),  # Monday of 2026-W01 lies in 2025
        (date(2021, 1, 3), "2020-W53"),
        (date(2021, 1, 4), "2021-W01"),
        (date(2024, 12, 30), "2025-W01"),
    ],
)
def test_week_of(day: date, week: str) -> None:
    assert week_of(day) == week


@pytest.mark.parametrize(
    ("week", "monday"),
    [
        ("2027-W01", date(2027, 1, 4)),
        ("2026-W53", date(2026, 12, 28)),
        ("2026-W01", date(2025, 12, 29)),
        ("2021-W01", date(2021, 1, 4)),
        ("2020-W53", date(2020, 12, 28)),
        ("2026-W49", date(2026, 11, 30)),
    ],
)
def test_week_monday(week: str, monday: date) -> None:
    assert week_monday(week) == monday
    assert monday.weekday() == 0


@pytest.mark.parametrize(
    ("week", "weeks", "expected"),
    [
        ("2020-W53", 1, "2021-W01"),
        ("2021-W01", -1, "2020-W53"),
        ("2020-W52", 1, "2020-W53"),
        ("2020-W52", 2, "2021-W01"),
        ("2021-W02", -2, "2020-W53"),
        ("2026-W53", 1, "2027-W01"),
        ("2027-W01", -1, "2026-W53"),
        ("2026-W52", 1, "2026-W53"),
        ("2027-W01", -2, "2026-W52"),
        ("2026-W01", -1, "2025-W52"),
        ("2025-W52", 1, "2026-W01"),
        ("2019-W52", 1, "2020-W01"),
        ("2020-W01", -1, "2019-W52"),
        ("2026-W49", 0, "2026-W49"),
        ("2026-W49", 52, "2027-W48"),  # 2026 has 53 weeks: 52 later is not the same number
        ("2026-W49", 53, "2027-W49"),
        ("2026-W49", -53, "2025-W48"),
        ("2025-W49", 52, "2026-W49"),
    ],
)
def test_shift_week(week: str, weeks: int, expected: str) -> None:
    assert shift_week(week, weeks) == expected


def test_shift_week_round_trips_over_a_decade() -> None:
    week = "2019-W40"
    for _ in range(600):
        later = shift_week(week, 1)
        assert shift_week(later, -1) == week
        assert later > week  # zero-padded weeks sort as text in calendar order
        week = later
    assert week == week_of(date(2019, 9, 30) + timedelta(weeks=600))


def test_shift_week_refuses_a_bad_week() -> None:
    with pytest.raises(ValueError):
        shift_week("2025-W53", 1)


# -- draw_batch --------------------------------------------------------------------------------


def candidates(random_ids: range | list[int], flagged_ids: range | list[int]) -> list[Candidate]:
    return [Candidate(i, True) for i in random_ids] + [Candidate(i, False) for i in flagged_ids]


def ids(drawn: list[Drawn]) -> list[int]:
    return [d.answer_id for d in drawn]


def test_draw_is_deterministic_for_a_seed_and_ignores_the_input_order() -> None:
    pool = candidates(range(1, 41), range(41, 61))
    first = draw_batch(pool, size=20, seed="recht:2026-W49")
    shuffled = pool[:]
    random.Random(7).shuffle(shuffled)
    assert draw_batch(shuffled, size=20, seed="recht:2026-W49") == first
    assert draw_batch(list(reversed(pool)), size=20, seed="recht:2026-W49") == first


def test_draw_depends_on_the_seed() -> None:
    pool = candidates(range(1, 61), [])
    draws = {
        seed: frozenset(ids(draw_batch(pool, size=20, seed=seed)))
        for seed in ("recht:2026-W49", "recht:2026-W50", "fremd:2026-W49", "recht:2027-W01")
    }
    assert len(set(draws.values())) == 4


def test_draw_is_not_the_first_ids() -> None:
    pool = candidates(range(1, 61), [])
    drawn = ids(draw_batch(pool, size=20, seed="recht:2026-W49"))
    assert len(drawn) == len(set(drawn)) == 20
    assert sorted(drawn) != list(range(1, 21))
    assert drawn != sorted(drawn)  # the order is shuffled too, not by id
    assert max(drawn) > 40 and min(drawn) <= 20  # spread over the whole range


def test_random_stratum_is_preferred_when_it_has_enough() -> None:
    pool = candidates(range(100, 125), range(1, 30))  # 25 random, 29 flagged-only
    drawn = draw_batch(pool, size=20, seed="s")
    assert len(drawn) == 20
    assert {d.stratum for d in drawn} == {RANDOM}
    assert set(ids(drawn)) <= set(range(100, 125))


def test_exactly_enough_random_ones_take_no_flagged_one() -> None:
    pool = candidates(range(1, 21), range(21, 40))
    drawn = draw_batch(pool, size=20, seed="s")
    assert sorted(ids(drawn)) == list(range(1, 21))
    assert all(d.stratum == RANDOM for d in drawn)


def test_too_few_random_ones_are_all_taken_and_topped_up_with_flagged_ones() -> None:
    pool = candidates([3, 9, 27, 44], range(100, 130))
    drawn = draw_batch(pool, size=20, seed="s")
    assert len(drawn) == 20
    assert [d for d in drawn if d.stratum == RANDOM] == [
        d for d in drawn if d.answer_id in {3, 9, 27, 44}
    ]
    assert sorted(d.answer_id for d in drawn if d.stratum == RANDOM) == [3, 9, 27, 44]
    flagged = [d.answer_id for d in drawn if d.stratum == FLAGGED]
    assert len(flagged) == len(set(flagged)) == 16
    assert set(flagged) <= set(range(100, 130))
    # The random ones come first: the batch's positions start with the random stratum.
    assert [d.stratum for d in drawn[:4]] == [RANDOM] * 4


@pytest.mark.parametrize(
    ("n_random", "n_flagged", "size", "expected_random", "expected_flagged"),
    [
        (0, 0, 20, 0, 0),
        (3, 2, 20, 3, 2),  # fewer than the size in all: take everything
        (0, 7, 5, 0, 5),  # no random stratum at all
        (0, 3, 20, 0, 3),
        (7, 0, 5, 5, 0),
        (7, 0, 20, 7, 0),
        (19, 30, 20, 19, 1),
        (20, 30, 20, 20, 0),
        (5, 5, 1, 1, 0),
        (5, 5, 0, 0, 0),
        (5, 5, -3, 0, 0),
    ],
)
def test_size_edge_cases(
    n_random: int, n_flagged: int, size: int, expected_random: int, expected_flagged: int
) -> None:
    pool = candidates(range(1, n_random + 1), range(1000, 1000 + n_flagged))
    drawn = draw_batch(pool, size=size, seed="edge")
    counts = Counter(d.stratum for d in drawn)
    assert counts[RANDOM] == expected_random
    assert counts[FLAGGED] == expected_flagged
    assert len(set(ids(drawn))) == len(drawn)


def test_every_candidate_has_the_same_chance() -> None:
    # Over many weeks (seeds) each random-stratum answer is drawn size/n of the time, and the
    # flagged top-up is uniform too; a draw biased toward low or high ids would show here.
    pool = candidates(range(10), range(10, 20))
    hits: Counter[int] = Counter()
    runs = 3000
    for k in range(runs):
        hits.update(ids(draw_batch(pool, size=13, seed=f"uc:{k}")))
    for answer_id in range(10):
        assert hits[answer_id] == runs  # 10 random < 13: every random one, every time
    for answer_id in range(10, 20):
        # 3 of 10 flagged each time: expected 900, sd = sqrt(3000 * .3 * .7) ≈ 25
        assert 800 < hits[answer_id] < 1000, (answer_id, hits[answer_id])

    pool = candidates(range(20), [])
    hits = Counter()
    for k in range(runs):
        hits.update(ids(draw_batch(pool, size=5, seed=f"uc:{k}")))
    for answer_id in range(20):
        # expected 750, sd = sqrt(3000 * .25 * .75) ≈ 24
        assert 650 < hits[answer_id] < 850, (answer_id, hits[answer_id])
