"""W1 before and after a change, with Spark's own engine as the peer, in one run.

A refactoring must not make the seed job slower. This script measures three things on
the same input, interleaved so that a busy machine hurts them alike:

* **spark** — Spark Structured Streaming's own windowed count (``bench.w1_spark``);
* **before** — sparkpoint's seed job (``examples/behavior_counts.py``) on the code of a
  git revision (``--before``, checked out into a temporary worktree);
* **after** — the same job on the code of this checkout.

Each measurement runs in a fresh process (its own SparkSession, ``local[2]``), warms up on
a small input, then times ``env.execute()`` over the full input and checks the output
exactly against the pandas oracle (``bench.w1_data.oracle_counts``). It prints every
figure, the medians and the ratios after/before and sparkpoint/spark.

Run::

    .venv/bin/python bench/w1_compare.py --before 4a73179 --events 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path.insert(0, str(REPO))

WARMUP_EVENTS = 100_000


def _child(args: argparse.Namespace) -> None:
    """One measurement in this process: ``--engine spark`` or sparkpoint from ``--tree``."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    sys.path.insert(0, args.tree)  # the driver imports the same sparkpoint as the workers (PYTHONPATH)
    from bench.w1_data import oracle_counts
    from bench.w1_spark import make_spark_session, run_spark_streaming

    spark = make_spark_session("w1-compare")
    work = Path(args.work)
    if args.engine == "spark":
        run_spark_streaming(args.warmup, work / "warm-out", spark)
        res = run_spark_streaming(args.input, work / "out", spark)
        print(json.dumps({"seconds": res["seconds"], "events": res["events"], "ok": True}))
        return
    sys.path.insert(0, str(REPO / "examples"))
    import behavior_counts

    from bench.w1 import check_exact, read_sparkpoint_output
    from sparkpoint.common.configuration import Configuration
    from sparkpoint.datastream import StreamExecutionEnvironment

    def run(input_dir: str, out: Path) -> float:
        conf = Configuration()
        conf.set("execution.epoch.max-records", args.max_records)
        conf.set("execution.epoch.max-bytes", "256 mb")
        conf.set("sparkpoint.local-state-dir", str(out) + "-state")
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(2)
        env.set_spark_session(spark)
        job_args = argparse.Namespace(input=input_dir, output=str(out), window_size_millis=60_000,
                                      window_lagged_millis=50_000, kafka=None, jdbc_url=None, parquet=False)
        if hasattr(behavior_counts, "parse_args"):  # a revision that has it: every option with its default
            job_args = behavior_counts.parse_args(["--input", input_dir, "--output", str(out)])
        behavior_counts.build(env, job_args)
        t0 = time.perf_counter()
        env.execute("w1")
        return time.perf_counter() - t0

    run(args.warmup, work / "warm-out")
    seconds = run(args.input, work / "out")
    got, hidden = read_sparkpoint_output(work / "out")
    check = check_exact(got, oracle_counts(args.events))
    print(json.dumps({"seconds": seconds, "events": args.events, "ok": bool(check["ok"] and not hidden)}))


def _measure(engine: str, tree: Path, data: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--engine", engine, "--tree", str(tree),
           "--input", str(data / "input"), "--warmup", str(data / "warmup"), "--work", str(work),
           "--events", str(args.events), "--max-records", str(args.max_records)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tree)
    if proc.returncode != 0:
        raise RuntimeError(f"{engine} run failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["events_per_s"] = result["events"] / result["seconds"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="HEAD~1", help="git revision to compare against")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--max-records", type=int, default=250_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--engine", default="sparkpoint", help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--warmup", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args)
        return 0

    from bench.w1_data import write_event_files

    root = Path(tempfile.mkdtemp(prefix="w1-compare-"))
    before_tree = root / "before"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(before_tree), args.before],
                   check=True, capture_output=True)
    try:
        write_event_files(root / "input", args.events, args.files)
        write_event_files(root / "warmup", WARMUP_EVENTS, 2)
        runs: dict[str, list[dict[str, Any]]] = {"spark": [], "before": [], "after": []}
        for rep in range(args.repeat):
            for label, engine, tree in (("spark", "spark", REPO), ("before", "sparkpoint", before_tree),
                                        ("after", "sparkpoint", REPO)):
                res = _measure(engine, tree, root, root / f"{label}-{rep}", args)
                runs[label].append(res)
                print(f"rep {rep} {label:6s}: {res['events']:,} events in {res['seconds']:.2f} s = "
                      f"{res['events_per_s'] / 1e6:.3f} M events/s, output {'exact' if res['ok'] else 'WRONG'}",
                      flush=True)
        med = {k: statistics.median(r["events_per_s"] for r in v) for k, v in runs.items()}
        print(f"\nmedian events/s: spark {med['spark']:,.0f}, before ({args.before}) {med['before']:,.0f}, "
              f"after {med['after']:,.0f}")
        print(f"after/before {med['after'] / med['before']:.3f}; sparkpoint/spark before "
              f"{med['before'] / med['spark']:.3f}, after {med['after'] / med['spark']:.3f}")
        return 0 if all(r["ok"] for v in runs.values() for r in v) else 1
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(before_tree)],
                       capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
