"""The calendar's grid (``publishers.calendar``): weeks and months in a person's zone, the days the
clocks change, a post on its local day, and a picked wall-clock time turned into an instant."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from publishers.calendar import fill, frame, local_at
from publishers.errors import PostInvalid

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def _post(pid: str, at: str, status: str = "approved") -> dict:
    return {"id": pid, "status": status, "time": at, "caption": f"caption of {pid}", "published": False,
            "variants": [{"_id": f"ig:1:{pid}", "_rev": "1-a", "platform": "ig", "account": "1", "status": status},
                         {"_id": f"bsky:shop:{pid}", "_rev": "1-b", "platform": "bsky", "account": "shop", "status": status}]}


def test_a_week_starts_on_monday_at_local_midnight_and_leads_to_the_next_and_previous():
    grid = frame("week", date(2026, 12, 3), BERLIN, _ms("2026-12-02T12:00:00+00:00"))
    assert [d.date for d in grid.days][0] == date(2026, 11, 30) and grid.days[-1].date == date(2026, 12, 6)
    assert grid.since_ms == _ms("2026-11-30T00:00:00+01:00") and grid.until_ms == _ms("2026-12-07T00:00:00+01:00")
    assert grid.prev == date(2026, 11, 23) and grid.next == date(2026, 12, 7)
    assert [d.date for d in grid.days if d.today] == [date(2026, 12, 2)]


def test_the_week_the_clocks_go_forward_has_a_23_hour_day_and_the_autumn_one_a_25_hour_day():
    spring = frame("week", date(2026, 3, 29), BERLIN, 0)  # Sunday 29 March 2026: 02:00 -> 03:00
    assert [d.hours for d in spring.days] == [24, 24, 24, 24, 24, 24, 23]
    autumn = frame("week", date(2026, 10, 25), BERLIN, 0)  # Sunday 25 October 2026: 03:00 -> 02:00
    assert [d.hours for d in autumn.days] == [24, 24, 24, 24, 24, 24, 25]
    assert autumn.until_ms - autumn.since_ms == (7 * 24 + 1) * 3_600_000


def test_a_post_is_on_its_local_day_even_when_its_utc_day_differs():
    grid = frame("week", date(2026, 12, 2), NEW_YORK, 0)
    late = _post("late", "2026-12-03T02:30:00.000Z")  # 21:30 on the 2nd in New York
    fill(grid, [late], NEW_YORK)
    day = next(d for d in grid.days if d.entries)
    assert day.date == date(2026, 12, 2)
    (e,) = day.entries
    assert (e["local"], e["date"]) == ("21:30", "2026-12-02")
    assert [n["platform"] for n in e["networks"]] == ["ig", "bsky"]  # one entry for the post, its networks on it
    assert e["revs"] == "ig:1:late@1-a,bsky:shop:late@1-b"


def test_posts_on_the_autumn_change_day_land_before_and_after_the_repeated_hour():
    grid = frame("week", date(2026, 10, 25), BERLIN, 0)
    fill(grid, [_post("b", "2026-10-25T22:30:00.000Z"), _post("a", "2026-10-24T22:30:00.000Z")], BERLIN)
    sunday = grid.days[-1]
    assert [e["id"] for e in sunday.entries] == ["a", "b"]  # 00:30 on the 25th, then 23:30 on the 25th
    assert [e["local"] for e in sunday.entries] == ["00:30", "23:30"]
    assert not any(d.entries for d in grid.days[:-1])


def test_a_month_is_whole_weeks_with_the_days_of_other_months_marked():
    grid = frame("month", date(2027, 2, 14), BERLIN, 0)  # February 2027: Monday 1st to Sunday 28th
    assert len(grid.days) == 28 and not any(d.outside for d in grid.days)
    march = frame("month", date(2026, 3, 10), BERLIN, 0)  # March 2026: Sunday 1st to Tuesday 31st
    assert march.days[0].date == date(2026, 2, 23) and march.days[-1].date == date(2026, 4, 5)
    assert len(march.days) == 42 and [d.date.day for d in march.days if not d.outside] == list(range(1, 32))
    assert march.prev == date(2026, 2, 1) and march.next == date(2026, 4, 1) and march.title == "March 2026"
    december = frame("month", date(2026, 12, 31), BERLIN, 0)
    assert december.next == date(2027, 1, 1) and december.prev == date(2026, 11, 1)


def test_a_post_just_outside_the_month_grid_is_left_out():
    grid = frame("month", date(2026, 12, 1), BERLIN, 0)  # 30 Nov 2026 to 3 Jan 2027
    fill(grid, [_post("in", "2027-01-03T22:59:00.000Z"), _post("out", "2027-01-03T23:00:00.000Z")], BERLIN)
    assert [e["id"] for d in grid.days for e in d.entries] == ["in"]


def test_a_picked_time_takes_the_offset_of_its_date_in_the_zone():
    assert local_at("2026-07-01", "09:00", BERLIN) == "2026-07-01T09:00:00+02:00"
    assert local_at("2026-12-01", "09:00", BERLIN) == "2026-12-01T09:00:00+01:00"
    assert datetime.fromisoformat(local_at("2026-12-01", "21:30", NEW_YORK)).astimezone(UTC).hour == 2


@pytest.mark.parametrize(("day", "clock", "said"), [
    ("2026-03-29", "02:30", "does not exist in Europe/Berlin"),
    ("2026-10-25", "02:30", "happens twice in Europe/Berlin"),
    ("2026-13-01", "09:00", "give the new time as a date"),
    ("2026-12-01", "9 am", "give the new time as a date"),
])
def test_a_time_that_is_not_one_or_that_the_clocks_skip_or_repeat_is_refused_with_a_sentence(day, clock, said):
    with pytest.raises(PostInvalid, match=said):
        local_at(day, clock, BERLIN)


def test_a_view_that_is_not_week_or_month_is_refused():
    with pytest.raises(PostInvalid, match="week or month"):
        frame("year", None, BERLIN, 0)
