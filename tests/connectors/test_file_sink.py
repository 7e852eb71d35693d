"""FileSink: committed output equals the input, names, rolling, buckets, two-phase commit."""

from __future__ import annotations

import collections
import datetime as dt
import glob
import os
import re

import fsspec
import pytest

from sparkpoint.common import Encoder, WatermarkStrategy
from sparkpoint.connectors.files import FileCommittable, FileCommitter, FileSinkWriter, FileSystemError, PartFileConfig
from sparkpoint.datastream.connectors.file_system import (
    BucketAssigner,
    FileSink,
    FileSource,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)
from sparkpoint.errors import ConfigurationError

PART = re.compile(r"^part-([0-9a-f]{12})-(\d+)-(\d+)$")


def _visible(directory) -> list[str]:
    """What a reader of the output sees: glob('*') skips hidden names."""
    return sorted(p for p in glob.glob(os.path.join(str(directory), "**", "*"), recursive=True) if os.path.isfile(p))


def _all_files(directory) -> list[str]:
    return sorted(os.path.join(r, f) for r, _, fs in os.walk(str(directory)) for f in fs)


def _lines(paths: list[str]) -> list[str]:
    out = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            out.extend(line.rstrip("\n") for line in f)
    return out


def _base_sink(path, **kw) -> FileSink:
    builder = FileSink.for_row_format(str(path), Encoder.simple_string_encoder()).with_bucket_assigner(
        BucketAssigner.base_path_bucket_assigner()
    )
    if "policy" in kw:
        builder = builder.with_rolling_policy(kw["policy"])
    if "config" in kw:
        builder = builder.with_output_file_config(kw["config"])
    return builder.build()


def test_output_equals_input_and_names_follow_flink(make_env, tmp_path):
    data = [f"record-{i}-{'x' * (i % 7)}" for i in range(500)]
    env = make_env("local", **{"execution.epoch.max-records": 60})
    env.set_parallelism(2)
    out = tmp_path / "out"
    env.from_collection(data).map(lambda s: s).sink_to(_base_sink(out)).set_parallelism(2)
    result = env.execute("sink")
    files = _visible(out)
    assert collections.Counter(_lines(files)) == collections.Counter(data)
    assert _all_files(out) == files  # no staged file left behind
    names = [PART.match(os.path.basename(p)) for p in files]
    assert all(names), files
    assert {m.group(1) for m in names} == {result.get_job_id()[:12]}
    assert {m.group(2) for m in names} == {"0", "1"}
    per_subtask = collections.defaultdict(list)
    for m in names:
        per_subtask[m.group(2)].append(int(m.group(3)))
    for counters in per_subtask.values():  # a new file every epoch, counters never repeat
        assert sorted(counters) == list(range(len(counters))) and len(counters) >= 3


