"""A file source hands its epoch to the record-wise run behind it a piece at a time, as it reads it, so an epoch's
lines are never all in memory at once: the same records, positions, watermarks and errors as one read of the
whole epoch. Expected results come from the files read with plain Python and from pandas."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from sparkpoint.common import Duration, Time, Types, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.connectors.base import SourceSplit
from sparkpoint.connectors.files import FileSourceReader, TextLineFormat
from sparkpoint.datastream import TumblingEventTimeWindows
from sparkpoint.datastream.connectors.file_system import FileSource, StreamFormat
from sparkpoint.errors import MalformedRecordError
from sparkpoint.runtime import chain

PIECE = 1_000
LOG: list[str] = []  # what the reader and the map did, in order (a local job runs its tasks in this process)


def logged_int(line):
    LOG.append("map")
    return int(line)


@pytest.fixture
def logged_reads(monkeypatch):
    """Pieces of :data:`PIECE` records; every read of the file reader logged with its line count."""
    monkeypatch.setattr(chain, "SLICE", PIECE)
    read_from = FileSourceReader._read_from

    def logged(self, f, split, max_records, max_bytes, *rest):
        result = read_from(self, f, split, max_records, max_bytes, *rest)
        LOG.append(f"read {len(result.values)}")
        return result

    monkeypatch.setattr(FileSourceReader, "_read_from", logged)
    LOG.clear()
    yield LOG
    LOG.clear()


def _write_numbers(path, n: int) -> str:
    path.write_text("".join(f"{i}\n" for i in range(n)))
    return str(path)


def test_the_run_takes_each_piece_before_the_next_is_read(make_env, tmp_path, logged_reads):
    n = 10_500
    env = make_env("local", **{"execution.epoch.max-records": 4_000})  # epochs of 4 and 0.5 pieces
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), _write_numbers(tmp_path / "n", n))
    stream = env.from_source(source.build(), WatermarkStrategy.no_watermarks(), "numbers").map(logged_int)
    result = stream.filter(lambda x: x % 3 == 0).map(str, output_type=Types.STRING()).execute_and_collect()
    assert sorted(map(int, result)) == [i for i in range(n) if i % 3 == 0]
    reads = [i for i, e in enumerate(logged_reads) if e.startswith("read")]
    sizes = [int(logged_reads[i].split()[1]) for i in reads]
    assert sum(sizes) == n and max(sizes) == PIECE and len(sizes) >= n // PIECE, sizes
    for i, j, size in zip(reads, [*reads[1:], len(logged_reads)], sizes):
        assert logged_reads[i + 1 : j] == ["map"] * size  # a piece's records all mapped before the next read


class FirstField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return int(value.split(",")[0])


def test_event_time_windows_over_pieces_match_pandas(make_env, tmp_path, monkeypatch):
    monkeypatch.setattr(chain, "SLICE", PIECE)
    rng = random.Random(7)
    rows = [(max(0, i * 10 + rng.randint(-400, 0)), rng.choice("abc")) for i in range(12_000)]  # 400 ms disorder
    path = tmp_path / "events"
    path.write_text("".join(f"{t},{k}\n" for t, k in rows))
    env = make_env("local", **{"execution.epoch.max-records": 5_000})
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(400)).with_timestamp_assigner(
        FirstField()
    )
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(path)).build()
    counts = (
        env.from_source(source, strategy, "events")  # the source stamps each piece and observes it
        .map(lambda line: (line.split(",")[1], 1))
        .key_by(lambda kv: kv[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(1_000)))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    )
    got = sorted(counts.execute_and_collect())
    df = pd.DataFrame(rows, columns=["t", "k"])
    expected = sorted((k, int(c)) for (k, _), c in df.groupby(["k", df.t // 1_000]).size().items())
    assert got == expected


def test_a_line_that_does_not_decode_in_a_later_piece_is_named_by_its_line(make_env, tmp_path, monkeypatch):
    monkeypatch.setattr(chain, "SLICE", PIECE)
    path = tmp_path / "text"
    lines = [f"line {i}".encode() for i in range(5_000)]
    lines[3_499] = b"bad \xff\xfe line"  # line 3,500, in the fourth piece
    path.write_bytes(b"\n".join(lines) + b"\n")
    env = make_env("local")
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(path)).build()
    env.from_source(source, WatermarkStrategy.no_watermarks(), "text").map(str.upper).print()
    with pytest.raises(MalformedRecordError, match=rf"{path}:3500\b"):
        env.execute()


@pytest.mark.parametrize("seed", range(4))
def test_pieces_of_a_cut_split_read_back_its_lines_with_positions(tmp_path, seed):
    rng = random.Random(seed)
    lines = ["".join(rng.choice("xyz 019") for _ in range(rng.randint(0, 30))) for _ in range(3_000)]
    path = tmp_path / "f"
    path.write_text("".join(line + "\n" for line in lines))
    data = path.read_bytes()
    start_line, end_line = rng.randint(0, 1_000), rng.randint(2_000, 3_000)
    start = sum(len(line) + 1 for line in lines[:start_line])
    end = sum(len(line) + 1 for line in lines[:end_line])
    info: dict = {"end": end} if end < len(data) else {}
    if seed % 2:  # the second part of a cut file, named apart from it
        info["path"] = str(path)
    split = SourceSplit(f"{path}#{start}" if seed % 2 else str(path), (start, start_line), info=info)
    reader, got, positions = FileSourceReader(TextLineFormat()), [], []
    budget = rng.randint(300, 2_000)
    while not split.finished:
        for result in reader.read_pieces(split, budget, 1 << 20, rng.randint(1, 400)):
            got += result.values
            positions.append(result.split.position)
            split = result.split
    assert got == lines[start_line:end_line]
    assert positions[-1] == (end, end_line)
    for offset, line_count in positions:  # every piece ends at the start of the line it counts up to
        assert offset == sum(len(line) + 1 for line in lines[:line_count])
