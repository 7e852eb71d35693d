"""Benchmark W2: keyed state that is large, with a small change per epoch.

A ``KeyedProcessFunction`` keeps a count per key in ``ValueState`` and emits
``(key, running count)`` only for the sample keys (keys ending in ``"000"``, one in a
thousand), collected by the driver and checked against a numpy hand count. Input
(:mod:`bench.w2_data`): load epochs that insert every one of N keys once, then hot
epochs of ``--hot-records`` records over a random ``--touch-fraction`` of the keys;
one pair of files per epoch (parallelism 2: each source subtask reads one file per
epoch). Exactly-once checkpoints every second on local disk.

Per state backend (``--backends``; one that is not available is reported and skipped)
and checkpoint kind (``--incremental``: full, incremental or both; the hashmap backend
only has full), at ``--keys`` and at ``--small-keys``:

* the hot-epoch time (median over the hot epochs) and the ratio N / small;
* checkpoints: end-to-end, synchronous and asynchronous durations, reported size, and
  bytes on disk of ``chk-N`` plus the files newly added to ``shared/``;
* restore: a new job started with ``execution.savepoint.path`` = the last retained
  checkpoint of the run (cancelled with RETAIN_ON_CANCELLATION), reading one more hot
  pair: time from ``execute_async()`` to the end of its first epoch;
* peak RSS of PySpark's Python daemon/workers (largest process and largest sum), of the
  JVM and of this driver.

The peer (:mod:`bench.w2_spark`): Spark Structured Streaming's ``groupBy(key).count()``
on its RocksDB state store over the same files, one pair per micro-batch.

    .venv/bin/python bench/w2.py --keys 200000 --small-keys 20000 --hot-epochs 3   # quick
    .venv/bin/python bench/w2.py --json w2.json                                     # 10M keys
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
if __name__ == "__main__":  # the JobMaster loads the listener factory as bench.w2:_listener_factory
    sys.modules.setdefault("bench.w2", sys.modules["__main__"])

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

from bench.procs import RssSampler  # noqa: E402
from bench.w2_data import SAMPLE_SUFFIX, W2Input, check_sample, du, now, write_input  # noqa: E402
from bench.w2_report import print_backend, print_spark, summarize_epochs  # noqa: E402
from bench.w2_spark import run_spark_count  # noqa: E402
from sparkpoint.common import Configuration, Duration, WatermarkStrategy  # noqa: E402
from sparkpoint.datastream import KeyedProcessFunction, StreamExecutionEnvironment  # noqa: E402
from sparkpoint.datastream.connectors.file_system import FileSource, StreamFormat  # noqa: E402
from sparkpoint.datastream.state import ValueStateDescriptor  # noqa: E402
from sparkpoint.datastream.transformations import CollectTransformation, TransformationInput  # noqa: E402
from sparkpoint.errors import ConfigurationError  # noqa: E402
from sparkpoint.runtime.job_listener import JobListener  # noqa: E402

PARALLELISM = 2
LISTENER = "bench.w2:_listener_factory"


class CountPerKey(KeyedProcessFunction):
    """Count per key in ValueState; emit ``(key, count)`` for the sample keys only."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if value.endswith(SAMPLE_SUFFIX):
            yield value, n


# -- the listener: epochs, checkpoints, cancel ------------------------------------------------------


