"""Temporal cues in a recall question: does it ask *when*, and which period is it about?
And when does a statement say it began to be true (:func:`stated_start`)?

Relative phrases resolve against ``now`` (UTC); when several phrases occur the most
specific (shortest) window wins, and :func:`time_affinity` scores a memory's timestamp
against it.

    >>> now = datetime(2023, 6, 15, 12, tzinfo=UTC).timestamp()  # a Thursday
    >>> cue = temporal_cue("When did I go hiking last week?", now=now)
    >>> cue.asks_when, cue.window.phrase
    (True, 'last week')
    >>> datetime.fromtimestamp(cue.window.start, UTC).date()
    datetime.date(2023, 6, 5)
    >>> time_affinity(cue.window.start + 3600, cue.window)
    1.0
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["TemporalCue", "TimeWindow", "temporal_cue", "time_affinity", "stated_start"]

_DAY = 86400.0
_FLAGS = re.IGNORECASE | re.ASCII  # ASCII: no Unicode digits or case folds reach int() / the tables

_MONTH_NAMES = ("january", "february", "march", "april", "may", "june",
                "july", "august", "september", "october", "november", "december")
_MONTHS = {name[:3]: number for number, name in enumerate(_MONTH_NAMES, start=1)}
_MONTH_ALT = "|".join((*_MONTH_NAMES, "sept", *_MONTHS))  # full names before abbreviations
_AMBIGUOUS_MONTHS = frozenset({"may", "march", "mar"})  # also verbs: need a strong cue
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                 "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
                 "couple": 2, "few": 3}
_NUMBER_ALT = r"\d{1,6}|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|" + "|".join(
    sorted((w for w in _NUMBER_WORDS if w not in ("couple", "few")), key=len, reverse=True))
_SEASON_START = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # meteorological, north
_SEASON_ALT = "|".join(_SEASON_START)
_POSSESSIVES = frozenset({"my", "his", "her", "your", "their", "our", "a", "the"})  # "my last fall"
_PART_OF_DAY = {"morning": (5, 12), "afternoon": (12, 18), "evening": (18, 24)}  # hours
_PART_OF_MONTH = {"early": (1, 11), "mid": (11, 21), "late": (21, None)}  # days, end exclusive

_ASKS_WHEN = re.compile(
    r"\bwhen(?:'s|\s+(?:did|was|were|is|are|do|does|had|has|have|will|would|should|could|can))\b"
    r"|\b(?:what|which)\s+(?:date|day|year|month|week|time)\b|\bhow\s+long\s+ago\b|\bsince\s+when\b",
    _FLAGS)

Span = tuple[datetime, datetime]


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A period ``[start, end)`` in UTC POSIX seconds, and the words that named it.

    >>> TimeWindow(0.0, 86400.0, "today").end
    86400.0
    """

    start: float
    end: float
    phrase: str

    def __post_init__(self) -> None:
        if not self.end > self.start:
            raise ValueError(f"TimeWindow needs end > start, got start={self.start!r} end={self.end!r}")


@dataclass(frozen=True, slots=True)
class TemporalCue:
    """What a question says about time: whether it asks for one, and which period it is about.

    >>> TemporalCue(asks_when=False, window=None).window is None
    True
    """

    asks_when: bool
    window: TimeWindow | None


def _midnight(now: datetime) -> datetime:
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def _days(start: datetime, count: float = 1) -> Span:
    return start, start + timedelta(days=count)