def test_rolling_on_part_size(local_env, tmp_path):
    data = [f"{i:05d}" for i in range(300)]  # 6 bytes per line
    local_env.set_parallelism(1)
    out = tmp_path / "rolled"
    policy = RollingPolicy.default_rolling_policy(part_size=100, rollover_interval=3_600_000)
    local_env.from_collection(data).sink_to(_base_sink(out, policy=policy))
    local_env.execute()
    files = sorted(_visible(out), key=lambda p: int(p.rsplit("-", 1)[1]))
    assert _lines(files) == data
    sizes = [os.path.getsize(p) for p in files]
    # Flink's DefaultRollingPolicy: roll before a record once the file is larger than part_size
    assert sizes[:-1] == [102] * (len(sizes) - 1) and 0 < sizes[-1] <= 102
    assert len(files) == -(-len(data) * 6 // 102)


def test_on_checkpoint_rolling_keeps_one_file_per_epoch(local_env, tmp_path):
    local_env.set_parallelism(1)
    out = tmp_path / "one"
    local_env.from_collection(list(range(1000))).sink_to(
        _base_sink(out, policy=RollingPolicy.on_checkpoint_rolling_policy())
    )
    local_env.execute()
    files = _visible(out)
    assert len(files) == 1 and _lines(files) == [str(i) for i in range(1000)]


def test_prefix_and_suffix(local_env, tmp_path):
    local_env.set_parallelism(1)
    out = tmp_path / "named"
    config = OutputFileConfig.builder().with_part_prefix("counts").with_part_suffix(".txt").build()
    assert (config.get_part_prefix(), config.get_part_suffix()) == ("counts", ".txt")
    local_env.from_collection(["a", "b"]).sink_to(_base_sink(out, config=config))
    job_id = local_env.execute().get_job_id()
    assert [os.path.basename(p) for p in _visible(out)] == [f"counts-{job_id[:12]}-0-0.txt"]


@pytest.mark.parametrize(
    "fmt,tz,expected_fmt",
    [(None, None, "%Y-%m-%d--%H"), ("yyyy/MM/dd", "UTC", "%Y/%m/%d"), ("%Y%m%d-%H%M", "UTC", "%Y%m%d-%H%M")],
)
def test_date_time_buckets(local_env, tmp_path, fmt, tz, expected_fmt):
    local_env.set_parallelism(1)
    out = tmp_path / "buckets"
    builder = FileSink.for_row_format(str(out), Encoder.simple_string_encoder())
    if fmt is not None:
        builder = builder.with_bucket_assigner(BucketAssigner.date_time_bucket_assigner(fmt, tz))
    zone = dt.UTC if tz else None
    before = dt.datetime.now(zone).strftime(expected_fmt)
    local_env.from_collection(["a", "b", "c"]).sink_to(builder.build())
    local_env.execute()
    after = dt.datetime.now(zone).strftime(expected_fmt)
    files = _visible(out)
    assert _lines(files) == ["a", "b", "c"]
    bucket = os.path.relpath(os.path.dirname(files[0]), out)
    assert bucket in {before, after}


def test_staged_files_are_hidden_until_committed_and_commit_is_idempotent(tmp_path):
    out = tmp_path / "2pc"
    config = PartFileConfig(
        str(out), Encoder.simple_string_encoder(), BucketAssigner.base_path_bucket_assigner(), part_size=10
    )
    writer = FileSinkWriter(config, 3, "0123456789abcdef" * 2, {"part_counter": 7})
    writer.write([f"line{i}" for i in range(5)], [None] * 5)
    committables = writer.prepare_commit()
    assert writer.snapshot_state() == {"part_counter": 7 + len(committables), "job": "0123456789ab"}
    assert [os.path.basename(c.final_path) for c in committables] == [
        f"part-0123456789ab-3-{n}" for n in range(7, 7 + len(committables))
    ]
    assert all(
        os.path.basename(c.staged_path).startswith("." + os.path.basename(c.final_path) + ".inprogress.")
        for c in committables
    )
    assert _visible(out) == [] and len(_all_files(out)) == len(committables)
    # a task Spark runs again (same state, same attempt) writes the same names, over what the first run staged
    retry = FileSinkWriter(config, 3, "0123456789abcdef" * 2, {"part_counter": 7})
    retry.write([f"line{i}" for i in range(5)], [None] * 5)
    assert retry.prepare_commit() == committables
    FileCommitter().commit(committables)
    FileCommitter().commit(committables)  # again: a no-op
    assert _lines(_visible(out)) == [f"line{i}" for i in range(5)]
    assert len(_all_files(out)) == len(committables)


def test_a_task_of_a_failed_attempt_still_writing_touches_no_file_of_the_attempt_after_it(tmp_path):
    """Two writers restored from the same state (a cancelled task of attempt 0 Spark had not ended yet, and the
    restored attempt 1's) interleave their writes and the older one aborts: the newer one's part files commit
    whole (their staged names are the attempt's)."""
    out = tmp_path / "zombie"
    config = PartFileConfig(str(out), Encoder.simple_string_encoder(), BucketAssigner.base_path_bucket_assigner())
    zombie = FileSinkWriter(config, 1, "fedcba9876543210" * 2, {"part_counter": 7})
    restored = FileSinkWriter(config, 1, "fedcba9876543210" * 2, {"part_counter": 7})
    restored.attempt = 1
    zombie.write([f"old{i}" for i in range(300)], [None] * 300)
    restored.write([f"new{i}" for i in range(100)], [None] * 100)
    zombie.write([f"old{i}" for i in range(300, 600)], [None] * 300)
    committables = restored.prepare_commit()
    zombie.abort()
    FileCommitter().commit(committables)
    assert _lines(_visible(out)) == [f"new{i}" for i in range(100)]
    missing = FileCommittable(str(out / ".part-x.inprogress"), str(out / "part-x"))
    with pytest.raises(FileSystemError, match=re.escape(str(out / "part-x"))):
        FileCommitter().commit([missing])


def test_memory_filesystem_round_trip(local_env):
    fs = fsspec.filesystem("memory")
    for i in range(3):
        with fs.open(f"memory://sp-in/f{i}.txt", "wb") as f:
            f.write("".join(f"{i}-{j}\n" for j in range(10)).encode())
    local_env.set_parallelism(1)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), "memory://sp-in").build()
    (
        local_env.from_source(source, WatermarkStrategy.no_watermarks(), "mem")
        .map(str.upper)
        .sink_to(_base_sink("memory://sp-out"))
    )
    local_env.execute()
    names = [p for p in fs.ls("/sp-out", detail=False)]
    assert names and all(PART.match(p.rsplit("/", 1)[1]) for p in names)
    got = sorted(line for p in names for line in fs.cat(p).decode().splitlines())
    assert got == sorted(f"{i}-{j}".upper() for i in range(3) for j in range(10))
    fs.rm("/sp-in", recursive=True)
    fs.rm("/sp-out", recursive=True)