class Probe(JobListener):
    """Records epochs and checkpoints; cancels the job once all input is read and a checkpoint at or after the
    last data epoch completed (the collected output of an exactly-once job is what its checkpoints committed)."""

    def __init__(self, expected_records: int, feed: Feed):
        self.expected, self.feed = expected_records, feed
        self.read = 0  # records this run read (a restored job's totals count on from its checkpoint's)
        self.job: Any = None
        self.t0 = now()
        self.epochs: list[dict[str, Any]] = []
        self.checkpoints: list[dict[str, Any]] = []
        self.last_data_epoch: int | None = None
        self.first_epoch_s: float | None = None
        self._shared_seen: set[str] = set()

    def on_job_started(self, job: Any) -> None:
        self.job = job

    def on_epoch_completed(self, stats: Any) -> None:
        t = now() - self.t0
        if self.first_epoch_s is None:
            self.first_epoch_s = t
        self.epochs.append(
            {
                "epoch": stats.epoch,
                "records_in": stats.records_in,
                "duration_s": stats.duration_s,
                "t_s": t,
                "phase_ms": dict(getattr(stats, "phase_ms", {})),
            }
        )
        self.read += stats.records_in
        self.feed.advance(self.read)
        if self.last_data_epoch is None and self.read >= self.expected:
            self.last_data_epoch = stats.epoch

    def on_checkpoint_completed(self, checkpoint: Any) -> None:
        chk = Path(checkpoint.location.removeprefix("file://"))
        new_shared = 0
        # shared state: SST files, and the state changelog's segments a changelog checkpoint references (they
        # are written every epoch, before the checkpoint: counted by the first checkpoint after them)
        for shared in (chk.parent / "shared", chk.parent / "changelog"):
            for f in shared.rglob("*") if shared.is_dir() else ():
                if f.is_file() and str(f) not in self._shared_seen:
                    self._shared_seen.add(str(f))
                    new_shared += f.stat().st_size
        st = self.job.coordinator.stats.get(checkpoint.checkpoint_id) if self.job is not None else None
        barrier = checkpoint.metadata.barrier_epoch
        self.checkpoints.append(
            {
                "id": checkpoint.checkpoint_id,
                "barrier_epoch": barrier,
                "location": str(chk),
                "end_to_end_ms": checkpoint.duration_ms(),
                "state_size": checkpoint.state_size,
                "sync_ms": getattr(st, "sync_duration_ms", None),
                "async_ms": getattr(st, "async_duration_ms", None),
                "chk_dir_bytes": du(chk),
                "new_shared_bytes": new_shared,
                "kind": "changelog" if any(chk.glob("changelog-*.json")) else "materialized",
            }
        )
        if self.last_data_epoch is not None and barrier >= self.last_data_epoch:
            self.job.cancel()


class Feed:
    """The directory a run reads, its pairs linked into it one at a time: the next once the run has read every
    record of those before. So an epoch never sees two pairs: a file source reads on past a file's end within an
    epoch, and deals a subtask more files while it holds fewer bytes than its bound."""

    def __init__(self, directory: Path):
        self.directory = directory
        shutil.rmtree(directory, ignore_errors=True)  # a run that ended early (no checkpoint) left its pairs
        directory.mkdir(parents=True)
        self.pending: list[tuple[list[Path], int]] = []  # (a pair's files, its records), in order
        self.linked = 0  # records of the pairs linked in, since begin()

    def begin(self, pairs: list[list[Path]], sizes: list[int]) -> None:
        """A run starts: it will read ``pairs`` (of ``sizes`` records), the first linked in now."""
        self.pending, self.linked = list(zip(pairs, sizes)), 0
        self.advance(0)

    def advance(self, read: int) -> None:
        """The run read ``read`` records: once that is all of the pairs linked, link the next."""
        if read >= self.linked and self.pending:
            paths, size = self.pending.pop(0)
            for path in paths:
                os.link(path, self.directory / path.name)
            self.linked += size


_PROBE: list[Probe] = []


def _listener_factory(job: Any) -> Probe:
    return _PROBE[-1]


# -- one sparkpoint job ---------------------------------------------------------------------------

EXTRA_CONF: dict[str, str] = {}  # -D key=value: more configuration of every sparkpoint job


def make_env(
    spark: Any, work: Path, tag: str, backend: str, incremental: bool, max_records: int, restore_from: str | None
) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set("execution.epoch.max-records", int(max_records))
    conf.set("execution.epoch.max-bytes", "256 mb")
    conf.set("sparkpoint.local-state-dir", str(work / f"ls-{tag}"))
    conf.set("execution.checkpointing.interval", "1000 ms")
    conf.set("execution.checkpointing.mode", "EXACTLY_ONCE")
    conf.set("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
    conf.set("execution.checkpointing.incremental", bool(incremental))
    conf.set("state.checkpoints.dir", (work / f"ck-{tag}").as_uri())
    conf.set("state.backend.type", backend)
    conf.set("execution.job-listeners", LISTENER)
    if restore_from:
        conf.set("execution.savepoint.path", restore_from)
    for key, value in EXTRA_CONF.items():
        conf.set(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(PARALLELISM)
    env.set_spark_session(spark)
    return env


def build_job(env: StreamExecutionEnvironment, input_dir: Path) -> None:
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(input_dir))
        .monitor_continuously(Duration.of_millis(200))
        .build()
    )
    counts = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "keys")
        .uid("keys")
        .key_by(lambda k: k)
        .process(CountPerKey())
        .uid("count")
    )
    env._add_transformation(CollectTransformation, "Collect", [TransformationInput(counts._id)])


