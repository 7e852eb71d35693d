"""The last files of a file source cut at line starts, so that no subtask reads on alone.

Every result is compared with the files read with plain Python: each line once, each cut part numbered from the
lines before it.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.common import Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.connectors import file_splits
from sparkpoint.connectors.base import SourceSplit
from sparkpoint.connectors.file_splits import balance, split_path, unread_bytes
from sparkpoint.connectors.files import FileSourceReader, FileSplitEnumerator, TextLineFormat
from sparkpoint.datastream import TumblingEventTimeWindows
from sparkpoint.datastream.connectors.file_system import FileSource, StreamFormat
from sparkpoint.errors import SparkpointError

PIECE = 200  # bytes: the smallest part worth a cut, in these tests


@pytest.fixture
def small_pieces(monkeypatch):
    """Cuts of :data:`PIECE` bytes, counted."""
    monkeypatch.setattr(file_splits, "MIN_PIECE", PIECE)
    cuts: list[tuple[str, int]] = []
    cut = file_splits._cut

    def counted(split, keep):
        parts = cut(split, keep)
        if parts is not None:
            cuts.append((split_path(split), parts[1].position[0]))
        return parts

    monkeypatch.setattr(file_splits, "_cut", counted)
    return cuts


def _lines(rng: random.Random, n: int, crlf: bool) -> tuple[list[str], str]:
    """``n`` random lines and their separator."""
    lines = ["".join(rng.choice("abc xyz0123") for _ in range(rng.randint(0, 40))) for _ in range(n)]
    return lines, "\r\n" if crlf else "\n"


def _write(path, lines: list[str], sep: str) -> str:
    path.write_bytes((sep.join(lines) + sep).encode())
    return str(path)


def _read_all(split: SourceSplit) -> list[str]:
    reader, values = FileSourceReader(TextLineFormat()), []
    while not split.finished:
        result = reader.read(split, 7, 1 << 20)
        values += result.values
        split = result.split
    return values


@pytest.mark.parametrize("seed", range(6))
def test_cut_parts_hold_every_unread_line_once_numbered_from_the_lines_before(tmp_path, small_pieces, seed):
    rng = random.Random(seed)
    files, taken = {}, {0: [], 1: [], 2: []}
    for i in (1, 2):  # subtasks 1 and 2 read a line each still: only subtasks still reading take part
        path = _write(tmp_path / f"one{i}.txt", ["x"], "\n")
        files[path] = (["x"], "\n", 0)
        taken[i].append(SourceSplit(path, (0, 0), info={"size": 2}))
    for i in range(rng.randint(1, 3)):
        lines, sep = _lines(rng, rng.randint(50, 300), crlf=i % 2 == 1)
        path = _write(tmp_path / f"f{i}.txt", lines, sep)
        done = rng.randint(0, len(lines) // 3)  # lines read already
        offset = sum(len(line) + len(sep) for line in lines[:done])
        size = (tmp_path / f"f{i}.txt").stat().st_size
        files[path] = (lines, sep, done)
        taken[0].append(SourceSplit(path, (offset, done), watermark=1_000 + i, info={"size": size}))
    balance(taken)
    loads = [sum(map(unread_bytes, splits)) for splits in taken.values()]
    assert max(loads) - min(loads) < 2 * PIECE and len(small_pieces) >= 2
    for path, (lines, sep, done) in files.items():
        parts = sorted(
            (s for splits in taken.values() for s in splits if split_path(s) == path), key=lambda s: s.position
        )
        got = [line for part in parts for line in _read_all(part)]
        assert got == lines[done:], path
        for part in parts:  # a part starts at a line start, numbered from the lines before it
            offset, before = part.position
            assert offset == sum(len(line) + len(sep) for line in lines[:before])
            assert part.watermark == parts[0].watermark  # a second part waits with the first part's watermark


def test_nothing_is_cut_while_files_are_left_to_hand_out_or_where_the_runtime_does_not_allow_it(tmp_path, small_pieces):
    rng = random.Random(1)
    paths = [_write(tmp_path / f"{i}.txt", *_lines(rng, 200, crlf=False)) for i in range(3)]
    enumerator = FileSplitEnumerator([str(tmp_path)])
    enumerator.epoch_bytes = 1  # one file each
    enumerator.cut_splits = True
    first = enumerator.assign({0: [], 1: []})
    assert [s.split_id for s in first[0] + first[1]] == paths[:2] and not small_pieces  # one file still to hand out
    enumerator.cut_splits = False  # continuous mode: tasks read on past what the driver knows
    second = enumerator.assign({0: [], 1: first[1]})
    assert [s.split_id for s in second[0] + second[1]] == [paths[2], paths[1]] and not small_pieces
    enumerator.cut_splits = True
    ended = enumerator.assign({0: [], 1: second[1]})  # subtask 0 read everything it had: it may have ended
    assert not ended[0] and not small_pieces
    nearly_read = second[0][0].with_(position=(second[0][0].info["size"] - 3, 199))
    third = enumerator.assign({0: [nearly_read], 1: second[1]})
    assert [split_path(s) for s in third[0]] == [paths[2], paths[1]] and len(small_pieces) == 1


@pytest.mark.parametrize("target", ["local", "spark"])
def test_a_job_whose_last_file_is_cut_reads_every_line_once(request, make_env, tmp_path, small_pieces, target):
    if target == "spark":
        request.getfixturevalue("spark")
    rng = random.Random(7)
    expected = []
    (tmp_path / "in").mkdir()
    for i, n in enumerate([40, 900, 60]):  # one long file: the subtask holding it would read on alone
        lines, sep = _lines(rng, n, crlf=False)
        lines = [f"{i}-{j}-{line}" for j, line in enumerate(lines)]
        _write(tmp_path / "in" / f"f{i}.txt", lines, sep)
        expected += lines
    env = make_env(target, **{"execution.epoch.max-records": 50, "sparkpoint.epoch.adaptive": "false"})
    env.set_parallelism(2)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "in")).build()
    got = list(env.from_source(source, WatermarkStrategy.no_watermarks(), "f").map(lambda s: s).execute_and_collect())
    assert sorted(got) == sorted(expected) and len(got) == len(expected)
    assert small_pieces and all(path.endswith("f1.txt") for path, _ in small_pieces), small_pieces


def test_a_malformed_line_in_a_cut_part_is_named_by_its_file_and_line(make_env, tmp_path, small_pieces):
    (tmp_path / "in").mkdir()
    _write(tmp_path / "in" / "a.csv", [f"{i},a" for i in range(20)], "\n")
    rows = [f"{i},{'b' * 30}" for i in range(400)]
    rows[350] = "not a number,b"  # line 351, far into the second half of the file
    bad = _write(tmp_path / "in" / "b.csv", rows, "\n")
    env = make_env("local", **{"execution.epoch.max-records": 30, "sparkpoint.epoch.adaptive": "false"})
    env.set_parallelism(2)
    fmt = StreamFormat.csv_format(field_types=[int, str])
    source = FileSource.for_record_stream_format(fmt, str(tmp_path / "in")).build()
    with pytest.raises(SparkpointError, match=re.escape(f"{bad}:351")):
        list(env.from_source(source, WatermarkStrategy.no_watermarks(), "csv").execute_and_collect())
    bad_offset = sum(len(row) + 1 for row in rows[:350])
    assert any(path == bad and cut <= bad_offset for path, cut in small_pieces)  # the bad line was in a cut part


def test_a_subtask_holding_nothing_gets_no_part_of_a_file(tmp_path, small_pieces):
    """It may have sent the end of event time (+inf) already: a record read after it would be late."""
    lines, sep = _lines(random.Random(3), 500, crlf=False)
    path = _write(tmp_path / "big.txt", lines, sep)
    split = SourceSplit(path, (0, 0), info={"size": (tmp_path / "big.txt").stat().st_size})
    taken = {0: [split], 1: []}
    balance(taken)
    assert taken == {0: [split], 1: []} and not small_pieces
    taken = {0: [split], 1: [SourceSplit(path + ".other", (0, 0), info={"size": 1})]}  # still reading: it may
    balance(taken)
    assert len(small_pieces) == 1 and split_path(taken[1][1]) == path


class _FirstNumber(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return int(value.split("-")[0])


def _timed_files(directory: Path, sizes: list[int]) -> list[int]:
    """Files of lines ``<time>-<filler>``, event time rising through each file and from one file to the next;
    returns the times."""
    directory.mkdir()
    times, t = [], 0
    for i, n in enumerate(sizes):
        lines = []
        for _ in range(n):
            t += 1
            lines.append(f"{t}-{'x' * 20}")
            times.append(t)
        _write(directory / f"f{i}.txt", lines, "\n")
    return times


def _windowed_counts(env, directory: Path, per_split: bool) -> list:
    """Per 50 ms window, the lines of ``directory`` whose time falls in it: with watermarks per split (a strategy
    at the source) or from a timestamp assigner after the source."""
    env.set_parallelism(2)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(directory)).build()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_FirstNumber())
    if per_split:
        stamped = env.from_source(source, strategy, "f")
    else:
        stamped = env.from_source(source, WatermarkStrategy.no_watermarks(), "f").assign_timestamps_and_watermarks(
            strategy
        )
    counts = (
        stamped.map(lambda line: (int(line.split("-")[0]) // 50, 1))
        .key_by(lambda kv: kv[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(50)))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    )
    return sorted(counts.execute_and_collect())


# subtask 0 reads the long f1 while subtask 1 has the short f0 and then f2, the last file, to read: the rest of f1
# would come after f2's later times there; with f2 long and f1 short, the rest of f2 may go to subtask 0
CUT_BACKWARDS, CUT_FORWARDS = [40, 900, 200], [900, 40, 900]


@pytest.mark.parametrize("sizes", [CUT_BACKWARDS, CUT_FORWARDS], ids=["backwards", "forwards"])
@pytest.mark.parametrize("per_split", [False, True], ids=["stamped-after", "per-split"])
def test_cuts_make_no_record_late(make_env, tmp_path, small_pieces, per_split, sizes):
    """Where watermarks are the splits' own, a cut part keeps its first part's and may go anywhere. Where an
    operator after the source stamps records, its subtask's watermark follows what it read: a part goes only to
    a subtask given nothing after it, or it would come late."""
    times = _timed_files(tmp_path / "in", sizes)
    env = make_env("local", **{"execution.epoch.max-records": 50, "sparkpoint.epoch.adaptive": "false"})
    assert _windowed_counts(env, tmp_path / "in", per_split) == sorted(Counter(t // 50 for t in times).items())
    cut_files = {Path(path).name for path, _ in small_pieces}
    if per_split:
        assert "f1.txt" in cut_files if sizes == CUT_BACKWARDS else cut_files, small_pieces
    else:
        assert cut_files == (set() if sizes == CUT_BACKWARDS else {"f2.txt"}), small_pieces


def test_a_cut_in_order_goes_only_past_what_the_subtask_was_given(tmp_path, small_pieces):
    rng = random.Random(5)
    paths = [_write(tmp_path / f"{i}.txt", *_lines(rng, 400, crlf=False)) for i in range(2)]
    sizes = [(tmp_path / f"{i}.txt").stat().st_size for i in range(2)]
    early, late = (
        SourceSplit(p, (0, 0), info={"mtime": float(i), "size": n}) for i, (p, n) in enumerate(zip(paths, sizes))
    )
    nearly_read = late.with_(position=(sizes[1] - 3, 399))
    frontier = {0: file_splits.order_key(early), 1: file_splits.order_key(late)}
    taken = {0: [early], 1: [nearly_read]}
    balance(taken, frontier)  # the early file's rest would follow the late file on subtask 1
    assert taken == {0: [early], 1: [nearly_read]} and not small_pieces
    balance(taken)  # unordered: it may
    assert len(small_pieces) == 1 and split_path(taken[1][1]) == paths[0]
    nearly_early = early.with_(position=(sizes[0] - 3, 399))
    taken = {0: [nearly_early], 1: [late]}
    balance(taken, frontier)  # the late file's rest follows the early file on subtask 0
    (tail,) = taken[0][1:]
    assert split_path(tail) == paths[1] and frontier[0] == file_splits.order_key(tail) > file_splits.order_key(late)


def test_the_frontier_survives_a_restore_and_a_rescale_takes_the_last(tmp_path):
    for i in range(3):
        _write(tmp_path / f"{i}.txt", ["x"] * 10, "\n")
    enumerator = FileSplitEnumerator([str(tmp_path)])
    enumerator.epoch_bytes = 1  # one file each
    first = enumerator.assign({0: [], 1: []})
    keys = {i: file_splits.order_key(first[i][0]) for i in (0, 1)}
    assert enumerator.frontier == keys and keys[0] < keys[1]
    snapshot = enumerator.snapshot()
    older = {k: v for k, v in snapshot.items() if k not in ("frontier", "subtasks")}  # from before the frontier
    for parallelism, state, kept in [(2, snapshot, keys[1]), (3, snapshot, keys[1]), (2, older, (float("inf"), "", 0))]:
        restored = FileSplitEnumerator([str(tmp_path)])
        restored.epoch_bytes = 1
        restored.restore(state)
        assert restored.snapshot() == state | {"listed": False} or state is older  # a checkpoint before assigning
        (last,) = restored.assign({i: [] for i in range(parallelism)})[0]  # the file still to hand out
        after = max(file_splits.order_key(last), kept)
        assert restored.frontier == {0: after, **dict.fromkeys(range(1, parallelism), kept)}


def test_a_subtask_given_nothing_yet_keeps_no_frontier_across_a_restore(tmp_path):
    """At the same parallelism, a subtask that was given no split has none after a restore either: it may take a
    part of any file (unlike after a rescale)."""
    _write(tmp_path / "0.txt", ["x"] * 10, "\n")
    enumerator = FileSplitEnumerator([str(tmp_path)])
    enumerator.assign({0: [], 1: [], 2: []})
    restored = FileSplitEnumerator([str(tmp_path)])
    restored.restore(enumerator.snapshot())
    restored.assign({0: [], 1: [], 2: []})
    assert set(restored.frontier) == {0} and restored.frontier == enumerator.frontier
    unassigned = FileSplitEnumerator([str(tmp_path)]).snapshot()  # a checkpoint before anything was handed out
    restored = FileSplitEnumerator([str(tmp_path)])
    restored.restore(unassigned)
    restored.assign({0: [], 1: [], 2: []})
    assert restored.frontier == enumerator.frontier


def test_a_compressed_file_is_never_cut(tmp_path, small_pieces):
    """Its position counts decompressed bytes: a cut at a byte of the file would split the compressed stream."""
    import gzip

    lines, sep = _lines(random.Random(5), 2_000, crlf=False)
    path = tmp_path / "big.txt.gz"
    path.write_bytes(gzip.compress((sep.join(lines) + sep).encode(), compresslevel=0))
    split = SourceSplit(str(path), (0, 0), info={"size": path.stat().st_size})
    taken = {0: [split], 1: [SourceSplit(str(tmp_path / "other"), (0, 0), info={"size": 1})]}
    balance(taken)
    assert taken[0] == [split] and len(taken[1]) == 1 and not small_pieces
    assert _read_all(split) == lines
