"""Counts in the words people use: "1 busy period", never "1 busy periods" (issue 40)."""

from app.services.integrations.calendars.sync import counted


def test_one_is_singular_and_any_other_count_plural():
    assert [counted(n, "busy period") for n in (0, 1, 2)] == [
        "0 busy periods",
        "1 busy period",
        "2 busy periods",
    ]