def run_job(
    spark: Any,
    inp: W2Input,
    work: Path,
    tag: str,
    backend: str,
    incremental: bool,
    feed: Feed,
    restore_from: str | None = None,
) -> dict[str, Any]:
    """One job over ``inp``'s files (the main ones, or after ``restore_from`` the restore pair: the last of
    ``inp.pair_paths``), fed pair by pair through ``feed``, cancelled when done (see :class:`Probe`)."""
    pairs = inp.load_pairs + inp.hot_pairs
    if restore_from:
        assert inp.restore_pair is not None
        pairs = [inp.restore_pair]
    sizes = [len(a) + len(b) for a, b in pairs]
    probe = Probe(sum(sizes), feed)
    _PROBE.append(probe)
    feed.begin(inp.pair_paths[-len(pairs) :], sizes)
    env = make_env(spark, work, tag, backend, incremental, inp.max_file_records, restore_from)
    build_job(env, feed.directory)
    with RssSampler() as rss:
        probe.t0 = now()
        client = env.execute_async(f"w2-{tag}")
        result = client.wait(4 * 3600)
        seconds = now() - probe.t0
    _PROBE.remove(probe)
    return {
        "tag": tag,
        "seconds": seconds,
        "epochs": probe.epochs,
        "checkpoints": probe.checkpoints,
        "first_epoch_s": probe.first_epoch_s,
        "collected": list(result.collected),
        "rss": rss.to_json(),
        "job_epochs": result.epochs,
    }


def run_size(
    spark: Any, inp: W2Input, work: Path, backend: str, incremental: bool, with_restore: bool = True
) -> dict[str, Any]:
    """Main run (load + hot epochs, checked), then (``with_restore``) the restore run from its last checkpoint
    (checked)."""
    kind = "incremental" if incremental else "full"
    tag = f"{backend}-{kind}-{inp.keys}"
    feed = Feed(work / f"feed-{tag}")  # the restore run reads on in the same directory: its checkpoint names the files
    main = run_job(spark, inp, work, tag, backend, incremental, feed)
    before = inp.sample_totals(False)
    main["check"] = check_sample(main.pop("collected"), before)
    main.update(summarize_epochs(main, inp))
    print(
        f"  {tag}: {main['seconds']:.1f} s, {len(main['epochs'])} epochs, hot epoch median "
        f"{main['hot_epoch_median_s']:.2f} s, sample check {'OK' if main['check']['ok'] else 'WRONG'}",
        flush=True,
    )
    out: dict[str, Any] = {"keys": inp.keys, "backend": backend, "incremental": incremental, "main": main}
    if not with_restore:
        _remove_run_dirs(work, tag)
        return out
    if not main["checkpoints"]:
        out["restore"] = {"error": "no completed checkpoint"}
        return out
    latest = main["checkpoints"][-1]["location"]
    added = inp.write_restore_pair()
    try:
        restore = run_job(spark, inp, work, f"{tag}-restore", backend, incremental, feed, restore_from=latest)
        pair_keys = set(inp.restore_pair[0].tolist()) | set(inp.restore_pair[1].tolist())
        changed = [str(k) for k in pair_keys if str(k).endswith(SAMPLE_SUFFIX)]
        after = inp.sample_totals(True)
        restore["check"] = check_sample(
            restore.pop("collected"), {k: after[k] for k in changed}, {k: before.get(k, 0) for k in changed}
        )
        restore["restored_checkpoint"] = latest
        print(
            f"  {tag}: restore from {Path(latest).name}: first epoch after {restore['first_epoch_s']:.2f} s, "
            f"check {'OK' if restore['check']['ok'] else 'WRONG'}",
            flush=True,
        )
        out["restore"] = restore
    finally:
        for path in added:
            path.unlink()
        inp.files -= len(added)
        inp.pair_paths.pop()
        _remove_run_dirs(work, tag)
    return out


