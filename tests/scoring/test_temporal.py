import ast
import doctest
import math
import sys
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

import scoring.temporal
from scoring.temporal import TemporalCue, TimeWindow, stated_start, temporal_cue, time_affinity

DAY = 86400.0
NOW = datetime(2023, 6, 15, 12, tzinfo=UTC).timestamp()  # a Thursday, in meteorological summer


def at(*args):
    return datetime(*args, tzinfo=UTC).timestamp()


def window(question, now=NOW):
    """(start, end, phrase) of the question's window, or None."""
    found = temporal_cue(question, now=now).window
    return None if found is None else (found.start, found.end, found.phrase)


def span(question, now=NOW):
    found = window(question, now)
    return None if found is None else found[:2]


def test_doctests_pass():
    assert doctest.testmod(scoring.temporal).failed == 0


def test_public_api():
    assert sorted(scoring.temporal.__all__) == ["TemporalCue", "TimeWindow", "stated_start", "temporal_cue", "time_affinity"]


def test_imports_only_the_standard_library():
    tree = ast.parse(open(scoring.temporal.__file__, encoding="utf-8").read())
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {m.split(".")[0] for m in modules} <= sys.stdlib_module_names | {"__future__"}


# --- days and parts of days -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What did I eat today?", (at(2023, 6, 15), at(2023, 6, 16))),
        ("what happened yesterday", (at(2023, 6, 14), at(2023, 6, 15))),
        ("the day before yesterday", (at(2023, 6, 13), at(2023, 6, 14))),
        ("this morning", (at(2023, 6, 15, 5), at(2023, 6, 15, 12))),
        ("this afternoon", (at(2023, 6, 15, 12), at(2023, 6, 15, 18))),  # begins exactly at now
        ("yesterday evening", (at(2023, 6, 14, 18), at(2023, 6, 15))),
        ("yesterday morning", (at(2023, 6, 14, 5), at(2023, 6, 14, 12))),
        ("last night", (at(2023, 6, 14, 18), at(2023, 6, 15, 6))),
    ],
)
def test_days_and_parts_of_days(question, expected):
    assert span(question) == expected


def test_a_part_of_today_not_yet_begun_falls_back_to_the_whole_day():
    assert span("tonight") == span("this evening") == (at(2023, 6, 15), at(2023, 6, 16))
    evening = at(2023, 6, 15, 20)
    assert span("tonight", evening) == span("this evening", evening) == (at(2023, 6, 15, 18), at(2023, 6, 16))


# --- weeks, months, years, weekends -------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("this week", (at(2023, 6, 12), at(2023, 6, 19))),  # weeks start on Monday
        ("last week", (at(2023, 6, 5), at(2023, 6, 12))),
        ("the previous week", (at(2023, 6, 5), at(2023, 6, 12))),
        ("over the past week", (NOW - 7 * DAY, NOW)),  # "past" is rolling
        ("this month", (at(2023, 6, 1), at(2023, 7, 1))),
        ("last month", (at(2023, 5, 1), at(2023, 6, 1))),
        ("the past month", (NOW - 30 * DAY, NOW)),
        ("this year", (at(2023, 1, 1), at(2024, 1, 1))),
        ("last year", (at(2022, 1, 1), at(2023, 1, 1))),
        ("previous year", (at(2022, 1, 1), at(2023, 1, 1))),
        ("in the past year", (NOW - 365 * DAY, NOW)),
        ("last weekend", (at(2023, 6, 10), at(2023, 6, 12))),
        ("this past weekend", (at(2023, 6, 10), at(2023, 6, 12))),
        ("this weekend", (at(2023, 6, 12), at(2023, 6, 19))),  # not begun on a Thursday: this week
    ],
)
def test_calendar_periods(question, expected):
    assert span(question) == expected


def test_this_weekend_once_it_has_begun():
    assert span("this weekend", at(2023, 6, 17, 9)) == (at(2023, 6, 17), at(2023, 6, 19))


def test_last_month_in_january_is_last_december():
    assert span("last month", at(2024, 1, 10)) == (at(2023, 12, 1), at(2024, 1, 1))


# --- weekdays ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "day"),
    [
        ("last Monday", 12),
        ("on monday", 12),
        ("last Tuesday", 13),
        ("on Wednesday", 14),
        ("last Thursday", 8),  # today is Thursday: the one a week ago
        ("last Friday", 9),
        ("on Saturday", 10),
        ("last Sunday", 11),
        ("this past Sunday", 11),
    ],
)
def test_weekdays_are_the_most_recent_such_day_before_today(question, day):
    assert span(question) == (at(2023, 6, day), at(2023, 6, day + 1))


