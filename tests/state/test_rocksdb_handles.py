"""Databases a task released stay open in a long-lived worker until their compactions are done.

The next task of the same subtask in the same process takes the open database back (no reopen, no
flush of its memtable); a task in another process waits for RocksDB's lock instead of failing; a
working directory about to be removed has its released databases closed first, and waits for other
processes' databases there.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkpoint.state import worker
from sparkpoint.state.rocksdb import handles
from sparkpoint.state.rocksdb.options import RocksDBOptions
from sparkpoint.state.rocksdb.store import StateStore

ROOT = Path(__file__).resolve().parents[2]
KEY = b"\x00\x01\x00\x01k"


@pytest.fixture
def held(monkeypatch):
    """A long-lived worker whose released databases look busy: the closer keeps them until a test says."""
    monkeypatch.setattr(worker, "_long_lived", True)
    monkeypatch.setattr(handles, "_busy", lambda db: True)
    yield monkeypatch
    handles.close_released()


def _committed(path: str, epoch: int) -> StateStore:
    store = StateStore(path)
    store.put(KEY, ("k", None), epoch)
    store.commit(epoch)
    return store


def _sst_files(path: str) -> int:
    return len(glob.glob(os.path.join(path, "*.sst")))


def _open_elsewhere(path: str) -> subprocess.Popen:
    """A second process: prints "ready", opens the database, prints its committed epoch and the open's time."""
    code = (
        "import sys, time; from sparkpoint.state.rocksdb.store import StateStore; print('ready', flush=True); "
        "t = time.monotonic(); s = StateStore(sys.argv[1]); "
        "print(s.committed_epoch(), round(time.monotonic() - t, 2)); s.close()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready", child.communicate()
    return child


def test_the_next_task_in_the_same_worker_takes_the_released_database_back_unflushed(tmp_path, held):
    path = str(tmp_path / "db")
    first = _committed(path, 1)
    files = _sst_files(path)
    first.release()
    second = StateStore(path)
    assert second.db is first.db and second.committed_epoch() == 1 and second.get(KEY) == 1
    assert _sst_files(path) == files  # rocksdict's close would have flushed the memtable into a new file
    second.close()


def test_a_database_released_with_other_options_is_closed_and_opened_anew(tmp_path, held):
    path = str(tmp_path / "db")
    first = _committed(path, 1)
    first.release()
    second = StateStore(path, RocksDBOptions(max_cached_entries=10))
    assert second.db is not first.db and second.committed_epoch() == 1
    second.close()


def test_outside_a_long_lived_worker_a_release_closes_the_database(tmp_path):
    path = str(tmp_path / "db")
    _committed(path, 1).release()
    assert not handles._released
    out, err = _open_elsewhere(path).communicate(timeout=60)
    assert out.split()[0] == "1" and float(out.split()[1]) < 1.0, (out, err)  # no lock to wait for


def test_the_closer_lets_go_once_no_compaction_or_flush_runs(tmp_path, held):
    path = str(tmp_path / "db")
    _committed(path, 3).release()
    child = _open_elsewhere(path)
    time.sleep(1.0)
    assert child.poll() is None, child.communicate()  # held while "busy"
    held.setattr(handles, "_busy", lambda db: False)
    out, err = child.communicate(timeout=60)
    assert out.split()[0] == "3" and float(out.split()[1]) >= 0.9, (out, err)


def test_an_open_waits_for_the_lock_another_process_holds(tmp_path):
    path = str(tmp_path / "db")
    holder = _committed(path, 2)
    child = _open_elsewhere(path)
    time.sleep(1.0)
    assert child.poll() is None, child.communicate()
    holder.close()
    out, err = child.communicate(timeout=60)
    epoch, waited = out.split()
    assert epoch == "2" and float(waited) >= 0.9, (out, err)


def test_removing_a_working_directory_lets_go_of_what_was_released_under_it_only(tmp_path, held):
    inside, outside = str(tmp_path / "w" / "db"), str(tmp_path / "other" / "db")
    _committed(inside, 1).release()
    _committed(outside, 5).release()
    worker.let_go_under(str(tmp_path / "w"))
    assert set(handles._released) == {outside}
    StateStore.destroy(inside)
    fresh = StateStore(inside)
    assert fresh.committed_epoch() is None  # a new, empty database
    fresh.close()


def test_a_directory_made_anew_waits_for_a_database_another_process_holds_there(tmp_path):
    path = str(tmp_path / "w" / "db")
    _committed(path, 1).close()
    code = (
        "import sys, time; from sparkpoint.state.rocksdb.store import StateStore; s = StateStore(sys.argv[1]); "
        "print('open', flush=True); time.sleep(1.5); s.close()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, path],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "open"
    t0 = time.monotonic()
    worker.let_go_under(str(tmp_path / "w"))  # an older attempt's directory: not made anew, no wait
    assert time.monotonic() - t0 < 0.5
    worker.let_go_under(str(tmp_path / "w"), wait=True)
    assert time.monotonic() - t0 >= 1.0 and child.wait(30) == 0
