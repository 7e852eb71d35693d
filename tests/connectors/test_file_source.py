"""FileSource: formats, split order, epochs, malformed records, continuous monitoring.

Every result is compared with an independent oracle: the same files read with plain
Python or pandas.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import random
import re
import time

import pandas as pd
import pytest

from sparkpoint.common import Duration, Encoder, Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.connectors.base import SourceSplit
from sparkpoint.connectors.events import EventSpec, generate_events
from sparkpoint.connectors.files import FileSourceReader, FileSplitEnumerator, TextLineFormat
from sparkpoint.datastream import OutputTag, ProcessWindowFunction, TumblingEventTimeWindows
from sparkpoint.datastream.connectors.file_system import BucketAssigner, FileSink, FileSource, StreamFormat
from sparkpoint.errors import SparkpointError


def _write(path, data: bytes, mtime: float | None = None) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return str(path)


def _file_sink(path) -> FileSink:
    return (
        FileSink.for_row_format(str(path), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .build()
    )


def _oracle_lines(paths: list[str]) -> list[str]:
    """Lines of the files in order, read with Python's universal-newline text mode."""
    out = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            out.extend(line.rstrip("\n") for line in f)
    return out


def _read_split(path: str, max_records: int, max_bytes: int, fmt=None) -> tuple[list, int]:
    reader = FileSourceReader(fmt or TextLineFormat())
    split, values, reads = SourceSplit(path, (0, 0)), [], 0
    while not split.finished:
        result = reader.read(split, max_records, max_bytes)
        values += result.values
        split = result.split
        reads += 1
        assert reads < 10_000
    return values, reads


def _random_text(rng: random.Random, n_lines: int, crlf: bool = False, trailing_newline: bool = True) -> bytes:
    lines = ["".join(rng.choice("abcdé xyz,0123") for _ in range(rng.randint(0, 30))) for _ in range(n_lines)]
    sep = "\r\n" if crlf else "\n"
    text = sep.join(lines) + (sep if trailing_newline and lines else "")
    return text.encode("utf-8")


# -- the reader --------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_records,max_bytes", [(1, 1), (3, 16), (7, 5), (1000, 40), (100_000, 1 << 24)])
@pytest.mark.parametrize("crlf,trailing", [(False, True), (True, True), (False, False), (True, False)])
def test_reader_gives_every_line_once(tmp_path, max_records, max_bytes, crlf, trailing):
    rng = random.Random(hash((max_records, max_bytes, crlf, trailing)) & 0xFFFF)
    path = _write(tmp_path / "f.txt", _random_text(rng, 57, crlf, trailing) + b"L" * 100 + b"\nend")
    values, reads = _read_split(path, max_records, max_bytes)
    assert values == _oracle_lines([path])
    if max_records < 58:
        assert reads >= 58 // max_records


def test_reader_respects_limits_and_positions(tmp_path):
    path = _write(tmp_path / "f.txt", b"aaaa\nbbbbbbbbbbbbbbbbbbbb\ncc\ndd\n")
    reader = FileSourceReader(TextLineFormat())
    r1 = reader.read(SourceSplit(path, (0, 0)), 10, 6)  # only the first line fits in 6 bytes
    assert r1.values == ["aaaa"] and r1.split.position == (5, 1) and not r1.split.finished
    r2 = reader.read(r1.split, 10, 6)  # a longer line is still read whole
    assert r2.values == ["b" * 20] and r2.split.position == (26, 2)
    r3 = reader.read(r2.split, 1, 1000)  # max_records
    assert r3.values == ["cc"] and not r3.split.finished
    r4 = reader.read(r3.split, 10, 1000)
    assert r4.values == ["dd"] and r4.split.finished and r4.split.position == (os.path.getsize(path), 4)


def test_empty_file_is_finished_at_once(tmp_path):
    values, reads = _read_split(_write(tmp_path / "e.txt", b""), 10, 100)
    assert values == [] and reads == 1


# -- formats against oracles ---------------------------------------------------------------------------


def test_text_directory_equals_oracle_in_order(local_env, tmp_path):
    rng = random.Random(1)
    base = tmp_path / "in"
    visible = [
        _write(base / "b.txt", _random_text(rng, 40), mtime=1000),
        _write(base / "sub" / "a.txt", _random_text(rng, 25, crlf=True), mtime=2000),
        _write(base / "empty.txt", b"", mtime=2500),
        _write(base / "c.txt", _random_text(rng, 33, trailing_newline=False), mtime=3000),
    ]
    _write(base / ".hidden.txt", b"never\n", mtime=1500)
    _write(base / "_SUCCESS", b"never\n", mtime=1500)
    _write(base / "_tmp" / "x.txt", b"never\n", mtime=1500)
    _write(base / ".staging" / "y.txt", b"never\n", mtime=1500)
    local_env.set_parallelism(1)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(base)).build()
    got = list(local_env.from_source(source, WatermarkStrategy.no_watermarks(), "files").execute_and_collect())
    assert got == _oracle_lines(visible)


