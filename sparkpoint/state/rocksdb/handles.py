"""Databases a task released, kept open in its worker process until their compactions are done.

A task opens its operator's database for one epoch. Closing it at the task's end costs twice:
rocksdict's close flushes the memtable (a new sorted run every epoch, so more compactions), and
RocksDB's close cancels a running compaction, whose work is lost; one longer than the epoch
never finished (measured in W2 at 5M keys: eight epochs in a row each waited 1 s for the same
compaction and cancelled it, and their L0 files grew from 2 to 8). In a long-lived worker
(:func:`sparkpoint.state.worker.is_long_lived_worker`) a released database stays open instead:
a closer thread closes it once RocksDB runs no compaction or flush for it (at most
``MAX_HOLD_S`` after the release), and a task of the same subtask that comes to this process
before then takes the open database back. A task in another process waits for RocksDB's lock
until the closer here lets go (:func:`open_waiting_for_lock`), and so does the removal of a
working directory (:func:`let_go_under`): a database still open in another process must not
write into a directory made anew at the same path.
"""

from __future__ import annotations

import atexit
import fcntl
import glob
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import rocksdict

from sparkpoint.state.worker import is_long_lived_worker, on_let_go

if TYPE_CHECKING:
    from sparkpoint.state.rocksdb.options import RocksDBOptions

__all__ = [
    "open_database",
    "release",
    "reclaim",
    "close_released",
    "let_go_under",
    "open_waiting_for_lock",
    "LOCK_WAIT_S",
]

logger = logging.getLogger(__name__)

MAX_HOLD_S = 60.0  # a released database is closed after this long, busy or not
LOCK_WAIT_S = 120.0  # how long an open (or a directory's removal) waits for another process to let go
_POLL_S = 0.01
_MAX_POLL_S = 0.1
_BUSY = ("rocksdb.num-running-compactions", "rocksdb.num-running-flushes")
_LOCK_ERRORS = ("while lock file", "lock hold by current process")  # RocksDB's messages for a held LOCK

_cond = threading.Condition()
_released: dict[str, tuple[Any, Any, float, tuple[int, int]]] = {}  # path -> (db, options, since, dir id)
_closing: set[str] = set()  # paths the closer is closing right now
_closer: threading.Thread | None = None


def open_database(path: str, options: RocksDBOptions, read_only: bool) -> rocksdict.Rdict:
    """Open (or create) the database at ``path`` with ``options`` for its column family too: given no column
    families, rocksdict reopens an existing database with the column-family options of its OPTIONS file and a
    fresh 8 MB block cache of its own, so the shared cache, the filters and the write buffers configured here
    would apply only to a database's first epoch. Waits for a lock another process holds."""
    opts = options.to_rocksdb()
    families = {"default": opts}
    if read_only:
        return rocksdict.Rdict(path, opts, column_families=families, access_type=rocksdict.AccessType.read_only())
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return open_waiting_for_lock(lambda: rocksdict.Rdict(path, opts, column_families=families), path)


def release(path: str, db: Any, options: Any) -> bool:
    """Keep ``db`` (opened at ``path`` with ``options``) open for the closer, in a long-lived worker;
    False elsewhere: the caller closes it now."""
    global _closer
    if not is_long_lived_worker():
        return False
    with _cond:
        _released[path] = (db, options, time.monotonic(), _dir_id(path))
        if _closer is None:
            _closer = threading.Thread(target=_close_idle, name="sparkpoint-rocksdb-closer", daemon=True)
            _closer.start()
            atexit.register(close_released)
        _cond.notify_all()
    return True


def reclaim(path: str, options: Any) -> Any | None:
    """The database at ``path`` if this process released it and still holds it open, with the same options
    and in the same directory (not one removed and made anew since)."""
    with _cond:
        entry = _released.pop(path, None)
    if entry is None:
        return None
    db, held_options, _, dir_id = entry
    if held_options == options and _dir_id(path) == dir_id:
        return db
    _close(path, db)
    return None


def close_released(under: str = "") -> None:
    """Close every database this process holds released under the directory ``under`` (all by default) now,
    and wait for those the closer is closing."""
    with _cond:
        paths = [p for p in _released if _is_under(p, under)]
        entries = [(p, _released.pop(p)[0]) for p in paths]
    for path, db in entries:
        _close(path, db)
    with _cond:
        _cond.wait_for(lambda: not any(_is_under(p, under) for p in _closing), timeout=LOCK_WAIT_S)


def let_go_under(directory: str, wait: bool = False) -> None:
    """Before ``directory`` is removed: close what this process released under it; ``wait`` (a database is
    made anew at the same path next, which one still open elsewhere must not write into): until no other
    process holds a database there (RocksDB's ``LOCK`` files; at most ``LOCK_WAIT_S`` each)."""
    close_released(directory)
    if not wait:
        return
    for lock in glob.glob(os.path.join(glob.escape(directory), "**", "LOCK"), recursive=True):
        _wait_unlocked(lock)


def open_waiting_for_lock(open_db: Callable[[], Any], path: str, wait_s: float = LOCK_WAIT_S) -> Any:
    """``open_db()``, retried while RocksDB's lock on ``path`` is held by another process (or by this one's
    closer, closing it), for at most ``wait_s``."""
    deadline = time.monotonic() + wait_s
    pause = _POLL_S
    while True:
        try:
            return open_db()
        except Exception as e:  # rocksdict raises a bare Exception with RocksDB's message
            if not any(m in str(e).lower() for m in _LOCK_ERRORS) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, _MAX_POLL_S)


def _wait_unlocked(lock_file: str) -> None:
    """Wait until no process holds RocksDB's POSIX lock on ``lock_file`` (this one holds none there: it
    closed its databases, and closing this descriptor would drop a lock it held)."""
    try:
        fd = os.open(lock_file, os.O_RDWR)
    except OSError:
        return  # gone already
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError:
                if time.monotonic() >= deadline:
                    logger.warning(
                        "%s is still locked after %.0f s; removing its directory anyway", lock_file, LOCK_WAIT_S
                    )
                    return
                time.sleep(_MAX_POLL_S)
    finally:
        os.close(fd)


def _close_idle() -> None:
    """The closer thread: closes released databases once RocksDB runs no compaction or flush for them."""
    while True:
        with _cond:
            _cond.wait_for(lambda: bool(_released))
            entries = list(_released.items())
        now = time.monotonic()
        for path, entry in entries:
            if now - entry[2] < MAX_HOLD_S and _busy(entry[0]):
                continue
            with _cond:
                if _released.get(path) is not entry:
                    continue  # taken back by a task meanwhile
                del _released[path]
                _closing.add(path)
            try:
                _close(path, entry[0])
            finally:
                with _cond:
                    _closing.discard(path)
                    _cond.notify_all()
        time.sleep(_POLL_S)


def _busy(db: Any) -> bool:
    """RocksDB runs a compaction or a flush for ``db``."""
    try:
        return any(db.property_int_value(p) for p in _BUSY)
    except Exception:  # noqa: BLE001 - a database that cannot answer is closed
        return False


def _close(path: str, db: Any) -> None:
    try:
        db.close()
    except Exception as e:  # noqa: BLE001 - e.g. its directory removed meanwhile (the job ended)
        log = logger.warning if os.path.isdir(path) else logger.debug
        log("closing the released database %s failed: %s", path, e)


def _is_under(path: str, directory: str) -> bool:
    return not directory or path == directory or path.startswith(os.path.join(directory, ""))


def _dir_id(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_dev, st.st_ino)


on_let_go(let_go_under)  # the runtime calls it before removing a working directory (sparkpoint.state.worker)