def _months(year: int, month: int, count: int = 1) -> Span:
    """``count`` calendar months from ``month`` (which may be out of 1..12: it carries into the year)."""
    index = year * 12 + month - 1
    start, end = (datetime(i // 12, i % 12 + 1, 1, tzinfo=UTC) for i in (index, index + count))
    return start, end


def _year(year: int) -> Span:
    return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)


def _day_word(m: re.Match[str], now: datetime) -> Span:
    back = 0 if m[0].lower() == "today" else 2 if m["before"] else 1
    return _days(_midnight(now) - timedelta(days=back))


def _part_of_day(m: re.Match[str], now: datetime) -> Span:
    today = _midnight(now)
    if m["lastnight"]:
        return today - timedelta(hours=6), today + timedelta(hours=6)
    first, last = _PART_OF_DAY[(m["part"] or "evening").lower()]
    base = today - timedelta(days=1) if (m["which"] or "").lower() == "yesterday" else today
    start, end = base + timedelta(hours=first), base + timedelta(hours=last)
    return (start, end) if start <= now else _days(today)  # not begun yet: the day so far


def _period(m: re.Match[str], now: datetime) -> Span:
    rel, unit = m["rel"].split()[-1].lower(), m["unit"].lower()
    rolling = rel == "past" and unit != "weekend"
    today = _midnight(now)
    monday = today - timedelta(days=today.weekday())
    if rolling:
        return now - timedelta(days={"week": 7, "month": 30, "year": 365}[unit]), now
    if unit == "week":
        return _days(monday if rel == "this" else monday - timedelta(days=7), 7)
    if unit == "weekend":
        saturday = monday + timedelta(days=5)
        if rel != "this":
            return _days(monday - timedelta(days=2), 2)
        return _days(saturday, 2) if saturday <= now else _days(monday, 7)
    back = 0 if rel == "this" else 1
    return _months(now.year, now.month - back) if unit == "month" else _year(now.year - back)


def _weekday(m: re.Match[str], now: datetime) -> Span:
    today = _midnight(now)
    back = (today.weekday() - _WEEKDAYS.index(m["day"].lower())) % 7 or 7
    return _days(today - timedelta(days=back))


def _ago(m: re.Match[str], now: datetime) -> Span:
    raw = m["n"].lower()
    n = int(raw) if raw.isdigit() else _NUMBER_WORDS[[w for w in raw.split() if w != "of"][-1]]
    unit, today = m["unit"].lower(), _midnight(now)
    if unit == "day":
        return _days(today - timedelta(days=n))
    if unit == "week":
        return _days(today - timedelta(days=7 * n + 3), 7)  # the 7 days centred on that day
    if unit == "month":
        return _months(now.year, now.month - n)
    return _year(now.year - n)


def _recent(m: re.Match[str], now: datetime) -> Span:
    return now - timedelta(days=30), now


def _last_season(m: re.Match[str], now: datetime) -> Span | None:
    season = m["season"].lower()
    before = m.string[max(0, m.start() - 8):m.start()].lower().split()
    if season == "fall" and before and before[-1] in _POSSESSIVES:
        return None
    for year in range(now.year, now.year - 3, -1):
        start, end = _months(year, _SEASON_START[season], 3)
        if end <= now:
            return start, end
    return None


def _season_year(m: re.Match[str], now: datetime) -> Span:
    return _months(int(m["year"]), _SEASON_START[m["season"].lower()], 3)


def _month_phrase(m: re.Match[str], now: datetime) -> Span | None:
    name = m["month"].lower()
    strong = m["year"] or m["mday"] or m["dsuf"] or m["prep"] or (m["rel"] and m["of"])
    if not strong and (name in _AMBIGUOUS_MONTHS or not (m["dday"] or m["part"] or m["rel"])):
        return None
    month, day = _MONTHS[name[:3]], int(m["dday"] or m["mday"] or 0)

    def window(year: int) -> Span:
        if day:
            return _days(datetime(year, month, day, tzinfo=UTC))
        start, end = _months(year, month)
        if m["part"]:
            first, last = _PART_OF_MONTH[m["part"].lower()]
            start, end = start.replace(day=first), end if last is None else start.replace(day=last)
        return start, end

    if m["year"]:
        year = int(m["year"])
    elif m["rel"]:
        year = now.year - (m["rel"].lower() == "last")
    else:  # the most recent such period that has begun ("last May": that has ended)
        edge = 1 if (m["prep"] or "").lower() == "last" else 0
        year = now.year if window(now.year)[edge] <= now else now.year - 1
    start, end = window(year)
    return (start, max(end, now)) if (m["prep"] or "").lower() == "since" else (start, end)


def _iso_date(m: re.Match[str], now: datetime) -> Span:
    return _days(datetime(int(m["y"]), int(m["m"]), int(m["d"]), tzinfo=UTC))


def _year_phrase(m: re.Match[str], now: datetime) -> Span | None:
    year = int(m["year"])
    if not 1900 <= year <= 2100:
        return None
    start, end = _year(year)
    return (start, max(end, now)) if m["prep"].lower() == "since" else (start, end)


_RULES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str], datetime], Span | None]], ...] = tuple(
    (re.compile(pattern, _FLAGS), resolve) for pattern, resolve in (
        (r"\b(?:(?P<before>the\s+day\s+before\s+)?yesterday|today)\b", _day_word),
        (r"\b(?:(?P<which>this|yesterday)\s+(?P<part>morning|afternoon|evening)|tonight"
         r"|(?P<lastnight>last\s+night))\b", _part_of_day),
        (r"\b(?P<rel>this\s+past|this|last|past|previous)\s+(?P<unit>week|month|year|weekend)\b", _period),
        (rf"\b(?:last|on|this\s+past|past)\s+(?P<day>{'|'.join(_WEEKDAYS)})\b", _weekday),
        (rf"\b(?P<n>{_NUMBER_ALT})\s+(?P<unit>day|week|month|year)s?\s+ago\b", _ago),
        (r"\b(?:recently|lately)\b", _recent),
        (rf"\b(?:last|past|previous)\s+(?P<season>{_SEASON_ALT})\b", _last_season),
        (rf"\b(?P<season>{_SEASON_ALT})\s+(?:of\s+)?(?P<year>\d{{4}})\b", _season_year),
        (rf"\b(?:(?P<prep>in|during|of|since|last)\s+(?:the\s+)?)?(?:(?P<part>early|mid|late)[\s-]+)?"
         rf"(?:(?P<dday>\d{{1,2}})(?P<dsuf>st|nd|rd|th)?(?:\s+of)?\s+)?(?P<month>{_MONTH_ALT})\b\.?"
         r"(?:\s+(?P<mday>\d{1,2})(?:st|nd|rd|th)?\b(?![:.]\d))?"
         r"(?:,?\s+(?:of\s+)?(?P<year>\d{4})\b|\s+(?P<of>of\s+)?(?P<rel>last|this)\s+year\b)?", _month_phrase),
        (r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b", _iso_date),
        (r"\b(?P<prep>in|during|of|since)\s+(?:the\s+year\s+)?(?P<year>\d{4})\b(?![-/]\d)", _year_phrase),
    ))


# A period bounded by two dated phrases ("between August 11 and August 15 2023", "from May to June 2024"),
# or up to the end of one ("as of December 2023", "until last week"): it wins over the phrases inside it.
# Each end is at most 40 characters (a dated phrase is short), so a long question costs linear time.
_RANGE = re.compile(r"\b(?:between|from)\s+(?P<a>[^?.!,;]{1,40}?)\s+(?:and|to|until|till|through)\s+(?P<b>[^?!,;]{1,40}?)"
                    r"(?=\s*(?:[?!,;]|\.(?:\s|$)|$))", _FLAGS)
_UP_TO = re.compile(r"\b(?:as\s+of|up\s+until|until|till)\s+(?P<b>[^?!,;]{1,40}?)(?=\s*(?:[?!,;]|\.(?:\s|$)|$))",
                    _FLAGS)
_YEAR = re.compile(r"\b\d{4}\b", _FLAGS)  # a four-digit year, anywhere in a text
_EARLIEST = datetime(1, 1, 2, tzinfo=UTC).timestamp()


def _named(text: str, when: datetime) -> TimeWindow | None:
    """The most specific period ``text`` names through :data:`_RULES` (shortest, then longest phrase, then first)."""
    best: tuple[float, int, int, TimeWindow] | None = None
    for pattern, resolve in _RULES:
        for m in pattern.finditer(text):
            try:
                span = resolve(m, when)
                if span is None:
                    continue
                window = TimeWindow(span[0].timestamp(), span[1].timestamp(), m[0].rstrip("."))
            except (ValueError, OverflowError):  # impossible dates, years out of range
                continue
            key = (window.end - window.start, -len(window.phrase), m.start(), window)
            if best is None or key[:3] < best[:3]:
                best = key
    return None if best is None else best[3]


def _bounded(question: str, when: datetime) -> TimeWindow | None:
    """A range or an "as of" period of ``question`` (see :data:`_RANGE`), when both ends name periods;
    the first end takes the year of the second when it names none ("between May 3 and May 10 2023")."""
    for m in _RANGE.finditer(question):
        a, b = (f"in {x}" if _YEAR.fullmatch(x.strip()) else x for x in (m["a"], m["b"]))  # "2020 and 2022"
        last = _named(b, when)
        year = _YEAR.search(b)
        first = _named(a + (f" {year[0]}" if year and not _YEAR.search(a) else ""), when)
        if first is not None and last is not None and first.start < last.end:
            return TimeWindow(first.start, last.end, m[0])
    for m in _UP_TO.finditer(question):
        last = _named(m["b"], when)
        if last is not None:
            return TimeWindow(_EARLIEST, last.end, m[0])
    return None


def temporal_cue(question: str, *, now: float) -> TemporalCue:
    """Find whether ``question`` asks for a time and which period (if any) it names: a range
    or an "as of" period when it names one, else its most specific dated phrase.

    Never raises on a string; unparseable or impossible dates are ignored.

    >>> now = datetime(2023, 6, 15, 12, tzinfo=UTC).timestamp()
    >>> cue = temporal_cue("What did I cook two days ago, or last month?", now=now)
    >>> cue.asks_when, cue.window.phrase, cue.window.end - cue.window.start
    (False, 'two days ago', 86400.0)
    >>> temporal_cue("I may go hiking", now=now).window is None
    True
    >>> cue = temporal_cue("Where was I between May 3 and May 10 2023?", now=now)
    >>> [datetime.fromtimestamp(t, UTC).date().isoformat() for t in (cue.window.start, cue.window.end)]
    ['2023-05-03', '2023-05-11']
    >>> cue = temporal_cue("How many dogs did I have as of March 2023?", now=now)
    >>> cue.window.phrase, datetime.fromtimestamp(cue.window.end, UTC).date().isoformat()
    ('as of March 2023', '2023-04-01')
    """
    when = datetime.fromtimestamp(now, UTC)
    return TemporalCue(asks_when=_ASKS_WHEN.search(question) is not None,
                       window=_bounded(question, when) or _named(question, when))


def time_affinity(stamp: float, window: TimeWindow, *, tolerance_days: float = 3.0) -> float:
    """1.0 inside ``[start, end)``; outside, falls linearly to 0.0 at ``tolerance_days`` from the window.

    >>> window = TimeWindow(0.0, 86400.0, "today")
    >>> time_affinity(43200.0, window), time_affinity(2.5 * 86400.0, window)
    (1.0, 0.5)
    """
    if not tolerance_days >= 0:
        raise ValueError(f"tolerance_days must be >= 0, got {tolerance_days!r}")
    if window.start <= stamp < window.end:
        return 1.0
    if math.isnan(stamp) or tolerance_days == 0:
        return 0.0
    distance = window.start - stamp if stamp < window.start else stamp - window.end
    return max(0.0, 1.0 - distance / (tolerance_days * _DAY))


# What introduces a statement's own start: "since ...", "as of ...", "starting (in) ...",
# "beginning (in) ...", and "in <a dated period>" opening the sentence ("In 2019 I moved to Porto").
_START_CUE = re.compile(r"\b(?P<cue>since|as\s+of|starting(?:\s+(?:in|on|from))?|beginning(?:\s+(?:in|on))?)\s+"
                        r"|^\W*(?P<opening>in)\s+", _FLAGS)
_START_RULES = tuple(rule for rule in _RULES if rule[1] is not _recent)  # "since recently" names no start


def stated_start(text: str, *, now: float) -> float | None:
    """When ``text``, said at ``now``, says it began to be true: the start of the period
    right after "since", "as of", "starting" or "beginning" ("since March 2024", "as of
    last month", "since 2019"), or of a dated period opening it ("In 2019 I moved to
    Porto"); ``None`` when it names none. Conservative: the period must follow the cue
    directly, one that opens the text needs a year ("In June ..." may be ahead), and a
    start after ``now`` is no start.

    >>> now = datetime(2024, 6, 15, tzinfo=UTC).timestamp()
    >>> def start(text):
    ...     found = stated_start(text, now=now)
    ...     return None if found is None else datetime.fromtimestamp(found, UTC).date().isoformat()
    >>> start("I live in Porto since March 2024"), start("In 2019 I moved to Porto")
    ('2024-03-01', '2019-01-01')
    >>> start("As of last month I work at Acme"), start("I live in Porto"), start("since 2030 I am retired")
    ('2024-05-01', None, None)
    """
    when: datetime | None = None
    for cue in _START_CUE.finditer(text):
        when = datetime.fromtimestamp(now, UTC) if when is None else when  # only for a text with a cue
        opening = cue["opening"] is not None
        # Read as "since <period>": a month named after the cue is a date, not a verb ("since May 2024").
        rest = "since " + text[cue.end():cue.end() + 60]
        for pattern, resolve in _START_RULES:
            found = pattern.match(rest) or pattern.match(rest, 6)
            if found is None or (opening and not _YEAR.search(found[0])):
                continue
            try:
                span = resolve(found, when)
            except (ValueError, OverflowError):  # impossible dates, years out of range
                continue
            if span is not None and span[0] <= when:
                return span[0].timestamp()
    return None
