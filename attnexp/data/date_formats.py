"""Dates written the way people write them, in Spanish and English, for the date-translation task.

Every format is a template over the fields of :func:`_fields`. Numeric formats are day first only, so no
two dates give the same string in one format. Names come from our own tables, never from the machine's locale.
"""

from __future__ import annotations

import datetime

from attnexp.errors import AttnexpError

_ES_MONTHS = (
    "enero",
    "febrero",
    "marzo",
    "abril",
    "mayo",
    "junio",
    "julio",
    "agosto",
    "septiembre",
    "octubre",
    "noviembre",
    "diciembre",
)
# Abbreviations recommended by the RAE, without their final period.
_ES_MONTHS_SHORT = ("ene", "feb", "mar", "abr", "may", "jun", "jul", "ago", "sept", "oct", "nov", "dic")
_ES_WEEKDAYS = ("lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo")
_EN_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_EN_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

# Name -> template; the order here is the stable order of FORMATS.
_TEMPLATES: dict[str, str] = {
    "es_long": "{d} de {es_month} de {yyyy}",
    "es_long_del": "{d} de {es_month} del {yyyy}",
    "es_weekday_long": "{es_weekday}, {d} de {es_month} de {yyyy}",
    "es_weekday_no_comma": "{es_weekday} {d} de {es_month} de {yyyy}",
    "es_weekday_capital": "{Es_weekday}, {d} de {es_month} de {yyyy}",
    "es_abbr": "{d} {es_mon}. {yyyy}",
    "es_abbr_dash": "{d}-{es_mon}-{yyyy}",
    "es_numeric": "{d}/{m}/{yyyy}",
    "es_numeric_short": "{dd}/{mm}/{yy}",
    "es_numeric_dash": "{dd}-{mm}-{yyyy}",
    "es_numeric_dot": "{dd}.{mm}.{yyyy}",
    "en_long": "{en_month} {d}, {yyyy}",
    "en_ordinal": "{en_month} {d_th}, {yyyy}",
    "en_weekday_ordinal": "{en_weekday}, {en_month} {d_th} {yyyy}",
    "en_weekday_long": "{en_weekday}, {d} {en_month} {yyyy}",
    "en_weekday_abbr": "{en_wd} {d} {en_mon} {yyyy}",
    "en_abbr": "{en_mon} {d}, {yyyy}",
    "en_day_month": "{d} {en_month} {yyyy}",
    "en_ordinal_day_month": "{d_th} {en_month} {yyyy}",
    "en_ordinal_of": "{d_th} of {en_month} {yyyy}",
    "en_upper": "{d} {EN_MON} {yyyy}",
}

FORMATS: tuple[str, ...] = tuple(_TEMPLATES)
# Formats that write the year with two digits: unambiguous only within a 100-year range.
_TWO_DIGIT_YEAR = frozenset(name for name, template in _TEMPLATES.items() if "{yy}" in template)


def _ordinal(n: int) -> str:
    """``n`` with its English ordinal suffix: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, ..."""
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _fields(day: datetime.date) -> dict[str, str]:
    """Every piece a template may use, for one date."""
    month, weekday = day.month - 1, day.weekday()
    return {
        "d": str(day.day),
        "dd": f"{day.day:02d}",
        "d_th": _ordinal(day.day),
        "m": str(day.month),
        "mm": f"{day.month:02d}",
        "yyyy": f"{day.year:04d}",
        "yy": f"{day.year % 100:02d}",
        "es_month": _ES_MONTHS[month],
        "es_mon": _ES_MONTHS_SHORT[month],
        "es_weekday": _ES_WEEKDAYS[weekday],
        "Es_weekday": _ES_WEEKDAYS[weekday].capitalize(),
        "en_month": _EN_MONTHS[month],
        "en_mon": _EN_MONTHS[month][:3],
        "EN_MON": _EN_MONTHS[month][:3].upper(),
        "en_weekday": _EN_WEEKDAYS[weekday],
        "en_wd": _EN_WEEKDAYS[weekday][:3],
    }


def render(day: datetime.date, fmt: str) -> str:
    """The date ``day`` written in the format named ``fmt`` (one of :data:`FORMATS`)."""
    template = _TEMPLATES.get(fmt)
    if template is None:
        raise AttnexpError(f"Unknown date format {fmt!r}; allowed formats are: {', '.join(FORMATS)}.")
    return template.format(**_fields(day))


def formats_for(first_year: int, last_year: int) -> tuple[str, ...]:
    """The formats that are unambiguous for dates in [first_year, last_year]: two-digit-year formats only when
    the range spans at most 100 years (a two-digit year then names exactly one year of the range)."""
    if last_year < first_year:
        raise AttnexpError(f"The last year ({last_year}) must not come before the first year ({first_year}).")
    if last_year - first_year < 100:
        return FORMATS
    return tuple(name for name in FORMATS if name not in _TWO_DIGIT_YEAR)


def parse_two_digit_year(yy: int, first_year: int) -> int:
    """The year of the 100-year window starting at ``first_year`` that ends in ``yy`` (0 to 99)."""
    if not 0 <= yy <= 99:
        raise AttnexpError(f"A two-digit year must be between 0 and 99, not {yy}.")
    return first_year + (yy - first_year) % 100
