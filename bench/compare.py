"""W1, W2 and W3 before and after a change, with Spark's own engine as the peer, in one run.

A change must not make the benchmarks slower. In one invocation this script measures the quick
forms of W1 (the seed job's windowed count), W2 (keyed state with a small change per epoch) and
W3 (keyed state with many keys) on:

* **before** — the code of a git revision (``--before REV``, checked out into a temporary
  ``git worktree`` that is removed afterwards, or an existing checkout, ``--before-tree PATH``);
* **after** — the code of this checkout, uncommitted changes included;
* **spark** — Spark Structured Streaming running the same workload (W1's windowed count, W2's and
  W3's ``groupBy(key).count()`` on the RocksDB state store).

Rounds are interleaved (``--repeat``): in each round every workload runs Spark, then before and
after, alternating which of the two goes first from one round to the next, so that a busy machine
hurts both alike. Each measurement is a fresh process with its own SparkSession (``local[2]``)
whose ``PYTHONPATH`` is the tree under test (:mod:`bench.compare_tree`: the driver and Spark's
Python workers import the same ``sparkpoint``, checked); it warms up on a small input, then times
one run and checks its output against the workload's oracle (:mod:`bench.compare_workloads`). It
prints every figure, the medians, and the ratios after/before and sparkpoint/spark per workload;
``--json`` writes them all. The exit status is 1 if any run failed or any output was wrong.

    .venv/bin/python bench/compare.py --before 5cfada9 --repeat 2 --json compare.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare_tree import (  # noqa: E402
    REPO,
    check_workers,
    describe_tree,
    enter_tree,
    import_root,
    median,
    revision_tree,
    run_child,
)
from bench.compare_workloads import WORKLOADS, measure, prepare  # noqa: E402

SCRIPT = Path(__file__).resolve()
UNITS = {"w1": "events/s", "w2": "hot-epoch records/s", "w3": "events/s"}
W2_RUNS = ("hashmap-full", "rocksdb-full", "rocksdb-incremental")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    side = p.add_mutually_exclusive_group()
    side.add_argument("--before", metavar="REV", help="git revision to compare against (a temporary worktree)")
    side.add_argument("--before-tree", type=Path, metavar="PATH", help="an existing checkout to compare against")
    p.add_argument("--workloads", default="w1,w2,w3", help="which of w1,w2,w3 (default all)")
    p.add_argument("--repeat", type=int, default=2, help="interleaved rounds (default 2)")
    p.add_argument("--no-spark", action="store_true", help="skip Spark's own engine (the peer)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds one measurement may take (default 1800)")
    p.add_argument("--workdir", type=Path, help="kept (default: a temporary directory, removed)")
    p.add_argument("--json", type=Path, help="also write every figure as JSON here")
    p.add_argument("--w1-events", type=int, default=2_000_000)
    p.add_argument("--w1-files", type=int, default=4)
    p.add_argument("--w1-max-records", type=int, nargs="+", default=[250_000], help="execution.epoch.max-records")
    p.add_argument("--w2-keys", type=int, default=200_000)
    p.add_argument("--w2-hot-epochs", type=int, default=5)
    p.add_argument("--w2-hot-records", type=int, default=200_000)
    p.add_argument("--w2-load-records", type=int, default=1_000_000)
    p.add_argument("--w2-touch-fraction", type=float, default=0.01)
    p.add_argument(
        "--w2-runs",
        default="rocksdb-incremental",
        help=f"backend-checkpoints of sparkpoint's W2 runs, of {','.join(W2_RUNS)}",
    )
    p.add_argument("--w2-no-restore", action="store_true", help="skip W2's restore run (from the last checkpoint)")
    p.add_argument("--w3-events", type=int, default=1_000_000)
    p.add_argument("--w3-files", type=int, default=4)
    p.add_argument("--w3-backends", default="rocksdb", help="state backends of sparkpoint's W3 runs")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is None and args.before is None and args.before_tree is None:
        p.error("give --before REV or --before-tree PATH")
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    if not args.workloads or set(args.workloads) - set(WORKLOADS):
        p.error(f"--workloads {','.join(args.workloads)}: expected some of {','.join(WORKLOADS)}")
    w2_runs = [r.strip() for r in args.w2_runs.split(",") if r.strip()]
    if set(w2_runs) - set(W2_RUNS):
        p.error(f"--w2-runs {args.w2_runs}: expected some of {','.join(W2_RUNS)}")
    args.variants = {
        "w1": [f"max-records-{n}" for n in args.w1_max_records],
        "w2": w2_runs,
        "w3": [b.strip() for b in args.w3_backends.split(",") if b.strip()],
    }
    return args


def _sizes(args: argparse.Namespace) -> dict[str, Any]:
    return {k: v for k, v in vars(args).items() if k.startswith(("w1_", "w2_", "w3_"))} | {
        "w2_restore": not args.w2_no_restore
    }


# -- a child: one measurement ---------------------------------------------------------------------


def child(spec: dict[str, Any]) -> None:
    """One measurement in this process; prints its result as JSON on the last line."""
    t0 = time.perf_counter()
    package = enter_tree(spec["path"])
    from bench.w1_spark import make_spark_session

    spark = make_spark_session(f"compare-{spec['workload']}-{spec['side']}")
    try:
        check_workers(spark, package)
        t1 = time.perf_counter()
        result = measure(
            spark,
            spec["workload"],
            "spark" if spec["side"] == "spark" else "sparkpoint",
            spec["variant"],
            spec["data"],
            Path(spec["work"]),
        )
        t2 = time.perf_counter()
    finally:
        spark.sparkContext.setLogLevel("ERROR")
        spark.stop()
    # start-up: interpreter, imports, SparkSession, the workers' check; measure: warm-up, timed run and check
    result["phases_s"] = {"start": round(t1 - t0, 1), "measure": round(t2 - t1, 1)}
    print(json.dumps({**result, "sparkpoint": package}, default=str))


# -- the parent: rounds, figures, summary ----------------------------------------------------------


def _measure(spec: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    work = Path(spec["work"])
    work.mkdir(parents=True)
    t0 = time.perf_counter()
    try:
        result = run_child(SCRIPT, ["--child", json.dumps(spec)], Path(spec["path"]), timeout_s)
    except RuntimeError as e:
        result = {"rate": float("nan"), "seconds": float("nan"), "ok": False, "error": str(e)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["process_s"] = time.perf_counter() - t0
    return {k: spec[k] for k in ("round", "workload", "variant", "side")} | result


def _print_run(run: dict[str, Any], rounds: int) -> None:
    head = f"round {run['round'] + 1}/{rounds} {run['workload']} {run['variant']:<20} {run['side']:<6}"
    if "error" in run:
        print(f"{head}: FAILED\n{run['error']}", flush=True)
        return
    detail = ", ".join(f"{k} {_fmt(v)}" for k, v in run.get("detail", {}).items())
    phases = run.get("phases_s", {})
    print(
        f"{head}: {run['rate']:>12,.0f} {UNITS[run['workload']]} (timed {run['seconds']:.2f} s; process "
        f"{run['process_s']:.0f} s: start {phases.get('start')}, warm-up + run + check {phases.get('measure')}), "
        f"output {'exact' if run['ok'] else 'WRONG'}; {detail}",
        flush=True,
    )


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, list):
        return "[" + " ".join(_fmt(v) for v in value) + "]"
    return f"{value:,}" if isinstance(value, int) else str(value)


def run_rounds(
    args: argparse.Namespace, data: dict[str, Any], paths: dict[str, Path], root: Path
) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for rnd in range(args.repeat):
        order = ("before", "after") if rnd % 2 == 0 else ("after", "before")
        for workload in args.workloads:
            plan = [("spark", "spark")] if not args.no_spark else []
            plan += [(side, variant) for variant in args.variants[workload] for side in order]
            for side, variant in plan:
                spec = {
                    "round": rnd,
                    "workload": workload,
                    "variant": variant,
                    "side": side,
                    "path": str(paths["after" if side == "spark" else side]),
                    "data": data[workload],
                    "work": str(root / "runs" / f"{rnd}-{workload}-{variant}-{side}"),
                }
                run = _measure(spec, args.timeout)
                _print_run(run, args.repeat)
                runs.append(run)
    return runs


def summarize(runs: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per workload and variant: the median rate of each side and the ratios; per round after/before."""
    rows = []
    for workload in args.workloads:
        spark = [r for r in runs if r["workload"] == workload and r["side"] == "spark"]
        for variant in args.variants[workload]:
            case = [r for r in runs if r["workload"] == workload and r["variant"] == variant]
            med = {
                side: median([r["rate"] for r in case if r["side"] == side and "error" not in r])
                for side in ("before", "after")
            }
            med["spark"] = median([r["rate"] for r in spark if "error" not in r])
            by_round = {(r["round"], r["side"]): r["rate"] for r in case if "error" not in r}
            per_round = [
                by_round[(i, "after")] / by_round[(i, "before")]
                for i in range(args.repeat)
                if (i, "after") in by_round and (i, "before") in by_round
            ]
            details = {
                side: {
                    k: median(
                        [
                            r["detail"][k]
                            for r in case
                            if r["side"] == side and isinstance(r.get("detail", {}).get(k), (int, float))
                        ]
                    )
                    for k in ("hot_median_s", "checkpoint_ms", "restore_first_epoch_s")
                    if any(k in r.get("detail", {}) for r in case)
                }
                for side in ("before", "after")
            }
            rows.append(
                {
                    "workload": workload,
                    "variant": variant,
                    "unit": UNITS[workload],
                    "median": med,
                    "after_before": med["after"] / med["before"],
                    "before_spark": med["before"] / med["spark"],
                    "after_spark": med["after"] / med["spark"],
                    "after_before_per_round": per_round,
                    "median_details": details,
                    "ok": all(r["ok"] for r in case + spark),
                    "runs": len(case) + len(spark),
                }
            )
    return rows


