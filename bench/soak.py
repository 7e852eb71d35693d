"""Soak test: the seed job, SIGKILLed over and over, must still commit exactly the oracle.

Runs ``examples/behavior_counts.py`` through ``sparkpoint run`` under
:class:`sparkpoint.testing.kill_loop.KillLoop` with checkpoints every second (the
configuration of ``checkpoint_conf`` in ``tests/e2e/test_exactly_once.py``; for
``--target spark`` also ``spark.master=local[2]`` and ``spark.ui.enabled=false``).
Each round restores from the newest completed checkpoint on disk and is SIGKILLed
at a random progress point (after 0-2 of the round's checkpoints and 1..E of its epochs, plus
a random fraction of an epoch) or at a fault-injection point of the checkpoint protocol
(``barrier``, ``metadata-write``, ``after-metadata``, ``after-commit``, and inside it
``upload``, during the asynchronous upload of the keyed state, and ``sink-commit``, between
two committables of a sink's commit; see ``sparkpoint/testing/faults.py``; at the 1st..3rd
pass), until ``--kills`` kills have happened; the last round runs to the end. The
committed output, read as the sink's reader sees it, is then compared with the pandas
oracle exactly: every window once, with its exact count.

Sinks (``--sink``, see ``bench/soak_sinks.py``): ``file`` (text part files, committed
parts only), ``parquet`` (Parquet part files read with pyarrow), ``kafka`` (the seed's
Kafka mode, events produced into a topic first; the output read ``read_committed``) and
``jdbc`` (a PostgreSQL table, read with ``SELECT``), the Kafka broker and PostgreSQL
server of the test suite started on 127.0.0.1; ``all`` runs each in turn. The summary
counts kills per fault point and pass, and how many fault kills came before the
round's first epoch line (inside the restore: a restore commits the restored
checkpoint's committables again and so passes ``sink-commit``).

Work. A killed round's sources read at most ``--epochs-per-round`` (E) epochs, then its
epochs run empty (checkpoints and commits go on) until the kill, so no kill depends on the
machine's speed and the job needs more than ``kills x (E + 1)`` epochs of input (1 epoch =
2 splits x 20,000 records); KillLoop says so if a round finishes first. The default is
200,000 events a kill locally (5 epochs), 350,000 on Spark, at least 3M / 0.6M.

Run::

    .venv/bin/python bench/soak.py --kills 100 --json soak.json
    .venv/bin/python bench/soak.py --sink kafka --kills 30 --json soak-kafka.json
    .venv/bin/python bench/soak.py --target spark --kills 10 --json soak-spark.json

Exit status: 0 on PASS, 1 on FAIL (output differs from the oracle, or a round
failed), 2 on usage errors.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a script: make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Every process (the `sparkpoint run` children and, on Spark, their Python workers) runs this
# interpreter and imports sparkpoint from this tree, not from wherever it happens to be installed.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(Path(__file__).resolve().parent.parent), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
)

import pandas as pd  # noqa: E402

from bench.soak_sinks import SINKS, SoakSink, make_sink  # noqa: E402
from sparkpoint.connectors.events import EventSpec, generate_events  # noqa: E402
from sparkpoint.runtime.restore import load_checkpoint  # noqa: E402
from sparkpoint.testing.kill_loop import ALL_FAULT_POINTS, KillLoop  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
JOB = str(ROOT / "examples" / "behavior_counts.py")
WINDOW_MS = 60_000
MAX_RECORDS = 20_000  # execution.epoch.max-records (per source split per epoch)
PARALLELISM = 2  # parallelism.default (= number of generator splits)
EPOCH_RECORDS = MAX_RECORDS * PARALLELISM
EVENTS_PER_KILL = {"local": 200_000, "spark": 350_000}
MIN_EVENTS = {"local": 3_000_000, "spark": 600_000}
JOB_ID_RE = re.compile(r"Job has been submitted with JobID ([0-9a-f]+)")
EPOCH_RE = re.compile(r"^epoch (\d+): ", re.M)


# -- configuration ----------------------------------------------------------------------------
def checkpoint_conf(ckpt: Path, local_state: Path, target: str) -> dict:
    """``checkpoint_conf`` of tests/e2e/test_exactly_once.py (+ the Spark keys of its Spark test)."""
    conf: dict[str, Any] = {
        "execution.target": target,
        "execution.checkpointing.interval": "1 s",
        "state.checkpoints.dir": ckpt.as_uri(),
        "state.checkpoints.num-retained": 3,
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "execution.epoch.max-records": MAX_RECORDS,
        "parallelism.default": PARALLELISM,
        "restart-strategy.type": "none",
    }
    if target == "spark":
        conf["spark.master"] = "local[2]"
        conf["spark.ui.enabled"] = "false"
    conf["sparkpoint.local-state-dir"] = str(local_state)
    return conf


# -- the oracle -------------------------------------------------------------------------------
def oracle(n: int, chunk: int = 1_000_000) -> Counter:
    """The pandas oracle of tests/e2e/test_exactly_once.py, computed in chunks of events."""
    total: pd.Series | None = None
    for start in range(0, n, chunk):
        lines, _ = generate_events(start, min(n, start + chunk), EventSpec())
        df = pd.DataFrame([line.split("\t") for line in lines], columns=["ts", "channel", "id", "behavior"])
        ts = df["ts"].astype("int64")
        df["start"] = ts - ts % WINDOW_MS
        counts = df.groupby(["start", "channel", "behavior"]).size()
        total = counts if total is None else total.add(counts, fill_value=0)
    assert total is not None
    return Counter({f"{s}\t{s + WINDOW_MS}\t{c}\t{b}\t{int(k)}": 1 for (s, c, b), k in total.items()})


# -- what each round did ----------------------------------------------------------------------
def plan_of(described: str) -> tuple[str, str | None]:
    """A round's kind (fault, random, none) and its fault point, from KillLoop's words for its plan."""
    if described.startswith("fault "):
        return "fault", described.removeprefix("fault ")
    return ("random", None) if described.startswith("random") else ("none", None)


def barrier_epoch(location: str | None, cache: dict) -> int:
    """The barrier epoch of a completed checkpoint (-1: no checkpoint, the job starts at epoch 0)."""
    if location is None:
        return -1
    if location not in cache:
        try:
            cache[location] = load_checkpoint(location, verify_files=False).metadata.barrier_epoch
        except Exception:  # noqa: BLE001 - a vanished checkpoint only costs the progress figure
            cache[location] = None
    return cache[location]


def describe_rounds(result: Any) -> list[dict]:
    cache: dict = {}
    rows = []
    for i in range(result.rounds):
        log = result.log[i] if i < len(result.log) else ""
        m = JOB_ID_RE.search(log)
        epochs = [int(e) for e in EPOCH_RE.findall(log)]
        start = barrier_epoch(result.restores[i], cache)
        nxt = barrier_epoch(result.restores[i + 1], cache) if i + 1 < result.rounds else None
        kind, fault = plan_of(result.plans[i])
        rows.append(
            {
                "round": i + 1,
                "kind": kind,
                "fault": fault,
                "plan": result.plans[i],
                "job_id": m.group(1) if m else None,
                "restored_from": result.restores[i],
                "first_epoch": (start + 1) if start is not None else None,
                "last_epoch_printed": max(epochs) if epochs else None,
                "killed": i < result.rounds - 1,
                "progress_epochs": (nxt - start) if (nxt is not None and start is not None) else None,
            }
        )
    return rows


# -- comparing with the oracle ----------------------------------------------------------------
def _key(line: str) -> str:
    return line.rsplit("\t", 1)[0]


def firing_epoch(window_start: int) -> int:
    """Roughly the epoch in which a window fires: the watermark (max ts - 50 s) passes its end."""
    spec = EventSpec()
    seq = (window_start + WINDOW_MS + 50_000 - spec.start_ts) // spec.interval_ms
    return max(0, seq) // EPOCH_RECORDS


def compare(got: Counter, expected: Counter, rounds: list[dict], out: Path | None, limit: int = 20) -> dict:
    """``got`` against the oracle; ``out``: the directory of text part files the lines come from, if any."""
    missing, extra = expected - got, got - expected
    report: dict[str, Any] = {
        "lines_committed": sum(got.values()),
        "lines_expected": sum(expected.values()),
        "missing": sum(missing.values()),
        "extra": sum(extra.values()),
        "equal": got == expected,
    }
    exp_keys = {_key(k) for k in expected}
    got_keys = {_key(k) for k in got}
    report["extra_duplicates"] = sum(n for line, n in extra.items() if line in expected)
    report["extra_wrong_count"] = sum(n for line, n in extra.items() if line not in expected and _key(line) in exp_keys)
    report["extra_unknown_window"] = sum(n for line, n in extra.items() if _key(line) not in exp_keys)
    report["missing_window_absent"] = sum(n for line, n in missing.items() if _key(line) not in got_keys)
    report["missing_count_differs"] = sum(n for line, n in missing.items() if _key(line) in got_keys)
    if report["equal"]:
        return report
    # Attribute offending lines to the part files (and so the rounds) that hold them.
    by_uid = {r["job_id"][:12]: r for r in rounds if r["job_id"]}
    where: dict[str, list[str]] = {}
    missing_keys = {_key(m) for m in missing}
    offending = set(extra) | {line for line in got if _key(line) in missing_keys}
    for path in sorted(out.rglob("*")) if out is not None else []:
        rel = path.relative_to(out)
        if path.is_file() and not any(p.startswith((".", "_")) for p in rel.parts):
            for line in path.read_text().splitlines():
                if line in offending:
                    where.setdefault(line, []).append(str(rel))

    def origin(files: list[str]) -> list[dict]:
        res = []
        for f in files:
            uid = Path(f).name.split("-")[1] if Path(f).name.count("-") >= 3 else None
            r = by_uid.get(uid or "")
            desc = None
            if r is not None:
                desc = r["plan"]
            res.append({"file": f, "round": r["round"] if r else None, "round_kind": desc})
        return res

    def rounds_running(epoch: int) -> list[int]:
        return [
            r["round"]
            for r in rounds
            if r["first_epoch"] is not None
            and r["last_epoch_printed"] is not None
            and r["first_epoch"] <= epoch <= r["last_epoch_printed"]
        ]

    examples = []
    for line, n in sorted(extra.items())[:limit]:
        fe = firing_epoch(int(line.split("\t")[0]))
        examples.append(
            {
                "type": "extra",
                "line": line,
                "times": n,
                "expected": line in expected,
                "in_files": origin(where.get(line, [])),
                "fires_in_epoch~": fe,
                "rounds_that_ran_that_epoch": rounds_running(fe),
            }
        )
    for line, _n in sorted(missing.items())[:limit]:
        fe = firing_epoch(int(line.split("\t")[0]))
        present = [
            {"line": g, "times": got[g], "in_files": origin(where.get(g, []))} for g in got if _key(g) == _key(line)
        ]
        examples.append(
            {
                "type": "missing",
                "line": line,
                "committed_instead": present,
                "fires_in_epoch~": fe,
                "rounds_that_ran_that_epoch": rounds_running(fe),
            }
        )
    report["examples"] = examples
    return report


# -- main -------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--kills", type=int, default=100, help="SIGKILLs before the job may finish (default 100)")
    p.add_argument(
        "--events",
        type=int,
        default=None,
        help="generated events (default: enough work for the kills: 200,000 a kill locally, "
        "350,000 on Spark, at least 3M / 0.6M)",
    )
    p.add_argument("--target", choices=("local", "spark"), default="local", help="execution.target")
    p.add_argument(
        "--sink",
        choices=(*SINKS, "all"),
        default="file",
        help="the seed job's sink (default file; all: each in turn, one workdir and JSON each)",
    )
    p.add_argument("--seed", type=int, default=1, help="KillLoop's random seed (default 1)")
    p.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where output, checkpoints and round logs go (must be empty or absent; "
        "default: a new temporary directory, kept on FAIL)",
    )
    p.add_argument("--json", type=Path, default=None, help="write the figures (and every round) as JSON here")
    p.add_argument(
        "--epochs-per-round", type=int, default=3, help="epochs a killed round's sources may read (default 3)"
    )
    p.add_argument("--fault-share", type=float, default=0.4, help="share of kills at fault points (default 0.4)")
    p.add_argument("--round-timeout", type=float, default=900, help="seconds one round may take (default 900)")
    return p, p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    p, args = parse_args(argv)
    events = (
        args.events
        if args.events is not None
        else max(MIN_EVENTS[args.target], EVENTS_PER_KILL[args.target] * args.kills)
    )
    if args.workdir is not None:
        root = args.workdir.resolve()
        if root.exists() and any(root.iterdir()):
            p.error(f"--workdir {root} is not empty")
        root.mkdir(parents=True, exist_ok=True)
        temporary = False
    else:
        root = Path(tempfile.mkdtemp(prefix="sparkpoint-soak-"))
        temporary = True
    sinks = SINKS if args.sink == "all" else (args.sink,)
    verdicts = {}
    for name in sinks:
        workdir = root / name if len(sinks) > 1 else root
        workdir.mkdir(exist_ok=True)
        json_path = args.json
        if json_path is not None and len(sinks) > 1:
            json_path = json_path.with_name(f"{json_path.stem}-{name}{json_path.suffix}")
        sink = make_sink(name)
        try:
            sink.start(workdir, events)
            summary = soak(args, argv, sink, events, workdir)
        finally:
            sink.close()
        summary["verdict"] = "PASS" if summary.get("equal") else "FAIL"
        if json_path:
            json_path.write_text(json.dumps(summary, indent=2, default=str) + "\n")
        print_summary(summary)
        verdicts[name] = summary["verdict"]
    if len(sinks) > 1:
        print("verdicts          " + ", ".join(f"{k} {v}" for k, v in verdicts.items()))
    passed = all(v == "PASS" for v in verdicts.values())
    if passed and temporary:
        shutil.rmtree(root, ignore_errors=True)
    elif not passed:
        print(f"soak: workdir kept for inspection: {root} (round logs under rounds/)")
    return 0 if passed else 1


def soak(args: argparse.Namespace, argv: list[str] | None, sink: SoakSink, events: int, workdir: Path) -> dict:
    """One soak of the seed job writing to ``sink``: the summary (``equal``: output == oracle)."""
    out, ckpt, local = workdir / "out", workdir / "ckpt", workdir / "local"
    conf = checkpoint_conf(ckpt, local, args.target)
    # Every run registers its REST endpoint under $SPARKPOINT_HOME/jobs; SIGKILLed runs leave their
    # entries behind (pruned lazily by `sparkpoint list`), so keep them out of the user's ~/.sparkpoint.
    os.environ["SPARKPOINT_HOME"] = str(workdir / "home")
    started_at = _dt.datetime.now().astimezone()
    print(
        f"soak: target {args.target}, sink {sink.name}, {events:,} events, {args.kills} kills, seed {args.seed}, "
        f"workdir {workdir}",
        flush=True,
    )
    # The oracle first: cheap compared with the loop, and it fails early if something is off.
    t0 = time.time()
    expected = oracle(events)
    oracle_s = time.time() - t0
    print(f"soak: oracle: {len(expected):,} window lines ({oracle_s:.1f} s)", flush=True)

    loop = KillLoop(
        JOB,
        sink.job_args(events, out, "soak"),
        ckpt,
        conf,
        kills=args.kills,
        seed=args.seed,
        fault_share=args.fault_share,
        epochs_per_round=args.epochs_per_round,
        cwd=str(ROOT),
        timeout_per_round=args.round_timeout,
        fault_points=ALL_FAULT_POINTS,
    )
    t0 = time.time()
    error: str | None = None
    result = None
    try:
        result = loop.run()
    except AssertionError as e:  # a round failed or hung: KillLoop's message holds that round's output
        error = str(e)
    loop_s = time.time() - t0

    summary: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else " ".join(argv),
        "date": started_at.isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "target": args.target,
        "sink": sink.name,
        "read_as": sink.describe(),
        "events": events,
        "kills_requested": args.kills,
        "seed": args.seed,
        "fault_share": args.fault_share,
        "epochs_per_round": args.epochs_per_round,
        "conf": {k: v for k, v in conf.items() if k not in ("state.checkpoints.dir", "sparkpoint.local-state-dir")},
        "workdir": str(workdir),
        "oracle_s": round(oracle_s, 1),
        "loop_s": round(loop_s, 1),
    }
    if error is not None:
        summary["error"] = error
        print(f"soak: KillLoop stopped with an error:\n{error[-6000:]}", file=sys.stderr)
        return summary
    assert result is not None
    summary.update(round_figures(result, workdir))
    cmp = compare(sink.read(out), expected, summary["per_round"], out if sink.name == "file" else None)
    summary.update({"leftovers": sink.leftovers(out), **cmp})
    return summary


def round_figures(result: Any, workdir: Path) -> dict:
    """Which round was killed how and where, from KillLoop's result; round logs to disk."""
    rounds = describe_rounds(result)
    logs = workdir / "rounds"
    logs.mkdir(exist_ok=True)
    for r, text in zip(rounds, result.log):
        (logs / f"round-{r['round']:03d}.log").write_text(
            f"# round {r['round']}: {r['plan']}; restored from {r['restored_from']}\n{text}"
        )
    killed = [r for r in rounds if r["killed"]]
    fault_dist = {
        pt: Counter(r["fault"] for r in killed if r["kind"] == "fault" and r["fault"].startswith(pt + "@"))
        for pt in ALL_FAULT_POINTS
    }
    # A round killed before it printed its first epoch line died in the restore itself (a restore commits the
    # restored checkpoint's committables again and so passes `sink-commit`).
    in_restore = Counter(
        r["fault"].split("@")[0] for r in killed if r["kind"] == "fault" and r["last_epoch_printed"] is None
    )
    no_progress = Counter(
        r["fault"].split("@")[0] if r["kind"] == "fault" else "random" for r in killed if r["progress_epochs"] == 0
    )
    return {
        "rounds": result.rounds,
        "kills": result.kills,
        "random_kills": sum(1 for r in killed if r["kind"] == "random"),
        "fault_kills": {pt: sum(c.values()) for pt, c in fault_dist.items()},
        "fault_kills_by_pass": {pt: dict(sorted(c.items())) for pt, c in fault_dist.items()},
        "fault_kills_before_first_epoch": dict(in_restore),
        "fallback_kills": result.fallback_kills,
        "rounds_without_progress": dict(no_progress),
        "epochs_total": (rounds[-1]["last_epoch_printed"] or 0) + 1,
        "epochs_run_in_last_round": (rounds[-1]["last_epoch_printed"] or 0) - (rounds[-1]["first_epoch"] or 0) + 1,
        "seconds": round(result.seconds, 1),
        "per_round": rounds,
    }