def test_csv_equals_pandas(local_env, tmp_path):
    rng = random.Random(2)
    paths = []
    for i in range(3):
        rows = [
            (rng.randint(-(10**6), 10**6), round(rng.uniform(-100, 100), 3), rng.choice(["x", "a,b", 'say "hi"', ""]))
            for _ in range(50 + i)
        ]
        p = tmp_path / "csv" / f"part{i}.csv"
        os.makedirs(p.parent, exist_ok=True)
        with open(p, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\r\n" if i == 1 else "\n")
            w.writerow(["id", "score", "label"])
            w.writerows(rows)
        os.utime(p, (1000 + i, 1000 + i))
        paths.append(str(p))
    fmt = StreamFormat.csv_format(field_types=[int, float, str], skip_header=True)
    local_env.set_parallelism(2)
    source = FileSource.for_record_stream_format(fmt, str(tmp_path / "csv")).build()
    got = list(local_env.from_source(source, WatermarkStrategy.no_watermarks(), "csv").execute_and_collect())
    oracle = pd.concat(
        [pd.read_csv(p, dtype={"id": "int64", "score": "float64", "label": str}, keep_default_na=False) for p in paths]
    )
    expected = list(oracle.itertuples(index=False, name=None))
    assert sorted(got) == sorted((int(a), float(b), c) for a, b, c in expected)
    assert len(got) == 153


def test_json_lines_equals_pandas(local_env, tmp_path):
    rng = random.Random(3)
    paths = []
    for i in range(2):
        recs = [
            {"user": f"u{rng.randint(0, 9)}", "n": rng.randint(0, 1000), "ok": rng.random() < 0.5} for _ in range(40)
        ]
        paths.append(
            _write(
                tmp_path / "j" / f"{i}.jsonl", ("\n".join(json.dumps(r) for r in recs) + "\n\n").encode(), mtime=100 + i
            )
        )
    source = FileSource.for_record_stream_format(StreamFormat.json_lines_format(), *paths).build()
    local_env.set_parallelism(1)
    got = list(local_env.from_source(source, WatermarkStrategy.no_watermarks(), "json").execute_and_collect())
    expected = pd.concat([pd.read_json(p, lines=True, dtype=False) for p in paths]).to_dict("records")
    assert got == [{"user": e["user"], "n": int(e["n"]), "ok": bool(e["ok"])} for e in expected]


# -- order and epochs ---------------------------------------------------------------------------------


def test_files_are_handed_out_by_mtime_then_path(local_env, tmp_path):
    d = tmp_path / "ordered"
    spec = {"a.txt": 300, "b.txt": 100, "c.txt": 200, "d.txt": 100, "0.txt": 400}
    for name, mtime in spec.items():
        _write(d / name, f"{name}\n".encode(), mtime=mtime)
    expected = [n for n, _ in sorted(spec.items(), key=lambda kv: (kv[1], str(d / kv[0])))]
    assert expected == ["b.txt", "d.txt", "c.txt", "a.txt", "0.txt"]
    enum = FileSplitEnumerator([str(d)])
    enum.discover()
    assert [os.path.basename(s.split_id) for s in enum.next_splits(100)] == expected
    assert enum.no_more_splits()
    local_env.set_parallelism(1)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(d)).build()
    got = list(local_env.from_source(source, WatermarkStrategy.no_watermarks(), "f").execute_and_collect())
    assert got == expected


@pytest.mark.parametrize("parallelism", [1, 3])
def test_directory_over_many_epochs_gives_every_line_once(make_env, tmp_path, parallelism):
    rng = random.Random(4)
    paths = [
        _write(
            tmp_path / "many" / f"f{i:02d}.txt",
            _random_text(rng, rng.randint(0, 60), crlf=i % 3 == 0, trailing_newline=i % 2 == 0),
            mtime=10 * i,
        )
        for i in range(9)
    ]
    env = make_env("local", **{"execution.epoch.max-records": 7})
    env.set_parallelism(parallelism)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "many")).build()
    got = list(env.from_source(source, WatermarkStrategy.no_watermarks(), "f").map(lambda s: s).execute_and_collect())
    expected = _oracle_lines(paths)
    if parallelism == 1:
        assert got == expected
    else:
        assert sorted(got) == sorted(expected)


