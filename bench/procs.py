"""The processes below this driver (the JVM, PySpark's daemon and its Python workers), read from ``/proc``:
their peak memory (:class:`RssSampler`) and the CPU time they used (:func:`cpu_seconds`)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds() -> float:
    """CPU time (user + system) used so far by this process and every process below it, reaped ones included
    (a process's ``cutime``/``cstime`` hold its reaped children's): the difference over a run is what the run
    cost the machine, whatever else ran on it meanwhile."""
    total = 0
    for pid in [str(os.getpid()), *_descendants(str(os.getpid()))]:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile: its time is in its parent's cutime once reaped
        total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / _TICKS


def _status(pid: str) -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    out[line[:5]] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return out


def _descendants(root: str) -> list[str]:
    """Processes below ``root`` (this driver: the JVM, PySpark's daemon and its workers)."""
    children: dict[str, list[str]] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                ppid = fh.read().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            continue
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


class RssSampler:
    """Peak memory of PySpark's Python daemon/workers, the JVM and this driver (processes
    below this one), sampled from ``/proc/*/status`` every ``interval_s`` in a background
    thread: VmHWM of each process seen (reset at the start through ``clear_refs``, so
    peaks between samples are not missed) and the largest sum of the workers' VmRSS."""

    def __init__(self, interval_s: float = 0.25, root: int | None = None):
        self.interval_s = interval_s
        self.root = str(root) if root is not None else None  # another process (and those below it) instead of this one
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.worker_peak = 0  # largest single Python worker/daemon (VmHWM)
        self.workers_sum_peak = 0  # largest sum of VmRSS over all of them at one sample
        self.jvm_peak = 0
        self.driver_peak = 0
        self.python_sum_peak = 0  # largest sum of VmRSS over every Python process below (a child driver too)
        self.workers_seen: set[str] = set()

    def __enter__(self) -> RssSampler:
        # reset the peak RSS (VmHWM) of this driver, the JVM and the reused Python workers, so
        # that the peaks are this run's
        top = self.root or str(os.getpid())
        for pid in [top, *_descendants(top)]:
            with contextlib.suppress(OSError):
                Path(f"/proc/{pid}/clear_refs").write_text("5")
        self._thread = threading.Thread(target=self._loop, name="w2-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def sample(self) -> None:
        me = self.root or str(os.getpid())
        driver = _status(me)
        self.driver_peak = max(self.driver_peak, driver.get("VmHWM", 0))
        total, python = 0, driver.get("VmRSS", 0) if self.root else 0
        for pid in _descendants(me):
            cmd = _cmdline(pid)
            program = cmd.split(b"\0")[0]
            if b"pyspark.daemon" in cmd or b"pyspark.worker" in cmd:
                st = _status(pid)
                self.workers_seen.add(pid)
                self.worker_peak = max(self.worker_peak, st.get("VmHWM", 0))
                total += st.get("VmRSS", 0)
                python += st.get("VmRSS", 0)
            elif b"java" in program:
                self.jvm_peak = max(self.jvm_peak, _status(pid).get("VmHWM", 0))
            elif b"python" in program:
                python += _status(pid).get("VmRSS", 0)
        self.workers_sum_peak = max(self.workers_sum_peak, total)
        self.python_sum_peak = max(self.python_sum_peak, python)

    def to_json(self) -> dict[str, int]:
        return {
            "worker_peak_bytes": self.worker_peak,
            "workers_sum_peak_bytes": self.workers_sum_peak,
            "jvm_peak_bytes": self.jvm_peak,
            "driver_peak_bytes": self.driver_peak,
            "python_sum_peak_bytes": self.python_sum_peak,
            "python_processes_seen": len(self.workers_seen),
        }


def timed(cmd: list[str], cwd: Path, env: dict | None = None, memory: dict | None = None) -> float:
    """The wall seconds of ``cmd``; with ``memory``, also the peak memory of its processes (``bench.procs``)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if memory is None:
        out, err = proc.communicate()
    else:
        with RssSampler(0.1, root=proc.pid) as rss:
            out, err = proc.communicate()
        memory.update(rss.to_json())
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])} ... failed:\n{out[-2000:]}\n{err[-3000:]}")
    return seconds
