"""Where a command's CPU went, by process: its driver, the JVM (its JIT compiler threads apart) and the Python
workers, read from ``/proc`` every 0.1 s while it runs (the last reading of each process counts, so a process that
ends between two readings loses at most 0.1 s; every JVM counts as JVM, Spark's launcher too).

    PYTHONPATH=. .venv/bin/python bench/cpu_split.py -- .venv/bin/sparkpoint run -D sparkpoint.jvm.c1-only=false \\
        bench/nexmark/job.py --query q2 --input EVENTS --output OUT
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.procs import _cmdline, _descendants  # noqa: E402

_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu(stat_path: str) -> tuple[str, float] | None:
    """A process's or thread's name and CPU seconds (user + system)."""
    try:
        with open(stat_path, encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return text[text.index("(") + 1 : text.rindex(")")], (int(fields[11]) + int(fields[12])) / _TICKS


def _kind(pid: str) -> str:
    cmd = _cmdline(pid)
    if b"pyspark.daemon" in cmd or b"pyspark.worker" in cmd or b"spark.daemon" in cmd:
        return "Python workers"
    if b"java" in cmd.split(b"\0")[0]:
        return "JVM"
    return "driver and others"


#: threads counted apart, by the kind of their process: (name prefixes, the row they go to)
_THREADS = {"JVM": (("C1 Compiler", "C2 Compiler"), "JIT"), "Python workers": (("rocksdb:",), "RocksDB")}


def sample(root: int, seen: dict[tuple[str, str], tuple[str, float]]) -> None:
    """The CPU so far of ``root``, of every process below it, of each JVM's JIT compiler threads and of the Python
    workers' RocksDB threads (flushes, compactions), into ``seen`` (a process's own figure includes its threads that
    ended; a counted thread that ended between two readings loses what it spent since the last)."""
    for pid in [str(root), *_descendants(str(root))]:
        got = _cpu(f"/proc/{pid}/stat")
        if got is None:
            continue
        kind = _kind(pid)
        seen[(pid, "")] = (kind, got[1])
        if kind not in _THREADS:
            continue
        prefixes, row = _THREADS[kind]
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in threads:
            thread = _cpu(f"/proc/{pid}/task/{tid}/stat")
            if thread is not None and thread[0].startswith(prefixes):
                seen[(pid, tid)] = (row, thread[1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", nargs=argparse.REMAINDER, help="after --: the command to run")
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command")
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
        seen: dict[tuple[str, str], tuple[str, float]] = {}
        while proc.poll() is None:
            sample(proc.pid, seen)
            time.sleep(0.1)
        if proc.returncode != 0:
            err.seek(0)
            sys.stderr.write(err.read()[-3000:].decode(errors="replace"))
    wall = time.perf_counter() - start
    by_kind: Counter = Counter()
    for kind, seconds in seen.values():
        by_kind[kind] += seconds
    jit, rocksdb = by_kind.pop("JIT", 0.0), by_kind.pop("RocksDB", 0.0)
    rows = {"JVM: JIT compiler": jit, "JVM: the rest": by_kind.pop("JVM", 0.0) - jit}
    rows["Python workers: RocksDB threads"] = rocksdb
    rows["Python workers: the rest"] = by_kind.pop("Python workers", 0.0) - rocksdb
    rows.update(sorted(by_kind.items()))
    print(f"exit {proc.returncode}, wall {wall:.2f} s; CPU seconds (this sampler's own not counted):")
    for kind, seconds in rows.items():
        print(f"  {kind:32s} {seconds:7.2f}")
    print(f"  {'all':32s} {sum(rows.values()):7.2f}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
