"""Dates written by people: every format's text, English ordinals, weekdays, injectivity and two-digit years."""

from __future__ import annotations

import datetime

import pytest

from attnexp.data.date_formats import FORMATS, formats_for, parse_two_digit_year, render
from attnexp.errors import AttnexpError

WED = datetime.date(2021, 3, 3)
TUE = datetime.date(2021, 3, 2)

# The format -> (text for Wednesday 2021-03-03, text for Tuesday 2021-03-02).
EXPECTED = {
    "es_long": ("3 de marzo de 2021", "2 de marzo de 2021"),
    "es_long_del": ("3 de marzo del 2021", "2 de marzo del 2021"),
    "es_weekday_long": ("miércoles, 3 de marzo de 2021", "martes, 2 de marzo de 2021"),
    "es_weekday_no_comma": ("miércoles 3 de marzo de 2021", "martes 2 de marzo de 2021"),
    "es_weekday_capital": ("Miércoles, 3 de marzo de 2021", "Martes, 2 de marzo de 2021"),
    "es_abbr": ("3 mar. 2021", "2 mar. 2021"),
    "es_abbr_dash": ("3-mar-2021", "2-mar-2021"),
    "es_numeric": ("3/3/2021", "2/3/2021"),
    "es_numeric_short": ("03/03/21", "02/03/21"),
    "es_numeric_dash": ("03-03-2021", "02-03-2021"),
    "es_numeric_dot": ("03.03.2021", "02.03.2021"),
    "en_long": ("March 3, 2021", "March 2, 2021"),
    "en_ordinal": ("March 3rd, 2021", "March 2nd, 2021"),
    "en_weekday_ordinal": ("Wednesday, March 3rd 2021", "Tuesday, March 2nd 2021"),
    "en_weekday_long": ("Wednesday, 3 March 2021", "Tuesday, 2 March 2021"),
    "en_weekday_abbr": ("Wed 3 Mar 2021", "Tue 2 Mar 2021"),
    "en_abbr": ("Mar 3, 2021", "Mar 2, 2021"),
    "en_day_month": ("3 March 2021", "2 March 2021"),
    "en_ordinal_day_month": ("3rd March 2021", "2nd March 2021"),
    "en_ordinal_of": ("3rd of March 2021", "2nd of March 2021"),
    "en_upper": ("3 MAR 2021", "2 MAR 2021"),
}


def test_every_format_has_a_hand_written_example():
    assert set(EXPECTED) == set(FORMATS) and len(FORMATS) == len(set(FORMATS))
    assert sum(name.startswith("es_") for name in FORMATS) >= 10
    assert sum(name.startswith("en_") for name in FORMATS) >= 10


@pytest.mark.parametrize("fmt", FORMATS)
def test_render_examples(fmt):
    assert (render(WED, fmt), render(TUE, fmt)) == EXPECTED[fmt]


@pytest.mark.parametrize(
    "day, text",
    [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (11, "11th"),
        (12, "12th"),
        (13, "13th"),
        (21, "21st"),
        (22, "22nd"),
        (23, "23rd"),
        (24, "24th"),
        (31, "31st"),
    ],
)
def test_english_ordinals(day, text):
    assert render(datetime.date(2021, 1, day), "en_ordinal") == f"January {text}, 2021"
    assert render(datetime.date(2021, 1, day), "en_ordinal_of") == f"{text} of January 2021"


def test_other_dates_month_names_weekdays_and_padding():
    saturday, sunday = datetime.date(2022, 1, 1), datetime.date(1999, 12, 26)
    assert render(saturday, "es_weekday_long") == "sábado, 1 de enero de 2022"
    assert render(saturday, "es_weekday_capital") == "Sábado, 1 de enero de 2022"
    assert render(saturday, "en_weekday_abbr") == "Sat 1 Jan 2022"
    assert render(sunday, "es_weekday_no_comma") == "domingo 26 de diciembre de 1999"
    assert render(sunday, "en_weekday_ordinal") == "Sunday, December 26th 1999"
    assert render(sunday, "es_abbr") == "26 dic. 1999"
    assert render(sunday, "en_upper") == "26 DEC 1999"
    september = datetime.date(2005, 9, 7)
    assert render(september, "es_abbr") == "7 sept. 2005"
    assert render(september, "es_abbr_dash") == "7-sept-2005"
    assert render(september, "en_abbr") == "Sep 7, 2005"
    assert render(september, "es_numeric_short") == "07/09/05"  # day first, never US month/day
    assert render(september, "es_numeric") == "7/9/2005"
    assert render(datetime.date(2024, 2, 29), "en_weekday_long") == "Thursday, 29 February 2024"


def test_every_weekday_is_the_real_one():
    week = [datetime.date(2024, 1, 1) + datetime.timedelta(days=i) for i in range(7)]  # Monday to Sunday
    assert [render(d, "es_weekday_long").split(",")[0] for d in week] == [
        "lunes",
        "martes",
        "miércoles",
        "jueves",
        "viernes",
        "sábado",
        "domingo",
    ]
    assert [render(d, "en_weekday_abbr").split()[0] for d in week] == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]


def test_every_format_is_injective_over_a_century():
    first = datetime.date(1950, 1, 1)
    days = [first + datetime.timedelta(days=i) for i in range((datetime.date(2049, 12, 31) - first).days + 1)]
    assert len(days) == 36525
    for fmt in formats_for(1950, 2049):
        texts = {render(day, fmt) for day in days}
        assert len(texts) == len(days), fmt


def test_two_digit_year_formats_only_within_a_century():
    assert "es_numeric_short" in formats_for(1950, 2049)
    assert formats_for(1950, 2049) == FORMATS
    wide = formats_for(1900, 2100)
    assert "es_numeric_short" not in wide
    assert all("1987" in render(datetime.date(1987, 6, 5), fmt) for fmt in wide)  # four-digit years only
    assert set(FORMATS) - set(wide) == {"es_numeric_short"}
    assert formats_for(1950, 2050) == wide  # 101 years: two ranges' years would share "50"
    with pytest.raises(AttnexpError, match="must not come before"):
        formats_for(2049, 1950)


def test_parse_two_digit_year():
    assert parse_two_digit_year(21, 1950) == 2021
    assert parse_two_digit_year(55, 1950) == 1955
    assert parse_two_digit_year(50, 1950) == 1950 and parse_two_digit_year(49, 1950) == 2049
    assert parse_two_digit_year(0, 2000) == 2000 and parse_two_digit_year(99, 2000) == 2099
    assert all(parse_two_digit_year(y % 100, 1950) == y for y in range(1950, 2050))
    with pytest.raises(AttnexpError, match="between 0 and 99"):
        parse_two_digit_year(100, 1950)


def test_unknown_format_names_the_allowed_ones():
    with pytest.raises(AttnexpError) as err:
        render(WED, "us_numeric")
    message = str(err.value)
    assert "'us_numeric'" in message and all(name in message for name in FORMATS)
