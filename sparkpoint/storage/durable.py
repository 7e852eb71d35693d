"""Durable writes on local file systems: what a power loss cannot take once a write has returned.

A rename makes a file appear whole, but neither its bytes nor the new name are on the disk
until they are synced: after a power loss, a ``_metadata`` renamed into place may be there
while the state files it points to are empty or gone. As RocksDB writes its MANIFEST, every
file of a checkpoint is therefore written to a temporary name, its bytes ``fsync``-ed,
renamed into place, and its directory ``fsync``-ed (the name); a directory's own entry in
its parent is ``fsync``-ed once, the first time a file is written into it (or when it is
created here), up to the first directory already known to be durable. Since every state
file, shared SST file and changelog segment goes through :func:`write_bytes` or
:func:`copy_file` before the checkpoint's ``_metadata`` is written, the ``_metadata`` a
restore finds never names bytes that a power loss can take.

This applies to local file systems (fsspec's ``file://``, and any mount it reaches). An
object store makes an object durable when its PUT returns, and other file systems
(``hdfs://`` ...) sync as their clients do: nothing is added there. ``sparkpoint.checkpoints.fsync:
false`` turns the syncing off (files are still renamed into place): for a disk whose contents need not
survive a power loss (a RAM disk, a test machine), where the ``fsync`` calls only cost time.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from sparkpoint.storage.file_systems import FSYNC_OPTION

__all__ = ["copy_file", "make_dirs", "sync_directory", "sync_existing_file", "syncs", "write_bytes"]

# errors of fsync on a directory that mean "this file system does not sync directories", not "the data is lost"
_UNSUPPORTED = frozenset(
    {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF, errno.EACCES, errno.EPERM, errno.EISDIR}
)

_lock = threading.Lock()
# (path, st_dev, st_ino) of directories whose entry is synced, the most recent last; bounded, as every checkpoint
# and changelog epoch adds a directory (one forgotten is synced again: a cost, never a loss)
_durable_entries: OrderedDict[tuple[str, int, int], None] = OrderedDict()
MAX_REMEMBERED = 4096


def syncs(fs: Any) -> bool:
    """Whether files written to ``fs`` are synced: a local file system (its paths are this machine's), unless
    ``sparkpoint.checkpoints.fsync: false`` opened it (the ``sparkpoint_fsync`` storage option)."""
    return isinstance(fs, LocalFileSystem) and fs.storage_options.get(FSYNC_OPTION, True) is not False


def write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to the local ``path`` durably: temporary file, ``fsync``, rename, ``fsync`` of the directory."""
    _write_durably(path, lambda f: f.write(data))


def copy_file(source: str, path: str) -> None:
    """Copy the local file ``source`` to the local ``path`` durably, as :func:`write_bytes` writes bytes."""

    def copy(dst: Any) -> None:
        with open(source, "rb") as src:
            shutil.copyfileobj(src, dst, 1 << 20)

    _write_durably(path, copy)


def _write_durably(path: str, fill: Callable[[Any], Any]) -> None:
    """``fill`` a temporary file beside ``path``, ``fsync`` it, rename it to ``path``, ``fsync`` the directory."""
    parent = os.path.dirname(path)
    make_dirs(parent)
    tmp = os.path.join(parent, f".{os.path.basename(path)}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        _remove_quietly(tmp)
        raise
    sync_directory(parent)


def sync_existing_file(path: str) -> None:
    """``fsync`` a file written by someone else (a process that may have died before syncing it), and its name."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    sync_directory(os.path.dirname(path))


def make_dirs(path: str) -> None:
    """Create the local directory ``path`` and its missing parents; every directory's entry is made durable."""
    os.makedirs(path, exist_ok=True)
    _sync_entry(os.path.abspath(path))


def sync_directory(path: str) -> None:
    """``fsync`` the directory ``path`` (the names in it); a file system that cannot sync directories is passed."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as e:
        if e.errno in _UNSUPPORTED:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in _UNSUPPORTED:
            raise
    finally:
        os.close(fd)


def _sync_entry(directory: str) -> None:
    """Make the entry of ``directory`` in its parent durable, and the parent's, up to one already known durable.

    Known directories are remembered by path and inode, so one deleted and created again is synced again.
    """
    chain: list[tuple[str, int, int]] = []
    current = directory
    while True:
        parent = os.path.dirname(current)
        if parent == current:
            break
        st = os.stat(current)
        key = (current, st.st_dev, st.st_ino)
        with _lock:
            if key in _durable_entries:
                break
        chain.append(key)
        current = parent
    for key in chain:  # innermost first: each fsync makes the name of the directory below it durable
        sync_directory(os.path.dirname(key[0]))
    with _lock:
        for key in chain:
            _durable_entries[key] = None
            _durable_entries.move_to_end(key)
        while len(_durable_entries) > MAX_REMEMBERED:
            _durable_entries.popitem(last=False)


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
