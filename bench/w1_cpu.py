"""W1 on Spark, with the CPU time each kind of process spent: the driver, the JVM, the Python workers.

Events/s says how fast; this says where the machine's CPU went while it was that fast. The seed
job (``examples/behavior_counts.py``, its ``process()`` count, no checkpoints) runs on a local
SparkSession (``bench.w1_spark.make_spark_session``) after a warm-up, and the CPU time of every
process on the machine is read from ``/proc`` before and after the timed run only:

    PYTHONPATH=. .venv/bin/python bench/w1_cpu.py --events 3000000 --files 6

For a profile of the Python workers, run it under a sampling profiler that follows child processes,
e.g. ``py-spy record --format raw --subprocesses -o workers.txt -- .venv/bin/python bench/w1_cpu.py``
(py-spy is not one of the project's dependencies).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ["PYSPARK_PYTHON"] = sys.executable

from bench import w1  # noqa: E402
from bench.w1_data import write_event_files  # noqa: E402
from bench.w1_spark import make_spark_session  # noqa: E402

_HZ = os.sysconf("SC_CLK_TCK")


def cpu_snapshot() -> tuple[list[int], Counter]:
    """The machine's CPU counters (``/proc/stat``) and the CPU ticks of every process, by kind."""
    with open("/proc/stat") as f:
        machine = [int(x) for x in f.readline().split()[1:]]
    ticks: Counter = Counter()
    me = os.getpid()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended meanwhile
            continue
        kind = (
            "driver"
            if int(pid) == me
            else "JVM"
            if "java" in command
            else "Python workers"
            if "pyspark" in command
            else "other"
        )
        ticks[kind] += int(fields[11]) + int(fields[12])  # utime + stime
    return machine, ticks


def print_cpu(before: tuple[list[int], Counter], after: tuple[list[int], Counter], seconds: float) -> None:
    (m0, t0), (m1, t1) = before, after
    total = sum(m1) - sum(m0)
    idle = (m1[3] + m1[4]) - (m0[3] + m0[4])
    print(f"wall {seconds:.2f} s, machine idle {100 * idle / total:.1f} % of {os.cpu_count()} CPUs")
    for kind in sorted(t1):
        print(f"  {kind:15s} {(t1[kind] - t0.get(kind, 0)) / _HZ:6.2f} s CPU")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3_000_000)
    parser.add_argument("--files", type=int, default=6)
    parser.add_argument("--max-records", type=int, default=250_000)
    parser.add_argument("--warmup-events", type=int, default=200_000)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="w1-cpu-"))
    try:
        write_event_files(work / "input", args.events, args.files)
        write_event_files(work / "warmup", args.warmup_events, 2)
        spark = make_spark_session()
        for name in ("warmup", "input"):
            before = cpu_snapshot()
            res = w1.run_sparkpoint(
                work / name, work / f"out-{name}", work / f"state-{name}", spark=spark, max_records=args.max_records
            )
            after = cpu_snapshot()
            print(f"{name}: {res['events']:,} events in {res['seconds']:.2f} s = {res['events_per_s']:,.0f} events/s")
        print_cpu(before, after, res["seconds"])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
