"""W1 and W3 at default settings, end to end through the CLI, against Spark Structured Streaming in the same run.

    PYTHONPATH=. .venv/bin/python bench/defaults.py --json defaults.json
    PYTHONPATH=. .venv/bin/python bench/defaults.py --events 300000 --files 2 --repeat 1    # small

sparkpoint runs each job as a user does: ``sparkpoint run JOB ...``, a new process each time (embedded
``local[2]`` Spark, parallelism 2, exactly-once checkpoints every 10 s on local disk) and no other setting but
W3's state backend:

* **W1**: the seed's job, ``examples/behavior_counts.py --input DIR --output DIR``;
* **W3**: ``bench/w3_job.py`` on the ``rocksdb`` backend (incremental checkpoints) and on the default one (heap),
  both against Spark on its RocksDB state store.

sparkpoint's JVM keeps Spark's default driver memory (1 GB: it moves bytes, the state is in Python); Spark's
session has 4 GB (``bench.w1_spark``).

Spark Structured Streaming runs W1's windowed count (``bench.w1_spark``) and W3's ``groupBy(key).count()``
(``bench.w3_spark``, RocksDB state store) on one session in this process (``local[2]``, ``maxFilesPerTrigger``
2, ``availableNow``, its checkpoint). Events/s = events / (wall time − the same run's wall time over 1,000
events in one file), which takes out start-up and the fixed cost of a run; medians over ``--repeat`` rounds,
the engines interleaved within a round, after a warm-up round over the small input that is not counted (the
first run of each pays for cold caches and, in Spark's session, for its first query). Every output is
checked: sparkpoint's W1 windows must equal the pandas oracle's exactly, Spark's all be right with only
windows after its last watermark held back; both engines' W3 keys must be the keys that reach 5 events
(sparkpoint's each once; Spark's are collected into a set, per micro-batch the keys whose count is 5 or more).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

from bench.procs import timed  # noqa: E402
from bench.w1_data import oracle_counts, write_event_files  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SMALL = 1_000
TARGET = 1.5
CONFIGS = {  # name -> (workload, the job and its -D keys beyond the common ones)
    "W1": ("W1", ROOT / "examples" / "behavior_counts.py", []),
    "W3 rocksdb": (
        "W3",
        ROOT / "bench" / "w3_job.py",
        ["state.backend.type=rocksdb", "execution.checkpointing.incremental=true"],
    ),
    "W3 default backend": ("W3", ROOT / "bench" / "w3_job.py", []),
}
COMMON = {
    "execution.checkpointing.interval": "10 s",
    "execution.checkpointing.mode": "EXACTLY_ONCE",
    "parallelism.default": "2",
    "spark.master": "local[2]",
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=3_000_000)
    p.add_argument("--files", type=int, default=12)
    p.add_argument("--repeat", type=int, default=3, help="rounds; the figures are medians")
    p.add_argument("--configs", default=",".join(CONFIGS), help="of: " + ", ".join(CONFIGS))
    p.add_argument("-D", dest="dynamic", action="append", default=[], help="KEY=VALUE for every sparkpoint run")
    p.add_argument("--no-spark", action="store_true", help="sparkpoint only (no ratio)")
    p.add_argument("--workdir", default=None, help="kept; default a temporary directory, removed")
    p.add_argument("--json", default=None)
    return p.parse_args(argv)


def sparkpoint_cmd(name: str, inp: Path, out: Path, ck: Path, extra: list[str]) -> list[str]:
    _, job, keys = CONFIGS[name]
    settings = [f"{k}={v}" for k, v in COMMON.items()] + [f"state.checkpoints.dir={ck.as_uri()}", *keys, *extra]
    dynamic = [a for kv in settings for a in ("-D", kv)]
    job_args = [str(job), "--input", str(inp), "--output", str(out)]
    return [sys.executable, "-m", "sparkpoint.cli", "run", *dynamic, *job_args]


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.inputs = {"big": work / "in-big", "small": work / "in-small"}
        self.spark: Any = None
        self.expected: dict[tuple[str, str], Any] = {}
        self.seconds: dict[tuple[str, str], list[float]] = {}  # (config, size) -> a figure per round
        self.checks: dict[str, list[str]] = {}  # config -> what failed, per run

    def prepare(self) -> None:
        from bench.w3 import oracle as w3_oracle

        write_event_files(self.inputs["big"], self.args.events, self.args.files)
        write_event_files(self.inputs["small"], SMALL, 1)
        for size, n in (("big", self.args.events), ("small", SMALL)):
            self.expected["W1", size] = oracle_counts(n)
            self.expected["W3", size] = w3_oracle(n)
        if not self.args.no_spark:
            from bench.w1_spark import make_spark_session

            self.spark = make_spark_session("sparkpoint-bench-defaults")

    def _fresh(self, *parts: str) -> Path:
        path = self.work.joinpath(*parts)
        shutil.rmtree(path, ignore_errors=True)
        return path

    def run_sparkpoint(self, name: str, size: str) -> None:
        tag = f"{name.replace(' ', '-')}-{size}"
        out, ck = self._fresh("out", tag), self._fresh("ck", tag)
        seconds = timed(sparkpoint_cmd(name, self.inputs[size], out, ck, self.args.dynamic), ROOT)
        self._record(name, size, seconds, self._check_sparkpoint(CONFIGS[name][0], size, out))

    def _check_sparkpoint(self, workload: str, size: str, out: Path) -> str | None:
        if workload == "W1":
            from bench.w1 import check_output_dir

            check = check_output_dir(out, self.expected["W1", size])
            return None if check["ok"] else f"W1 output differs from the oracle: {check}"
        from sparkpoint.testing.kill_loop import read_committed_lines

        return _keys_check(read_committed_lines(out), self.expected["W3", size])

    def run_spark(self, workload: str, size: str) -> None:
        out, ck = self._fresh("out", f"spark-{workload}-{size}"), self._fresh("ck", f"spark-{workload}-{size}")
        start = time.perf_counter()
        if workload == "W1":
            from bench.w1_spark import read_output, run_spark_streaming, verify_output

            run = run_spark_streaming(self.inputs[size], out, self.spark, checkpoint_dir=ck, max_files_per_trigger=2)
            seconds = time.perf_counter() - start
            check = verify_output(read_output(out, self.spark), self.expected["W1", size], run["final_watermark_ms"])
            problem = None if check["ok"] else f"Spark's W1 output is wrong: {check}"
        else:
            from bench.w3_spark import run_native

            run = run_native(self.spark, self.inputs[size], ck, files_per_trigger=2)
            seconds = time.perf_counter() - start
            problem = _keys_check(sorted(run["keys"]), self.expected["W3", size])
        self._record(f"Spark SS {workload}", size, seconds, problem)

    def _record(self, name: str, size: str, seconds: float, problem: str | None) -> None:
        self.seconds.setdefault((name, size), []).append(seconds)
        failed = self.checks.setdefault(name, [])
        if problem:
            failed.append(f"{size}: {problem[:400]}")
        verdict = "OK" if not problem else "WRONG: " + problem[:200]
        print(f"  {name:<22} {size:<5} {seconds:7.2f} s  {verdict}", flush=True)

    def rate(self, name: str) -> float | None:
        """Events/s from the medians of the rounds' big and small runs."""
        big, small = self.seconds.get((name, "big")), self.seconds.get((name, "small"))
        if not big or not small:
            return None
        seconds = statistics.median(big) - statistics.median(small)
        return self.args.events / seconds if seconds > 0 else None