def test_file_to_file_on_spark(spark, make_env, tmp_path):
    src = tmp_path / "in"
    os.makedirs(src)
    expected = []
    for i in range(4):
        lines = [f"{i}\t{j}\t{'v' * (j % 5)}" for j in range(120)]
        (src / f"{i}.tsv").write_text("\n".join(lines) + "\n")
        expected += lines
    env = make_env("spark", **{"execution.epoch.max-records": 70})
    env.set_parallelism(2)
    out = tmp_path / "out"
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(src)).build()
    env.from_source(source, WatermarkStrategy.no_watermarks(), "in").sink_to(_base_sink(out))
    env.execute("spark-files")
    files = _visible(out)
    assert collections.Counter(_lines(files)) == collections.Counter(expected)
    assert _all_files(out) == files
    assert {PART.match(os.path.basename(p)).group(2) for p in files} == {"0", "1"}


class _ByParity(BucketAssigner):
    def get_bucket_id(self, value, now_ms):
        return "even" if int(value) % 2 == 0 else "odd"


def test_a_batch_is_written_at_once_only_where_one_by_one_gives_the_same(tmp_path):
    assert not BucketAssigner.base_path_bucket_assigner().depends_on_record()
    assert not BucketAssigner.date_time_bucket_assigner().depends_on_record()
    assert _ByParity().depends_on_record()
    # a bucket by record: every record in its bucket, in order
    config = PartFileConfig(str(tmp_path / "parity"), Encoder.simple_string_encoder(), _ByParity())
    writer = FileSinkWriter(config, 0, "0123456789abcdef" * 2, None)
    writer.write([str(i) for i in range(10)], [None] * 10)
    FileCommitter().commit(writer.prepare_commit())
    for bucket, first in (("even", 0), ("odd", 1)):
        assert _lines(_visible(tmp_path / "parity" / bucket)) == [str(i) for i in range(first, 10, 2)]
    # one bucket, a batch larger than what the part may grow to: rolled between records, as one by one
    base = BucketAssigner.base_path_bucket_assigner()
    sized = PartFileConfig(str(tmp_path / "sized"), Encoder.simple_string_encoder(), base, part_size=7)
    writer = FileSinkWriter(sized, 0, "0123456789abcdef" * 2, None)
    writer.write(["aaa", "bbb", "ccc", "ddd"], [None] * 4)
    parts = writer.prepare_commit()
    FileCommitter().commit(parts)
    sizes = sorted(os.path.getsize(c.final_path) for c in parts)
    assert sizes == [8, 8] and sorted(_lines(_visible(tmp_path / "sized"))) == ["aaa", "bbb", "ccc", "ddd"]


class _Shout(str):
    def __str__(self):
        return self.upper()


@pytest.mark.parametrize("charset", ["UTF-8", "UTF-16", "UTF-8-sig"])
@pytest.mark.parametrize("record_type", [None, "STRING", "TUPLE"])
def test_a_batch_encodes_as_its_records_one_by_one(record_type, charset):
    from sparkpoint.common import Types

    types = {None: None, "STRING": Types.STRING(), "TUPLE": Types.TUPLE([Types.STRING(), Types.INT()])}
    encoder = Encoder.simple_string_encoder(charset)
    if record_type is not None:
        encoder = encoder.with_record_type(types[record_type])
    batches = [[], ["a", "b\tc", "é"], ["a", 1, None], ["a", _Shout("x")], [("a", 1), "b"]]
    if record_type == "TUPLE":
        batches = [[], [("a", 1), ("b\tc", 2)]]
    for batch in batches:
        assert encoder.encode_batch(batch) == b"".join(encoder.encode(v) for v in batch), (record_type, batch)


@pytest.mark.parametrize("second", ["same", "nested", "apart", "other-prefix"])
def test_two_file_sinks_that_would_take_each_others_parts_are_refused(make_env, tmp_path, second):
    """Part files are named by prefix, job and subtask: two sinks of a job with one prefix in one directory (or one
    under the other) would overwrite each other's staged parts, or clean them up as an aborted attempt's."""
    env = make_env("local")
    stream = env.from_collection(["a", "b"])
    stream.sink_to(_base_sink(tmp_path / "out")).uid("first")
    where = {"same": "out", "nested": "out/late", "apart": "other", "other-prefix": "out"}[second]
    config = {"config": OutputFileConfig.builder().with_part_prefix("late").build()} if second == "other-prefix" else {}
    stream.sink_to(_base_sink(tmp_path / where, **config)).uid("second")
    if second in ("same", "nested"):
        with pytest.raises(ConfigurationError, match=r"sinks 'first' and 'second' write part files named 'part'"):
            env.execute()
        assert not (tmp_path / "out").exists() or not _all_files(tmp_path / "out")
    else:
        env.execute()
        assert sorted(_lines(_visible(tmp_path / "out"))) == (["a", "b"] if second == "apart" else ["a", "a", "b", "b"])
