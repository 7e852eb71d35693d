"""sparkpoint against Spark on W1 and W3, checkpoint overhead and a phase profile: one invocation, one SparkSession.

On one SparkSession (:func:`bench.w1_spark.make_spark_session`: ``local[2]``, 8 shuffle partitions):

1. **W1**, the seed job (``examples/behavior_counts.py``, built by :func:`bench.w1.run_sparkpoint`) in both
   formulations, the seed's ``process()`` and ``--incremental-count``, with exactly-once checkpoints every
   10 s (the keys of :func:`bench.w1_checkpoints.checkpoint_config`), once per ``--max-records`` value, against
   Spark Structured Streaming's native windowed count (:func:`bench.w1_spark.run_spark_streaming`) on the same
   files. sparkpoint's output is checked exactly against the pandas oracle (:func:`bench.w1.check_exact`),
   Spark's on the windows it emitted (:func:`bench.w1_spark.verify_output`).
2. **Checkpoint overhead**: the same sparkpoint W1 runs (both formulations, the first ``--max-records``) with
   checkpointing off, next to the checkpointed run of the same round (the order alternates between rounds);
   ``--overhead-pairs`` such pairs per formulation (the rounds' and, beyond ``--repeat``, pairs run after
   them). Overhead = the median over the pairs of seconds on / seconds off - 1 (target at most 10 %): a pair
   runs back to back, so the machine's drift over minutes cancels out. Printed beside it, the same median
   of the CPU time the runs cost (this process and every one below it: :func:`bench.procs.cpu_seconds`),
   which other load on the machine moves much less.
3. **W3** (:mod:`bench.w3`: a ``KeyedProcessFunction`` with a ``ValueState`` count on ~1M keys) on the rocksdb
   and hashmap backends against Spark's native ``groupBy(key).count()`` on the RocksDB state store and against
   ``transformWithStateInPandas`` (on ``--tws-events`` events, keys of 4 hex digits, as ``bench/w3.py``), each
   checked against its hand count.
4. **Phase profile**: the sparkpoint tasks' ``TaskReport.phase_ms`` summed per phase (the job listener of
   :mod:`bench.w3_probe`), per run, for the W1 runs with checkpoints and the W3 runs.
5. **Summary**: workload, sparkpoint events/s, the peer's events/s, ratio, target, met or not; "ALL CHECKS OK"
   only if every output check passed (exit code 1 otherwise).

``--repeat N`` runs every configuration N times (interleaved; W1 rounds first, then W3 rounds) and summarises
medians. Events/s = input events / wall time of the whole run (sparkpoint: ``env.execute()``; Spark: ``start()``
to ``awaitTermination()``). See ``bench/README.md``, "One invocation: bench/speed.py".

    PYTHONPATH=. .venv/bin/python bench/speed.py --json speed.json
    PYTHONPATH=. .venv/bin/python bench/speed.py --events 300000 --files 2 --w3-events 200000 \\
        --tws-events 20000 --warmup-events 50000          # a small smoke run
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a script: make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The Python workers must run this interpreter (the venv's); set before any session starts.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

import pandas as pd  # noqa: E402

from bench import w1, w3  # noqa: E402
from bench.procs import cpu_seconds  # noqa: E402
from bench.w1_checkpoints import checkpoint_config, checkpoint_summary  # noqa: E402
from bench.w1_data import oracle_counts, write_event_files  # noqa: E402
from bench.w1_spark import make_spark_session, read_output, run_spark_streaming, verify_output  # noqa: E402
from bench.w3_probe import PHASES, with_probe  # noqa: E402
from bench.w3_spark import run_native, run_tws  # noqa: E402

CHECKPOINT_INTERVAL_MS = 10_000
RATIO_TARGET = 1.5
OVERHEAD_TARGET_PERCENT = 10.0
#: The seed job's formulations: name -> options of ``examples/behavior_counts.py``.
FORMULATIONS: dict[str, list[str]] = {"process()": [], "incremental-count": ["--incremental-count"]}
W3_BACKENDS = ("rocksdb", "hashmap")
#: The order of ``TaskReport.phase_ms`` (``gc`` is the part of the others spent in Python's cycle collector).
PHASE_ORDER = ("setup", "input", "run", "route", "state", "upload_wait", "gc")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=5_000_000, help="W1 events (default 5,000,000)")
    p.add_argument("--files", type=int, default=10, help="W1 input files (= Spark micro-batches; default 10)")
    p.add_argument(
        "--max-records",
        type=int,
        nargs="+",
        default=[250_000, 500_000],
        help="sparkpoint's execution.epoch.max-records for W1 (default 250000 500000); the checkpoint "
        "overhead is measured with the first",
    )
    p.add_argument("--w3-events", type=int, default=2_000_000, help="W3 events (default 2,000,000)")
    p.add_argument(
        "--tws-events",
        type=int,
        default=100_000,
        help="transformWithStateInPandas's input (default 100,000; 0 skips it)",
    )
    p.add_argument("--repeat", type=int, default=1, help="rounds of every configuration (default 1; medians)")
    p.add_argument(
        "--overhead-pairs",
        type=int,
        default=5,
        help="checkpoints on/off pairs per formulation for the checkpoint overhead (default 5; at least "
        "--repeat: the rounds' pairs, then more)",
    )
    p.add_argument(
        "--warmup-events",
        type=int,
        default=200_000,
        help="warm both engines up on this many other events first (default 200,000; 0 skips)",
    )
    p.add_argument("--skip-w1", action="store_true", help="skip W1 and the checkpoint overhead")
    p.add_argument("--skip-w3", action="store_true", help="skip W3")
    p.add_argument(
        "--compare-overlap",
        action="store_true",
        help="also run every checkpointed W1 configuration without epoch overlap "
        "(sparkpoint.epoch.sources-ahead: false) and report the gain",
    )
    p.add_argument(
        "-D",
        dest="config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a configuration key of every sparkpoint run (repeatable); it does not override what a "
        "run compares: W1's checkpoint keys (on/off) and W3's state.backend.type",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="directory for input/output/state (kept; default: a temp dir, removed afterwards)",
    )
    p.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    args = p.parse_args(argv)
    args.config_map = w1.parse_config(args.config, p)
    args.max_records = list(dict.fromkeys(args.max_records))
    if min(args.events, args.files, args.w3_events, args.repeat, *args.max_records) < 1 or args.tws_events < 0:
        p.error("--events, --files, --w3-events, --repeat and --max-records must be positive")
    args.overhead_pairs = max(args.overhead_pairs, args.repeat)
    if args.skip_w1 and args.skip_w3:
        p.error("--skip-w1 and --skip-w3: nothing to run")
    return args


def _median_eps(runs: list[dict[str, Any]]) -> float:
    return statistics.median(r["events_per_s"] for r in runs) if runs else float("nan")


def _mean_phases(runs: list[dict[str, Any]]) -> dict[str, float]:
    """``phase_ms`` added up over ``runs`` and divided by their number: per run."""
    total: dict[str, float] = {}
    for r in runs:
        for phase, ms in r["phase_ms"].items():
            total[phase] = total.get(phase, 0.0) + ms
    return {k: v / len(runs) for k, v in total.items()} if runs else {}


# -- W1 ----------------------------------------------------------------------------------------------------------


@dataclass
class W1Input:
    input_dir: Path
    work: Path
    expected: pd.DataFrame
    events: int


def sparkpoint_w1(
    spark: Any, inp: W1Input, formulation: str, max_records: int, checkpoints: bool, rep: int, ahead: bool = True
) -> dict[str, Any]:
    """One sparkpoint W1 run, checkpoints every 10 s or off, checked exactly against the oracle (``ahead``
    False: without epoch overlap, ``sparkpoint.epoch.sources-ahead: false``)."""
    tag = f"{formulation.strip('()')}-{max_records}-{'ck' if checkpoints else 'off'}{'' if ahead else '-seq'}-{rep}"
    config = {"execution.job-listeners": with_probe(w1.JOB_CONFIG.get("execution.job-listeners"))}
    if not ahead:
        config["sparkpoint.epoch.sources-ahead"] = "false"
    if checkpoints:
        config.update(checkpoint_config(inp.work / "ck" / tag, CHECKPOINT_INTERVAL_MS))
    out = inp.work / "out" / tag
    PHASES.reset()
    cpu = cpu_seconds()
    res = w1.run_sparkpoint(
        inp.input_dir,
        out,
        inp.work / "state" / tag,
        spark=spark,
        max_records=max_records,
        options=FORMULATIONS[formulation],
        config=config,
    )
    cpu = cpu_seconds() - cpu
    check = w1.check_output_dir(out, inp.expected)
    ok = bool(check["ok"] and res["events"] == inp.events)
    ck = checkpoint_summary(res["checkpoints"])
    mode = "10 s" if checkpoints else "off"
    print(
        f"  sparkpoint {formulation:<17} max-records {max_records:>9,} checkpoints {mode:<4}"
        f"{'' if ahead else ', no overlap'}: {res['seconds']:6.2f} s {res['events_per_s']:>10,.0f} ev/s, "
        f"CPU {cpu:5.1f} s, "
        f"{res['epochs']} epochs, {res['sources_ahead']} epochs' sources ahead, "
        f"{ck['checkpoints_completed']} checkpoints ({ck['checkpoints_failed']} failed), output "
        f"{'exact' if ok else 'WRONG'} ({check['emitted_rows']:,}/{check['expected_rows']:,} rows, wrong "
        f"{check['wrong_count_rows']}, missing {check['missing_rows']}, extra {check['extra_rows']}, duplicates "
        f"{check['duplicate_rows']}, hidden files {check['hidden_files_left']})",
        flush=True,
    )
    return {
        "formulation": formulation,
        "max_records": max_records,
        "checkpoints": checkpoints,
        "round": rep,
        "ahead": ahead,
        "sources_ahead": res["sources_ahead"],
        "seconds": res["seconds"],
        "cpu_s": cpu,
        "events": res["events"],
        "events_per_s": res["events_per_s"],
        "epochs": res["epochs"],
        "checkpoint": ck,
        "check": check,
        "ok": ok,
        "phase_ms": dict(PHASES.phase_ms),
    }


def spark_w1(spark: Any, inp: W1Input, rep: int) -> dict[str, Any]:
    """Spark Structured Streaming's native W1 query, checked on the windows it emitted."""
    out = inp.work / "spark" / f"output-{rep}"
    res = run_spark_streaming(inp.input_dir, out, spark)
    check = verify_output(read_output(out, spark), inp.expected, res["final_watermark_ms"])
    ok = bool(check["ok"] and res["events"] == inp.events)
    print(
        f"  Spark SS native windowed count: {res['seconds']:6.2f} s {res['events_per_s']:>10,.0f} ev/s, "
        f"{res['batches']} micro-batches; output {'correct' if ok else 'WRONG'} ({check['correct_rows']:,}/"
        f"{check['emitted_rows']:,} rows correct, {check['held_back_rows']} held back by the final watermark: "
        f"explained {check['held_back_explained']})",
        flush=True,
    )
    return {
        "seconds": res["seconds"],
        "events": res["events"],
        "events_per_s": res["events_per_s"],
        "batches": res["batches"],
        "check": check,
        "ok": ok,
    }


