"""Which process wrote a file, and whether it still runs: a pid, its start time and its host.

A pid alone does not name a process: the kernel reuses pids, so a file that records only a
pid may point at an unrelated process long after its writer died. A process is named here by
its pid, its start time (``/proc/<pid>/stat`` field 22, clock ticks since boot) and the host
it runs on (host name, boot id, pid namespace: the pids one can look at from here). Whether
it still runs can be proved only on its host; elsewhere it is unknown.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ProcessIdentity", "process_start_time", "resident_bytes"]


def resident_bytes() -> int:
    """This process's resident memory (``/proc/self/statm``), or 0 where the system does not tell."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def process_start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot), or ``None`` where /proc does not tell."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]  # the command may hold spaces and parentheses
    except (OSError, IndexError):
        return None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError:
        return None


def _host() -> str | None:
    """This host as processes see it: name, boot id and pid namespace (``None`` when /proc does not tell)."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"{socket.gethostname()}/{boot}/{namespace}" if boot else None


def _pid_exists(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@dataclass(frozen=True)
class ProcessIdentity:
    """A process: its pid, start time and host (``None`` where they are not known)."""

    pid: int
    started: str | None = None
    host: str | None = None

    @staticmethod
    def current() -> ProcessIdentity:
        """Returns this process's identity."""
        return ProcessIdentity(os.getpid(), process_start_time(os.getpid()), _host())

    @staticmethod
    def of(pid: int) -> ProcessIdentity:
        """The process that has pid ``pid`` on this host now."""
        return ProcessIdentity(pid, process_start_time(pid), _host())

    def to_json(self) -> dict[str, Any]:
        """Returns the identity as a JSON-ready dict."""
        return {"pid": self.pid, "started": self.started, "host": self.host}

    @staticmethod
    def from_json(entry: Mapping[str, Any]) -> ProcessIdentity:
        """Read back :meth:`to_json` (an entry with only a pid, as older versions wrote, is a pid alone)."""
        started, host = entry.get("started"), entry.get("host")
        return ProcessIdentity(
            int(entry.get("pid", -1)), None if started is None else str(started), None if host is None else str(host)
        )

    def on_this_host(self) -> bool:
        """Whether the process ran where this one runs (so that its pid can be looked at)."""
        return self.host is not None and self.host == _host()

    def host_rebooted(self) -> bool:
        """Whether the process ran on this host before it last booted (same name and pid namespace, another
        boot id): then it runs no more."""
        here = _host()
        if self.host is None or here is None:
            return False
        then, now = self.host.split("/", 2), here.split("/", 2)
        return len(then) == 3 and then[0] == now[0] and then[2] == now[2] and then[1] != now[1]

    def gone(self) -> bool | None:
        """``True`` when the process provably runs no more (on this host, its pid is free or names a process
        started at another time: a reused pid), ``False`` when it runs, ``None`` when this cannot be told here
        (another host). Without a recorded start time a live pid counts as the process."""
        if self.host is not None and not self.on_this_host():
            return None
        if not _pid_exists(self.pid):
            return True
        if self.started is None:
            return False
        now = process_start_time(self.pid)
        return now is not None and now != self.started
