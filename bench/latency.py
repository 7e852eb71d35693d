"""Benchmark: end-to-end latency of a keyed, stateful Kafka -> Kafka job, per execution mode and delivery guarantee.

The job (``bench/latency_job.py``): KafkaSource -> ``key_by`` -> a ``KeyedProcessFunction`` counting
each key's records in ``ValueState`` -> KafkaSink, parallelism 2. On a broker it starts itself for each run
(``tests.servers.kafka_server``), for each execution mode (``sparkpoint.execution.mode``) and
delivery guarantee, this program

1. creates fresh 2-partition input and output topics and starts a ``read_committed`` consumer
   of the output topic;
2. runs the job through ``sparkpoint run`` in a child process (``-D key=value``; a local Spark
   ``local[2]`` by default; EXACTLY_ONCE with checkpoints every second);
3. warms up: produces a trickle (``--warmup-rate``) until the job's first output arrives (JVM,
   Spark session, Python workers and the first epoch stay out of the measurement);
4. for each rate (``--rates``, ascending): produces at that rate for ``--settle`` seconds (not
   measured) and ``--duration`` seconds (measured), then waits until every record of the phase
   came out (at most ``--drain-timeout``);
5. with ``--search``, goes on raising the rate (x1.5) in steps of ``--search-duration`` seconds
   while the job keeps up: every record out, p99 at most twice the p99 of the lowest rate
   (+0.5 s), and the producer reaching 95 % of the rate;
6. stops the job (SIGTERM to its process group) and checks its output: every input id came out
   (exactly once for EXACTLY_ONCE), and each key's counts are 1..n.

Each input record is ``id\\tkey\\tsent_ns``, stamped with the send time just before the
producer's ``produce()``; latency = the consumer's receive time - that send time (one clock:
producer and consumer are threads of this process), so it includes the producer's batching,
the job, the sink's commit and the consumer's fetch. The keyed function stamps each record with the time it
counted it (the same machine's clock), so the tables also show the part of the latency before that point ("to
function": the input topic, the source, the channel). A run that fails (the child exits, or no
output within ``--start-timeout``) is reported with the tail of its output, and the next run goes on.

    python bench/latency.py                                            # both modes, both guarantees
    python bench/latency.py --modes epoch --rates 2000 --json latency.json
    python bench/latency.py --modes epoch --guarantees AT_LEAST_ONCE --search --target local
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from bench.latency_clients import PARTITIONS, Collector, Feeder, idle_fetch_rate, save_series  # noqa: E402
from tests.servers.kafka_server import KafkaServer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
JOB_MODULE = "bench.latency_job"


class RunFailed(Exception):
    """The job ended, or never produced output: the message says how, with the tail of its output."""


class JobProcess:
    """``sparkpoint run`` of the job in its own process group; its output kept in a log and a tail."""

    def __init__(self, cmd: list[str], log: Path):
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        self.log = log
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self.epoch_lines = 0  # the progress lines: one per epoch, in continuous mode one a second at most
        self.proc = subprocess.Popen(
            cmd,
            cwd=str(REPO),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self._thread = threading.Thread(target=self._pump, name="latency-job-log", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        t0 = time.monotonic()
        with open(self.log, "w", encoding="utf-8") as out:
            for line in self.proc.stdout:
                out.write(f"{time.monotonic() - t0:8.3f} {line}")
                out.flush()
                self.tail.append(line.rstrip("\n"))
                if line.startswith("epoch "):
                    self.epoch_lines += 1

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            self._thread.join(5)
            status = self.proc.returncode
            raise RunFailed(f"the job exited with status {status}; its output ended:\n" + self.tail_text())

    def tail_text(self, lines: int = 25) -> str:
        return "\n".join(list(self.tail)[-lines:])

    def stop(self) -> int | None:
        """SIGTERM to the job's process group (driver, JVM, Python workers), SIGKILL after 20 s."""
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._thread.join(5)
        return self.proc.returncode


# -- one run: a mode and a guarantee, every rate --------------------------------------------------


def job_conf(args: argparse.Namespace, mode: str, guarantee: str, work: Path) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "execution.target": args.target,
        "sparkpoint.execution.mode": mode,
        "parallelism.default": 2,
        "restart-strategy.type": "none",
        "sparkpoint.local-state-dir": str(work / "state"),
        "rest.enabled": "false",
    }
    if args.target == "spark":
        conf.update({"spark.master": args.master, "spark.ui.enabled": "false"})
    if guarantee == "EXACTLY_ONCE" or args.checkpoint_all:
        conf["execution.checkpointing.interval"] = args.checkpoint_interval
        conf["state.checkpoints.dir"] = (work / "ckpt").as_uri()
    for item in args.define:
        key, _, value = item.partition("=")
        conf[key.strip()] = value.strip()
    return conf