def _keys_check(got: list[str], expected: set[str]) -> str | None:
    """None if ``got`` holds every expected key exactly once and nothing else, else what differs."""
    if len(got) == len(set(got)) and set(got) == expected:
        return None
    return (
        f"{len(got):,} keys emitted, {len(expected):,} expected: {len(expected - set(got))} missing, "
        f"{len(set(got) - expected)} extra, {len(got) - len(set(got))} twice"
    )


def table(bench: Bench, names: list[str]) -> tuple[list[dict[str, Any]], bool]:
    rows, ok = [], True
    print(f"\n{'configuration':<22} {'sparkpoint ev/s':>16} {'Spark SS ev/s':>14} {'ratio':>7}  target  checks")
    for name in names:
        workload = CONFIGS[name][0]
        ours, peer = bench.rate(name), bench.rate(f"Spark SS {workload}")
        failed = bench.checks.get(name, []) + bench.checks.get(f"Spark SS {workload}", [])
        ratio = ours / peer if ours and peer else None
        met = ratio is not None and ratio >= TARGET
        ok = ok and not failed
        print(
            f"{name:<22} {f'{ours:,.0f}' if ours else '-':>16} {f'{peer:,.0f}' if peer else '-':>14} "
            f"{f'{ratio:.2f}x' if ratio else '-':>7}  {'met' if met else 'NOT MET'}  {'OK' if not failed else 'WRONG'}"
        )
        rows.append({"config": name, "sparkpoint_events_per_s": ours, "spark_events_per_s": peer, "ratio": ratio,
                     "target_met": met, "failed_checks": failed})  # fmt: skip
    return rows, ok


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configurations: {unknown}; known: {list(CONFIGS)}")
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="defaults-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    bench = Bench(args, work)
    try:
        bench.prepare()
        workloads = sorted({CONFIGS[n][0] for n in names})
        print("warm-up (not counted): every engine once over the small input", flush=True)
        for name in names:
            bench.run_sparkpoint(name, "small")
        for workload in [] if args.no_spark else workloads:
            bench.run_spark(workload, "small")
        bench.seconds.clear()
        for round_no in range(1, args.repeat + 1):
            print(f"round {round_no} of {args.repeat} ({args.events:,} events in {args.files} files)", flush=True)
            for size in ("small", "big"):
                for name in names:
                    bench.run_sparkpoint(name, size)
                for workload in [] if args.no_spark else workloads:
                    bench.run_spark(workload, size)
        rows, ok = table(bench, names)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print("ALL CHECKS OK" if ok else "CHECKS FAILED")
    if args.json:
        result = {"command": " ".join(["bench/defaults.py", *(argv if argv is not None else sys.argv[1:])]),
                  "events": args.events, "files": args.files, "repeat": args.repeat, "rows": rows, "ok": ok,
                  "seconds": {f"{n}|{s}": v for (n, s), v in bench.seconds.items()}}  # fmt: skip
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
