"""A FileSource restored from a savepoint or a retained checkpoint reads the files added since the snapshot,
and none it had read before (beyond Flink: its static enumerator does not list again)."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

from sparkpoint.connectors.files import FileSplitEnumerator
from sparkpoint.storage.checkpoint_storage import latest_completed
from sparkpoint.testing.kill_loop import read_committed_lines
from tests.e2e.relist_job import build


def write_files(directory: Path, first: int, count: int, lines: int = 40) -> list[str]:
    """Files ``f<first>`` .. with ``lines`` distinct lines each (modification times in order); their lines."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for i in range(first, first + count):
        text = [f"file {i} line {j}" for j in range(lines)]
        path = directory / f"f{i:04d}.txt"
        path.write_text("\n".join(text) + "\n")
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
        written += text
    return written


def test_a_restored_bounded_enumerator_lists_again(tmp_path):
    write_files(tmp_path / "in", 0, 3, lines=1)
    enum = FileSplitEnumerator([str(tmp_path / "in")])
    handed = enum.next_splits(10)
    assert len(handed) == 3 and enum.no_more_splits()
    snap = enum.snapshot()
    write_files(tmp_path / "in", 3, 2, lines=1)
    restored = FileSplitEnumerator([str(tmp_path / "in")])
    restored.restore({**snap, "listed": True})  # a snapshot written before re-listing existed says so
    assert not restored.no_more_splits()
    assert sorted(os.path.basename(s.split_id) for s in restored.next_splits(10)) == ["f0003.txt", "f0004.txt"]
    assert restored.next_splits(10) == [] and restored.no_more_splits()


def test_a_restored_continuous_enumerator_lists_at_once_and_keeps_pending_files(tmp_path, caplog):
    write_files(tmp_path / "in", 0, 3, lines=1)
    enum = FileSplitEnumerator([str(tmp_path / "in")], discovery_interval_ms=3_600_000)
    assert [os.path.basename(s.split_id) for s in enum.next_splits(1)] == ["f0000.txt"]
    snap = enum.snapshot()  # f0001, f0002 still pending at the snapshot
    write_files(tmp_path / "in", 3, 2, lines=1)
    restored = FileSplitEnumerator([str(tmp_path / "in")], discovery_interval_ms=3_600_000)
    restored.restore(snap)
    with caplog.at_level("INFO", logger="sparkpoint.connectors.file_enumerator"):
        handed = [os.path.basename(s.split_id) for s in restored.next_splits(10)]
    assert handed == ["f0001.txt", "f0002.txt", "f0003.txt", "f0004.txt"]  # no wait for the interval
    assert not restored.no_more_splits()  # continuous: never finished
    assert any("found 2 new file(s)" in r.getMessage() for r in caplog.records), caplog.text


def test_a_file_is_known_by_its_path(tmp_path):
    write_files(tmp_path / "in", 0, 1, lines=1)
    enum = FileSplitEnumerator([str(tmp_path / "in")])
    enum.next_splits(10)
    snap = enum.snapshot()
    with open(tmp_path / "in" / "f0000.txt", "a") as f:  # changed after it was read: a user error
        f.write("appended\n")
    os.rename(tmp_path / "in" / "f0000.txt", tmp_path / "in" / "moved.txt")
    write_files(tmp_path / "in", 0, 1, lines=1)  # same path again after the rename
    restored = FileSplitEnumerator([str(tmp_path / "in")])
    restored.restore(snap)
    assert [os.path.basename(s.split_id) for s in restored.next_splits(10)] == ["moved.txt"]
    assert restored.no_more_splits()


def _run_then_stop(make_env, tmp_path: Path, stop: str) -> str:
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 10,
            "execution.checkpointing.interval": "200 ms",
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
            "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        },
    )
    env.set_parallelism(2)
    build(env, str(tmp_path / "in"), str(tmp_path / "out"), delay_ms=2)  # 1,200 lines: 2.4 s or more
    client = env.execute_async("relist")
    deadline = time.time() + 60
    while not read_committed_lines(tmp_path / "out") and time.time() < deadline:
        time.sleep(0.1)
    if stop == "savepoint":
        path = client.stop_with_savepoint(False, (tmp_path / "sp").as_uri()).result(timeout=60)
    else:
        while latest_completed((tmp_path / "ck").as_uri()) is None and time.time() < deadline:
            time.sleep(0.1)
        client.cancel().result(timeout=60)
        path = latest_completed((tmp_path / "ck").as_uri())
    client.wait(60)
    return path


def _restore_and_finish(make_env, tmp_path: Path, path: str) -> None:
    env = make_env("local", **{"execution.epoch.max-records": 10, "execution.savepoint.path": path})
    env.set_parallelism(2)
    build(env, str(tmp_path / "in"), str(tmp_path / "out"))
    env.execute("relist, restored")


def test_savepoint_then_new_files_then_restore_reads_each_line_once(make_env, tmp_path):
    old = write_files(tmp_path / "in", 0, 30)
    path = _run_then_stop(make_env, tmp_path, "savepoint")
    assert len(read_committed_lines(tmp_path / "out")) < len(old)  # stopped part-way
    new = write_files(tmp_path / "in", 30, 5)
    _restore_and_finish(make_env, tmp_path, path)
    assert Counter(read_committed_lines(tmp_path / "out")) == Counter(line.upper() for line in old + new)


def test_retained_checkpoint_then_new_files_then_restore_reads_each_line_once(make_env, tmp_path):
    old = write_files(tmp_path / "in", 0, 30)
    path = _run_then_stop(make_env, tmp_path, "checkpoint")
    new = write_files(tmp_path / "in", 30, 5)
    _restore_and_finish(make_env, tmp_path, path)
    assert Counter(read_committed_lines(tmp_path / "out")) == Counter(line.upper() for line in old + new)