def print_summary(s: dict) -> None:
    print()
    print(f"target            {s['target']} ({s['machine']['cpus']} CPUs), {s['events']:,} events, seed {s['seed']}")
    print(f"sink              {s['sink']}: {s['read_as']}")
    print(
        f"kills at          progress points, sources held after {s['epochs_per_round']} epochs of a killed round, "
        f"fault share {s['fault_share']}"
    )
    if "rounds" in s:
        print(
            f"rounds            {s['rounds']} (the last ran "
            f"{s['epochs_run_in_last_round']} of {s['epochs_total']} epochs)"
        )
        print(
            f"kills             {s['kills']} of {s['kills_requested']} requested: {s['random_kills']} random, "
            + ", ".join(f"{pt} {n}" for pt, n in s["fault_kills"].items())
        )
        print(f"  fallback        {s['fallback_kills']} fault round(s) the driver ended (point not passed again)")
        print("  by pass         " + "; ".join(f"{pt} {d}" for pt, d in s["fault_kills_by_pass"].items()))
        print(
            f"  before epoch 1  {s['fault_kills_before_first_epoch'] or 'none'} (fault kills before the round's "
            f"first epoch line: in the restore, or at the first barrier)"
        )
        print(f"  no progress     {s['rounds_without_progress'] or 'none'}")
        print(f"seconds           {s['seconds']} in the kill loop (+ {s['oracle_s']} s oracle)")
        print(f"lines             {s['lines_committed']:,} committed, {s['lines_expected']:,} expected")
        print(
            f"missing / extra   {s['missing']} / {s['extra']} (extra: {s['extra_duplicates']} duplicates, "
            f"{s['extra_wrong_count']} wrong counts, {s['extra_unknown_window']} unknown windows; missing: "
            f"{s['missing_window_absent']} windows absent, {s['missing_count_differs']} with another count)"
        )
        print(f"leftovers         {s['leftovers'] or 'not checked'}")
        for ex in s.get("examples", [])[:10]:
            print(f"  {json.dumps(ex, default=str)}")
    else:
        print(f"error             {s.get('error', '')[:300]}")
    print(f"verdict           {s['verdict']}")


if __name__ == "__main__":
    sys.exit(main())
