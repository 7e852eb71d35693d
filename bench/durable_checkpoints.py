"""What durable checkpoints cost: the same job with ``sparkpoint.checkpoints.fsync`` on (the default) and off.

A keyed running count (``--records`` records over 50 keys, two source splits, parallelism 2, epochs of
``--max-records`` records per split) checkpoints at every epoch into a local directory, with the hashmap
backend, RocksDB with incremental checkpoints, and RocksDB with the state changelog (a segment per
keyed subtask and epoch, and changelog checkpoints between materializations): the cases that write the
most files per second. Each is run as a user runs it, ``env.execute()`` with the key in the job's
configuration, on the in-process executor (``--target local``, this process) or on a local Spark
(``--target spark``, ``local[2]``, the tasks' files written by Python workers), alternately off and on.

Prints per case and mode the median wall time, the checkpoints completed (``_metadata`` files renamed
into place), the ``fsync`` calls and the time spent in them (counted in this process: the driver's
only, on Spark), the added milliseconds per checkpoint and the ratio of the medians. Every run's
final counts are checked against a hand count. The cost is the disk's: multiply the ``fsync`` calls
per checkpoint by your disk's ``fsync`` latency to carry the result over.

    .venv/bin/python bench/durable_checkpoints.py --records 60000 --repeat 3
    .venv/bin/python bench/durable_checkpoints.py --target spark --records 20000 --repeat 2 --cases hashmap
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sparkpoint.common import Configuration, WatermarkStrategy  # noqa: E402
from sparkpoint.datastream import KeyedProcessFunction, StreamExecutionEnvironment  # noqa: E402
from sparkpoint.datastream.connectors.generator import DataGeneratorSource  # noqa: E402
from sparkpoint.datastream.state import ValueStateDescriptor  # noqa: E402

KEYS = 50
ROCKSDB = {"state.backend.type": "rocksdb", "execution.checkpointing.incremental": "true"}
CASES = {
    "hashmap": {},
    "rocksdb-incremental": ROCKSDB,
    "rocksdb-changelog": {**ROCKSDB, "state.changelog.enabled": "true"},
}


def key_of(i: int) -> str:
    return f"k{(i * 7919) % KEYS}"


class Count(KeyedProcessFunction):
    def open(self, ctx: Any) -> None:
        self.n = ctx.get_state(ValueStateDescriptor("n"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        n = (self.n.value() or 0) + 1
        self.n.update(n)
        yield (value, n)


class FsyncMeter:
    """Counts this process's ``os.fsync`` calls, the seconds spent in them and the ``_metadata`` files renamed
    into place (checkpoints completed)."""

    def __init__(self) -> None:
        self.real_fsync = os.fsync
        self.calls, self.seconds, self.checkpoints = 0, 0.0, 0

    def reset(self) -> None:
        self.calls, self.seconds, self.checkpoints = 0, 0.0, 0

    def fsync(self, fd: Any) -> None:
        self.calls += 1
        t0 = time.perf_counter()
        self.real_fsync(fd)
        self.seconds += time.perf_counter() - t0

    def renaming(self, rename: Any) -> Any:
        """``rename`` (``os.replace`` or ``os.rename``: a write without ``fsync`` moves with the latter), counting."""

        def counted(src: Any, dst: Any, **kwargs: Any) -> None:
            rename(src, dst, **kwargs)
            self.checkpoints += os.path.basename(os.fspath(dst)) == "_metadata"

        return counted


def run(spark: Any, work: Path, tag: str, conf_keys: dict, records: int, max_records: int) -> tuple[float, Counter]:
    """Seconds of the job's run (on ``spark`` if given), the final count per key."""
    conf = Configuration()
    for key, value in {
        "execution.target": "spark" if spark else "local",
        "execution.epoch.max-records": max_records,
        "execution.epoch.idle-pause": "0 ms",
        "sparkpoint.local-state-dir": str(work / f"ls-{tag}"),
        "execution.checkpointing.interval": "1 ms",
        "state.checkpoints.dir": (work / f"ck-{tag}").as_uri(),
        **conf_keys,
    }.items():
        conf.set(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    if spark is not None:
        env.set_spark_session(spark)
    src = DataGeneratorSource(key_of, records, num_splits=2)
    counts = (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(Count())
        .uid("count")
    )
    t0 = time.perf_counter()
    out = list(counts.execute_and_collect(f"durable-{tag}"))
    seconds = time.perf_counter() - t0
    last: Counter = Counter()
    for key, n in out:
        last[key] = max(last[key], n)
    return seconds, last


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=60_000)
    p.add_argument("--max-records", type=int, default=1_000, help="records per source split per epoch")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--target", choices=("local", "spark"), default="local")
    p.add_argument(
        "--dir",
        default=None,
        help="where the checkpoints go: a directory on the disk to measure (default: the system's temporary directory)",
    )
    args = p.parse_args(argv)
    spark = None
    if args.target == "spark":
        from bench.w1_spark import make_spark_session

        os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers import sparkpoint from this environment
        spark = make_spark_session("sparkpoint-bench-durable-checkpoints")
    meter = FsyncMeter()
    os.fsync, os.replace, os.rename = meter.fsync, meter.renaming(os.replace), meter.renaming(os.rename)
    work = Path(tempfile.mkdtemp(prefix="durable-ck-", dir=args.dir))
    oracle = Counter(key_of(i) for i in range(args.records))
    print(
        f"{args.records:,} records, epochs of {args.max_records:,} records per split, a checkpoint per epoch, "
        f"under {work}",
        flush=True,
    )
    run(spark, work, "warmup", {}, 2_000, 500)
    ok = True
    for case in args.cases.split(","):
        rows: dict[str, list[tuple[float, int, int, float]]] = {"fsync": [], "no-fsync": []}
        for i in range(args.repeat):
            for mode in ("no-fsync", "fsync"):
                meter.reset()
                keys = {**CASES[case], "sparkpoint.checkpoints.fsync": "false" if mode == "no-fsync" else "true"}
                seconds, last = run(spark, work, f"{case}-{mode}-{i}", keys, args.records, args.max_records)
                ok &= last == oracle
                rows[mode].append((seconds, meter.checkpoints, meter.calls, meter.seconds))
                print(
                    f"  {case:>20} {mode:>8} #{i}: {seconds:6.2f} s, {meter.checkpoints} checkpoints, "
                    f"{meter.calls} fsync calls ({meter.seconds * 1000:.0f} ms in them), "
                    f"counts {'exact' if last == oracle else 'WRONG'}",
                    flush=True,
                )
        on, off = (statistics.median(r[0] for r in rows[m]) for m in ("fsync", "no-fsync"))
        ck = statistics.median(r[1] for r in rows["fsync"]) or 1
        calls = statistics.median(r[2] for r in rows["fsync"])
        in_fsync = statistics.median(r[3] for r in rows["fsync"])
        print(
            f"{case}: fsync {on:.2f} s, no-fsync {off:.2f} s (medians): ratio {on / off:.3f}, "
            f"{(on - off) / ck * 1000:+.1f} ms per checkpoint; {calls / ck:.1f} fsync calls per checkpoint, "
            f"{in_fsync / max(calls, 1) * 1000:.2f} ms each",
            flush=True,
        )
    if spark is not None:
        spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