def test_empty_directory_finishes_and_missing_path_is_named(local_env, tmp_path):
    os.makedirs(tmp_path / "nothing")
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "nothing")).build()
    assert list(local_env.from_source(source, WatermarkStrategy.no_watermarks(), "e").execute_and_collect()) == []
    with pytest.raises(SparkpointError, match=re.escape(str(tmp_path / "missing"))):
        FileSplitEnumerator([str(tmp_path / "missing")]).discover()


def test_enumerator_snapshot_restore_and_discovery_interval(tmp_path):
    d = tmp_path / "mon"
    for i in range(3):
        _write(d / f"{i}.txt", b"x\n", mtime=100 + i)
    enum = FileSplitEnumerator([str(d)], discovery_interval_ms=3_600_000)
    enum.discover()
    first = enum.next_splits(1)
    assert [os.path.basename(s.split_id) for s in first] == ["0.txt"]
    snap = enum.snapshot()
    _write(d / "3.txt", b"x\n", mtime=50)
    enum.discover()  # within the interval: no new listing
    assert len(enum.pending) == 2 and not enum.no_more_splits()
    restored = FileSplitEnumerator([str(d)], discovery_interval_ms=1)
    restored.restore(snap)
    restored.discover()  # lists again: 3.txt is new, 0..2 are seen
    names = [os.path.basename(s.split_id) for s in restored.next_splits(10)]
    assert names == ["3.txt", "1.txt", "2.txt"]  # pending queue re-sorted by mtime
    restored.discover()
    assert restored.next_splits(10) == []


# -- event time: the seed's events from time-ordered files --------------------------------------------


class _EventTime(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return int(value.split("\t")[0])


class _CountWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield (w.start, w.end, key[0], key[1], sum(1 for _ in elements))


@pytest.mark.parametrize("target,max_records", [("local", 37), ("spark", 300)])
def test_time_ordered_event_files_windows_equal_pandas(request, make_env, tmp_path, target, max_records):
    spec = EventSpec(seed=7, interval_ms=150, max_out_of_orderness_ms=10_000)
    lines, ts = generate_events(0, 2400, spec)
    d = tmp_path / "events"
    for i in range(4):  # names sort against time: only the modification time gives the right order
        _write(d / f"events-{3 - i}.tsv", ("\n".join(lines[i * 600 : (i + 1) * 600]) + "\n").encode(), mtime=1000 + i)
    if target == "spark":
        request.getfixturevalue("spark")
    env = make_env(target, **{"execution.epoch.max-records": max_records})
    env.set_parallelism(2)
    late = OutputTag("late")
    wm = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(50)).with_timestamp_assigner(_EventTime())
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(d)).build()
    windows = (
        env.from_source(source, wm, "events")
        .key_by(lambda line: (line.split("\t")[1], line.split("\t")[3]))
        .window(TumblingEventTimeWindows.of(Time.minutes(1)))
        .side_output_late_data(late)
        .process(_CountWindow())
    )
    windows.get_side_output(late).sink_to(_file_sink(tmp_path / "late"))
    got = sorted(windows.execute_and_collect())
    assert not glob.glob(str(tmp_path / "late" / "*"))  # nothing late

    df = pd.DataFrame([ln.split("\t") for ln in lines], columns=["ts", "channel", "id", "behavior"])
    df["start"] = df["ts"].astype("int64") // 60_000 * 60_000
    oracle = df.groupby(["start", "channel", "behavior"]).size().reset_index(name="n")
    expected = sorted((int(s), int(s) + 60_000, c, b, int(n)) for s, c, b, n in oracle.itertuples(index=False))
    assert got == expected
    assert sum(r[4] for r in got) == 2400


# -- malformed records ----------------------------------------------------------------------------------


def _bad_csv(tmp_path) -> tuple[str, list[tuple]]:
    good = [(i, f"name{i}") for i in range(20)]
    text = "".join(f"{i},{n}\n" for i, n in good[:10]) + "eleven,oops\n" + "".join(f"{i},{n}\n" for i, n in good[10:])
    text += "1,2,3\n"
    return _write(tmp_path / "bad" / "data.csv", text.encode()), good


