"""Benchmark W3: keyed state with many keys, sparkpoint against Spark Structured Streaming, in one run.

A ``KeyedProcessFunction`` with a ``ValueState`` count per key (the first 5 hex digits of the event
id: about a million keys) emits a key when its 5th event arrives, over the seed's event files
(``bench/w1_data``), exactly-once checkpoints every 10 s into a FileSink. The same events go to
Spark's native ``groupBy(key).count()`` on the RocksDB state store and, on a smaller input (it is
slow), to ``transformWithStateInPandas`` doing exactly what sparkpoint's job does
(``bench/w3_spark.py``). Every engine's output is checked against a hand count (pandas): the keys
that reach 5 events, each once. Prints events/s and the ratios, and sparkpoint's task time per phase.

    PYTHONPATH=. .venv/bin/python bench/w3.py --events 2000000 --json w3.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.w1_data import write_event_files  # noqa: E402
from bench.w3_job import NTH, build, key_of  # noqa: E402
from bench.w3_probe import PHASES, with_probe  # noqa: E402
from bench.w3_spark import run_native, run_tws  # noqa: E402
from sparkpoint.common import Configuration  # noqa: E402
from sparkpoint.connectors.events import EventSpec, generate_events  # noqa: E402
from sparkpoint.datastream import StreamExecutionEnvironment  # noqa: E402
from sparkpoint.testing.kill_loop import read_committed_lines  # noqa: E402

FILES = 8  # input files (= Spark micro-batches)
MAX_RECORDS = 250_000  # sparkpoint's execution.epoch.max-records


def oracle(n_events: int, digits: int = 5) -> set[str]:
    """The keys (of ``digits`` hex digits) that reach ``NTH`` events, by hand."""
    counts: Counter = Counter()
    for lo in range(0, n_events, 500_000):
        lines, _ = generate_events(lo, min(n_events, lo + 500_000), EventSpec())
        counts.update(key_of(line, digits) for line in lines)
    return {k for k, c in counts.items() if c >= NTH}


def run_sparkpoint(
    spark: Any, input_dir: Path, work: Path, backend: str, max_records: int, config: dict[str, Any] | None = None
) -> dict[str, Any]:
    """W3 on sparkpoint with the ``backend`` state backend; ``config``: more configuration (``-D`` keys), set over
    the defaults but not over ``state.backend.type``; the phase listener is kept if they name other listeners."""
    settings: dict[str, Any] = {
        "execution.checkpointing.interval": "10 s",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "state.checkpoints.dir": (work / f"ck-{backend}").as_uri(),
        "execution.checkpointing.incremental": backend == "rocksdb",
        "execution.epoch.max-records": max_records,
        "execution.epoch.max-bytes": "256 mb",
        "sparkpoint.local-state-dir": str(work / f"ls-{backend}"),
        **(config or {}),
        "state.backend.type": backend,
    }
    settings["execution.job-listeners"] = with_probe(settings.get("execution.job-listeners"))
    conf = Configuration()
    for key, value in settings.items():
        conf.set(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.set_spark_session(spark)
    out = work / f"out-{backend}"
    build(env, str(input_dir), str(out))
    PHASES.reset()
    t0 = time.perf_counter()
    env.execute(f"w3-{backend}")
    return {
        "seconds": time.perf_counter() - t0,
        "lines": read_committed_lines(out),
        "epochs": PHASES.epochs,
        "phase_ms": dict(PHASES.phase_ms),
    }


def check_keys(name: str, got: list[str], expected: set[str]) -> bool:
    """Print and return whether ``got`` holds every expected key exactly once and nothing else."""
    if not expected:
        print(f"  {name}: no key reaches {NTH} events in this input: the check below compares empty sets")
    ok = Counter(got) == Counter(expected)
    extra, missing = len(set(got) - expected), len(expected - set(got))
    print(
        f"  {name}: {len(got):,} keys emitted, {len(expected):,} expected: "
        f"{'OK' if ok else f'WRONG ({missing} missing, {extra} extra, {len(got) - len(set(got))} twice)'}"
    )
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--files", type=int, default=FILES)
    p.add_argument("--tws-events", type=int, default=100_000, help="transformWithStateInPandas's input (0 skips)")
    p.add_argument("--backends", default="rocksdb", help="sparkpoint state backends to run (rocksdb,hashmap)")
    p.add_argument("--max-records", type=int, default=MAX_RECORDS, help="execution.epoch.max-records")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from bench.w1_spark import make_spark_session

    work = Path(tempfile.mkdtemp(prefix="w3-bench-"))
    results: dict[str, Any] = {
        "command": " ".join(["bench/w3.py"] + (argv or sys.argv[1:])),
        "loadavg_start": os.getloadavg(),
        "events": args.events,
    }
    try:
        write_event_files(work / "input", args.events, args.files)
        expected = oracle(args.events)
        print(f"{args.events:,} events in {args.files} files; {len(expected):,} keys reach {NTH} events")
        spark = make_spark_session("sparkpoint-bench-w3")
        native = run_native(spark, work / "input", work / "native-ck")
        rate = args.events / native["seconds"]
        print(f"Spark native groupBy(key).count(), RocksDB state store: {native['seconds']:.1f} s, {rate:,.0f} ev/s")
        ok = check_keys("native (keys with count >= 5)", sorted(native["keys"]), expected)
        results["native"] = {"seconds": native["seconds"], "events_per_s": rate, "ok": ok}
        for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
            run = run_sparkpoint(spark, work / "input", work, backend, args.max_records)
            sp_rate = args.events / run["seconds"]
            print(
                f"sparkpoint, {backend}: {run['seconds']:.1f} s, {sp_rate:,.0f} ev/s ({run['epochs']} epochs), "
                f"{sp_rate / rate:.2f}x Spark native"
            )
            print(
                "  task time per phase, all tasks (s): "
                + " ".join(f"{k} {v / 1000:.1f}" for k, v in sorted(run["phase_ms"].items()))
            )
            ok = check_keys(f"sparkpoint {backend}", run["lines"], expected) and ok
            results[f"sparkpoint_{backend}"] = {
                "seconds": run["seconds"],
                "events_per_s": sp_rate,
                "ratio_to_native": sp_rate / rate,
                "phase_ms": run["phase_ms"],
            }
        if args.tws_events:
            write_event_files(work / "tws-input", args.tws_events, 2)
            # fewer events (it is slow), so keys of 4 hex digits: some do reach 5 events and the check means something
            tws = run_tws(spark, work / "tws-input", work / "tws-ck", digits=4)
            tws_rate = args.tws_events / tws["seconds"]
            ours = results.get("sparkpoint_rocksdb", {}).get("events_per_s", float("nan"))
            print(
                f"Spark transformWithStateInPandas ({args.tws_events:,} events, keys of 4 hex digits): "
                f"{tws['seconds']:.1f} s, {tws_rate:,.0f} ev/s; sparkpoint (W3) is {ours / tws_rate:.1f}x that"
            )
            expected_tws = oracle(args.tws_events, digits=4)
            ok = check_keys("transformWithStateInPandas", tws["emitted"], expected_tws) and bool(expected_tws) and ok
            results["tws"] = {
                "seconds": tws["seconds"],
                "events_per_s": tws_rate,
                "events": args.tws_events,
                "keys_reaching_5": len(expected_tws),
            }
        results["ok"] = ok
        print("ALL CHECKS OK" if ok else "CHECKS FAILED")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return 0 if results.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
