"""A job that fails before any snapshot completed starts over from nothing, as Flink restarts it: sources from
their start, keyed state empty, what exactly-once sinks staged dropped. Before, such a job failed."""

from __future__ import annotations

import logging
import shutil
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.checkpoint.coordinator import CheckpointCoordinator, CheckpointSettings
from sparkpoint.common import Configuration, Encoder
from sparkpoint.datastream.connectors.file_sink import FileSink
from sparkpoint.errors import UserFunctionError
from sparkpoint.runtime.failover import Failover
from sparkpoint.storage.checkpoint_storage import FsCheckpointStorage
from sparkpoint.testing.kill_loop import read_committed_lines
from tests.checkpoint.test_checkpointing import FailOnce, running_counts
from tests.runtime.test_job_master import _counting

COUNT = 2_000
RESTARTS = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 2,
    "restart-strategy.fixed-delay.delay": "0 ms",
}


def _checkpointed(env, tmp_path: Path) -> None:
    """Exactly-once checkpoints, the first one at the end of the first epoch: a failure in it finds none."""
    env.enable_checkpointing(3_600_000)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())


def started_over(caplog) -> bool:
    return any("from the job's start: no checkpoint completed yet" in r.getMessage() for r in caplog.records)


def counts_failing_before_the_first_checkpoint(make_env, tmp_path: Path, target: str = "local"):
    """A job's running counts per key over :data:`COUNT` records, in epochs of 200: key k3 fails once in the second
    epoch, and the first epoch's checkpoint waits for the keyed tasks' acknowledgements, which come with the second
    epoch's reports, so none completed and the job starts over. Returns the environment and the counts."""
    env = make_env(target, **{"execution.epoch.max-records": 100, **RESTARTS})
    _checkpointed(env, tmp_path)
    return env, _counting(env, COUNT, FailOnce(tmp_path / "failed-once"))


def test_a_job_failing_before_its_first_checkpoint_starts_over_with_empty_state(make_env, tmp_path, caplog):
    flag = tmp_path / "failed-once"
    env = make_env("local", **RESTARTS)
    _checkpointed(env, tmp_path)
    got = list(_counting(env, COUNT, FailOnce(flag)).execute_and_collect())
    assert flag.exists() and started_over(caplog)
    # the failed epoch's records went nowhere; from the start, each key counted from zero to its total once
    assert Counter(got) == running_counts(COUNT)


def test_starting_over_on_spark_writes_each_count_once_through_an_exactly_once_file_sink(
    make_env, spark, tmp_path, caplog
):
    """Running counts per key into a file sink: the committed lines are each key's counts 1..total once each.
    Keyed state kept from the failed attempt would count past the total; its staged files leaking would write
    counts twice; sources not back at their start would leave counts out."""
    flag, out = tmp_path / "failed-once", tmp_path / "out"
    env, counts = counts_failing_before_the_first_checkpoint(make_env, tmp_path, "spark")
    counts.map(lambda kv: f"{kv[0]},{kv[1]}").sink_to(
        FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()
    ).uid("files")
    result = env.execute("starts over on spark")
    assert flag.exists() and result.restarts == 1 and started_over(caplog)
    # the source's records counted once: the first epoch's metrics went with the failed attempt
    assert result.metrics["gen"]["numRecordsOut"] == COUNT
    want = Counter(f"{k},{n}" for k, n in running_counts(COUNT))
    assert Counter(read_committed_lines(out)) == want
    assert not [p for p in out.rglob("*") if ".inprogress" in p.name], "the failed attempt's staged files"


def test_a_failure_without_a_restart_strategy_still_fails_the_job(make_env, tmp_path):
    env = make_env("local", **{"restart-strategy.type": "none"})
    _checkpointed(env, tmp_path)
    _counting(env, COUNT, FailOnce(tmp_path / "failed-once")).print()
    with pytest.raises(UserFunctionError, match="transient failure"):
        env.execute("fails")


