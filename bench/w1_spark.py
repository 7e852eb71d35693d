"""Benchmark W1 on Spark Structured Streaming's own engine (the baseline).

The seed job, written directly against Structured Streaming::

    readStream.text(dir)  (maxFilesPerTrigger=1: one micro-batch per file)
      -> split "ts\\tchannel\\tid\\tbehavior", event_time = timestamp_millis(ts)
      -> withWatermark("event_time", "50 seconds")
      -> groupBy(window(event_time, "60 seconds"), channel, behavior).count()
      -> writeStream append -> CSV file sink "windowStart\\twindowEnd\\tchannel\\tbehavior\\tcount"
         (window bounds in epoch ms), trigger(availableNow=True)

Held-back windows: append mode emits a window only once the watermark has passed
its end. The watermark is ``max(event_time seen) - 50 s``; Spark computes it after
each micro-batch and, with ``availableNow``, runs one extra no-data batch after the
last file that emits every window ending at or before it (observed: N files give
N + 1 batches). But the watermark only moves when data arrives, so the windows
ending after ``max(ts) - 50 s`` are *held back*: they stay in the state store and
an ``availableNow`` run never writes them (a later run with newer input would).
With the default :class:`EventSpec` the last event is near the end of a 60 s
window, so the last two windows are held back: 2 windows x 28 keys
(4 channels x 7 behaviours) = 56 rows. Flink, by contrast, emits them at end of
input (its final ``Long.MAX_VALUE`` watermark). :func:`verify_output` compares the
sink with the pandas oracle of :mod:`bench.w1_data` on the windows Spark emitted,
and checks that the missing rows are exactly those of windows ending after the
final watermark; throughput counts all input events, since all were processed.

Timing: ``seconds`` is the wall time from ``start()`` to ``awaitTermination()``. In
a fresh session the first micro-batch carries ~15-20 s of JVM/code-generation
warm-up; ``--warmup-events`` runs the query once untimed on other data first.

Run::

    PYTHONPATH=. python bench/w1_spark.py --events 5000000 --files 20 [--warmup-events 200000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

if __package__ in (None, ""):
    # Run as a script: make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.types import LongType, StringType, StructField, StructType  # noqa: E402

from bench.w1_data import ORACLE_COLUMNS, oracle_counts, write_event_files  # noqa: E402
from sparkpoint.connectors.events import EventSpec  # noqa: E402

__all__ = [
    "WATERMARK_DELAY",
    "WINDOW_DURATION",
    "SHUFFLE_PARTITIONS",
    "OUTPUT_SCHEMA",
    "make_spark_session",
    "build_query",
    "run_spark_streaming",
    "read_output",
    "verify_output",
    "main",
]

WATERMARK_DELAY: str = "50 seconds"
WINDOW_DURATION: str = "60 seconds"
SHUFFLE_PARTITIONS: int = 8

#: Schema of the CSV sink (tab separated, no header).
OUTPUT_SCHEMA: StructType = StructType(
    [
        StructField("window_start", LongType(), False),
        StructField("window_end", LongType(), False),
        StructField("channel", StringType(), False),
        StructField("behavior", StringType(), False),
        StructField("count", LongType(), False),
    ]
)


def make_spark_session(app_name: str = "sparkpoint-bench-w1") -> SparkSession:
    """A local Spark session for the benchmark.

    ``local[2]``, UI disabled, ``spark.sql.shuffle.partitions=8``, driver memory 4g
    (applied because the builder launches the JVM; an already running session is
    reused as is), UTC session time zone.
    """
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        .config("spark.driver.memory", "4g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark


def build_query(spark: SparkSession, input_dir: str, max_files_per_trigger: int = 1) -> DataFrame:
    """The W1 streaming DataFrame (before the sink).

    Columns: ``windowStart``, ``windowEnd`` (epoch ms), ``channel``, ``behavior``, ``count``.
    """
    lines = spark.readStream.option("maxFilesPerTrigger", max_files_per_trigger).text(input_dir)
    parts = F.split(F.col("value"), "\t")
    events = lines.select(
        F.timestamp_millis(parts.getItem(0).cast("long")).alias("event_time"),
        parts.getItem(1).alias("channel"),
        parts.getItem(3).alias("behavior"),
    )
    counts = (
        events.withWatermark("event_time", WATERMARK_DELAY)
        .groupBy(F.window("event_time", WINDOW_DURATION), "channel", "behavior")
        .count()
    )
    return counts.select(
        F.unix_millis(F.col("window.start")).alias("windowStart"),
        F.unix_millis(F.col("window.end")).alias("windowEnd"),
        "channel",
        "behavior",
        "count",
    )


def _watermark_ms(progress: dict[str, Any]) -> int | None:
    """The watermark (epoch ms) reported in one query progress, if any."""
    wm = (progress.get("eventTime") or {}).get("watermark")
    if not wm:
        return None
    return int(pd.Timestamp(wm).value // 1_000_000)


def run_spark_streaming(
    input_dir: str | Path,
    output_dir: str | Path,
    spark: SparkSession,
    *,
    checkpoint_dir: str | Path | None = None,
    max_files_per_trigger: int = 1,
) -> dict[str, Any]:
    """Run W1 with Structured Streaming over ``input_dir`` until all input is consumed.

    The CSV sink (tab separated, no header) goes to ``output_dir``; the checkpoint to
    ``checkpoint_dir`` (default: ``<output_dir>/../<output_dir name>-checkpoint``).
    Both should be new, or the query resumes from the old checkpoint.

    Returns:
        ``events`` (input rows, summed over the micro-batch progress reports; these
        are capped at ``spark.sql.streaming.numRecentProgressUpdates``, set to 1000
        by :func:`make_spark_session`),
        ``seconds`` (wall time from ``start()`` to the end of ``awaitTermination()``),
        ``events_per_s``, ``windows`` (rows in the sink), ``batches`` (micro-batches
        run, data and no-data), ``data_batches``, ``batch_ms`` (each batch's
        ``triggerExecution`` time), ``final_watermark_ms`` (the
        watermark after the last batch) and ``max_event_time_ms``.
    """
    out = Path(output_dir)
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else out.parent / f"{out.name}-checkpoint"
    frame = build_query(spark, str(input_dir), max_files_per_trigger)
    writer = (
        frame.writeStream.format("csv")
        .option("sep", "\t")
        .option("header", "false")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .outputMode("append")
        .trigger(availableNow=True)
    )
    t0 = time.perf_counter()
    query = writer.start()
    query.awaitTermination()
    seconds = time.perf_counter() - t0
    if query.exception() is not None:
        raise RuntimeError(f"W1 streaming query failed: {query.exception()}")

    progress = query.recentProgress
    events = int(sum(p.get("numInputRows", 0) for p in progress))
    data_batches = sum(1 for p in progress if p.get("numInputRows", 0) > 0)
    watermarks = [w for w in (_watermark_ms(p) for p in progress) if w is not None]
    max_ets = [
        int(pd.Timestamp(p["eventTime"]["max"]).value // 1_000_000)
        for p in progress
        if (p.get("eventTime") or {}).get("max")
    ]
    durations = [int((p.get("durationMs") or {}).get("triggerExecution", 0)) for p in progress]
    windows = spark.read.schema(OUTPUT_SCHEMA).option("sep", "\t").csv(str(out)).count()
    return {
        "events": events,
        "seconds": seconds,
        "events_per_s": events / seconds if seconds > 0 else float("nan"),
        "windows": int(windows),
        "batches": len(progress),
        "data_batches": data_batches,
        "batch_ms": durations,
        "final_watermark_ms": max(watermarks) if watermarks else None,
        "max_event_time_ms": max(max_ets) if max_ets else None,
    }


def read_output(output_dir: str | Path, spark: SparkSession) -> pd.DataFrame:
    """The sink's rows as a pandas frame with the oracle's columns, sorted.

    Read through Spark so that only files committed in the sink's ``_spark_metadata``
    log are seen.
    """
    rows = spark.read.schema(OUTPUT_SCHEMA).option("sep", "\t").csv(str(output_dir)).collect()
    df = pd.DataFrame([tuple(r) for r in rows], columns=list(ORACLE_COLUMNS))
    df = df.astype({"window_start": np.int64, "window_end": np.int64, "count": np.int64})
    return df.sort_values(["window_start", "channel", "behavior"]).reset_index(drop=True)


def verify_output(emitted: pd.DataFrame, expected: pd.DataFrame, final_watermark_ms: int | None) -> dict[str, Any]:
    """Compare the sink's rows with the oracle.

    A row is *correct* if the oracle has the same (window, key) with the same count.
    Oracle rows missing from the sink are *held back*; they are *explained* if every
    one of them belongs to a window whose end is after the final watermark (append
    mode cannot emit those without further input).

    Returns:
        ``ok`` (no wrong/extra/duplicate rows and all held-back rows explained),
        ``expected_rows``, ``emitted_rows``, ``correct_rows``, ``wrong_count_rows``,
        ``extra_rows`` (emitted but not expected), ``duplicate_rows``,
        ``held_back_rows``, ``held_back_windows`` (distinct window starts, ISO UTC),
        ``held_back_events`` (sum of their expected counts), ``held_back_explained``,
        ``emitted_events`` (sum of emitted counts).
    """
    key = ["window_start", "window_end", "channel", "behavior"]
    duplicates = int(emitted.duplicated(key).sum())
    merged = expected.merge(emitted, on=key, how="outer", suffixes=("_exp", "_got"), indicator=True)
    both = merged[merged["_merge"] == "both"]
    correct = int((both["count_exp"] == both["count_got"]).sum())
    wrong = int(len(both) - correct)
    extra = int((merged["_merge"] == "right_only").sum())
    held = merged[merged["_merge"] == "left_only"]
    explained = held.empty if final_watermark_ms is None else bool((held["window_end"] > final_watermark_ms).all())
    held_windows = sorted(set(held["window_start"].tolist()))
    return {
        "ok": bool(wrong == 0 and extra == 0 and duplicates == 0 and explained),
        "expected_rows": int(len(expected)),
        "emitted_rows": int(len(emitted)),
        "correct_rows": correct,
        "wrong_count_rows": wrong,
        "extra_rows": extra,
        "duplicate_rows": duplicates,
        "held_back_rows": int(len(held)),
        "held_back_windows": [pd.Timestamp(w, unit="ms", tz="UTC").isoformat() for w in held_windows],
        "held_back_events": int(held["count_exp"].sum()),
        "held_back_explained": explained,
        "emitted_events": int(emitted["count"].sum()),
    }


def main(argv: list[str] | None = None) -> int:
    """Command line: generate W1 data, run Spark's own query, check it, print figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=5_000_000, help="number of events")
    parser.add_argument("--files", type=int, default=20, help="number of input files (= data micro-batches)")
    parser.add_argument("--seed", type=int, default=EventSpec().seed, help="event stream seed")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="directory for input/output/checkpoint (default: a temp dir, removed afterwards)",
    )
    parser.add_argument(
        "--warmup-events",
        type=int,
        default=0,
        help="first run the query untimed over this many events (own files/sink) in the same "
        "session, so the timed run excludes JVM/codegen warm-up (default 0: cold run)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    args = parser.parse_args(argv)

    spec = EventSpec(seed=args.seed)
    own_tmp = args.workdir is None
    work = Path(tempfile.mkdtemp(prefix="w1-spark-")) if own_tmp else args.workdir
    work.mkdir(parents=True, exist_ok=True)
    input_dir, output_dir = work / "input", work / "output"
    warm_dir = work / "warmup"
    for d in (input_dir, output_dir, work / "output-checkpoint", warm_dir):
        if d.exists():
            shutil.rmtree(d)
    try:
        t = time.perf_counter()
        write_event_files(input_dir, args.events, args.files, spec)
        print(f"wrote {args.events:,} events in {args.files} files in {time.perf_counter() - t:.1f} s", flush=True)
        t = time.perf_counter()
        expected = oracle_counts(args.events, spec)
        print(f"oracle: {len(expected):,} window rows in {time.perf_counter() - t:.1f} s", flush=True)

        spark = make_spark_session()
        try:
            if args.warmup_events > 0:
                write_event_files(
                    warm_dir / "input", args.warmup_events, min(args.files, 4), EventSpec(seed=args.seed + 1)
                )
                warm = run_spark_streaming(warm_dir / "input", warm_dir / "output", spark)
                print(f"warm-up: {warm['events']:,} events in {warm['seconds']:.2f} s (not counted)", flush=True)
            result = run_spark_streaming(input_dir, output_dir, spark)
            emitted = read_output(output_dir, spark)
        finally:
            # Quieten the state store maintenance thread's harmless errors at shutdown.
            spark.sparkContext.setLogLevel("ERROR")
            spark.stop()
        check = verify_output(emitted, expected, result["final_watermark_ms"])
    finally:
        if own_tmp:
            shutil.rmtree(work, ignore_errors=True)

    print(
        f"spark structured streaming W1: {result['events']:,} events in {result['seconds']:.2f} s "
        f"= {result['events_per_s']:,.0f} events/s "
        f"({result['batches']} micro-batches, {result['data_batches']} with data)"
    )
    print(f"micro-batch times (ms): {result['batch_ms']}")
    fwm = result["final_watermark_ms"]
    print(
        f"final watermark: {pd.Timestamp(fwm, unit='ms', tz='UTC').isoformat() if fwm is not None else None}, "
        f"max event time: {pd.Timestamp(result['max_event_time_ms'], unit='ms', tz='UTC').isoformat()}"
    )
    print(
        f"windows (sink rows): {result['windows']:,} emitted of {check['expected_rows']:,} expected; "
        f"held back: {check['held_back_rows']} rows in windows {check['held_back_windows']} "
        f"({check['held_back_events']:,} events), explained by watermark: {check['held_back_explained']}"
    )
    print(
        f"emitted rows correct: {check['correct_rows']:,}/{check['emitted_rows']:,}, "
        f"wrong counts: {check['wrong_count_rows']}, extra: {check['extra_rows']}, "
        f"duplicates: {check['duplicate_rows']}; events in emitted windows + held back = "
        f"{check['emitted_events'] + check['held_back_events']:,} (input {args.events:,})"
    )
    ok = check["ok"] and result["events"] == args.events
    print("CORRECT" if ok else "MISMATCH")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "args": {
                        "events": args.events,
                        "files": args.files,
                        "seed": args.seed,
                        "warmup_events": args.warmup_events,
                    },
                    "result": result,
                    "check": check,
                    "ok": ok,
                },
                indent=2,
            )
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