def test_malformed_csv_line_fails_the_job_naming_file_and_line(local_env, tmp_path):
    path, _ = _bad_csv(tmp_path)
    fmt = StreamFormat.csv_format(field_types=[int, str])
    source = FileSource.for_record_stream_format(fmt, path).build()
    with pytest.raises(SparkpointError, match=re.escape(f"{path}:11")):
        list(local_env.from_source(source, WatermarkStrategy.no_watermarks(), "csv").execute_and_collect())


def test_malformed_lines_go_to_the_side_output(make_env, tmp_path):
    path, good = _bad_csv(tmp_path)
    env = make_env("local", **{"execution.epoch.max-records": 4})
    env.set_parallelism(1)
    tag = OutputTag("malformed")
    source = (
        FileSource.for_record_stream_format(StreamFormat.csv_format(field_types=[int, str]), path)
        .set_malformed_record_output(tag)
        .build()
    )
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "csv")
    out = tmp_path / "malformed-out"
    ds.get_side_output(tag).sink_to(_file_sink(out))
    assert list(ds.execute_and_collect()) == good
    side = sorted(_oracle_lines(sorted(glob.glob(str(out / "*")))))
    assert len(side) == 2
    assert side[0].startswith(f"{path}:11: ") and side[0].endswith("eleven,oops")
    assert side[1].startswith(f"{path}:22: ") and "expected 2 fields, found 3" in side[1]


# -- continuous monitoring -----------------------------------------------------------------------------


def _committed_lines(out) -> list[str]:
    return _oracle_lines(sorted(glob.glob(os.path.join(str(out), "*"))))


def _wait_for(predicate, timeout: float = 8.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_continuous_monitoring_picks_up_new_files(make_env, tmp_path):
    d, out = tmp_path / "watch", tmp_path / "watch-out"
    first = [f"first-{i}" for i in range(30)]
    second = [f"second-{i}" for i in range(25)]
    _write(d / "1.txt", ("\n".join(first) + "\n").encode())
    env = make_env("local", **{"execution.epoch.idle-pause": "20 ms", "execution.epoch.max-records": 10})
    env.set_parallelism(1)
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(d))
        .monitor_continuously(Duration.of_millis(100))
        .build()
    )
    assert source.get_boundedness() == "CONTINUOUS_UNBOUNDED"
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "watch").sink_to(_file_sink(out)))
    client = env.execute_async("watch")
    try:
        assert _wait_for(lambda: sorted(_committed_lines(out)) == sorted(first))
        _write(d / ".2.txt.tmp", ("\n".join(second) + "\n").encode())  # hidden while written
        os.rename(d / ".2.txt.tmp", d / "2.txt")
        assert _wait_for(lambda: sorted(_committed_lines(out)) == sorted(first + second))
        assert not client.get_job_execution_result().done()  # still running: unbounded
    finally:
        client.cancel()
    client.wait(10)
    assert sorted(_committed_lines(out)) == sorted(first + second)


def test_a_continuous_source_passes_on_the_watermark_of_a_file_it_finished(make_env, tmp_path):
    """The last batch of a file moves event time on, though no further file has appeared yet."""
    d, out = tmp_path / "watch", tmp_path / "watch-out"
    _write(d / "1.txt", ("\n".join(str(ts) for ts in range(0, 300_000, 1_000)) + "\n").encode())
    env = make_env("local", **{"execution.epoch.idle-pause": "20 ms", "execution.epoch.max-records": 100})
    env.set_parallelism(1)
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(d))
        .monitor_continuously(Duration.of_millis(100))
        .build()
    )
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda line, _: int(line))
    (
        env.from_source(source, strategy, "watch")
        .uid("watch")
        .window_all(TumblingEventTimeWindows.of(Time.minutes(1)))
        .reduce(lambda a, b: a)
        .uid("firsts")
        .sink_to(_file_sink(out))
    )
    client = env.execute_async("watch-windows")
    try:
        # the watermark reaches 298,999 (the file's last timestamp, less 1 ms): the windows before 4:00 fire;
        # without the finished file's watermark it would stay at its last batch but one (198,999)
        assert _wait_for(
            lambda: sorted(map(int, _committed_lines(out))) == [0, 60_000, 120_000, 180_000], timeout=15
        ), _committed_lines(out)
    finally:
        client.cancel()
    client.wait(10)


