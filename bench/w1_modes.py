"""Benchmark: W1's sustained throughput in continuous mode against epoch mode and Spark's own engine.

One invocation, one SparkSession (``local[2]``, as :mod:`bench.w1`): the seed job over ``--events`` events in
``--files`` files (FileSource -> 60 s tumbling event-time windows -> FileSink), run by
:func:`bench.w1.run_sparkpoint` with ``sparkpoint.execution.mode`` ``epoch`` and ``continuous`` in turn, and
Spark Structured Streaming's own query over the same files, each round in the same order, after a warm-up of
every engine on other events (JVM, Python workers, continuous mode's first barrier stage). Every sparkpoint run's
output is checked exactly against the pandas oracle. Prints events/s per engine (median and best of
``--repeat`` rounds) and the ratios continuous / epoch and each / Spark.

    .venv/bin/python bench/w1_modes.py --events 2000000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.w1 import check_output_dir, run_sparkpoint  # noqa: E402
from bench.w1_data import oracle_counts, write_event_files  # noqa: E402
from bench.w1_spark import make_spark_session, run_spark_streaming  # noqa: E402
from sparkpoint.connectors.events import EventSpec  # noqa: E402

MODES = ("epoch", "continuous")


def run_mode(spark: Any, mode: str, input_dir: Path, work: Path, max_records: int) -> dict[str, Any]:
    out, state = work / f"out-{mode}", work / f"state-{mode}"
    shutil.rmtree(out, ignore_errors=True)
    return run_sparkpoint(
        input_dir, out, state, spark=spark, max_records=max_records, config={"sparkpoint.execution.mode": mode}
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--files", type=int, default=10)
    p.add_argument("--max-records", type=int, default=250_000, help="execution.epoch.max-records (both modes)")
    p.add_argument("--warmup-events", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="w1-modes-"))
    try:
        write_event_files(work / "input", args.events, args.files, EventSpec())
        write_event_files(work / "warm", args.warmup_events, 4, EventSpec(seed=EventSpec().seed + 1))
        expected = oracle_counts(args.events)
        spark = make_spark_session()
        run_spark_streaming(work / "warm", work / "warm-spark", spark)
        for mode in MODES:
            run_mode(spark, mode, work / "warm", work / "warm-runs", args.max_records)
        rates: dict[str, list[float]] = {"spark": [], **{m: [] for m in MODES}}
        ok = True
        for rnd in range(args.repeat):
            shutil.rmtree(work / "spark-out", ignore_errors=True)
            rates["spark"].append(run_spark_streaming(work / "input", work / "spark-out", spark)["events_per_s"])
            for mode in MODES:
                res = run_mode(spark, mode, work / "input", work, args.max_records)
                check = check_output_dir(work / f"out-{mode}", expected)
                ok &= check["ok"] and res["events"] == args.events
                rates[mode].append(res["events_per_s"])
                print(f"round {rnd + 1} {mode}: {res['events_per_s']:,.0f} events/s, exact: {check['ok']}", flush=True)
        summary = {k: {"median": statistics.median(v), "best": max(v)} for k, v in rates.items()}
        print(f"\n{args.events:,} events, {args.repeat} rounds (events/s, median [best]):")
        for k, v in summary.items():
            to_spark = v["median"] / summary["spark"]["median"]
            print(f"  {k:<12} {v['median']:>10,.0f} [{v['best']:,.0f}]  ratio to spark {to_spark:.2f}")
        ratio = summary["continuous"]["median"] / summary["epoch"]["median"]
        print(f"  continuous / epoch: {ratio:.2f} (median)   {'ALL EXACT' if ok else 'OUTPUT MISMATCH'}")
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "args": vars(args) | {"json": str(args.json)},
                        "rates": rates,
                        "summary": summary,
                        "continuous_over_epoch": ratio,
                    },
                    indent=2,
                )
            )
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