def test_a_failover_after_a_savepoint_restores_it_not_an_older_checkpoint_nor_the_start(tmp_path):
    """A savepoint commits the sink output it covers, and a failover never restores it: restoring an older checkpoint,
    or starting over, would write that output again. The savepoint is restored instead."""
    config = Configuration(dict(RESTARTS))
    storage = FsCheckpointStorage((tmp_path / "ck").as_uri(), "f" * 32)

    def snapshot(coordinator, epoch, savepoint_dir=None):
        pending = coordinator.trigger(0, epoch, {"operator_states": {}}, set(), set(), {}, savepoint_dir=savepoint_dir)
        assert pending is not None
        (completed,) = [c for c, _ in coordinator.complete_ready(0)]
        return completed

    with_savepoint_only = CheckpointCoordinator(CheckpointSettings(config), storage, "f" * 32, "job", 128, {})
    savepoint = snapshot(with_savepoint_only, 3, (tmp_path / "sp").as_uri())
    assert savepoint.is_savepoint and not with_savepoint_only.store.get_all_checkpoints()
    restart = Failover("f" * 32, config, checkpointing_enabled=True).recover(
        RuntimeError("boom"), 4, with_savepoint_only
    )
    assert restart is not None and restart.checkpoint is not None
    assert (restart.checkpoint.checkpoint_id, restart.checkpoint.kind) == (savepoint.checkpoint_id, "savepoint")

    both = CheckpointCoordinator(CheckpointSettings(config), storage, "f" * 32, "job", 128, {}, start_id=10)
    older = snapshot(both, 1)
    savepoint = snapshot(both, 3, (tmp_path / "sp2").as_uri())
    assert not older.is_savepoint and [c.checkpoint_id for c in both.store.get_all_checkpoints()] == [10]
    restart = Failover("f" * 32, config, checkpointing_enabled=True).recover(RuntimeError("boom"), 4, both)
    assert restart is not None and restart.checkpoint is not None
    assert restart.checkpoint.checkpoint_id == savepoint.checkpoint_id == 11

    # with nothing completed at all, the same failover starts over
    fresh = CheckpointCoordinator(CheckpointSettings(config), storage, "f" * 32, "job", 128, {})
    restart = Failover("f" * 32, config, checkpointing_enabled=True).recover(RuntimeError("boom"), 4, fresh)
    assert restart is not None and restart.checkpoint is None


def test_a_file_sink_starting_over_removes_its_jobs_staged_files_and_no_other_jobs(tmp_path):
    """What a failed attempt staged goes (the new attempt may stage fewer parts, under other names); staged and
    committed files of another job writing to the same directory stay."""
    ours, theirs = "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6", "ffffeeeeddddccccbbbbaaaa99998888"
    bucket = tmp_path / "out" / "2026-11-30--12"
    bucket.mkdir(parents=True)
    token = {0: "", 3: ".0a1b2c3d4e5f"}  # staged names before and since they carry a random token
    staged = [bucket / f".part-{ours[:12]}-{s}-{n}.inprogress{token[n]}" for s in (0, 1) for n in (0, 3)]
    kept = [bucket / f".part-{theirs[:12]}-0-0.inprogress", bucket / f"part-{theirs[:12]}-0-0", bucket / "notes"]
    for path in staged + kept:
        path.write_text("x\n")
    sink = FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build()
    sink.recover_from_start(ours)
    assert sorted(p.name for p in bucket.iterdir()) == sorted(p.name for p in kept)


def test_a_restore_from_the_jobs_directory_takes_a_savepoint_newer_than_its_checkpoints(tmp_path, caplog):
    """``run -s <checkpoints>/<job id>`` after the driver died: a savepoint the job took after its newest checkpoint
    committed more output, so the directory's restore is that savepoint (noted in the directory when it completed),
    not the older checkpoint. A savepoint disposed of since is passed over, with an error that says so."""
    from sparkpoint.checkpoint.loader import load_latest_checkpoint

    config = Configuration(dict(RESTARTS))
    job = "e" * 32
    storage = FsCheckpointStorage((tmp_path / "ck").as_uri(), job)
    coordinator = CheckpointCoordinator(CheckpointSettings(config), storage, job, "job", 128, {}, start_id=5)
    for epoch, savepoint_dir in (
        (1, None),
        (3, (tmp_path / "sp").as_uri()),
        (4, None),
        (6, (tmp_path / "sp").as_uri()),
    ):
        assert coordinator.trigger(0, epoch, {"operator_states": {}}, set(), set(), {}, savepoint_dir=savepoint_dir)
        coordinator.complete_ready(0)
    job_dir = (tmp_path / "ck" / job).as_uri()
    assert coordinator.store.get_latest_checkpoint().checkpoint_id == 7
    restored = load_latest_checkpoint(job_dir)
    assert (restored.checkpoint_id, restored.kind, restored.metadata.barrier_epoch) == (8, "savepoint", 6)

    newest = coordinator.latest_savepoint
    assert newest is not None and newest[0] == 8
    shutil.rmtree(newest[1].removeprefix("file://"))  # disposed of: the newest checkpoint is what is left
    with caplog.at_level(logging.ERROR):
        restored = load_latest_checkpoint(job_dir)
    assert (restored.checkpoint_id, restored.kind) == (7, "checkpoint")
    assert any("cannot recover from checkpoint 8" in r.getMessage() for r in caplog.records)
