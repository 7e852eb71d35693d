"""Databases a task released stay open in a long-lived worker until their compactions are done.

The next task of the same subtask in the same process takes the open database back (no reopen, no
flush of its memtable); a task in another process waits for RocksDB's lock instead of failing; a
working directory about to be removed has its released databases closed first.
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


@pytest.fixture
def long_lived(monkeypatch):
    monkeypatch.setattr(worker, "_long_lived", True)
    yield
    handles.close_released()


def _committed(path: str, epoch: int) -> StateStore:
    store = StateStore(path)
    store.put(b"\x00\x01\x00\x01k", ("k", None), epoch)
    store.commit(epoch)
    return store


def _sst_files(path: str) -> int:
    return len(glob.glob(os.path.join(path, "*.sst")))


def _open_elsewhere(path: str) -> subprocess.Popen:
    """A second process that opens the database and prints its committed epoch and how long the open took."""
    code = ("import sys, time; from sparkpoint.state.rocksdb.store import StateStore; t = time.monotonic(); "
            "s = StateStore(sys.argv[1]); print(s.committed_epoch(), round(time.monotonic() - t, 2)); s.close()")
    return subprocess.Popen([sys.executable, "-c", code, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_the_next_task_in_the_same_worker_takes_the_released_database_back_unflushed(tmp_path, long_lived):
    path = str(tmp_path / "db")
    first = _committed(path, 1)
    files = _sst_files(path)
    first.release()
    second = StateStore(path)
    assert second.db is first.db and second.committed_epoch() == 1 and second.get(b"\x00\x01\x00\x01k") == 1
    assert _sst_files(path) == files   # rocksdict's close would have flushed the memtable into a new file
    second.close()


def test_outside_a_long_lived_worker_a_release_closes_the_database(tmp_path):
    path = str(tmp_path / "db")
    first = _committed(path, 1)
    first.release()
    second = StateStore(path)
    assert second.db is not first.db and second.committed_epoch() == 1
    second.close()


def test_the_closer_lets_go_of_an_idle_database_for_another_process(tmp_path, long_lived):
    path = str(tmp_path / "db")
    _committed(path, 3).release()
    out, err = _open_elsewhere(path).communicate(timeout=60)
    assert out.split()[0] == "3", err


def test_an_open_waits_for_the_lock_another_process_holds(tmp_path):
    path = str(tmp_path / "db")
    holder = _committed(path, 2)
    child = _open_elsewhere(path)
    time.sleep(1.5)   # the child is waiting for the lock meanwhile
    assert child.poll() is None, child.communicate()
    holder.close()
    out, err = child.communicate(timeout=60)
    epoch, waited = out.split()
    assert epoch == "2" and float(waited) >= 1.0, (out, err)


def test_removing_a_working_directory_closes_what_was_released_under_it(tmp_path, long_lived):
    path = str(tmp_path / "w" / "db")
    _committed(path, 1).release()
    _committed(str(tmp_path / "other" / "db"), 5).release()
    worker.let_go_under(str(tmp_path / "w"))
    StateStore.destroy(path)
    fresh = StateStore(path)
    assert fresh.committed_epoch() is None   # a new, empty database
    fresh.close()
    other = handles.reclaim(str(tmp_path / "other" / "db"), RocksDBOptions())   # not under it: still held
    assert other is not None
    other.close()
