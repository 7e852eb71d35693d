"""Databases a task released, kept open in its worker process until their compactions are done.

A task opens its operator's database for one epoch. Closing it at the task's end costs twice:
rocksdict's close flushes the memtable (a new sorted run every epoch, so more compactions), and
RocksDB's close cancels a running compaction, whose work is lost; one longer than the epoch
never finished (measured in W2 at 5M keys: eight epochs in a row each waited 1 s for the same
compaction and cancelled it, and their L0 files grew from 2 to 8). In a long-lived worker
(:func:`sparkpoint.state.worker.is_long_lived_worker`) a released database stays open instead:
a closer thread closes it once RocksDB runs no compaction or flush for it, and a
task of the same subtask that comes to this process before then takes the open database back.
A task in another process waits for RocksDB's lock until the closer here lets go
(:func:`open_waiting_for_lock`).
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from typing import Any, Callable, Optional

from sparkpoint.state.worker import is_long_lived_worker, on_let_go

__all__ = ["release", "reclaim", "close_released", "open_waiting_for_lock", "LOCK_WAIT_S"]

MAX_HOLD_S = 60.0    # a released database is closed after this long, busy or not
LOCK_WAIT_S = 120.0  # how long an open waits for another process (or this one's closer) to let go
_POLL_S = 0.01
_BUSY = ("rocksdb.num-running-compactions", "rocksdb.num-running-flushes")

_lock = threading.Lock()
_released: dict[str, tuple[Any, Any, float]] = {}   # path -> (database, its options, when released)
_wake = threading.Event()
_closer: Optional[threading.Thread] = None


def release(path: str, db: Any, options: Any) -> bool:
    """Keep ``db`` (opened at ``path`` with ``options``) open for the closer, in a long-lived worker;
    False elsewhere: the caller closes it now."""
    global _closer
    if not is_long_lived_worker():
        return False
    with _lock:
        _released[path] = (db, options, time.monotonic())
        if _closer is None:
            _closer = threading.Thread(target=_close_idle, name="sparkpoint-rocksdb-closer", daemon=True)
            _closer.start()
            atexit.register(close_released)
            on_let_go(close_released)
    _wake.set()
    return True


def reclaim(path: str, options: Any) -> Optional[Any]:
    """The database at ``path`` if this process released it and still holds it open (with the same options)."""
    with _lock:
        entry = _released.pop(path, None)
    if entry is None:
        return None
    db, held_options, _ = entry
    if held_options == options:
        return db
    _close(db)
    return None


def close_released(under: str = "") -> None:
    """Close every database this process holds released under the directory ``under`` (all by default) now."""
    prefix = os.path.join(under, "") if under else ""
    with _lock:
        paths = [p for p in _released if not prefix or p == under or p.startswith(prefix)]
        entries = [_released.pop(p) for p in paths]
    for db, _, _ in entries:
        _close(db)


def open_waiting_for_lock(open_db: Callable[[], Any], path: str, wait_s: float = LOCK_WAIT_S) -> Any:
    """``open_db()``, retried while RocksDB's lock on ``path`` is held by another process (or by this one's
    closer, closing it), for at most ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return open_db()
        except Exception as e:  # rocksdict raises a bare Exception with RocksDB's message
            if "lock" not in str(e).lower() or time.monotonic() >= deadline:
                raise
        time.sleep(_POLL_S)


def _close_idle() -> None:
    while True:
        _wake.wait()
        with _lock:
            entries = list(_released.items())
            if not entries:
                _wake.clear()
                continue
        now = time.monotonic()
        for path, entry in entries:
            db, _, since = entry
            if now - since < MAX_HOLD_S and _busy(db):
                continue
            with _lock:
                if _released.get(path) is not entry:
                    continue   # taken back by a task meanwhile
                del _released[path]
            _close(db)
        time.sleep(_POLL_S)


def _busy(db: Any) -> bool:
    try:
        return any(db.property_int_value(p) for p in _BUSY)
    except Exception:  # noqa: BLE001 - a database that cannot answer is closed
        return False


def _close(db: Any) -> None:
    try:
        db.close()
    except Exception:  # noqa: BLE001 - its directory may be gone (a job's working state removed)
        pass