def run_w1(spark: Any, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """W1 input and oracle, then ``--repeat`` rounds of: Spark, then sparkpoint per formulation and max-records
    (checkpoints every 10 s; with the first max-records also off, before or after by round)."""
    t = time.perf_counter()
    write_event_files(work / "w1" / "input", args.events, args.files)
    inp = W1Input(work / "w1" / "input", work / "w1", oracle_counts(args.events), args.events)
    print(
        f"W1: {args.events:,} events in {args.files} files, oracle {len(inp.expected):,} window rows "
        f"({time.perf_counter() - t:.1f} s)",
        flush=True,
    )
    spark_runs: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    for rep in range(args.repeat):
        print(f"W1 round {rep + 1} of {args.repeat}:", flush=True)
        spark_runs.append(spark_w1(spark, inp, rep))
        for formulation in FORMULATIONS:
            for mr in args.max_records:
                if mr == args.max_records[0]:
                    runs += _overhead_pair(spark, inp, formulation, mr, rep)
                else:
                    runs.append(sparkpoint_w1(spark, inp, formulation, mr, True, rep))
                if args.compare_overlap:
                    runs.append(sparkpoint_w1(spark, inp, formulation, mr, True, rep, ahead=False))
    for rep in range(args.repeat, args.overhead_pairs):
        print(f"W1 checkpoint overhead, pair {rep + 1} of {args.overhead_pairs}:", flush=True)
        for formulation in FORMULATIONS:
            runs += [
                {**r, "overhead_only": True} for r in _overhead_pair(spark, inp, formulation, args.max_records[0], rep)
            ]
    return {"spark": spark_runs, "sparkpoint": runs}


def _overhead_pair(spark: Any, inp: W1Input, formulation: str, max_records: int, rep: int) -> list[dict[str, Any]]:
    """One run with checkpoints and one without, back to back (which first alternates with ``rep``)."""
    modes = [False, True] if rep % 2 == 0 else [True, False]
    return [sparkpoint_w1(spark, inp, formulation, max_records, checkpoints, rep) for checkpoints in modes]


def summarise_w1(res: dict[str, Any], max_records: list[int]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Summary rows (each configuration vs Spark; checkpoint overhead) and the phase profile of the W1 runs."""
    spark_eps, spark_ok = _median_eps(res["spark"]), all(r["ok"] for r in res["spark"])
    rows, profile = [], {}
    for formulation in FORMULATIONS:
        for mr in max_records:
            on = [
                r
                for r in res["sparkpoint"]
                if (r["formulation"], r["max_records"], r["checkpoints"], r["ahead"]) == (formulation, mr, True, True)
                and not r.get("overhead_only")
            ]
            eps = _median_eps(on)
            rows.append(
                _row(
                    f"W1 {formulation}, max-records {mr:,}, checkpoints 10 s / Spark SS native",
                    eps,
                    spark_eps,
                    eps / spark_eps,
                    f"{eps / spark_eps:.2f}x",
                    f">= {RATIO_TARGET}x",
                    eps / spark_eps >= RATIO_TARGET,
                    spark_ok and all(r["ok"] for r in on),
                )
            )
            profile[f"W1 {formulation}, max-records {mr:,}, checkpoints"] = _mean_phases(on)
            seq = [
                r
                for r in res["sparkpoint"]
                if (r["formulation"], r["max_records"], r["ahead"]) == (formulation, mr, False)
            ]
            if seq:
                gain = _median_eps(on) / _median_eps(seq)
                rows.append(
                    _row(
                        f"W1 {formulation}, max-records {mr:,}: epoch overlap on / off",
                        _median_eps(on),
                        _median_eps(seq),
                        gain,
                        f"{gain:.2f}x",
                        "-",
                        None,
                        all(r["ok"] for r in on + seq),
                    )
                )
    for formulation in FORMULATIONS:
        runs = [
            r
            for r in res["sparkpoint"]
            if (r["formulation"], r["max_records"], r["ahead"]) == (formulation, max_records[0], True)
        ]
        overhead, cpu_overhead = checkpoint_overhead(runs)
        on = [r for r in runs if r["checkpoints"]]
        off = [r for r in runs if not r["checkpoints"]]
        rows.append(
            _row(
                f"W1 {formulation} checkpoint overhead (10 s / off), max-records {max_records[0]:,}",
                _median_eps(on),
                _median_eps(off),
                overhead,
                f"{overhead:+.1f} %",
                f"<= {OVERHEAD_TARGET_PERCENT:.0f} %",
                overhead <= OVERHEAD_TARGET_PERCENT,
                all(r["ok"] for r in runs),
            )
        )
        rows.append(
            _row(
                f"W1 {formulation} checkpoint overhead in CPU time (10 s / off)",
                _median_eps(on),
                _median_eps(off),
                cpu_overhead,
                f"{cpu_overhead:+.1f} %",
                "-",
                None,
                all(r["ok"] for r in runs),
            )
        )
    return rows, profile


def checkpoint_overhead(runs: list[dict[str, Any]]) -> tuple[float, float]:
    """The checkpoint overhead in percent of wall time and of CPU time: the median over the rounds' pairs (a run
    with checkpoints and one without, back to back) of on / off - 1. Prints every pair's."""
    pairs: dict[int, dict[bool, dict[str, Any]]] = {}
    for r in runs:
        pairs.setdefault(r["round"], {})[r["checkpoints"]] = r
    ratios = [
        (p[True]["seconds"] / p[False]["seconds"], p[True]["cpu_s"] / p[False]["cpu_s"])
        for _, p in sorted(pairs.items())
        if len(p) == 2
    ]
    wall, cpu = (100 * (statistics.median(x) - 1) for x in zip(*ratios))
    print(
        f"checkpoint overhead of W1 {runs[0]['formulation']}, pair by pair (wall / CPU): "
        + ", ".join(f"{100 * (w - 1):+.1f}/{100 * (c - 1):+.1f} %" for w, c in ratios),
        flush=True,
    )
    return wall, cpu


# -- W3 ----------------------------------------------------------------------------------------------------------


def run_w3(spark: Any, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """``--repeat`` rounds of: Spark native, sparkpoint per backend, transformWithStateInPandas; all checked."""
    base = work / "w3"
    write_event_files(base / "input", args.w3_events, w3.FILES)
    expected = w3.oracle(args.w3_events)
    print(
        f"W3: {args.w3_events:,} events in {w3.FILES} files; {len(expected):,} keys reach {w3.NTH} events", flush=True
    )
    expected_tws: set[str] = set()
    if args.tws_events:
        write_event_files(base / "tws-input", args.tws_events, 2)
        expected_tws = w3.oracle(args.tws_events, digits=4)
    res: dict[str, list[dict[str, Any]]] = {"native": [], "tws": [], **{b: [] for b in W3_BACKENDS}}
    for rep in range(args.repeat):
        print(f"W3 round {rep + 1} of {args.repeat}:", flush=True)
        native = run_native(spark, base / "input", base / f"native-ck-{rep}")
        eps = args.w3_events / native["seconds"]
        print(
            f"  Spark native groupBy(key).count(), RocksDB state store: {native['seconds']:6.2f} s {eps:>10,.0f} ev/s",
            flush=True,
        )
        ok = w3.check_keys("Spark native (keys with count >= 5)", sorted(native["keys"]), expected)
        res["native"].append({"seconds": native["seconds"], "events_per_s": eps, "ok": ok})
        for backend in W3_BACKENDS:
            run = w3.run_sparkpoint(
                spark, base / "input", base / f"round-{rep}", backend, w3.MAX_RECORDS, config=w1.JOB_CONFIG
            )
            eps = args.w3_events / run["seconds"]
            print(
                f"  sparkpoint {backend}: {run['seconds']:6.2f} s {eps:>10,.0f} ev/s ({run['epochs']} epochs)",
                flush=True,
            )
            ok = w3.check_keys(f"sparkpoint {backend}", run["lines"], expected)
            res[backend].append(
                {
                    "seconds": run["seconds"],
                    "events_per_s": eps,
                    "ok": ok,
                    "epochs": run["epochs"],
                    "phase_ms": run["phase_ms"],
                }
            )
        if args.tws_events:
            res["tws"].append(tws_w3(spark, base, rep, args.tws_events, expected_tws))
    return res


def tws_w3(spark: Any, base: Path, rep: int, events: int, expected: set[str]) -> dict[str, Any]:
    """``transformWithStateInPandas`` on the small input, checked; a failure (it needs ``protobuf``, the
    ``bench`` extra) is reported as a failed check and the benchmark goes on."""
    try:
        import google.protobuf.descriptor  # noqa: F401 - what Spark's Python workers need for it

        tws = run_tws(spark, base / "tws-input", base / f"tws-ck-{rep}", digits=4)
    except Exception as e:  # noqa: BLE001 - any failure of the peer's query
        reason = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        if isinstance(e, ImportError):
            reason += " (transformWithStateInPandas needs protobuf: pip install -e '.[bench]')"
        print(f"  Spark transformWithStateInPandas FAILED: {reason}", flush=True)
        return {"seconds": float("nan"), "events_per_s": float("nan"), "ok": False, "error": reason}
    eps = events / tws["seconds"]
    print(
        f"  Spark transformWithStateInPandas ({events:,} events, keys of 4 hex digits): "
        f"{tws['seconds']:6.2f} s {eps:>10,.0f} ev/s",
        flush=True,
    )
    ok = w3.check_keys("transformWithStateInPandas", tws["emitted"], expected) and bool(expected)
    return {"seconds": tws["seconds"], "events_per_s": eps, "ok": ok}


def summarise_w3(res: dict[str, Any], tws_events: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Summary rows (each backend vs Spark native and vs transformWithStateInPandas) and the W3 phase profile."""
    native_eps, native_ok = _median_eps(res["native"]), all(r["ok"] for r in res["native"])
    rows, profile = [], {}
    for backend in W3_BACKENDS:
        eps, ok = _median_eps(res[backend]), all(r["ok"] for r in res[backend])
        rows.append(
            _row(
                f"W3 sparkpoint {backend} / Spark native groupBy count (RocksDB)",
                eps,
                native_eps,
                eps / native_eps,
                f"{eps / native_eps:.2f}x",
                f">= {RATIO_TARGET}x",
                eps / native_eps >= RATIO_TARGET,
                ok and native_ok,
            )
        )
        profile[f"W3 {backend}"] = _mean_phases(res[backend])
    if res["tws"]:
        tws_eps, tws_ok = _median_eps(res["tws"]), all(r["ok"] for r in res["tws"])
        for backend in W3_BACKENDS:
            eps, ok = _median_eps(res[backend]), all(r["ok"] for r in res[backend])
            rows.append(
                _row(
                    f"W3 sparkpoint {backend} / transformWithStateInPandas ({tws_events:,} events)",
                    eps,
                    tws_eps,
                    eps / tws_eps,
                    f"{eps / tws_eps:.1f}x",
                    "-",
                    None,
                    ok and tws_ok,
                )
            )
    return rows, profile


# -- report ------------------------------------------------------------------------------------------------------


def _row(
    workload: str,
    sp_eps: float,
    peer_eps: float,
    ratio: float,
    ratio_text: str,
    target: str,
    met: bool | None,
    ok: bool,
) -> dict[str, Any]:
    return {
        "workload": workload,
        "sparkpoint_events_per_s": sp_eps,
        "peer_events_per_s": peer_eps,
        "ratio": ratio,
        "ratio_text": ratio_text,
        "target": target,
        "met": met,
        "ok": bool(ok),
    }


def print_profile(profile: dict[str, dict[str, float]]) -> None:
    """Task time per phase (seconds per run, all tasks added up; ``gc`` is part of the others)."""
    phases = [p for p in PHASE_ORDER if any(p in v for v in profile.values())]
    phases += sorted({p for v in profile.values() for p in v} - set(phases))
    width = max(len(k) for k in profile)
    print(
        "\nsparkpoint task time per phase (TaskReport.phase_ms, all tasks added up, seconds per run; "
        "gc is part of the others):"
    )
    print(f"  {'run':<{width}} " + " ".join(f"{p:>11}" for p in phases))
    for label, ms in profile.items():
        print(f"  {label:<{width}} " + " ".join(f"{ms.get(p, 0.0) / 1000:>11.2f}" for p in phases))


def print_summary(rows: list[dict[str, Any]], repeat: int) -> bool:
    """The final table; returns whether every output check passed."""
    width = max(len(r["workload"]) for r in rows)
    print(
        f"\nsummary (events/s, {'median of ' + str(repeat) + ' rounds' if repeat > 1 else '1 round'}; "
        f"peer = what the workload is measured against):"
    )
    print(f"  {'workload':<{width}} {'sparkpoint':>11} {'peer':>11} {'ratio':>8} {'target':>8} {'met':>4} output")
    for r in rows:
        met = "-" if r["met"] is None else ("yes" if r["met"] else "NO")
        print(
            f"  {r['workload']:<{width}} {r['sparkpoint_events_per_s']:>11,.0f} {r['peer_events_per_s']:>11,.0f} "
            f"{r['ratio_text']:>8} {r['target']:>8} {met:>4} {'ok' if r['ok'] else 'FAILED'}"
        )
    ok = all(r["ok"] for r in rows)
    print("ALL CHECKS OK" if ok else "CHECKS FAILED")
    return ok


def _prepare_workdir(args: argparse.Namespace) -> tuple[Path, bool]:
    own = args.workdir is None
    work = Path(tempfile.mkdtemp(prefix="speed-bench-")) if own else args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    for name in ("warmup", "w1", "w3"):  # an earlier run's, in the same --workdir
        shutil.rmtree(work / name, ignore_errors=True)
    return work, own


def run_all(args: argparse.Namespace, work: Path, results: dict[str, Any]) -> None:
    """Warm-up, W1 and W3 on one SparkSession; fills ``results``."""
    spark = make_spark_session("sparkpoint-bench-speed")
    try:
        import pyspark

        results["machine"]["spark"] = pyspark.__version__
        if args.warmup_events > 0:
            w1.warm_up(spark, work / "warmup", args.warmup_events, args.files, args.max_records[0])
        rows: list[dict[str, Any]] = []
        profile: dict[str, Any] = {}
        if not args.skip_w1:
            results["w1"] = run_w1(spark, args, work)
            w1_rows, w1_profile = summarise_w1(results["w1"], args.max_records)
            rows += w1_rows
            profile.update(w1_profile)
        if not args.skip_w3:
            results["w3"] = run_w3(spark, args, work)
            w3_rows, w3_profile = summarise_w3(results["w3"], args.tws_events)
            rows += w3_rows
            profile.update(w3_profile)
        results["summary"], results["phase_profile_ms"] = rows, profile
    finally:
        spark.sparkContext.setLogLevel("ERROR")  # the state store's harmless errors at shutdown
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    w1.JOB_CONFIG.update(args.config_map)
    work, own_tmp = _prepare_workdir(args)
    results: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["bench/speed.py"] + (argv if argv is not None else sys.argv[1:])),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        },
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
    }
    t0 = time.perf_counter()
    try:
        run_all(args, work, results)
    finally:
        results["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        results["total_s"] = time.perf_counter() - t0
        if own_tmp:
            shutil.rmtree(work, ignore_errors=True)
    if results["phase_profile_ms"]:
        print_profile(results["phase_profile_ms"])
    print(
        f"\n{results['date']}, {os.cpu_count()} CPUs, load average {results['machine']['loadavg_start']} at start, "
        f"{results['machine']['loadavg_end']} at end, {results['total_s']:.0f} s in total"
    )
    ok = print_summary(results["summary"], args.repeat) if results["summary"] else False
    results["ok"] = ok
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, default=str))
        print(f"results written to {args.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
