"""Java's zone ids and date-time patterns, as Flink's ``DateTimeBucketAssigner`` takes them: expected strings
written by hand from Java's ``DateTimeFormatter`` rules (``M`` unpadded, ``MMM`` a short name, ``SSS``
milliseconds, ``''`` a quote) for 2024-03-05 07:08:09.123456 at +08:00 (a Tuesday, day 65)."""

from __future__ import annotations

import datetime as dt

import pytest

from sparkpoint.common.java_time import java_formatter, java_zone
from sparkpoint.datastream.connectors.file_system import BucketAssigner

AT = dt.datetime(2024, 3, 5, 7, 8, 9, 123456, tzinfo=dt.timezone(dt.timedelta(hours=8)))


@pytest.mark.parametrize(
    "pattern, expected",
    [
        ("yyyy-MM-dd--HH", "2024-03-05--07"),
        ("y/M/d H:m:s.SSS", "2024/3/5 7:8:9.123"),
        ("yy.MM.dd S SS", "24.03.05 1 12"),
        ("EEE, dd MMM yyyy hh a", "Tue, 05 Mar 2024 07 AM"),
        ("EEEE MMMM DDD", "Tuesday March 065"),
        ("'at' HH 'o''clock' ''", "at 07 o'clock '"),
        ("HHmm Z XXX X", "0708 +0800 +08:00 +0800"),
    ],
)
def test_patterns_format_as_java_does(pattern, expected):
    assert java_formatter(pattern)(AT) == expected


def test_an_unknown_letter_is_named():
    with pytest.raises(ValueError, match="'QQ' in 'yyyy QQ'"):
        java_formatter("yyyy QQ")


@pytest.mark.parametrize(
    "zone_id, offset",
    [
        ("GMT+8", dt.timedelta(hours=8)),
        ("UTC+08:00", dt.timedelta(hours=8)),
        ("+0530", dt.timedelta(hours=5, minutes=30)),
        ("-03", dt.timedelta(hours=-3)),
        ("UT-9:30", dt.timedelta(hours=-9, minutes=-30)),
        ("Z", dt.timedelta(0)),
        ("GMT", dt.timedelta(0)),
        ("Asia/Shanghai", dt.timedelta(hours=8)),
    ],
)
def test_zone_ids_are_javas(zone_id, offset):
    assert java_zone(zone_id).utcoffset(dt.datetime(2024, 1, 15)) == offset


@pytest.mark.parametrize("zone_id", ["Mars/Olympus", "GMT+19", "+8:0"])
def test_an_unknown_zone_is_named(zone_id):
    with pytest.raises(ValueError, match=zone_id.replace("+", r"\+")):
        java_zone(zone_id)


def test_a_bucket_assigner_takes_javas_zone_and_single_letters():
    assigner = BucketAssigner.date_time_bucket_assigner("yyyy/M/d/H", "GMT+8")
    now_ms = int(dt.datetime(2024, 3, 4, 23, 30, tzinfo=dt.UTC).timestamp() * 1000)  # 07:30 on the 5th at +8
    assert assigner.get_bucket_id("x", now_ms) == "2024/3/5/7"
