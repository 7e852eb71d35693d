"""What a checkpoint's files went through on disk, and whether a power loss could take what ``_metadata`` names.

An :class:`Events` log holds, in order, the ``fsync``, rename and ``mkdir`` calls of a run: recorded by
wrapping ``os`` in this process (:func:`record_os_calls`, the in-process executor) or read from
``strace -f -y`` of a child process (:func:`parse_strace`, a run on Spark, whose tasks write from Python
workers). :func:`assert_durable` checks one completed checkpoint against it, as the discipline of a
durable rename asks: every file ``_metadata`` names (state files, shared SST files, changelog
segments) was synced under its temporary name, renamed, and its directory synced, all before
``_metadata``'s own rename; ``_metadata`` itself was synced before its rename and the checkpoint
directory after it; every directory created on the way got its parent synced before ``_metadata``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.loader import load_checkpoint

__all__ = ["Events", "assert_durable", "parse_strace", "record_os_calls"]


@dataclass
class Events:
    """``(op, path, target)`` in the order they happened: ``fsync`` (path synced), ``rename`` (path -> target),
    ``mkdir`` (path created)."""

    log: list[tuple[str, str, str | None]] = field(default_factory=list)

    def add(self, op: str, path: str, target: str | None = None) -> None:
        self.log.append((op, os.path.realpath(path), None if target is None else os.path.realpath(target)))

    def indexes(self, op: str, path: str) -> list[int]:
        return [i for i, (o, p, _) in enumerate(self.log) if o == op and p == path]

    def renames_to(self, target: str) -> list[tuple[int, str]]:
        return [(i, p) for i, (o, p, t) in enumerate(self.log) if o == "rename" and t == target]


def record_os_calls(monkeypatch: Any) -> Events:
    """Log this process's ``os.fsync``, ``os.replace``/``os.rename`` and ``os.mkdir`` calls (each after it
    succeeded) into the returned :class:`Events`."""
    events = Events()
    fsync, replace, rename, mkdir = os.fsync, os.replace, os.rename, os.mkdir

    def logged_fsync(fd: Any) -> None:
        fsync(fd)
        number = fd if isinstance(fd, int) else fd.fileno()
        events.add("fsync", os.readlink(f"/proc/self/fd/{number}"))

    def logged_rename(call: Any) -> Any:
        def wrapped(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            call(src, dst, *args, **kwargs)
            events.add("rename", os.fspath(src), os.fspath(dst))

        return wrapped

    def logged_mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
        mkdir(path, *args, **kwargs)
        events.add("mkdir", os.path.abspath(os.fspath(path)))

    monkeypatch.setattr(os, "fsync", logged_fsync)
    monkeypatch.setattr(os, "replace", logged_rename(replace))
    monkeypatch.setattr(os, "rename", logged_rename(rename))
    monkeypatch.setattr(os, "mkdir", logged_mkdir)
    return events


_CALL = re.compile(r"^\d+\s+(?P<call>fsync|fdatasync|rename|renameat2?|mkdir|mkdirat)\((?P<args>.*)\)\s+=\s+0\b")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def parse_strace(text: str) -> Events:
    """The successful calls of ``strace -f -y -s 4096 -e trace=fsync,fdatasync,rename,renameat,renameat2,mkdir,
    mkdirat`` output, each at the line where it returned (a call split by another process's line is joined)."""
    events = Events()
    pending: dict[str, str] = {}  # pid -> the start of an unfinished call
    for line in text.splitlines():
        pid = line.split(" ", 1)[0]
        if line.endswith("<unfinished ...>"):
            pending[pid] = line[: -len("<unfinished ...>")].rstrip()
            continue
        resumed = re.match(r"^(\d+)\s+<\.\.\. \w+ resumed>(.*)$", line)
        if resumed:
            line = pending.pop(resumed.group(1), "") + resumed.group(2)
        m = _CALL.match(line)
        if not m:
            continue
        call, args = m.group("call"), m.group("args")
        if call in ("fsync", "fdatasync"):
            fd = re.match(r"\d+<(.*)>$", args)
            if fd:
                events.add("fsync", fd.group(1))
            continue
        paths = [bytes(s, "ascii").decode("unicode_escape") for s in _STRING.findall(args)]
        if call.startswith("rename") and len(paths) == 2:
            events.add("rename", paths[0], paths[1])
        elif call.startswith("mkdir") and paths:
            events.add("mkdir", paths[0])
    return events


def assert_durable(events: Events, chk: str, root: str) -> int:
    """Assert that checkpoint ``chk`` (a local directory) was made durable in the order of ``events``; every
    directory below ``root`` the files are in counts. Returns how many referenced files were checked."""
    chk = os.path.realpath(chk)
    meta = os.path.join(chk, "_metadata")
    renames = events.renames_to(meta)
    assert renames, f"_metadata of {chk} was not renamed into place"
    at, tmp = renames[-1]
    assert any(i < at for i in events.indexes("fsync", tmp)), f"{meta} renamed before its bytes were synced"
    assert any(i > at for i in events.indexes("fsync", chk)), f"{chk} not synced after _metadata's rename"
    metadata = load_checkpoint(chk, verify_files=False).metadata
    files = {os.path.realpath(os.path.join(chk, h.path)) for h in metadata.state_files() + metadata.shared_files()}
    assert files, f"{chk} names no files"
    for path in sorted(files):
        assert _synced_before(events, path, at), f"{path}, named by {meta}, was not durable before its rename"
    for directory in _directories_below(root, files | {meta}):
        for created in events.indexes("mkdir", directory):
            if created < at:
                parent = os.path.dirname(directory)
                assert any(created < i < at for i in events.indexes("fsync", parent)), (
                    f"{directory} was created but {parent} not synced before {meta} was renamed"
                )
    return len(files)


def _synced_before(events: Events, path: str, deadline: int) -> bool:
    """Whether ``path`` had its bytes synced, was renamed into place, and had its directory synced before
    ``deadline``, or (a file another run wrote) was synced itself, then its directory."""
    directory_synced = events.indexes("fsync", os.path.dirname(path))
    for at, tmp in events.renames_to(path):
        if (
            at < deadline
            and any(i < at for i in events.indexes("fsync", tmp))
            and any(at < i < deadline for i in directory_synced)
        ):
            return True
    return any(i < deadline and any(i < j < deadline for j in directory_synced) for i in events.indexes("fsync", path))


def _directories_below(root: str, files: set[str]) -> set[str]:
    root = os.path.realpath(root)
    out = set()
    for path in files:
        directory = os.path.dirname(path)
        while directory.startswith(root + os.sep):
            out.add(directory)
            directory = os.path.dirname(directory)
    return out
