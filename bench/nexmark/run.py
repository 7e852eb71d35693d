"""Nexmark, one command: query × engine → events/s, outputs verified against the pandas oracle.

    PYTHONPATH=. .venv/bin/python bench/nexmark/run.py --events 3000000 --json nexmark.json
    PYTHONPATH=. .venv/bin/python bench/nexmark/run.py --events 200000 --queries q0,q5 --pyflink   # small

Engines, every one at its defaults but for what the comparison fixes (exactly-once checkpoints every 10 s,
parallelism 2 / ``local[2]``, the same event files):

* **sparkpoint** (epoch mode): ``sparkpoint run bench/nexmark/job.py ...`` as a user runs it, a new process per
  query (embedded local Spark, checkpoints on local disk);
* **continuous** (``--continuous``): the same with ``-D sparkpoint.execution.mode=continuous``;
* **kafka** (``--kafka``): sparkpoint in epoch mode reading the same events from a 2-partition topic
  (:func:`~bench.nexmark.generator.write_topic`) of a broker this command starts (``tests.servers.kafka_server``),
  with per-partition watermarks;
* **Spark SS**: :mod:`bench.nexmark.spark_queries` on one SparkSession in this process (``local[2]``, RocksDB
  state store, ``maxFilesPerTrigger`` 2, ``availableNow``, checkpoints into a temporary directory);
* **PyFlink** (``--pyflink``): the same job with its imports turned to ``pyflink``, run by PyFlink 2.3's Python
  (``--pyflink-python``) on ``--pyflink-events`` events (PyFlink's Python DataStream is ~100× slower).

Events/s = events / (wall time of the run − wall time of the same run over the 1,000-event input), so start-up
(JVM, session, Python workers, the first and last checkpoint) is not counted, as the issue's protocol says. With
``--repeat N`` each query runs N rounds, the engines in turn within a round, and the wall times are the medians;
before the first query one uncounted run of sparkpoint (epoch mode) and of Spark SS over the small input warms the
OS's caches and Spark.
Checks: sparkpoint's and PyFlink's lines must equal the oracle's (:func:`bench.nexmark.oracle.check`); Spark's
must be the oracle's but for the last windows, which Spark's append mode never emits at the end of input (its
watermark moves only with data): what it emitted must all be right, and what it left out must be only windows
ending within 2 windows of the input's end.
"""

from __future__ import annotations

import argparse
import json
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
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