def _remove_run_dirs(work: Path, tag: str) -> None:
    """The checkpoint and local-state directories of the runs tagged ``tag`` (main and restore)."""
    for d in work.glob(f"*-{tag}*"):
        shutil.rmtree(d, ignore_errors=True)


def backend_available(name: str) -> str | None:
    """``None`` if the backend loads, else why not."""
    from sparkpoint.state.backend_loader import load_state_backend

    try:
        load_state_backend(name)
    except ConfigurationError as e:
        return str(e)
    except ImportError as e:
        return f"{type(e).__name__}: {e}"
    return None


# -- the whole benchmark ----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=10_000_000, help="N, keys in the state (default 10,000,000)")
    p.add_argument("--small-keys", type=int, default=50_000, help="the small reference (default 50,000)")
    p.add_argument(
        "--hashmap-keys",
        type=int,
        default=None,
        help="N for the hashmap backend, which rewrites all its state every epoch (default: --keys)",
    )
    p.add_argument("--hot-epochs", type=int, default=10, help="hot epochs after the load (default 10)")
    p.add_argument("--hot-records", type=int, default=200_000, help="records per hot epoch (default 200,000)")
    p.add_argument(
        "--touch-fraction", type=float, default=0.01, help="fraction of the keys a hot epoch touches (default 0.01)"
    )
    p.add_argument(
        "--touch-keys",
        type=int,
        default=None,
        help="keys a hot epoch touches at every size instead of a fraction (the same change, "
        "another state size: what the state's size alone costs)",
    )
    p.add_argument(
        "--load-records",
        type=int,
        default=1_000_000,
        help="records per load epoch (default 1,000,000: 10 load epochs at 10M keys)",
    )
    p.add_argument("--backends", default="hashmap,rocksdb", help="state.backend.type values (default hashmap,rocksdb)")
    p.add_argument(
        "--incremental",
        choices=("full", "incremental", "both"),
        default="both",
        help="checkpoint kinds for backends that have incremental checkpoints (hashmap: full only)",
    )
    p.add_argument("--warmup-keys", type=int, default=20_000, help="untimed warm-up run (0 skips)")
    p.add_argument("--no-spark", action="store_true", help="skip the Spark Structured Streaming peer")
    p.add_argument("--workdir", type=Path, default=None, help="default: a temp dir, removed afterwards")
    p.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    p.add_argument(
        "-D",
        dest="defines",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="configuration of every sparkpoint job, e.g. -D state.backend.rocksdb.compaction.style=LEVEL",
    )
    args = p.parse_args(argv)
    for define in args.defines:
        key, sep, value = define.partition("=")
        if not sep:
            p.error(f"-D {define}: expected KEY=VALUE")
        EXTRA_CONF[key.strip()] = value.strip()
    return args


def run_spark_peer(spark: Any, inp: W2Input, work: Path) -> dict[str, Any]:
    from bench.w2_report import summarize_spark

    ck = work / f"spark-ck-{inp.keys}"
    shutil.rmtree(ck, ignore_errors=True)
    with RssSampler() as rss:
        res = run_spark_count(spark, inp.directory, ck)
    res["rss"] = rss.to_json()
    out = summarize_spark(res, inp)
    shutil.rmtree(ck, ignore_errors=True)
    print(
        f"  spark {inp.keys:,} keys: {out['seconds']:.1f} s, {out['batches']} micro-batches, hot median "
        f"{out['hot_batch_median_ms']:,.0f} ms, sample counts {'OK' if out['ok'] else 'WRONG'}",
        flush=True,
    )
    return out


