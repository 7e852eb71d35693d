"""Restoring an older retained checkpoint: file sinks roll back what it did not see, or it is warned about.

Jobs write the numbers 0..N-1 through a file sink with a checkpoint every epoch and are
cancelled after a few; a later job restores an older checkpoint of theirs. The oracle is
the hand count ``range(N)``: with a rollback the final output holds every number once.
"""

from __future__ import annotations

import glob
import logging
import os
import re
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from sparkpoint.checkpoint.loader import load_checkpoint
from sparkpoint.common import Encoder, Types, WatermarkStrategy
from sparkpoint.datastream.connectors.file_system import BucketAssigner, FileSink
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.formats.parquet import ParquetBulkWriters
from sparkpoint.testing.kill_loop import read_committed_lines

N = 3_000
ROW = Types.ROW_NAMED(["n"], [Types.LONG()])


def identity(i: int) -> int:
    return i


def completed(ck: Path, job: str = "*") -> list[str]:
    dirs = [d for d in glob.glob(str(ck / job / "chk-*")) if os.path.exists(d + "/_metadata")]
    return sorted(dirs, key=lambda p: int(p.rsplit("-", 1)[1]))


def start(
    make_env,
    tmp_path: Path,
    out: Path,
    restore: str | None = None,
    rate: float | None = 2_000,
    parquet: bool = False,
    sink=None,
    **conf: object,
):
    """The numbers job writing to ``out`` (or to ``sink``), checkpointing into ``tmp_path/ck``; its client."""
    config = {"execution.epoch.max-records": 50, **conf}
    if restore is not None:
        config["execution.savepoint.path"] = restore
    env = make_env("local", **config)
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    env.get_checkpoint_config().set_externalized_checkpoint_retention("RETAIN_ON_CANCELLATION")
    env.get_configuration().set("state.checkpoints.num-retained", 1_000)
    env.set_parallelism(2)
    stream = env.from_source(
        DataGeneratorSource(identity, N, num_splits=2, records_per_second=rate),
        WatermarkStrategy.no_watermarks(),
        "numbers",
    ).uid("numbers")
    if sink is not None:
        stream.map(str).uid("text").sink_to(sink).uid("sink")
        return env.execute_async("numbers")
    if parquet:
        sink = FileSink.for_bulk_format(str(out), ParquetBulkWriters.for_row_type(ROW))
        stream = stream.map(lambda i: (i,), output_type=ROW).uid("rows")
    else:
        sink = FileSink.for_row_format(str(out), Encoder.simple_string_encoder())
        stream = stream.map(str).uid("text")
    stream.sink_to(sink.with_bucket_assigner(BucketAssigner.base_path_bucket_assigner()).build()).uid("sink")
    return env.execute_async("numbers")


def cancel_after(client, ck: Path, checkpoints: int, timeout: float = 30) -> str:
    """Cancel the job once it completed ``checkpoints`` checkpoints; its job directory."""
    job_dir = ck / client.get_job_id()
    deadline = time.time() + timeout
    while time.time() < deadline and len(completed(ck, client.get_job_id())) < checkpoints:
        time.sleep(0.02)
    client.cancel()
    client.wait(30)
    assert len(completed(ck, client.get_job_id())) >= checkpoints, "the job did not checkpoint in time"
    return str(job_dir)


def numbers(out: Path, parquet: bool = False) -> Counter:
    if not parquet:
        return Counter(int(line) for line in read_committed_lines(out))
    files = [
        p
        for p in out.rglob("*")
        if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(out).parts)
    ]
    return Counter(n for f in files for n in pq.read_table(f).column("n").to_pylist())


def barrier(chk: str) -> int:
    return load_checkpoint(chk, verify_files=False).metadata.barrier_epoch


def test_rollback_moves_aside_what_the_older_checkpoint_did_not_see_across_restored_jobs(make_env, tmp_path):
    out, ck = tmp_path / "out", tmp_path / "ck"
    first = start(make_env, tmp_path, out)
    cancel_after(first, ck, 8)
    # a second job restored from an older checkpoint of the first without rollback (its output now holds
    # the replayed epochs twice), cancelled in its turn
    second = start(make_env, tmp_path, out, restore=completed(ck, first.get_job_id())[-5])
    cancel_after(second, ck, 6)
    assert max(numbers(out).values()) == 2
    # a third job restores an older checkpoint of the second with rollback: the lineage spans both job ids,
    # and what the first job committed past the second's hand-over goes too
    third_from = completed(ck, second.get_job_id())[-4]
    third = start(make_env, tmp_path, out, restore=third_from, rate=None, **{"sparkpoint.restore.rollback": "move"})
    third.wait(60)
    assert numbers(out) == Counter(range(N))
    moved = glob.glob(str(out / ".rolled-back" / f"chk-{third_from.rsplit('-', 1)[1]}-job-*" / "part-*"))
    assert {Path(m).name.split("-")[1] for m in moved} == {first.get_job_id()[:12], second.get_job_id()[:12]}
    moved_lines = Counter(int(line) for f in moved for line in Path(f).read_text().splitlines())
    assert set(moved_lines) <= set(range(N)) and sum(moved_lines.values()) + N == len(numbers_with_moved(out))