def test_plural_weekday_is_not_a_date():
    assert window("what do I do on Mondays?") is None


# --- "N units ago" and "recently" ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("3 days ago", (at(2023, 6, 12), at(2023, 6, 13))),
        ("a day ago", (at(2023, 6, 14), at(2023, 6, 15))),
        ("a couple of days ago", (at(2023, 6, 13), at(2023, 6, 14))),
        ("a couple days ago", (at(2023, 6, 13), at(2023, 6, 14))),
        ("a few days ago", (at(2023, 6, 12), at(2023, 6, 13))),
        ("ten days ago", (at(2023, 6, 5), at(2023, 6, 6))),
        ("two weeks ago", (at(2023, 5, 29), at(2023, 6, 5))),  # the 7 days centred on June 1
        ("a week ago", (at(2023, 6, 5), at(2023, 6, 12))),
        ("a month ago", (at(2023, 5, 1), at(2023, 6, 1))),
        ("3 months ago", (at(2023, 3, 1), at(2023, 4, 1))),
        ("twelve months ago", (at(2022, 6, 1), at(2022, 7, 1))),
        ("seven months ago", (at(2022, 11, 1), at(2022, 12, 1))),
        ("one year ago", (at(2022, 1, 1), at(2023, 1, 1))),
        ("two years ago", (at(2021, 1, 1), at(2022, 1, 1))),
        ("recently", (NOW - 30 * DAY, NOW)),
        ("what have I been reading lately", (NOW - 30 * DAY, NOW)),
    ],
)
def test_ago_and_recently(question, expected):
    assert span(question) == expected


def test_absurd_ago_is_ignored():
    assert window("999999 years ago") is None
    assert window("999999 weeks ago") is None


# --- months and dates -----------------------------------------------------------------------------

MAY_2023 = (at(2023, 5, 1), at(2023, 6, 1))
MAY_8_2023 = (at(2023, 5, 8), at(2023, 5, 9))


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What did I do in May?", MAY_2023),
        ("in June", (at(2023, 6, 1), at(2023, 7, 1))),  # the current month has begun
        ("in July", (at(2022, 7, 1), at(2022, 8, 1))),  # never in the future
        ("during December", (at(2022, 12, 1), at(2023, 1, 1))),
        ("in May of last year", (at(2022, 5, 1), at(2022, 6, 1))),
        ("in May last year", (at(2022, 5, 1), at(2022, 6, 1))),
        ("last May", MAY_2023),
        ("last June", (at(2022, 6, 1), at(2022, 7, 1))),  # June has not ended yet
        ("May 2023", MAY_2023),
        ("in May 2023", MAY_2023),
        ("May of 2023", MAY_2023),
        ("8 May 2023", MAY_8_2023),
        ("8th of May, 2023", MAY_8_2023),
        ("the 8th of May", MAY_8_2023),
        ("May 8, 2023", MAY_8_2023),
        ("May 8th", MAY_8_2023),
        ("on Jan. 5", (at(2023, 1, 5), at(2023, 1, 6))),
        ("sept 3rd 2021", (at(2021, 9, 3), at(2021, 9, 4))),
        ("8 June", (at(2023, 6, 8), at(2023, 6, 9))),
        ("June 20th", (at(2022, 6, 20), at(2022, 6, 21))),  # this year's is still ahead
        ("2023-05-08", MAY_8_2023),
        ("early May 2023", (at(2023, 5, 1), at(2023, 5, 11))),
        ("mid May 2023", (at(2023, 5, 11), at(2023, 5, 21))),
        ("in mid-May", (at(2023, 5, 11), at(2023, 5, 21))),
        ("late May 2023", (at(2023, 5, 21), at(2023, 6, 1))),
        ("late February 2024", (at(2024, 2, 21), at(2024, 3, 1))),
        ("late June", (at(2022, 6, 21), at(2022, 7, 1))),  # not begun this year
        ("since May", (at(2023, 5, 1), NOW)),
        ("Dec 2023", (at(2023, 12, 1), at(2024, 1, 1))),  # an explicit year may be in the future
    ],
)
def test_months_and_dates(question, expected):
    assert span(question) == expected