def run_backends(args: argparse.Namespace, spark: Any, inputs: Any, work: Path, results: dict) -> None:
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        why = backend_available(backend)
        if why is not None:
            print(f"\n{backend}: not available ({why})", flush=True)
            results["backends"][backend] = {"available": False, "reason": why}
            continue
        kinds = (
            [False]
            if backend == "hashmap"
            else {"full": [False], "incremental": [True], "both": [False, True]}[args.incremental]
        )
        if backend == "hashmap" and args.incremental != "full":
            print("\nhashmap: full checkpoints only (no incremental form)", flush=True)
        big_keys = args.hashmap_keys if backend == "hashmap" and args.hashmap_keys else args.keys
        for inc in kinds:
            label = f"{backend}, {'incremental' if inc else 'full'} checkpoints"
            print(f"\n== sparkpoint, {label} ==", flush=True)
            small = run_size(spark, inputs(args.small_keys), work, backend, inc)
            big = run_size(spark, inputs(big_keys), work, backend, inc)
            # the small reference again: the machine's speed drifts between runs, so the big run is
            # compared with the mean of the small runs before and after it
            after = run_size(spark, inputs(args.small_keys), work, backend, inc, with_restore=False)
            ratios = print_backend(
                label + (f" (N = {big_keys:,}, --hashmap-keys)" if big_keys != args.keys else ""), big, small, after
            )
            results["backends"].setdefault(backend, {"available": True, "runs": []})["runs"].append(
                {"incremental": inc, "big": big, "small": small, "small_after": after, **ratios}
            )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    own_tmp = args.workdir is None
    work = Path(tempfile.mkdtemp(prefix="w2-bench-")) if own_tmp else args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    cache: dict[int, W2Input] = {}

    def inputs(keys: int) -> W2Input:
        if keys not in cache:
            t = now()
            shutil.rmtree(work / f"input-{keys}", ignore_errors=True)
            fraction = args.touch_fraction if args.touch_keys is None else min(1.0, args.touch_keys / keys)
            cache[keys] = write_input(
                work / f"input-{keys}", keys, args.load_records, args.hot_epochs, args.hot_records, fraction
            )
            print(
                f"input {keys:,} keys: {cache[keys].main_records:,} records in {cache[keys].files} files "
                f"({len(cache[keys].load_pairs)} load + {args.hot_epochs} hot epochs) in {now() - t:.1f} s",
                flush=True,
            )
        return cache[keys]

    results: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["bench/w2.py"] + (argv if argv is not None else sys.argv[1:])),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        },
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "backends": {},
    }
    from bench.w1_spark import make_spark_session

    spark = make_spark_session("sparkpoint-bench-w2")
    t_all = now()
    try:
        if args.warmup_keys > 0:
            warm = write_input(
                work / "warmup", args.warmup_keys, args.load_records, 2, 20_000, args.touch_fraction, seed=99
            )
            run_size(spark, warm, work, "hashmap", False)
            if not args.no_spark:
                run_spark_peer(spark, warm, work)
            print("(warm-up done, not counted)", flush=True)
        if not args.no_spark:
            print("\n== spark structured streaming (RocksDB state store) ==", flush=True)
            s_small = run_spark_peer(spark, inputs(args.small_keys), work)
            s_big = run_spark_peer(spark, inputs(args.keys), work)
            results["spark"] = {"small": s_small, "big": s_big}
        run_backends(args, spark, inputs, work, results)
        if not args.no_spark:
            results["spark"]["hot_batch_ratio"] = print_spark(results["spark"]["big"], results["spark"]["small"])
    finally:
        spark.sparkContext.setLogLevel("ERROR")
        spark.stop()
        results["total_s"] = now() - t_all
        results["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        if own_tmp:
            shutil.rmtree(work, ignore_errors=True)
    ok = _all_ok(results)
    results["ok"] = ok
    print(
        f"\n{results['date']}, load average {results['machine']['loadavg_start']} -> "
        f"{results['machine']['loadavg_end']}, {results['total_s']:.0f} s in all: "
        f"{'ALL CHECKS OK' if ok else 'CHECK FAILED'}"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, default=str))
        print(f"results written to {args.json}")
    return 0 if ok else 1


def _all_ok(results: dict[str, Any]) -> bool:
    oks = [s["ok"] for k, s in results.get("spark", {}).items() if isinstance(s, dict)]
    for b in results["backends"].values():
        for r in b.get("runs", []):
            for side in ("big", "small"):
                oks += [
                    r[side]["main"]["check"]["ok"],
                    r[side]["main"]["epoch_shape_ok"],
                    r[side].get("restore", {}).get("check", {}).get("ok", False),
                ]
            oks += [r["small_after"]["main"]["check"]["ok"], r["small_after"]["main"]["epoch_shape_ok"]]
    return all(oks)


if __name__ == "__main__":
    sys.exit(main())
