"""A file source hands its epoch to the record-wise run behind it a piece at a time, as it reads it, so an epoch's
lines are never all in memory at once: the same records, positions, watermarks and errors as one read of the
whole epoch. Expected results come from the files read with plain Python and from pandas."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from sparkpoint.common import Duration, Encoder, Time, Types, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.connectors.base import SourceSplit
from sparkpoint.connectors.files import FileSourceReader, TextLineFormat
from sparkpoint.connectors.line_formats import CsvFormat
from sparkpoint.datastream import SinkFunction, TumblingEventTimeWindows
from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat
from sparkpoint.errors import MalformedRecordError, UserFunctionError
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


def test_a_source_counts_the_records_it_passed_to_the_run(make_env, tmp_path, monkeypatch):
    """The records a source handed to the run piece by piece count as its output: in the task's report (whether
    sources may run ahead) and, in continuous mode, in what a source subtask read since the last barrier (the
    bound of ``execution.epoch.max-records`` between barriers)."""
    from sparkpoint.runtime import task as task_module
    from sparkpoint.runtime.continuous.stream_task import ContinuousTask

    run_task, reported = task_module._run_task, []

    def recording(plan, stage_id, *args, **kwargs):
        result = run_task(plan, stage_id, *args, **kwargs)
        reported.extend(r.records_out for r in result[1] if r.stage_id == 0)
        return result

    monkeypatch.setattr(task_module, "_run_task", recording)
    env = make_env("local")
    env.set_parallelism(1)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), _write_numbers(tmp_path / "n", 1_000))
    env.from_source(source.build(), WatermarkStrategy.no_watermarks(), "n").filter(lambda x: False).print()
    env.execute()
    assert sum(reported) == 1_000  # read and passed on, though the filter kept none

    run_chain, reads = ContinuousTask._run_chain, []

    def counting(self, inputs, born):
        n = run_chain(self, inputs, born)
        if self.is_source:
            reads.append(n)
        return n

    monkeypatch.setattr(ContinuousTask, "_run_chain", counting)
    env = make_env("local", **{"sparkpoint.execution.mode": "continuous", "execution.epoch.max-records": 500})
    env.set_parallelism(1)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), _write_numbers(tmp_path / "m", 3_000))
    env.from_source(source.build(), WatermarkStrategy.no_watermarks(), "m").map(str.strip).print()
    env.execute()
    assert sum(reads) == 3_000 and max(reads) <= 500, reads


def _messy_file(rng: random.Random) -> bytes:
    """Lines of CSV, blank lines, lines that do not decode, CRLF or LF, maybe a header, maybe no last newline."""
    lines = []
    for _ in range(rng.randint(1, 60)):
        kind = rng.random()
        lines.append(
            b""
            if kind < 0.1
            else b"bad\xff,1"
            if kind < 0.15
            else f"{rng.randint(0, 999)},{rng.choice('abc')}".encode() * rng.randint(1, 3)
        )
    eol = rng.choice([b"\n", b"\r\n"])
    data = (b"h1,h2" + eol if rng.random() < 0.3 else b"") + b"".join(line + eol for line in lines)
    return data[: -len(eol)] if rng.random() < 0.3 else data


def test_a_read_in_pieces_is_the_read_at_once(tmp_path):
    """Records, malformed lines (with their line numbers), the position reached, the end and the bytes read: the
    same whether a split's read comes whole or in pieces, whatever the bounds."""
    rng = random.Random(5)
    for case in range(400):
        data = _messy_file(rng)
        path = tmp_path / f"f{case}"
        path.write_bytes(data)
        starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10 and i + 1 < len(data)]
        start = rng.choice(starts)
        end = rng.choice([s for s in starts if s > start] + [len(data)])
        info = {"end": end} if end < len(data) else {}
        split = SourceSplit(str(path), (start, starts.index(start)), info=info)
        fmt = rng.choice([TextLineFormat(), CsvFormat(",", None, True), CsvFormat(",", [int, str], rng.random() < 0.5)])
        reader, max_records, max_bytes = FileSourceReader(fmt), rng.randint(1, 40), rng.randint(1, 400)
        whole = reader.read(split, max_records, max_bytes)
        pieces = list(reader.read_pieces(split, max_records, max_bytes, rng.randint(1, 10)))
        got = (
            [v for p in pieces for v in p.values],
            [m for p in pieces for m in p.malformed],
            pieces[-1].split.position,
            pieces[-1].split.finished,
            sum(p.size for p in pieces),
        )
        assert got == (whole.values, whole.malformed, whole.split.position, whole.split.finished, whole.size), case


class LoggedSink(SinkFunction):
    def invoke(self, value, context):
        LOG.append(f"sink {value}")


def test_a_sink_writes_each_piece_before_the_next_is_read(make_env, tmp_path, logged_reads):
    """A sink at the end of the run takes each piece's records as they come, so an epoch's output is not held whole
    until the end of the task (a pass-through job's memory followed its epoch's size)."""
    n = 10_500
    env = make_env("local", **{"execution.epoch.max-records": 4_000})
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), _write_numbers(tmp_path / "n", n))
    numbers = env.from_source(source.build(), WatermarkStrategy.no_watermarks(), "numbers").map(logged_int)
    numbers.filter(lambda x: x % 3 == 0).add_sink(LoggedSink()).uid("logged")
    metrics = env.execute().metrics
    assert metrics["logged"]["numRecordsIn"] == len(range(0, n, 3))
    reads = [i for i, e in enumerate(logged_reads) if e.startswith("read")]
    sizes = [int(logged_reads[i].split()[1]) for i in reads]
    assert sum(sizes) == n and max(sizes) == PIECE, sizes
    first = 0
    for i, j, size in zip(reads, [*reads[1:], len(logged_reads)], sizes):
        piece = range(first, first + size)
        assert logged_reads[i + 1 : j] == ["map"] * size + [f"sink {x}" for x in piece if x % 3 == 0]
        first += size


def fails_late(x):
    if x == 9_500:  # in the second piece: the first piece's records are written by then
        raise ValueError("no 9500")
    return x


def test_a_failed_task_leaves_no_staged_part_file_of_what_its_sink_wrote(make_env, tmp_path, logged_reads):
    n = 10_000
    env = make_env("local", **{"restart-strategy.type": "none", "execution.epoch.max-records": 20_000})
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), _write_numbers(tmp_path / "n", n))
    out = tmp_path / "out"
    env.from_source(source.build(), WatermarkStrategy.no_watermarks(), "numbers").map(logged_int).map(fails_late).uid(
        "fails"
    ).map(str, output_type=Types.STRING()).sink_to(
        FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()
    ).uid("files")
    with pytest.raises(UserFunctionError, match="9500"):
        env.execute()
    assert logged_reads.count("map") > PIECE  # the sink had a piece or more to write before the failure
    assert [p for p in out.rglob("*") if p.is_file()] == []