def test_impossible_and_ambiguous_dates_are_ignored():
    assert window("2023-02-30") is None
    assert window("February 30th, 2023") is None
    assert window("05/08/2023") is None  # month/day order is ambiguous: slash dates are skipped


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("in 2022", (at(2022, 1, 1), at(2023, 1, 1))),
        ("during 2022", (at(2022, 1, 1), at(2023, 1, 1))),
        ("back in the year 1999", (at(1999, 1, 1), at(2000, 1, 1))),
        ("since 2022", (at(2022, 1, 1), NOW)),
        ("last summer", (at(2022, 6, 1), at(2022, 9, 1))),  # summer 2023 is under way
        ("last spring", (at(2023, 3, 1), at(2023, 6, 1))),
        ("last winter", (at(2022, 12, 1), at(2023, 3, 1))),
        ("last fall", (at(2022, 9, 1), at(2022, 12, 1))),
        ("last autumn", (at(2022, 9, 1), at(2022, 12, 1))),
        ("summer of 2021", (at(2021, 6, 1), at(2021, 9, 1))),
    ],
)
def test_years_and_seasons(question, expected):
    assert span(question) == expected


@pytest.mark.parametrize(
    "question",
    [
        "I may go to the gym",
        "May I ask what I like?",
        "we march forward",
        "March on, and we may win",
        "2 may come",  # a cardinal before an ambiguous month is not a day
        "tell me about June",  # a bare month name could be a person
        "the 2022 model",  # a year needs in/during/of/since before it
        "how much were 2022 dollars worth",
        "in 1850",  # outside 1900-2100
        "since my last fall",  # an accident, not autumn
        "what did we talk about?",
    ],
)
def test_false_positives(question):
    assert window(question) is None


# --- choice, phrase, case -------------------------------------------------------------------------


def test_the_most_specific_phrase_wins():
    assert window("last week, or was it yesterday?") == (at(2023, 6, 14), at(2023, 6, 15), "yesterday")
    assert window("in May of last year")[2] == "in May of last year"
    assert window("last month, around 8 May 2023")[2] == "8 May 2023"


def test_phrase_is_as_written_and_matching_ignores_case():
    assert window("What did I buy LAST WEEK?") == (at(2023, 6, 5), at(2023, 6, 12), "LAST WEEK")
    assert window("Anything In MAY 2023?") == (*MAY_2023, "In MAY 2023")


@pytest.mark.parametrize(
    "question",
    [
        "When did I move to Berlin?",
        "when was the party",
        "When is my dentist appointment?",
        "when's the flight",
        "What date is the wedding?",
        "what year did we meet",
        "Which month was the trip?",
        "How long ago did I start running?",
        "What time is the meeting?",
        "Since when have I been vegan?",
    ],
)
def test_asks_when(question):
    assert temporal_cue(question, now=NOW).asks_when


@pytest.mark.parametrize(
    "question",
    ["What did I eat last week?", "Where is my key?", "tell me when you know", "who did I meet in May"],
)
def test_does_not_ask_when(question):
    assert not temporal_cue(question, now=NOW).asks_when


def test_no_cue_at_all():
    assert temporal_cue("", now=NOW) == TemporalCue(asks_when=False, window=None)


# --- time_affinity and TimeWindow -----------------------------------------------------------------

WINDOW = TimeWindow(10 * DAY, 11 * DAY, "some day")


def test_affinity_is_one_inside_and_decays_linearly_outside():
    assert time_affinity(10 * DAY, WINDOW) == 1.0
    assert time_affinity(10.5 * DAY, WINDOW) == 1.0
    assert time_affinity(8.5 * DAY, WINDOW) == pytest.approx(0.5)
    assert time_affinity(12.5 * DAY, WINDOW) == pytest.approx(0.5)
    assert time_affinity(7 * DAY, WINDOW) == 0.0
    assert time_affinity(100 * DAY, WINDOW) == 0.0
    assert time_affinity(12 * DAY, WINDOW, tolerance_days=2) == pytest.approx(0.5)


def test_zero_tolerance_is_a_hard_window():
    assert time_affinity(10.5 * DAY, WINDOW, tolerance_days=0) == 1.0
    assert time_affinity(9.99 * DAY, WINDOW, tolerance_days=0) == 0.0
    assert time_affinity(11 * DAY, WINDOW, tolerance_days=0) == 0.0  # end is exclusive


def test_nan_stamp_has_no_affinity():
    assert time_affinity(math.nan, WINDOW) == 0.0