def print_summary(rows: list[dict[str, Any]], args: argparse.Namespace, before: str) -> None:
    print(f"\nmedians over {args.repeat} round(s), higher is faster; before = {before}, after = this checkout")
    print(
        f"{'case':<26} {'unit':<20} {'spark':>11} {'before':>11} {'after':>11} {'after/before':>12} "
        f"{'before/spark':>12} {'after/spark':>11}  outputs"
    )
    for row in rows:
        med = row["median"]
        print(
            f"{row['workload'] + ' ' + row['variant']:<26} {row['unit']:<20} {med['spark']:>11,.0f} "
            f"{med['before']:>11,.0f} {med['after']:>11,.0f} {row['after_before']:>11.3f}x "
            f"{row['before_spark']:>11.2f}x {row['after_spark']:>10.2f}x  "
            f"{'all exact' if row['ok'] else 'WRONG OR FAILED'}"
        )
    for row in rows:
        extra = "; ".join(
            f"{k} before {_fmt(v)} after {_fmt(row['median_details']['after'].get(k))}"
            for k, v in row["median_details"]["before"].items()
        )
        per_round = _fmt([round(x, 3) for x in row["after_before_per_round"]])
        print(
            f"  {row['workload']} {row['variant']}: after/before per round {per_round}"
            + (f"; medians: {extra}" if extra else "")
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child is not None:
        child(json.loads(args.child))
        return 0
    own_root = args.workdir is None
    root = Path(tempfile.mkdtemp(prefix="compare-")) if own_root else args.workdir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    report: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["bench/compare.py"] + (argv if argv is not None else sys.argv[1:])),
        "cpus": os.cpu_count(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "sizes": _sizes(args),
    }
    try:
        with revision_tree(args.before, args.before_tree, root) as before_tree:
            report["before"], report["after"] = describe_tree(before_tree), describe_tree(REPO)
            before = args.before or str(args.before_tree)
            print(f"before: {before} = {report['before']}\nafter: this checkout = {report['after']}", flush=True)
            paths = {"before": import_root(before_tree, root, "before"), "after": REPO}
            data = {}
            for workload in args.workloads:
                t0 = time.perf_counter()
                data[workload] = prepare(workload, root / "data", report["sizes"])
                print(f"{workload} input and oracle in {time.perf_counter() - t0:.1f} s: {data[workload]}", flush=True)
                if data[workload].get("expected_keys") == 0:
                    print(
                        f"  note: no key reaches {workload.upper()}'s 5 events in {data[workload]['events']:,} "
                        "events, so its check compares empty sets (some keys do from about 500,000 events)"
                    )
            runs = run_rounds(args, data, paths, root)
    finally:
        if own_root:
            shutil.rmtree(root, ignore_errors=True)
    rows = summarize(runs, args)
    print_summary(rows, args, before)
    report.update(
        runs=runs,
        summary=rows,
        total_s=time.perf_counter() - t_all,
        loadavg_end=[round(x, 2) for x in os.getloadavg()],
        ok=all(r["ok"] for r in rows),
    )
    print(
        f"\n{report['total_s']:.0f} s in all, load average {report['loadavg_start']} -> {report['loadavg_end']}: "
        f"{'ALL OUTPUTS EXACT' if report['ok'] else 'A RUN FAILED OR ITS OUTPUT WAS WRONG'}"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2, default=str))
        print(f"results written to {args.json}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
