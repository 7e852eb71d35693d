"""W1 with exactly-once checkpoints every 10 s versus checkpointing off, in one run.

Same input, same SparkSession, runs interleaved (off, on, off, on, ...). Prints each
run's events/s, the overhead of checkpointing (target: at most 10 %), and the
checkpoints' end-to-end, synchronous and asynchronous durations and sizes; every
run's output is checked against the pandas oracle.

    .venv/bin/python bench/w1_checkpoints.py --events 5000000 --repeat 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.w1 import _load_example, check_exact, read_sparkpoint_output  # noqa: E402
from bench.w1_data import oracle_counts, write_event_files  # noqa: E402
from bench.w1_spark import make_spark_session  # noqa: E402
from sparkpoint.common import Configuration  # noqa: E402
from sparkpoint.connectors.events import EventSpec  # noqa: E402
from sparkpoint.datastream import StreamExecutionEnvironment  # noqa: E402


def checkpoint_config(checkpoint_dir: Path, interval_ms: int) -> dict[str, str]:
    """The configuration of W1's exactly-once checkpoints every ``interval_ms`` into ``checkpoint_dir``."""
    return {
        "execution.checkpointing.interval": f"{interval_ms} ms",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "state.checkpoints.dir": checkpoint_dir.as_uri(),
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
    }


def checkpoint_summary(checkpoints: dict | None) -> dict[str, Any]:
    """Completed and failed checkpoints of a job result's ``checkpoints``, with the completed ones' durations.

    The history entries are in Flink's ``CheckpointStatistics`` shape, which has no synchronous and asynchronous
    durations (Flink gives them per task only): ``sync_ms``/``async_ms`` are None where an entry lacks them.
    """
    history = (checkpoints or {}).get("history", [])
    done = [c for c in history if c["status"] == "COMPLETED"]

    def ms(c: dict, key: str) -> float | None:
        return None if c.get(key) is None else round(c[key], 1)

    return {
        "checkpoints_completed": len(done),
        "checkpoints_failed": sum(c["status"] == "FAILED" for c in history),
        "checkpoint_durations_ms": [c["end_to_end_duration"] for c in done],
        "sync_ms": [ms(c, "sync_duration_ms") for c in done],
        "async_ms": [ms(c, "async_duration_ms") for c in done],
        "sizes": [c["state_size"] for c in done],
        "checkpointed_sizes": [c.get("checkpointed_size") for c in done],
    }


def run(spark: Any, input_dir: Path, work: Path, tag: str, checkpoint_ms: int | None, max_records: int) -> dict:
    example = _load_example()
    out = work / f"out-{tag}"
    conf = Configuration()
    conf.set("execution.epoch.max-records", max_records)
    conf.set("execution.epoch.max-bytes", "256 mb")
    conf.set("sparkpoint.local-state-dir", str(work / f"ls-{tag}"))
    if checkpoint_ms:
        for key, value in checkpoint_config(work / f"ck-{tag}", checkpoint_ms).items():
            conf.set(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.set_spark_session(spark)
    args = example.parse_args(
        [
            "--input",
            str(input_dir),
            "--output",
            str(out),
            "--seed",
            str(EventSpec().seed),
            "--window-size-millis",
            "60000",
            "--window-lagged-millis",
            "50000",
        ]
    )
    example.build(env, args)
    t0 = time.perf_counter()
    result = env.execute(f"w1-{tag}")
    seconds = time.perf_counter() - t0
    return {
        "tag": tag,
        "seconds": seconds,
        "epochs": result.epochs,
        "output": out,
        **checkpoint_summary(result.checkpoints),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=5_000_000)
    p.add_argument("--files", type=int, default=20)
    p.add_argument("--interval-ms", type=int, default=10_000)
    p.add_argument("--max-records", type=int, default=250_000)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="w1-ckpt-"))
    input_dir = work / "input"
    write_event_files(input_dir, args.events, args.files)
    expected = oracle_counts(args.events)
    spark = make_spark_session()
    warm = work / "warm"
    write_event_files(warm, 200_000, 2)
    run(spark, warm, work, "warmup", None, args.max_records)
    results: list[dict] = []
    for i in range(args.repeat):
        for tag, interval in (("off", None), ("exactly-once", args.interval_ms)):
            r = run(spark, input_dir, work, f"{tag}-{i}", interval, args.max_records)
            got, hidden = read_sparkpoint_output(r.pop("output"))
            check = check_exact(got, expected)
            r.update(kind=tag, correct=check["ok"] and not hidden, events_per_s=args.events / r["seconds"])
            results.append(r)
            print(
                f"{r['tag']:>16}: {r['seconds']:6.1f} s, {r['events_per_s']:9,.0f} events/s, "
                f"{r['epochs']} epochs, checkpoints {r['checkpoints_completed']} completed / "
                f"{r['checkpoints_failed']} failed, output {'correct' if r['correct'] else 'WRONG'}",
                flush=True,
            )
            if r["checkpoints_completed"]:
                print(
                    f"{'':>18}end-to-end {r['checkpoint_durations_ms']} ms, sync {r['sync_ms']} ms, "
                    f"async {r['async_ms']} ms, sizes {r['sizes']} bytes",
                    flush=True,
                )
    off = statistics.median(r["seconds"] for r in results if r["kind"] == "off")
    on = statistics.median(r["seconds"] for r in results if r["kind"] == "exactly-once")
    overhead = (on - off) / off * 100
    print(
        f"\nmedian: off {args.events / off:,.0f} events/s, exactly-once every {args.interval_ms} ms "
        f"{args.events / on:,.0f} events/s: overhead {overhead:+.1f} % (target <= 10 %)"
    )
    ok = all(r["correct"] for r in results)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"events": args.events, "overhead_percent": overhead, "runs": results}, indent=2, default=str)
        )
    spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