def job_command(job_args: list[str], conf: dict[str, Any]) -> list[str]:
    """``sparkpoint run -D k=v ... -pym bench.latency_job ARGS`` from the repository's root: run as a module, as
    a job file would put ``bench/`` on ``sys.path``, where ``bench/kafka.py`` hides the Kafka client package."""
    cmd = [sys.executable, "-m", "sparkpoint.cli", "run"]
    for key, value in conf.items():
        cmd += ["-D", f"{key}={value}"]
    return [*cmd, "-pym", JOB_MODULE, *job_args]


def phase_stats(ids: range, rate: float, reached: float, feeder: Feeder, collector: Collector) -> dict[str, Any]:
    with collector.lock:
        got = [i for i in ids if i in collector.received]
        lat = np.array([collector.received[i] - feeder.sent[i] for i in got], dtype=np.float64) / 1e6
        before = np.array([collector.counted[i] - feeder.sent[i] for i in got], dtype=np.float64) / 1e6
        duplicates = sum(collector.copies[i] for i in got)
    out: dict[str, Any] = {
        "rate": rate,
        "reached_rate": round(reached, 1),
        "records_in": len(ids),
        "records_out": len(got),
        "missing": len(ids) - len(got),
        "duplicates": duplicates,
    }
    if len(lat):
        p50, p90, p99 = np.percentile(lat, [50, 90, 99])
        out.update({"p50_ms": p50, "p90_ms": p90, "p99_ms": p99, "max_ms": float(lat.max()), "mean_ms": lat.mean()})
        # the part before the keyed function counted the record: the input topic, the source, the channel
        out["to_function_p50_ms"], out["to_function_p99_ms"] = np.percentile(before, [50, 99])
    return out


def run_phase(
    rate: float, seconds: float, args: argparse.Namespace, job: JobProcess, feeder: Feeder, collector: Collector
) -> dict[str, Any]:
    """``--settle`` seconds at ``rate`` (not measured), ``seconds`` measured, then the drain."""
    feeder.produce(rate, args.settle)
    ids, reached = feeder.produce(rate, seconds)
    deadline = time.monotonic() + args.drain_timeout
    while collector.arrived(ids) < len(ids) and time.monotonic() < deadline:
        job.check_alive()
        time.sleep(0.2)
    time.sleep(0.5)  # copies of the last records, if any
    stats = phase_stats(ids, rate, reached, feeder, collector)
    if args.series:
        save_series(Path(args.series) / f"{job.log.parent.name}-{rate:.0f}.npz", ids, feeder, collector)
    print(
        f"    {rate:>9,.0f}/s: {stats['records_out']:,} of {stats['records_in']:,} out, "
        f"p50 {stats.get('p50_ms', float('nan')):,.0f} ms, p99 {stats.get('p99_ms', float('nan')):,.0f} ms",
        flush=True,
    )
    return stats


def warm_up(args: argparse.Namespace, job: JobProcess, feeder: Feeder, collector: Collector) -> float:
    """A trickle of records until the first output comes; the seconds that took."""
    t0 = time.monotonic()
    while not collector.received:
        job.check_alive()
        if time.monotonic() - t0 > args.start_timeout:
            raise RunFailed(f"no output within {args.start_timeout:.0f} s; the job's output ends:\n" + job.tail_text())
        feeder.produce(args.warmup_rate, 0.25)
    return time.monotonic() - t0


def search(
    args: argparse.Namespace, base: dict[str, Any], job: JobProcess, feeder: Feeder, collector: Collector
) -> dict[str, Any]:
    """Raise the rate x1.5 from the highest given one while the job keeps up; the highest rate it sustained."""
    limit = max(2 * base.get("p99_ms", 0.0), base.get("p99_ms", 0.0) + 500)
    rate, steps, best = max(args.rates), [], 0.0
    while rate <= args.search_max:
        step = run_phase(rate, args.search_duration, args, job, feeder, collector)
        ok = step["missing"] == 0 and step.get("p99_ms", float("inf")) <= limit and step["reached_rate"] >= 0.95 * rate
        step["sustained"] = ok
        steps.append(step)
        if not ok:
            break
        best, rate = rate, rate * 1.5
    return {"highest_sustained_rate": best, "p99_limit_ms": limit, "steps": steps}


