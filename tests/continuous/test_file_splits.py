"""A continuous-mode file source asks for its next file when it runs out (as Flink's file readers do), instead of
waiting for the next barrier to bring it.

Every file here is dealt alone (``execution.epoch.max-bytes`` below one file's size) and barriers come every 2 s, so
a source that got files only with barriers would read one file per subtask per barrier. Every check is against the
lines as written, each exactly once.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from sparkpoint.common import Duration, Encoder, WatermarkStrategy
from sparkpoint.connectors.base import SourceSplit
from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.runtime.continuous.split_requests import SplitAsker
from sparkpoint.runtime.continuous.stream_task import ContinuousTask
from sparkpoint.runtime.source_coordinator import SourceCoordinator
from sparkpoint.testing.kill_loop import read_committed_lines

FILES, LINES = 12, 200
SLOW_BARRIERS = {
    "sparkpoint.execution.mode": "continuous",
    "sparkpoint.continuous.barrier-interval": "2 s",
    "execution.epoch.max-bytes": "1 kb",  # a file is ~10 kb: each deal gives a subtask one file
    "parallelism.default": 2,
}


def write_files(directory: Path) -> list[str]:
    """``FILES`` files of ``LINES`` lines, oldest first (the order they are dealt in); returns every line."""
    directory.mkdir()
    lines = []
    for k in range(FILES):
        body = [f"file {k:02d} line {i:03d} " + "x" * 32 for i in range(LINES)]
        path = directory / f"part-{k:02d}.txt"
        path.write_text("\n".join(body) + "\n")
        os.utime(path, (1_000_000 + k, 1_000_000 + k))
        lines += body
    return lines


def copy_files(env, inp: Path, out: Path) -> None:
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(inp)).build()
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "files").uid("files")
    stream.sink_to(FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()).uid("copy")


def test_a_source_asks_for_its_next_file_instead_of_waiting_for_a_barrier(make_env, tmp_path):
    """Dealt only at barriers, the 12 files would take 6 barriers, 12 s; asked for, they are all read before
    the second barrier (the first comes as the slots start)."""
    lines = write_files(tmp_path / "in")
    env = make_env("local", **SLOW_BARRIERS)
    copy_files(env, tmp_path / "in", tmp_path / "out")
    result = env.execute("copy")
    assert Counter(read_committed_lines(tmp_path / "out")) == Counter(lines)
    assert result.epochs <= 3, f"{result.epochs} barriers for {FILES} files"


def test_a_directory_without_files_is_idle_not_at_its_end(make_env, tmp_path):
    """A monitored directory that has no files yet: its sources are idle, not at the end of their input, so the
    barriers keep their interval (200 ms) rather than follow each other as a final checkpoint's would."""
    (tmp_path / "in").mkdir()
    env = make_env(
        "local",
        **{
            "sparkpoint.execution.mode": "continuous",
            "parallelism.default": 2,
            "execution.checkpointing.interval": "1 h",
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
        },
    )
    builder = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "in"))
    source = builder.monitor_continuously(Duration.of_millis(100)).build()
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "files").uid("files")
    stream.sink_to(FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build()).uid("copy")
    client = env.execute_async("idle")
    time.sleep(2.0)
    client.cancel()
    result = client.wait(30)
    assert result.epochs <= 2.0 / 0.2 + 5, f"{result.epochs} barriers in 2 s"


def test_a_top_up_deals_to_the_subtask_that_asked_behind_what_it_holds(tmp_path):
    """Only the subtask that asked gets files, the next in order, after those it held at its last barrier; none
    while its unread bytes (as it says, read to where it is now) fill the bound; one when it holds nothing. A
    source of splits that never end (a generator's here) deals only at barriers."""
    write_files(tmp_path / "in")
    files = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "in")).build()
    coordinator = SourceCoordinator(0, "files", files, 2, epoch_bytes=1024)
    first = coordinator.assign()
    assert [[s.split_id for s in first[i]] for i in (0, 1)] == [[path(tmp_path, 0)], [path(tmp_path, 1)]]

    assert [s.split_id for s in coordinator.top_up(1, [])] == [path(tmp_path, 2)]
    assert [s.split_id for s in coordinator.assigned[1]] == [path(tmp_path, 1), path(tmp_path, 2)]
    assert [s.split_id for s in coordinator.assigned[0]] == [path(tmp_path, 0)]

    unread = first[0][0]  # ~10 kb unread: the 1 kb bound is full
    assert coordinator.top_up(0, [unread]) == []
    done = replace(unread, finished=True)
    assert [s.split_id for s in coordinator.top_up(0, [done])] == [path(tmp_path, 3)]
    assert [s.split_id for s in coordinator.assigned[0]] == [path(tmp_path, 0), path(tmp_path, 3)]

    numbers = SourceCoordinator(0, "numbers", DataGeneratorSource(lambda i: i, 100, num_splits=4), 2)
    before = {i: [s.split_id for s in splits] for i, splits in numbers.assign().items()}
    assert numbers.top_up(0, []) == []
    assert {i: [s.split_id for s in splits] for i, splits in numbers.assigned.items()} == before


def path(tmp_path: Path, k: int) -> str:
    return str(tmp_path / "in" / f"part-{k:02d}.txt")


def test_a_subtask_asks_once_for_what_it_holds_of_each_source_node_and_again_for_a_node_that_ran_dry():
    """Two file sources in one subtask: a request for what it holds of a node goes once; a second node that now
    holds nothing (while the first still holds the same split) asks, for itself alone (the first's files may be
    on their way: the driver would deal it again on what it held before); a node whose split changed asks again,
    and splits of a node, or a barrier, let it ask again."""
    sent: list = []
    held = {3: [SourceSplit("x-1"), SourceSplit("x-2")], 5: [SourceSplit("y-1"), SourceSplit("y-2")]}
    task = SimpleNamespace(
        subtask=1,
        dep=SimpleNamespace(epoch=4, splits=held, no_more_splits={}),
        paused=False,
        drained=False,
        splits_asker=SplitAsker([3, 5]),
        control=SimpleNamespace(send=sent.append),
    )

    def asked() -> list[dict]:
        ContinuousTask._ask_for_splits(task)
        ContinuousTask._ask_for_splits(task)
        assert all((m.subtask, m.epoch) == (1, 4) for m in sent)
        requests = [dict(m.held) for m in sent]
        sent.clear()
        return requests

    a1, a2 = SourceSplit("a-1"), SourceSplit("a-2")
    assert asked() == []  # holds enough of every node
    held[3] = [a1]
    assert asked() == [{3: [a1]}]
    held[5] = [replace(held[5][0], finished=True)]  # the second source ran dry, the first holds what it held
    assert asked() == [{5: []}]
    held[3] = [a2]
    assert asked() == [{3: [a2]}]
    task.splits_asker.given(5)  # as AddSplits of node 5 does (a barrier forgets every node)
    assert asked() == [{5: []}]