@pytest.mark.parametrize("bad", [-1.0, -1e-9, math.nan])
def test_negative_tolerance_is_rejected(bad):
    with pytest.raises(ValueError, match="tolerance_days"):
        time_affinity(0.0, WINDOW, tolerance_days=bad)


@pytest.mark.parametrize(("start", "end"), [(1.0, 1.0), (2.0, 1.0), (math.nan, 1.0)])
def test_time_window_requires_end_after_start(start, end):
    with pytest.raises(ValueError, match="end > start"):
        TimeWindow(start, end, "x")


def test_dataclasses_are_frozen():
    with pytest.raises(AttributeError):
        WINDOW.start = 0.0


# --- properties -----------------------------------------------------------------------------------

RELATIVE = [
    "today", "tonight", "this morning", "this afternoon", "this evening", "yesterday", "yesterday evening",
    "the day before yesterday", "last night", "this week", "last week", "past week", "previous week",
    "this month", "last month", "past month", "this year", "last year", "past year", "this weekend",
    "last weekend", "last Monday", "on Tuesday", "last Sunday", "3 days ago", "a few weeks ago",
    "a couple of months ago", "twelve years ago", "recently", "lately", "in May", "in December",
    "last May", "May 8th", "31st of January", "late June", "in early March", "in May of last year",
    "last summer", "last winter", "last spring", "last fall", "since May",
]  # fmt: skip
NOWS = st.floats(min_value=0.0, max_value=4.1e9)  # 1970 to 2099


@given(st.text(), NOWS)
def test_never_raises_and_windows_are_well_formed(question, now):
    cue = temporal_cue(question, now=now)
    assert isinstance(cue.asks_when, bool)
    if cue.window is not None:
        assert cue.window.end > cue.window.start
        assert cue.window.phrase in question


NO_DIGITS = st.text(st.characters(exclude_categories=("Nd",)), max_size=20)  # digits could name a future year


@given(st.lists(st.sampled_from(RELATIVE), min_size=1, max_size=3), NO_DIGITS, NOWS)
def test_relative_windows_never_start_after_now(phrases, noise, now):
    cue = temporal_cue("what did I do " + " and ".join(phrases) + f"? {noise}", now=now)
    assert cue.window is not None
    assert cue.window.start <= now


@given(st.sampled_from(RELATIVE), NOWS)
def test_each_relative_phrase_resolves(phrase, now):
    cue = temporal_cue(phrase, now=now)
    assert cue.window is not None and cue.window.phrase == phrase
    assert cue.window.start <= now


WINDOWS = st.tuples(st.floats(-1e10, 1e10), st.floats(1.0, 1e9)).map(
    lambda sd: TimeWindow(sd[0], sd[0] + sd[1], "w")
)
TOLERANCES = st.floats(0.0, 1e4)


@given(st.floats(-2e10, 2e10), WINDOWS, TOLERANCES)
def test_affinity_is_in_unit_interval_and_one_inside(stamp, win, tolerance):
    score = time_affinity(stamp, win, tolerance_days=tolerance)
    assert 0.0 <= score <= 1.0
    if win.start <= stamp < win.end:
        assert score == 1.0


@given(WINDOWS, TOLERANCES, st.floats(0.0, 1e9), st.floats(0.0, 1e9), st.booleans())
def test_affinity_does_not_increase_with_distance(win, tolerance, near, far, before):
    near, far = sorted((near, far))
    if before:
        stamps = (win.start - near, win.start - far)
    else:
        stamps = (win.end + near, win.end + far)
    a, b = (time_affinity(s, win, tolerance_days=tolerance) for s in stamps)
    assert a >= b


# -- stated_start: when a statement says it began to be true ------------------------------------

SAID = datetime(2024, 6, 15, 12, tzinfo=UTC).timestamp()


@pytest.mark.parametrize("text, start", [
    ("I live in Porto since March 2024", "2024-03-01"),
    ("Since May I live in Porto", "2024-05-01"),  # a month right after "since" is a date, not a verb
    ("I've been vegan since June", "2024-06-01"),
    ("since 2019 I work remotely", "2019-01-01"),
    ("I live here since 2019-04-02", "2019-04-02"),
    ("As of last month I work at Acme", "2024-05-01"),
    ("as of yesterday I'm vegan", "2024-06-14"),
    ("since last summer I keep bees", "2023-06-01"),
    ("Starting in 2020 I work from home", "2020-01-01"),
    ("In 2019 I moved to Porto", "2019-01-01"),
    ("In June 2023 I started at Acme", "2023-06-01"),
])
def test_stated_start_reads_a_start_the_statement_names(text, start):
    found = stated_start(text, now=SAID)
    assert found is not None and datetime.fromtimestamp(found, UTC).date().isoformat() == start