def check_output(feeder: Feeder, collector: Collector, guarantee: str) -> dict[str, Any]:
    """Every id out (once for EXACTLY_ONCE), each key's counts 1..n (each once for EXACTLY_ONCE)."""
    with collector.lock:
        missing = sum(1 for i in feeder.sent if i not in collector.received)
        duplicates = sum(collector.copies.values())
        wrong_keys = []
        for key, n in feeder.per_key.items():
            counts = collector.counts.get(key, [])
            want = list(range(1, n + 1))
            ok = sorted(counts) == want if guarantee == "EXACTLY_ONCE" else sorted(set(counts)) == want
            if not ok:
                wrong_keys.append(key)
    exact = missing == 0 and not wrong_keys and not collector.bad and (duplicates == 0 or guarantee != "EXACTLY_ONCE")
    return {
        "records_in": len(feeder.sent),
        "records_out": len(collector.received) + duplicates,
        "missing": missing,
        "duplicates": duplicates,
        "keys_with_wrong_counts": len(wrong_keys),
        "unreadable": len(collector.bad),
        "ok": exact,
    }


def run_one(kafka: KafkaServer, mode: str, guarantee: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One job for ``mode`` and ``guarantee``: warm-up, every rate, the search; its figures or its failure."""
    tag = f"{mode}-{guarantee.lower()}-{time.time_ns()}"
    in_topic, out_topic = f"latency-in-{tag}", f"latency-out-{tag}"
    kafka.create_topic(in_topic, partitions=PARTITIONS)
    kafka.create_topic(out_topic, partitions=PARTITIONS)
    run_dir = work / tag
    run_dir.mkdir(parents=True)
    job_args = ["--bootstrap-servers", kafka.bootstrap_servers, "--input-topic", in_topic]
    job_args += ["--output-topic", out_topic, "--guarantee", guarantee]
    cmd = job_command(job_args, job_conf(args, mode, guarantee, run_dir))
    result: dict[str, Any] = {"mode": mode, "guarantee": guarantee, "command": cmd, "log": str(run_dir / "job.log")}
    collector = Collector(kafka.bootstrap_servers, out_topic)
    feeder = Feeder(kafka.bootstrap_servers, in_topic, args.keys)
    job = JobProcess(cmd, run_dir / "job.log")
    print(f"== {mode} {guarantee} (log {run_dir / 'job.log'})", flush=True)
    try:
        result["first_output_s"] = round(warm_up(args, job, feeder, collector), 1)
        print(f"    first output after {result['first_output_s']} s", flush=True)
        result["rates"] = []
        for rate in sorted(args.rates):
            result["rates"].append(run_phase(rate, args.duration, args, job, feeder, collector))
            if result["rates"][-1]["records_out"] == 0:
                raise RunFailed(f"no record at {rate:,.0f}/s came out; the job's output ends:\n" + job.tail_text(8))
        if args.search:
            result["search"] = search(args, result["rates"][0], job, feeder, collector)
        job.check_alive()
        result["check"] = check_output(feeder, collector, guarantee)
        result["ok"] = True
    except RunFailed as e:
        result.update({"ok": False, "error": str(e)})
        print(f"    FAILED: {e}", flush=True)
    finally:
        result["exit_status"] = job.stop()
        result["epoch_lines"] = job.epoch_lines
        collector.close()
    return result


# -- report ----------------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def print_tables(results: list[dict[str, Any]]) -> None:
    head = ["rate (records/s)", "reached", "records in", "out", "missing", "copies", "p50", "p90", "p99", "max"]
    head += ["to function p50", "to function p99"]
    for r in results:
        print(f"\n{r['mode']} mode, {r['guarantee']}", end="")
        if not r["ok"]:
            print(f": FAILED (exit status {r.get('exit_status')})\n{r['error']}")
            continue
        check = r["check"]
        verdict = "every record out" + (", each once" if r["guarantee"] == "EXACTLY_ONCE" else "")
        verdict = verdict if check["ok"] else f"NOT OK {json.dumps(check)}"
        print(f" (first output after {r['first_output_s']} s; {check['records_in']:,} records in all: {verdict})")
        print("| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
        steps = [*r["rates"], *r.get("search", {}).get("steps", [])]
        for s in steps:
            searched = "" if "sustained" not in s else " (search: " + ("kept up)" if s["sustained"] else "fell behind)")
            row = [
                f"{s['rate']:,.0f}{searched}",
                f"{s['reached_rate']:,.0f}",
                f"{s['records_in']:,}",
                f"{s['records_out']:,}",
                f"{s['missing']:,}",
                f"{s['duplicates']:,}",
                *(_ms(s.get(k)) for k in ("p50_ms", "p90_ms", "p99_ms", "max_ms")),
                *(_ms(s.get(k)) for k in ("to_function_p50_ms", "to_function_p99_ms")),
            ]
            print("| " + " | ".join(row) + " |")
        if "search" in r:
            found = r["search"]
            print(
                f"highest rate sustained: {found['highest_sustained_rate']:,.0f} records/s "
                f"(p99 limit {found['p99_limit_ms']:,.0f} ms)"
            )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--modes", default="epoch,continuous", help="execution modes, comma-separated")
    p.add_argument("--guarantees", default="AT_LEAST_ONCE,EXACTLY_ONCE", help="delivery guarantees, comma-separated")
    p.add_argument("--rates", default="2000,10000", help="records/s, comma-separated")
    p.add_argument("--duration", type=float, default=20.0, help="measured seconds per rate")
    p.add_argument("--settle", type=float, default=5.0, help="seconds at each rate before the measurement")
    p.add_argument("--drain-timeout", type=float, default=30.0, help="longest wait for a rate's records to come out")
    p.add_argument("--warmup-rate", type=float, default=100.0, help="records/s until the job's first output")
    p.add_argument("--start-timeout", type=float, default=240.0, help="longest wait for the job's first output")
    p.add_argument("--search", action="store_true", help="then raise the rate x1.5 while the job keeps up")
    p.add_argument("--search-duration", type=float, default=10.0, help="measured seconds per search step")
    p.add_argument("--search-max", type=float, default=500_000.0, help="the search stops above this rate")
    p.add_argument("--keys", type=int, default=100, help="distinct keys")
    p.add_argument("--target", choices=["spark", "local"], default="spark", help="local: the in-process executor")
    p.add_argument("--master", default="local[2]", help="spark.master of the Spark runs")
    p.add_argument("--checkpoint-interval", default="1 s", help="EXACTLY_ONCE's checkpoint interval")
    p.add_argument("--checkpoint-all", action="store_true", help="AT_LEAST_ONCE takes checkpoints too")
    p.add_argument("-D", dest="define", action="append", default=[], metavar="KEY=VALUE", help="more job configuration")
    p.add_argument("--workdir", help="logs and checkpoints (kept; default: a temporary directory, removed)")
    p.add_argument("--json", help="write every figure to this file")
    p.add_argument(
        "--series", help="a directory for each run's per-record times (.npz: id, sent, counted, received ns)"
    )
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    args.guarantees = [g.strip().upper() for g in args.guarantees.split(",") if g.strip()]
    args.rates = [float(r) for r in args.rates.split(",") if r.strip()]
    bad = [g for g in args.guarantees if g not in ("AT_LEAST_ONCE", "EXACTLY_ONCE")]
    if bad or not args.rates or not args.modes:
        p.error(f"give modes, rates and guarantees among AT_LEAST_ONCE, EXACTLY_ONCE (not {bad})")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="latency-"))
    results: list[dict[str, Any]] = []
    started = time.time()
    fetch_rate: float | None = None
    fetch_cpu: float | None = None
    try:
        for mode in args.modes:
            for guarantee in args.guarantees:
                # a broker of its own per run: the one this benchmark starts slows down as earlier runs' topics
                # fill it (the same continuous run measured p99 0.2 s first and 1.2 s after three other runs)
                with KafkaServer() as kafka:
                    if not results:
                        fetch_rate, fetch_cpu = idle_fetch_rate(kafka)
                        rate_text = "?" if fetch_rate is None else f"{fetch_rate:,.0f}"
                        print(f"one idle consumer: {rate_text} fetches/s, {fetch_cpu:.0%} of a core", flush=True)
                    results.append(run_one(kafka, mode, guarantee, args, work))
    finally:
        if not args.workdir:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    print_tables(results)
    report = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "load_average": os.getloadavg(),
        "idle_consumer": {"fetches_per_s": fetch_rate, "core_share": fetch_cpu},
        "argv": sys.argv,
        "results": results,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=float))
    return 0 if all(r["ok"] and r["check"]["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
