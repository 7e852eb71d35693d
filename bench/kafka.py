"""Benchmark: Kafka -> seed job -> Kafka with exactly-once, against files and the client library.

In one run, on a broker it starts itself (``tests.servers.kafka_server``):

1. fills a 4-partition input topic with ``--events`` seed events (and writes the same
   events to 4 text files for the file peer);
2. measures the ceiling of the client library: a plain confluent-kafka loop consuming the
   whole input topic and producing every record to a scratch topic in transactions of
   ~100k records;
3. runs the seed job (``examples/behavior_counts.py``) Kafka -> windows -> Kafka with
   EXACTLY_ONCE, checkpoints every 1 s, parallelism 2, through ``sparkpoint run`` in a
   child process, on the in-process executor and on a local Spark (``local[2]``), once per
   ``--epoch-max-records`` value;
4. runs the same job over the same events from files to files (``FileSource``/``FileSink``),
   same executor and configuration: the peer that shows what Kafka costs;
5. checks every run's committed output (``read_committed`` for Kafka, finished part files
   for files) exactly against a pandas oracle and prints a table;
6. optionally (``--profile-events``) profiles a Kafka run on the in-process executor.

Seconds are the child process's wall time, start to exit (interpreter start, job graph,
Spark session, every epoch and the final commit); "job rate" is the job's own figure
(records over the summed epoch durations, from its per-epoch lines).

    python bench/kafka.py                                  # 2,000,000 events, max-records 20000 100000
    python bench/kafka.py --events 200000 --targets local --profile-events 0   # quick
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.kafka_data import client_ceiling, committed_lines, compare, file_lines, fill_topic, oracle_lines  # noqa: E402
from bench.w1_data import write_event_files  # noqa: E402
from sparkpoint.testing.kill_loop import run_command  # noqa: E402
from tests.servers.kafka_server import KafkaServer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
JOB = str(REPO / "examples" / "behavior_counts.py")
EPOCH_LINE = re.compile(
    r"epoch (\d+): ([\d,]+) records in, ([\d,]+) out \(([\d.]+)s\); "
    r"total ([\d,]+) at ([\d,]+) records/s"
)


def job_conf(target: str, work: Path, max_records: int) -> dict[str, Any]:
    """The seed job's exactly-once configuration (as the end-to-end tests use it)."""
    return {
        "execution.target": target,
        "execution.checkpointing.interval": "1 s",
        "state.checkpoints.dir": (work / "ckpt").as_uri(),
        "state.checkpoints.num-retained": 3,
        "execution.epoch.max-records": max_records,
        "parallelism.default": 2,
        "restart-strategy.type": "none",
        "sparkpoint.local-state-dir": str(work / "state"),
        "rest.enabled": "false",
        **({"spark.master": "local[2]", "spark.ui.enabled": "false"} if target == "spark" else {}),
    }


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def run_job(
    job_args: list[str], conf: dict[str, Any], log: Path, python_options: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``sparkpoint run`` the seed job in a child process; wall time, epoch lines, timings of its output."""
    cmd = run_command(JOB, job_args, conf)
    cmd = [cmd[0], *python_options, *cmd[1:]]
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=str(REPO), env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    epochs: list[dict[str, Any]] = []
    first_epoch_at: float | None = None
    submitted_at: float | None = None
    assert proc.stdout is not None
    with open(log, "w", encoding="utf-8") as out:
        for line in proc.stdout:
            now = time.perf_counter() - t0
            out.write(f"{now:8.3f} {line}")
            if submitted_at is None and line.startswith("Job has been submitted"):
                submitted_at = now
            m = EPOCH_LINE.search(line)
            if m:
                first_epoch_at = now if first_epoch_at is None else first_epoch_at
                epochs.append(
                    {
                        "epoch": int(m[1]),
                        "in": int(m[2].replace(",", "")),
                        "out": int(m[3].replace(",", "")),
                        "s": float(m[4]),
                        "at": now,
                        "total": int(m[5].replace(",", "")),
                        "rate": int(m[6].replace(",", "")),
                    }
                )
    rc = proc.wait()
    seconds = time.perf_counter() - t0
    return {
        "rc": rc,
        "seconds": seconds,
        "submitted_at": submitted_at,
        "first_epoch_at": first_epoch_at,
        "epochs": epochs,
        "busy_s": sum(e["s"] for e in epochs),
        "job_rate": epochs[-1]["rate"] if epochs else 0,
        "records": epochs[-1]["total"] if epochs else 0,
        "load": (load_before, os.getloadavg()[0]),
    }


def kafka_run(
    kafka: KafkaServer,
    events_topic: str,
    target: str,
    max_records: int,
    work: Path,
    expected: Any,
    python_options: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The seed job Kafka -> Kafka (EXACTLY_ONCE) into a fresh 2-partition topic; checked read_committed."""
    out_topic = f"counts-{target}-{max_records}-{time.time_ns()}"
    kafka.create_topic(out_topic, partitions=2)
    run_dir = work / out_topic
    run_dir.mkdir()
    args = ["--kafka", kafka.bootstrap_servers, "--input-topic", events_topic, "--output-topic", out_topic, "--bounded"]
    result = run_job(args, job_conf(target, run_dir, max_records), run_dir / "job.log", python_options)
    got = committed_lines(kafka.bootstrap_servers, out_topic)
    result["check"] = compare(got, expected)
    if result["check"] != "exact":  # keep both for a look (with --workdir)
        (run_dir / "committed.tsv").write_text("".join(f"{line}\t{k}\n" for line, k in sorted(got.items())))
        (run_dir / "expected.tsv").write_text("".join(f"{line}\n" for line in sorted(expected)))
    return result


def file_run(input_dir: Path, target: str, max_records: int, work: Path, expected: Any) -> dict[str, Any]:
    """The same job from the event files to a FileSink; checked on the finished part files."""
    run_dir = work / f"files-{target}-{max_records}-{time.time_ns()}"
    run_dir.mkdir()
    args = ["--input", str(input_dir), "--output", str(run_dir / "out")]
    result = run_job(args, job_conf(target, run_dir, max_records), run_dir / "job.log")
    got, hidden = file_lines(run_dir / "out")
    check = compare(got, expected)
    result["check"] = check if not hidden else f"{check}; left-over files {hidden[:3]}"
    return result


def spark_session_start() -> float:
    """Seconds to import pyspark and start a ``local[2]`` session (UI off), in a fresh process."""
    code = (
        "import time; t = time.perf_counter(); from pyspark.sql import SparkSession; "
        "s = SparkSession.builder.master('local[2]').config('spark.ui.enabled', 'false').getOrCreate(); "
        "print(time.perf_counter() - t); s.stop()"
    )
    out = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def profile_local(kafka: KafkaServer, n: int, max_records: int, work: Path, top: int) -> dict[str, Any]:
    """cProfile of a Kafka -> Kafka run on the in-process executor over ``n`` events of a topic of its own."""
    topic = f"profile-events-{time.time_ns()}"
    kafka.create_topic(topic, partitions=4)
    fill_topic(kafka, topic, n)
    prof = work / "kafka-local.prof"
    result = kafka_run(
        kafka, topic, "local", max_records, work, oracle_lines(n), python_options=("-m", "cProfile", "-o", str(prof))
    )
    rows = []
    if prof.exists():
        stats = pstats.Stats(str(prof))
        total = stats.total_tt  # type: ignore[attr-defined]
        for sort in ("tottime", "cumulative"):
            items = sorted(stats.stats.items(), key=lambda kv: -kv[1][2 if sort == "tottime" else 3])  # type: ignore[attr-defined]
            if sort == "cumulative":  # the job's own frames, not the interpreter's and the CLI's
                items = [kv for kv in items if "sparkpoint" in kv[0][0] and not kv[0][0].endswith("cli.py")]
            for (file, line, func), (_cc, calls, tt, ct, _callers) in items[:top]:
                rows.append(
                    {
                        "sort": sort,
                        "function": f"{Path(file).name}:{line}({func})",
                        "calls": calls,
                        "tottime": tt,
                        "cumtime": ct,
                    }
                )
        result["profile_total_s"] = total
    result["profile"] = rows
    result.pop("epochs", None)
    return result


# -- report -------------------------------------------------------------------------------------


def _row(name: str, r: dict[str, Any], peer: dict[str, Any] | None, ceiling: float) -> list[str]:
    rate = r["records"] / r["seconds"] if r["seconds"] else 0.0
    to_peer = f"{rate / (peer['records'] / peer['seconds']):.2f}" if peer and peer.get("seconds") else "-"
    return [
        name,
        f"{r['records']:,}",
        f"{r['seconds']:.1f}",
        f"{rate:,.0f}",
        f"{r.get('job_rate', 0):,}",
        to_peer,
        f"{rate / ceiling:.3f}" if ceiling else "-",
        r.get("check", "-"),
    ]


def print_table(results: dict[str, dict[str, Any]], ceiling: dict[str, Any]) -> None:
    head = ["run", "records", "seconds", "records/s", "job rate", "/ file peer", "/ ceiling", "output"]
    rows = [
        [
            "client ceiling",
            f"{ceiling['records']:,}",
            f"{ceiling['seconds']:.1f}",
            f"{ceiling['records_per_s']:,.0f}",
            "-",
            "-",
            "1.000",
            "-",
        ]
    ]
    for name, r in results.items():
        peer = results.get(name.replace("kafka", "files")) if name.startswith("kafka") else None
        rows.append(_row(name, r, peer, ceiling["records_per_s"]))
    print("\n| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def print_details(results: dict[str, dict[str, Any]]) -> None:
    print(
        "\nper run: rc, process wall s, 'submitted' at s, first epoch at s, epochs, busy s (sum of epoch "
        "durations), mean/max epoch s, load average 1 min before/after"
    )
    for name, r in results.items():
        e = [x["s"] for x in r["epochs"]] or [0.0]
        sub = f"{r['submitted_at']:.1f}" if r["submitted_at"] is not None else "-"
        first = f"{r['first_epoch_at']:.1f}" if r["first_epoch_at"] is not None else "-"
        print(
            f"  {name:<24} rc={r['rc']} wall={r['seconds']:.1f} submitted={sub} first-epoch={first} "
            f"epochs={len(r['epochs'])} busy={r['busy_s']:.1f} mean={sum(e) / len(e):.2f} max={max(e):.2f} "
            f"load={r['load'][0]:.2f}/{r['load'][1]:.2f}"
        )


def print_profile(prof: dict[str, Any]) -> None:
    print(
        f"\ncProfile of a Kafka -> Kafka run on the in-process executor: {prof['records']:,} records, "
        f"{prof['seconds']:.1f} s wall under the profiler, output {prof['check']}"
    )
    for sort in ("tottime", "cumulative"):
        print(f"  top by {sort}:")
        for row in (x for x in prof["profile"] if x["sort"] == sort):
            print(f"    {row['tottime']:8.2f} {row['cumtime']:8.2f} {row['calls']:>10,}  {row['function']}")


# -- main ---------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument(
        "--epoch-max-records",
        type=int,
        nargs="+",
        default=[20_000, 100_000],
        help="execution.epoch.max-records values (records per source split per epoch)",
    )
    p.add_argument("--targets", nargs="+", default=["local", "spark"], choices=["local", "spark"])
    p.add_argument("--no-files", action="store_true", help="skip the file peer")
    p.add_argument("--ceiling-batch", type=int, default=100_000, help="records per transaction of the ceiling")
    p.add_argument("--profile-events", type=int, default=0, help="cProfile a local Kafka run of this many (0: no)")
    p.add_argument("--profile-top", type=int, default=25)
    p.add_argument("--workdir", help="keep files here (default: a temporary directory, removed)")
    p.add_argument("--json", help="write all figures to this file")
    return p.parse_args(argv)


def run_all(args: argparse.Namespace, kafka: KafkaServer, work: Path) -> dict[str, Any]:
    n = args.events
    kafka.create_topic("events", partitions=4)
    kafka.create_topic("ceiling-scratch", partitions=4)
    fill_s = fill_topic(kafka, "events", n)
    print(f"filled topic 'events' (4 partitions) with {n:,} events in {fill_s:.1f} s", flush=True)
    if not args.no_files:
        write_event_files(work / "input", n, 4)
    expected = oracle_lines(n)
    print(f"oracle: {len(expected):,} window lines", flush=True)
    ceiling = client_ceiling(kafka.bootstrap_servers, "events", "ceiling-scratch", n, args.ceiling_batch)
    print(
        f"client ceiling: {ceiling['records']:,} records in {ceiling['seconds']:.1f} s = "
        f"{ceiling['records_per_s']:,.0f}/s ({ceiling['commits']} commits)",
        flush=True,
    )
    out: dict[str, Any] = {"events": n, "fill_s": fill_s, "ceiling": ceiling, "runs": {}}
    if "spark" in args.targets:
        out["spark_session_start_s"] = spark_session_start()
        print(
            f"Spark session start (import + local[2] getOrCreate, fresh process): {out['spark_session_start_s']:.1f} s",
            flush=True,
        )
    for mr in args.epoch_max_records:
        for target in args.targets:
            for kind in ("kafka", "files"):
                if kind == "files" and args.no_files:
                    continue
                name = f"{kind} {target} {mr // 1000}k"
                if kind == "kafka":
                    r = kafka_run(kafka, "events", target, mr, work, expected)
                else:
                    r = file_run(work / "input", target, mr, work, expected)
                out["runs"][name] = r
                print(
                    f"{name}: rc={r['rc']} {r['records']:,} records, {r['seconds']:.1f} s, job rate "
                    f"{r['job_rate']:,}/s, {len(r['epochs'])} epochs, output {r['check']}",
                    flush=True,
                )
    if args.profile_events:
        out["profile"] = profile_local(kafka, args.profile_events, args.epoch_max_records[0], work, args.profile_top)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="sparkpoint-bench-kafka-"))
    work.mkdir(parents=True, exist_ok=True)
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()}",
        flush=True,
    )
    t0 = time.perf_counter()
    try:
        with KafkaServer() as kafka:
            out = run_all(args, kafka, work)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print_table(out["runs"], out["ceiling"])
    print_details(out["runs"])
    if "profile" in out:
        print_profile(out["profile"])
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; load average at end {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    bad = [k for k, r in out["runs"].items() if r["rc"] != 0 or r["check"] != "exact"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