@pytest.mark.parametrize("text", [
    "I live in Porto",
    "I moved to Berlin in 2019",  # when an event happened, not a start the statement names
    "In June I'm moving to Berlin",  # an undated opening may lie ahead
    "In the morning I run",
    "since 2030 I am retired",  # a start after the statement is no start
    "since the divorce I live alone",
    "since I moved I cycle to work",
    "I was born in 1990",
    "since recently I cycle",
    "since 1850 the house stands",
    "since March 2099",
    "",
])
def test_stated_start_is_conservative(text):
    assert stated_start(text, now=SAID) is None


@given(st.text(max_size=80))
def test_stated_start_never_raises_and_never_lies_ahead(text):
    found = stated_start(text, now=SAID)
    assert found is None or found <= SAID


# --- ranges and "as of" ----------------------------------------------------------------------------

@pytest.mark.parametrize(("question", "expected"), [
    ("Where was I between August 11 and August 15 2022?", (at(2022, 8, 11), at(2022, 8, 16))),  # the year of the end
    ("What did I do from March to May 2023?", (at(2023, 3, 1), at(2023, 6, 1))),
    ("Between 2019 and 2021, where did I live?", (at(2019, 1, 1), at(2022, 1, 1))),
    ("what happened from 2023-01-05 through 2023-01-07?", (at(2023, 1, 5), at(2023, 1, 8))),
    ("where did I work between last March and last month?", (at(2023, 3, 1), at(2023, 6, 1))),
])
def test_a_range_spans_both_of_its_ends(question, expected):
    assert span(question) == expected


def test_a_range_wins_over_the_narrower_phrases_inside_it():
    found = window("Where was I between August 11 and August 15 2022?")
    assert found is not None and found[2] == "between August 11 and August 15 2022"


@pytest.mark.parametrize(("question", "expected"), [
    ("What did we discuss between John and Tim on 11 December, 2022?", (at(2022, 12, 11), at(2022, 12, 12))),
    ("How many weeks passed between adopting Coco and Shadow?", None),
    ("What did I do from June to May 2023?", (at(2023, 5, 1), at(2023, 6, 1))),  # backwards: its narrowest part
])
def test_a_range_without_two_ordered_dated_ends_is_no_range(question, expected):
    assert span(question) == expected


@pytest.mark.parametrize(("question", "end"), [
    ("How many dogs did I have, as of September 2022?", at(2022, 10, 1)),
    ("Where did I live until 2020?", None),  # a bare year needs "in": no end, no window
    ("What had I read until last month?", at(2023, 6, 1)),
])
def test_as_of_is_everything_up_to_the_end_of_its_period(question, end):
    found = window(question)
    if end is None:
        assert found is None
    else:
        assert found is not None and found[1] == end and found[0] < at(1900, 1, 1)
        assert time_affinity(at(2001, 1, 1), temporal_cue(question, now=NOW).window) == 1.0


DATES = st.dates(min_value=datetime(2000, 1, 1).date(), max_value=datetime(2030, 12, 31).date())


@given(DATES, DATES)
def test_a_range_of_two_dates_covers_both_days(first, second):
    first, second = sorted((first, second))
    question = f"what happened between {first:%B} {first.day} {first.year} and {second:%B} {second.day} {second.year}?"
    start, end = span(question)
    assert start == at(first.year, first.month, first.day)
    assert end == at(second.year, second.month, second.day) + DAY


@pytest.mark.parametrize(("question", "expected"), [
    ("What was I up to last week?", (at(2023, 6, 5), at(2023, 6, 12))),  # "up to" is no bound here
    ("What have I been up to in May 2023?", (at(2023, 5, 1), at(2023, 6, 1))),
])
def test_being_up_to_something_is_no_bound(question, expected):
    assert span(question) == expected


def test_a_long_question_without_short_dated_ends_is_no_range():
    """Each end of a range is at most 40 characters (which keeps a long question cheap to read)."""
    assert temporal_cue("from " + "a to " * 6000, now=NOW).window is None
    assert span("between " + "x and " * 5000 + "May 3 2023?") == (at(2023, 5, 3), at(2023, 5, 4))