def numbers_with_moved(out: Path) -> list[int]:
    """Every number the three jobs committed, visible or moved aside."""
    return [int(line) for f in out.rglob("part-*") for line in f.read_text().splitlines()]


def test_without_rollback_the_restore_warns_with_the_replayed_epochs(make_env, tmp_path, caplog):
    out, ck = tmp_path / "out", tmp_path / "ck"
    first = start(make_env, tmp_path, out)
    cancel_after(first, ck, 6)
    chks = completed(ck, first.get_job_id())
    older = chks[-4]
    epochs = barrier(chks[-1]) - barrier(older)
    with caplog.at_level(logging.WARNING):
        start(make_env, tmp_path, out, restore=older, rate=None).wait(60)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    replay = [w for w in warnings if "committed after checkpoint" in w]
    assert len(replay) == 1, warnings
    assert re.search(rf"\b{epochs} epoch\(s\) \({barrier(older) + 1} to {barrier(chks[-1])}\)", replay[0]), replay
    assert "3 newer checkpoint(s)" in replay[0]
    assert not [w for w in warnings if "committed file(s) of other jobs" in w], warnings  # its own lineage
    got = numbers(out)
    assert set(got) == set(range(N)) and sum(got.values()) > N  # the replayed epochs' output is there twice


def test_parquet_restored_twice_from_one_checkpoint_warns_then_deletes(make_env, tmp_path, caplog):
    out, ck = tmp_path / "out", tmp_path / "ck"
    first = start(make_env, tmp_path, out, parquet=True)
    cancel_after(first, ck, 6)
    chks = completed(ck, first.get_job_id())
    older = chks[-4]
    with caplog.at_level(logging.WARNING):  # without rollback: warned, and the replayed epochs are there twice
        start(make_env, tmp_path, out, restore=older, rate=None, parquet=True).wait(60)
    replay = [r.getMessage() for r in caplog.records if "committed after checkpoint" in r.getMessage()]
    assert len(replay) == 1 and f"{barrier(chks[-1]) - barrier(older)} epoch(s)" in replay[0], replay
    assert sum(numbers(out, parquet=True).values()) > N
    # the same checkpoint again, with delete: the first job's later files and all of the second job's go
    start(
        make_env, tmp_path, out, restore=older, rate=None, parquet=True, **{"sparkpoint.restore.rollback": "delete"}
    ).wait(60)
    assert numbers(out, parquet=True) == Counter(range(N))
    assert not (out / ".rolled-back").exists()


def test_the_seed_job_restored_from_an_older_checkpoint_with_rollback_writes_the_oracle(tmp_path):
    """`sparkpoint run -s <older chk> --rollback move` after the seed job was killed: the pandas oracle, once."""
    import signal
    import subprocess
    import sys

    from tests.cli.test_cli import JOB, ROOT
    from tests.e2e.test_exactly_once import oracle

    ck, out, events = tmp_path / "ck", tmp_path / "out", 120_000
    args = [
        "-D",
        "execution.target=local",
        "-D",
        "execution.checkpointing.interval=100 ms",
        "-D",
        f"state.checkpoints.dir={ck.as_uri()}",
        "-D",
        "state.checkpoints.num-retained=100",
        "-D",
        f"sparkpoint.local-state-dir={tmp_path / 'ls'}",
        "-D",
        "execution.epoch.max-records=2000",
        "-D",
        "rest.enabled=false",
    ]
    command = [sys.executable, "-m", "sparkpoint.cli", "run", *args]
    env = {**os.environ, "SPARKPOINT_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [*command, JOB, "--events", str(events), "--events-per-second", "40000", "--output", str(out)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 60
        while time.time() < deadline and (len(completed(ck)) < 12 or not numbers_of(out)):
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL, "the job ended before it was killed"
    older = completed(ck)[-6]
    restored = subprocess.run(
        [*command, "-s", older, "--rollback", "move", JOB, "--events", str(events), "--output", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert restored.returncode == 0, restored.stderr
    assert Counter(read_committed_lines(out)) == oracle(events)
    assert glob.glob(str(out / ".rolled-back" / f"chk-{older.rsplit('-', 1)[1]}-job-*" / "part-*"))
    assert "committed after checkpoint" in restored.stderr


def numbers_of(out: Path) -> list[str]:
    return read_committed_lines(out) if out.exists() else []
