"""Where keyed tasks run on a cluster without a shared disk, and what a move costs.

A Spark standalone master and two workers on 127.0.0.1, each with a private ``/tmp``
(:class:`tests.servers.spark_cluster.StandaloneCluster`; needs root for ``unshare -m``).
The job (:mod:`bench.placement_job`) counts ``--records`` records over ``--keys`` keys in
RocksDB with incremental checkpoints on a directory all processes see. Scenarios:

* ``locality``: keyed tasks prefer the executor that ran them last (the default);
* ``no-locality``: ``sparkpoint.spark.task-locality: false``, Spark places tasks freely;
* ``worker-lost``: as ``locality``, with worker 1 (its executor and Python workers) killed
  by SIGKILL after ``--kill-after-epoch``, then started again.

Per scenario: keyed task runs that had a previous executor, how many ran elsewhere
(read from the driver's log), the state rebuilds and their milliseconds, job failovers,
the median epoch time, and whether the output equals the hand count (every key once).

    .venv/bin/python bench/placement.py --records 400000 --keys 100000            # quick
    .venv/bin/python bench/placement.py --records 2000000 --keys 1000000 --json placement.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sparkpoint.testing.kill_loop import run_command  # noqa: E402
from tests.servers.spark_cluster import StandaloneCluster  # noqa: E402

JOB = Path(__file__).with_name("placement_job.py")
_PLACED = re.compile(r"ran away from the executor holding their state (\d+) times in (\d+)")
_REBUILT = re.compile(r"rebuilt it in (\d+) ms")
_SUMMARY = re.compile(r'\{"restarts": \d+, "state_rebuilds": \d+, "epochs": \d+\}')
_EPOCH = re.compile(r"^epoch (\d+): [\d,]+ records in, [\d,]+ out \(([\d.]+)s\)", re.MULTILINE)


def run_scenario(cluster: StandaloneCluster, work: Path, name: str, args: argparse.Namespace) -> dict[str, Any]:
    conf = {
        **cluster.driver_conf(),
        "state.backend.type": "rocksdb",
        "execution.checkpointing.incremental": "true",
        "execution.checkpointing.interval": args.checkpoint_interval,
        "execution.epoch.max-records": str(args.epoch_records),
        "state.checkpoints.dir": (work / name / "checkpoints").as_uri(),
    }
    if name == "no-locality":
        conf["sparkpoint.spark.task-locality"] = "false"
    cmd = run_command(str(JOB), [str(args.records), str(args.keys)], conf, cli_options=["-v"])
    started = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err_lines: list[str] = []
    killed = threading.Event()

    def read_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err_lines.append(line)
            m = _EPOCH.match(line)
            if name == "worker-lost" and m and int(m.group(1)) >= args.kill_after_epoch and not killed.is_set():
                killed.set()
                threading.Thread(target=_kill_and_restart, args=(cluster,), daemon=True).start()

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    assert proc.stdout is not None
    out = proc.stdout.read()  # stderr is the reader's
    proc.wait()
    reader.join()
    log = "".join(err_lines)
    if proc.returncode != 0:
        raise SystemExit(f"scenario {name} failed:\n{log[-4000:]}")
    return _summary(name, out, log, args, time.time() - started, killed.is_set())


def _kill_and_restart(cluster: StandaloneCluster) -> None:
    killed = cluster.kill_worker(1)
    print(f"  killed worker 1: {sorted(killed.kinds())}", file=sys.stderr)
    cluster.start_worker(1)


def _summary(name: str, out: str, log: str, args: argparse.Namespace, seconds: float, killed: bool) -> dict[str, Any]:
    placement = _PLACED.findall(log)
    moved, placed = (int(placement[-1][0]), int(placement[-1][1])) if placement else (0, 0)
    rebuild_ms = [int(ms) for ms in _REBUILT.findall(log)]
    epochs = [float(s) for _, s in _EPOCH.findall(log)]
    summaries = _SUMMARY.findall(log)  # the JVM may write into the same line
    if not summaries:
        raise SystemExit(f"scenario {name}: no summary from the job:\n{log[-3000:]}")
    summary = json.loads(summaries[-1])
    keys = sorted(line.split("> ", 1)[-1] for line in out.splitlines() if "> " in line)
    expected = sorted(f"k{k}" for k in range(args.keys))
    return {
        "scenario": name,
        "seconds": round(seconds, 1),
        "worker_killed": killed,
        "keyed_runs_with_a_preferred_executor": placed,
        "ran_elsewhere": moved,
        "state_rebuilds": summary["state_rebuilds"],
        "failovers": summary["restarts"],
        "rebuild_ms": rebuild_ms,
        "median_epoch_s": round(statistics.median(epochs[1:]), 2) if len(epochs) > 1 else None,
        "output_equals_hand_count": keys == expected,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--epoch-records", type=int, default=50_000)
    parser.add_argument("--checkpoint-interval", default="5 s")
    parser.add_argument("--kill-after-epoch", type=int, default=3)
    parser.add_argument("--scenarios", default="locality,no-locality,worker-lost")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parent.parent) as tmp:
        work = Path(tmp)
        with StandaloneCluster(work / "logs", workers=2) as cluster:
            for name in args.scenarios.split(","):
                cluster.wait_idle()
                result = run_scenario(cluster, work, name, args)
                print(json.dumps(result))
                results.append(result)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