def test_a_subtask_that_will_finish_its_file_within_the_epoch_gets_the_next_ones(tmp_path):
    """A file's end is not a backlog's: a subtask whose unread bytes fall short of the epoch's bound is dealt the
    next files (as many as fit), so it reads on instead of ending the epoch at the file's end."""
    paths = [_write(tmp_path / f"{i}.txt", b"x" * 999 + b"\n", mtime=1_000_000 + i) for i in range(5)]
    enumerator = FileSplitEnumerator([str(tmp_path)])
    enumerator.epoch_bytes = 2_500
    first = enumerator.assign({0: []})
    assert [s.split_id for s in first[0]] == paths[:2]  # 1,000 + 1,000 fit, a third would not
    half_read = first[0][1].with_(position=(500, 0))  # the first file read, the second half read
    second = enumerator.assign({0: [first[0][0].with_(finished=True), half_read]})
    # 500 unread + 1,000 + 1,000 = 2,500: two more files; the last stays for a later epoch
    assert [s.split_id for s in second[0]] == [paths[1], paths[2], paths[3]]
    assert second[0][0].position == (500, 0)
    full = enumerator.assign({0: [s.with_(position=(0, 0)) for s in second[0]]})  # 3,000 unread: nothing new
    assert [s.split_id for s in full[0]] == paths[1:4] and not enumerator.no_more_splits()


@pytest.mark.parametrize(
    "max_records, sizes, watermark",
    [
        (1_500, [1_500, 1_500], 1_499_000 - 1),  # ends inside the second file: its watermark
        (2_000, [2_000, 1_000], 999_000 - 1),  # ends at the second file's end: the least of the ended files'
    ],
)
def test_a_file_queued_unstarted_does_not_hold_the_watermark(make_env, tmp_path, max_records, sizes, watermark):
    """An epoch that ends with the next files dealt to the same subtask but not begun moves the watermark by the
    files read: Flink's reader has not been given the next file yet, so it does not hold event time back (a file
    begun, then left, would); with only such files left open, by the least of the files that ended, as when no
    file is left."""
    from tests.runtime.recording_listener import RecordingJobListener

    d = tmp_path / "in"
    for i in range(3):  # 3 files of 1,000 lines, timestamps rising 1 s a line across them
        _write(d / f"{i}.txt", "".join(f"{ts}\n" for ts in range(i * 1_000, (i + 1) * 1_000)).encode(), 1_000 + i)
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": max_records,
            "execution.job-listeners": "tests.runtime.recording_listener:RecordingJobListener",
        },
    )
    env.set_parallelism(1)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda line, _: int(line) * 1000)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(d)).build()
    env.from_source(source, strategy, "files").uid("files").filter(lambda x: False).print()
    result = env.execute("queued-files")
    epochs = [e[1] for e in RecordingJobListener.events[result.get_job_id()] if e[0] == "epoch"]
    # epoch 0 reads the first file and half the second or all of it, the third queued behind
    assert [s.records_in for s in epochs[:2]] == sizes, [s.records_in for s in epochs]
    assert epochs[0].watermark == watermark, epochs[0].watermark


@pytest.mark.parametrize("codec", ["gzip", "bz2", "lzma"])
def test_compressed_files_are_read_decompressed_over_many_epochs(make_env, tmp_path, codec):
    """As Flink's stream formats: by the name's ending (.gz, .bz2, .xz), a read going on from the position (in
    the decompressed lines) the last epoch stopped at; the compressed file beside a plain one."""
    import importlib

    ending = {"gzip": ".gz", "bz2": ".bz2", "lzma": ".xz"}[codec]
    rng = random.Random(7)
    text = _random_text(rng, 40, crlf=False, trailing_newline=True)
    plain = _write(tmp_path / "in" / "a.txt", b"first\nsecond\n", mtime=10)
    packed = _write(tmp_path / "in" / f"b.txt{ending}", importlib.import_module(codec).compress(text), mtime=20)
    env = make_env("local", **{"execution.epoch.max-records": 7})
    env.set_parallelism(1)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "in")).build()
    got = list(env.from_source(source, WatermarkStrategy.no_watermarks(), "f").execute_and_collect())
    assert got == _oracle_lines([plain]) + text.decode().splitlines()
    assert os.path.getsize(packed) != len(text)  # the premise: read raw, these would be other bytes


def test_a_malformed_line_of_a_compressed_file_is_named_by_its_line(local_env, tmp_path):
    import gzip

    rows = [f"{i},name-{i}" for i in range(20)]
    rows[10] = "eleven,bad"
    path = _write(tmp_path / "bad.csv.gz", gzip.compress(("\n".join(rows) + "\n").encode()))
    source = FileSource.for_record_stream_format(StreamFormat.csv_format(field_types=[int, str]), path).build()
    with pytest.raises(SparkpointError, match=re.escape(f"{path}:11")):
        list(local_env.from_source(source, WatermarkStrategy.no_watermarks(), "csv").execute_and_collect())
