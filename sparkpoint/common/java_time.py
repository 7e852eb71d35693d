"""Java's date-time names in Python: a ``ZoneId`` string as a ``tzinfo``, a ``DateTimeFormatter`` pattern as a
formatting function, as Flink's ``DateTimeBucketAssigner`` takes them.

Zones: region ids (``Asia/Shanghai``, through ``zoneinfo``), ``Z``, ``UTC``/``GMT``/``UT``, offsets (``+8``,
``+08``, ``+0800``, ``+08:00``) and offsets behind those prefixes (``GMT+8``, ``UTC+08:00``). Patterns: the
letters ``y M d H h m s S a E D Z X z`` in Java's counts (``M`` unpadded, ``MM`` padded, ``MMM`` a short name,
``SSS`` milliseconds, ...), text in single quotes, ``''`` for a quote.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["java_formatter", "java_zone"]

_OFFSET = re.compile(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?")


def java_zone(zone_id: str) -> dt.tzinfo:
    """The zone of a Java ``ZoneId`` string; a ``ValueError`` naming it if it is none."""
    if zone_id in ("Z", "UTC", "GMT", "UT"):
        return dt.UTC
    m = _OFFSET.fullmatch(zone_id)
    if m is not None:
        sign, hours, minutes, seconds = m.groups()
        offset = dt.timedelta(hours=int(hours), minutes=int(minutes or 0), seconds=int(seconds or 0))
        if offset > dt.timedelta(hours=18):
            raise ValueError(f"zone offset {zone_id!r} is beyond +-18:00")
        return dt.timezone(-offset if sign == "-" else offset)
    try:
        return ZoneInfo(zone_id)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise ValueError(f"unknown time zone id {zone_id!r} (a region such as 'Asia/Shanghai', or 'GMT+8')") from e


def _offset(t: dt.datetime, colon: bool) -> str:
    off = t.utcoffset()
    if off is None:
        return ""
    minutes = int(off.total_seconds()) // 60
    sign, minutes = ("-" if minutes < 0 else "+"), abs(minutes)
    return f"{sign}{minutes // 60:02d}{':' if colon else ''}{minutes % 60:02d}"


def _field(letter: str, n: int) -> Callable[[dt.datetime], str] | None:
    numbers: dict[str, Callable[[dt.datetime], int]] = {
        "d": lambda t: t.day,
        "H": lambda t: t.hour,
        "h": lambda t: t.hour % 12 or 12,
        "m": lambda t: t.minute,
        "s": lambda t: t.second,
        "D": lambda t: t.timetuple().tm_yday,
    }
    if letter in numbers:
        get = numbers[letter]
        return lambda t: f"{get(t):0{n}d}"
    if letter == "y":
        return (lambda t: f"{t.year % 100:02d}") if n == 2 else (lambda t: f"{t.year:0{n}d}")
    if letter == "M":
        return (lambda t: f"{t.month:0{n}d}") if n <= 2 else (lambda t: t.strftime("%b" if n == 3 else "%B"))
    if letter == "S":
        return lambda t: f"{t.microsecond:06d}"[:n].ljust(n, "0")
    texts: dict[str, Callable[[dt.datetime], str]] = {
        "a": lambda t: "AM" if t.hour < 12 else "PM",
        "E": lambda t: t.strftime("%A" if n >= 4 else "%a"),
        "Z": lambda t: _offset(t, colon=False),
        "X": lambda t: "Z" if t.utcoffset() == dt.timedelta(0) else _offset(t, colon=n >= 3),
        "z": lambda t: t.tzname() or "",
    }
    return texts.get(letter)


def java_formatter(pattern: str) -> Callable[[dt.datetime], str]:
    """A function formatting a ``datetime`` as Java's ``DateTimeFormatter.ofPattern(pattern)`` does (the letters
    above); a ``ValueError`` naming letters it does not know."""
    parts: list[Callable[[dt.datetime], str]] = []
    for m in re.finditer(r"''|'((?:[^']|'')*)'|([A-Za-z])\2*|[^A-Za-z']+", pattern):
        text = m.group(0)
        if text == "''" or m.group(1) is not None:  # a quote, or quoted text
            parts.append(_literal("'" if text == "''" else m.group(1).replace("''", "'")))
        elif m.group(2) is not None:
            field = _field(m.group(2), len(text))
            if field is None:
                raise ValueError(f"unsupported date-time pattern letters {text!r} in {pattern!r}")
            parts.append(field)
        else:
            parts.append(_literal(text))
    return lambda t: "".join(part(t) for part in parts)


def _literal(text: str) -> Callable[[dt.datetime], str]:
    return lambda t: text