from bench.nexmark import oracle  # noqa: E402
from bench.nexmark.generator import disorder_ms, write_files  # noqa: E402
from bench.nexmark.queries import QUERIES  # noqa: E402
from bench.procs import timed  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SMALL = 1_000
RATE = 10_000


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=3_000_000)
    p.add_argument("--files", type=int, default=12)
    p.add_argument("--queries", default=",".join(QUERIES))
    p.add_argument("--continuous", action="store_true", help="also sparkpoint's continuous mode")
    p.add_argument("--kafka", action="store_true", help="also sparkpoint reading the events from a Kafka topic")
    p.add_argument("--memory", action="store_true", help="peak memory of sparkpoint's runs at a third and all events")
    p.add_argument("--pyflink", action="store_true", help="also PyFlink 2.3 (scratch venv)")
    p.add_argument("--pyflink-python", default="/tmp/pyflink-venv/bin/python")
    p.add_argument("--pyflink-events", type=int, default=100_000)
    p.add_argument("--no-spark", action="store_true", help="skip Spark Structured Streaming")
    p.add_argument("--repeat", type=int, default=1, help="rounds per query, the engines in turn; figures are medians")
    p.add_argument("-D", dest="dynamic", action="append", default=[], help="KEY=VALUE for every sparkpoint run")
    p.add_argument("--workdir", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    return args


def sparkpoint_cmd(query: str, inp: Path | list[str], out: Path, ck: Path, extra: list[str]) -> list[str]:
    """The CLI run of ``query`` over the files in ``inp`` (or ``["--kafka", servers, "--topic", topic]``)."""
    keys = {
        "execution.checkpointing.interval": "10 s",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "state.checkpoints.dir": ck.as_uri(),
        "parallelism.default": "2",
    }
    dynamic = [a for k, v in keys.items() for a in ("-D", f"{k}={v}")] + [a for kv in extra for a in ("-D", kv)]
    source = inp if isinstance(inp, list) else ["--input", str(inp)]
    job = ["--query", query, *source, "--output", str(out), "--disorder-ms", str(disorder_ms(RATE))]
    return [sys.executable, "-m", "sparkpoint.cli", "run", *dynamic, str(HERE / "job.py"), *job]


def pyflink_job(work: Path) -> Path:
    """The job and its queries with their imports turned to pyflink."""
    target = work / "pyflink-job"
    target.mkdir(exist_ok=True)
    for name in ("job.py", "queries.py"):
        (target / name).write_text((HERE / name).read_text().replace("sparkpoint", "pyflink"))
    return target / "job.py"


def spark_check(query: str, got: list[str], want: list[str], end_ms: int) -> str | None:
    """Spark's lines: all right, and only windows near the end of input missing (see the module's docstring)."""
    extra = Counter(got) - Counter(want)
    if extra:
        return f"{query}: {sum(extra.values())} lines not in the oracle, e.g. {list(extra)[:2]}"
    missing = Counter(want) - Counter(got)
    column = {"q5": 0, "q7": 0, "q8": 2, "q11": 3}.get(query)
    if column is None:
        return oracle.check(query, got, want)
    early = [m for m in missing if int(m.split("\t")[column]) < end_ms - 2 * oracle.WINDOW_MS]
    return f"{query}: {len(early)} lines missing before the end, e.g. {early[:2]}" if early else None


class Engines:
    """Runs one query on each engine over the big and the small input; events/s and the verdict."""

    def __init__(self, args: argparse.Namespace, work: Path):
        self.args, self.work = args, work
        self.inputs = {"big": work / "events", "small": work / "small", "pyflink": work / "pyflink-events"}
        self.inputs["third"] = work / "third-events"  # --memory: a third of the events, for how memory grows
        self.frames: dict[str, Any] = {}
        self.spark: Any = None
        self.kafka: Any = None  # the broker of --kafka, and its topics per input size
        self.topics: dict[str, list[str]] = {}

    def prepare(self) -> None:
        a = self.args
        t = time.perf_counter()
        write_files(self.inputs["big"], a.events, a.files)
        write_files(self.inputs["small"], SMALL, 1)
        if a.pyflink:
            write_files(self.inputs["pyflink"], a.pyflink_events, 2)
        if a.memory:
            write_files(self.inputs["third"], a.events // 3, max(1, a.files // 3))
        print(f"wrote {a.events:,} events in {a.files} files in {time.perf_counter() - t:.1f} s", flush=True)
        self.frames = {name: oracle.load(d) for name, d in self.inputs.items() if d.exists() and name != "third"}
        if a.kafka:
            self._write_topics()
        if not a.no_spark:
            from bench.w1_spark import make_spark_session

            self.spark = make_spark_session("nexmark")
            self.spark.conf.set(
                "spark.sql.streaming.stateStore.providerClass",
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
            )

    def _write_topics(self) -> None:
        from bench.nexmark.generator import write_topic
        from tests.servers.kafka_server import KafkaServer

        self.kafka = KafkaServer().start()
        t = time.perf_counter()
        for size, count in (("big", self.args.events), ("small", SMALL)):
            topic = f"nexmark-{size}"
            self.kafka.create_topic(topic, partitions=2)
            write_topic(self.kafka, topic, count, 2)
            self.topics[size] = ["--kafka", self.kafka.bootstrap_servers, "--topic", topic]
        print(f"wrote the events to topics in {time.perf_counter() - t:.1f} s", flush=True)

    def close(self) -> None:
        if self.kafka is not None:
            self.kafka.stop()

    def run_sparkpoint(self, query: str, mode: str) -> dict[str, Any]:
        extra = list(self.args.dynamic) + (["sparkpoint.execution.mode=continuous"] if mode == "continuous" else [])
        seconds: dict[str, float] = {}
        memory: dict[str, dict] = {}
        sizes = ("third", "small", "big") if self.args.memory and mode == "epochs" else ("small", "big")
        for size in sizes:
            tag = f"{query}-{mode}-{size}"
            out, ck = self._fresh("out", tag), self._fresh("ck", tag)
            inp = self.topics[size] if mode == "kafka" else self.inputs[size]
            cmd = sparkpoint_cmd(query, inp, out, ck, extra)
            seconds[size] = timed(cmd, ROOT, memory=memory.setdefault(size, {}) if size != "small" else None)
        want = self._want(query, "big")
        result = self._result(query, "big", seconds, oracle.check(query, oracle.output_lines(out), want))
        if memory:
            result["memory"] = memory
        return result

    def run_spark(self, query: str) -> dict[str, Any]:
        from bench.nexmark.spark_queries import SPARK_QUERIES, run

        if query not in SPARK_QUERIES:
            return {"events_per_s": None, "ok": None, "why": "not expressible in Structured Streaming"}
        seconds = {}
        for size in ("small", "big"):
            tag = f"{query}-spark-{size}"
            out, ck = self._fresh("out", tag), self._fresh("ck", tag)
            start = time.perf_counter()
            run(self.spark, query, str(self.inputs[size]), str(out), str(ck), disorder_ms(RATE))
            seconds[size] = time.perf_counter() - start
        got = oracle.output_lines(self.work / "out" / f"{query}-spark-big")
        end = int(self.frames["big"]["B"].ts.max())
        return self._result(query, "big", seconds, spark_check(query, got, self._want(query, "big"), end))

    def run_pyflink(self, query: str) -> dict[str, Any]:
        job = pyflink_job(self.work)
        env = {
            **os.environ,
            "JAVA_HOME": os.environ.get("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64"),
            "PATH": f"{Path(self.args.pyflink_python).parent}:{os.environ['PATH']}",  # its Python workers' python
        }
        seconds = {}
        for size in ("small", "pyflink"):
            out = self._fresh("out", f"{query}-pyflink-{size}")
            job_args = ["--query", query, "--input", str(self.inputs[size]), "--output", str(out)]
            cmd = [self.args.pyflink_python, str(job), *job_args, "--disorder-ms", str(disorder_ms(RATE))]
            seconds["big" if size == "pyflink" else size] = timed(cmd, self.work, env)
        return self._result(
            query, "pyflink", seconds, oracle.check(query, oracle.output_lines(out), self._want(query, "pyflink"))
        )

    def warm_up(self, query: str) -> None:
        """One uncounted run of sparkpoint and of Spark SS over the small input (the OS's caches, Spark's JIT)."""
        out, ck = self._fresh("out", "warm"), self._fresh("ck", "warm")
        timed(sparkpoint_cmd(query, self.inputs["small"], out, ck, list(self.args.dynamic)), ROOT)
        from bench.nexmark.spark_queries import SPARK_QUERIES, run

        if self.spark is not None and query in SPARK_QUERIES:
            out, ck = self._fresh("out", "warm-spark"), self._fresh("ck", "warm-spark")
            run(self.spark, query, str(self.inputs["small"]), str(out), str(ck), disorder_ms(RATE))

    def run(self, query: str, engine: str) -> dict[str, Any]:
        """One round of ``query`` on ``engine``: its small and its big run."""
        if engine in ("sparkpoint", "continuous", "kafka"):
            return self.run_sparkpoint(query, "epochs" if engine == "sparkpoint" else engine)
        return self.run_spark(query) if engine == "spark-ss" else self.run_pyflink(query)

    def _fresh(self, *parts: str) -> Path:
        """An output or checkpoint directory of a run, emptied of an earlier round's."""
        path = self.work.joinpath(*parts)
        if path.exists():
            shutil.rmtree(path)
        return path

    def _want(self, query: str, size: str) -> list[str]:
        return oracle.expected(query, self.frames[size])

    def _result(self, query: str, size: str, seconds: dict[str, float], problem: str | None) -> dict[str, Any]:
        events = {"big": self.args.events, "pyflink": self.args.pyflink_events}[size]
        net = max(seconds["big"] - seconds["small"], 1e-3)
        return {
            "seconds": seconds,
            "events": events,
            "events_per_s": events / net,
            "ok": problem is None,
            "why": problem,
        }


def medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The rounds of one query on one engine as one result: events/s from the medians of the big and the small
    runs' seconds, every round's check (the first problem found), the last round's memory."""
    result = dict(rounds[-1])
    if result.get("seconds") is None:
        return result
    big = statistics.median(r["seconds"]["big"] for r in rounds)
    small = statistics.median(r["seconds"]["small"] for r in rounds)
    problems = [r["why"] for r in rounds if not r["ok"]]
    result.update(
        seconds={"big": big, "small": small},
        rounds=[r["seconds"] for r in rounds],
        events_per_s=result["events"] / max(big - small, 1e-3),
        ok=not problems,
        why=problems[0] if problems else None,
    )
    return result


def memory_table(results: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Peak memory of sparkpoint's runs (epoch mode) over a third of the events and all of them: the largest
    Python worker's RSS, the sum of its Python processes' (driver and workers) and the JVM's; a ratio near 1 is
    memory that does not grow with the input (the queries that keep state grow with it)."""
    columns = (("worker", "worker_peak_bytes"), ("python", "python_sum_peak_bytes"), ("JVM", "jvm_peak_bytes"))
    rows = [f"{'query':<6}" + "".join(f"{f'{name}, N/3':>14}{f'{name}, N':>12}{'ratio':>7}" for name, _ in columns)]
    mb = 1 << 20
    for query, by_engine in results.items():
        memory = by_engine.get("sparkpoint", {}).get("memory")
        if not memory:
            continue
        third, big = memory["third"], memory["big"]
        rows.append(
            f"{query:<6}"
            + "".join(
                f"{third[key] / mb:>11,.0f} MB{big[key] / mb:>9,.0f} MB{big[key] / max(third[key], 1):>7.2f}"
                for _, key in columns
            )
        )
    return rows


def table(results: dict[str, dict[str, dict[str, Any]]], engines: list[str]) -> list[str]:
    """The printed table: events/s per engine, the ratio to Spark SS, and the checks."""
    head = f"{'query':<6}" + "".join(f"{e:>16}" for e in engines) + f"{'x Spark SS':>12}  checks"
    rows = [head]
    for query, by_engine in results.items():
        cells = []
        for e in engines:
            r = by_engine.get(e, {})
            eps = r.get("events_per_s")
            cells.append(f"{eps:>16,.0f}" if eps else f"{'-':>16}")
        ours, peer = (
            by_engine.get("sparkpoint", {}).get("events_per_s"),
            by_engine.get("spark-ss", {}).get("events_per_s"),
        )
        ratio = f"{ours / peer:>11.2f}x" if ours and peer else f"{'-':>12}"
        checks = "; ".join(
            f"{e}: {'ok' if r.get('ok') else r.get('why')}" for e, r in by_engine.items() if r.get("ok") is not None
        )
        rows.append(f"{query:<6}" + "".join(cells) + ratio + "  " + checks)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="nexmark-"))
    engines_run = ["sparkpoint"] + (["continuous"] if args.continuous else []) + (["kafka"] if args.kafka else [])
    engines_run += [] if args.no_spark else ["spark-ss"]
    engines_run += ["pyflink"] if args.pyflink else []
    bench = Engines(args, work)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    try:
        bench.prepare()
        queries = args.queries.split(",")
        print("warm-up (not counted): sparkpoint and Spark SS once over the small input", flush=True)
        bench.warm_up(queries[0])
        for query in queries:
            rounds: dict[str, list[dict[str, Any]]] = {engine: [] for engine in engines_run}
            for _ in range(args.repeat):
                for engine in engines_run:
                    rounds[engine].append(bench.run(query, engine))
            results[query] = {engine: medians(rs) for engine, rs in rounds.items()}
            for engine, r in results[query].items():
                eps = r.get("events_per_s")
                print(
                    f"  {query} {engine:<11} {f'{eps:,.0f} ev/s' if eps else '-':>16}  {'ok' if r['ok'] else r['why']}",
                    flush=True,
                )
    finally:
        bench.close()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print("\n".join(table(results, engines_run)))
    if args.memory:
        print("\n".join(memory_table(results)))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    ok = all(r.get("ok") is not False for by in results.values() for r in by.values())
    print("ALL CHECKS OK" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
