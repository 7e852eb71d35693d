"""Recovery inside one run: lost working state, corrupt checkpoints, notifications."""

from __future__ import annotations

import glob
import shutil
import time
from pathlib import Path

from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import CheckpointListener, MapFunction
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from tests.checkpoint.test_checkpointing import Count, key_of, oracle_totals


def _job(env, tmp_path: Path, count: int, fn=None):
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    env.get_configuration().set("state.checkpoints.num-retained", 3)
    env.set_parallelism(2)
    src = DataGeneratorSource(key_of, count, num_splits=2)
    return (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(fn or Count())
        .uid("count")
    )


def _last_counts(rows) -> dict:
    last: dict = {}
    for key, n in rows:
        last[key] = max(last.get(key, 0), n)
    return last


def test_wiped_local_state_is_rebuilt_from_the_latest_checkpoint(make_env, tmp_path):
    count = 3_000
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 25,
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.delay": "0 ms",
        },
    )
    wiped = []

    def on_epoch(stats):
        if stats.epoch == 12 and not wiped:
            shutil.rmtree(tmp_path / "local-state")
            wiped.append(stats.epoch)

    env._on_epoch = on_epoch
    got = list(_job(env, tmp_path, count).execute_and_collect())
    assert wiped
    assert _last_counts(got) == dict(oracle_totals(count))


def test_recovery_skips_a_corrupt_latest_checkpoint(make_env, tmp_path, caplog):
    """The newest retained checkpoint is damaged when a failure hits: recovery falls back to the previous one."""
    count = 3_000
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 25,
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.delay": "0 ms",
        },
    )
    damaged = []

    def on_epoch(stats):
        if stats.epoch == 15 and not damaged:
            chks = sorted(
                (p for p in glob.glob(str(tmp_path / "ck" / "*" / "chk-*")) if Path(p, "_metadata").exists()),
                key=lambda p: int(p.rsplit("-", 1)[1]),
            )
            newest = chks[-1]
            keyed = sorted(glob.glob(newest + "/keyed-*"))
            Path(keyed[0]).write_bytes(Path(keyed[0]).read_bytes()[:-3])  # truncated
            damaged.append(newest)
            shutil.rmtree(tmp_path / "local-state")  # and the working state is lost

    env._on_epoch = on_epoch
    got = list(_job(env, tmp_path, count).execute_and_collect())
    assert damaged
    assert _last_counts(got) == dict(oracle_totals(count))
    newest_id = int(damaged[0].rsplit("-", 1)[1])
    assert any(
        f"cannot recover from checkpoint {newest_id}" in r.message and "truncated" in r.message for r in caplog.records
    ), [r.message for r in caplog.records]
    assert any(  # what the newer checkpoint committed comes again: said, not silent
        r.levelname == "WARNING" and f"older than checkpoint(s) {newest_id} that could not be read" in r.message
        for r in caplog.records
    ), [r.message for r in caplog.records]


class Notified(MapFunction, CheckpointListener):
    def map(self, value):
        return value

    def notify_checkpoint_complete(self, checkpoint_id):
        Path(self.directory, f"notified-{checkpoint_id}").touch()


def test_checkpoint_listeners_are_notified(make_env, tmp_path):
    env = make_env("local", **{"execution.epoch.max-records": 25})
    fn = Notified()
    fn.directory = str(tmp_path)
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    src = DataGeneratorSource(key_of, 500, num_splits=1)
    env.from_source(src, WatermarkStrategy.no_watermarks(), "gen").map(fn).uid("notified").print()
    result = env.execute()
    completed = {c["id"] for c in result.checkpoints["history"] if c["status"] == "COMPLETED"}
    notified = {int(p.name.split("-")[1]) for p in tmp_path.glob("notified-*")}
    assert notified and notified <= completed
    assert len(notified) >= len(completed) - 1  # the last one completes as the job ends


def _retained_checkpoints(make_env, tmp_path: Path, count: int, at_least: int) -> None:
    """Run the job until ``at_least`` checkpoints are retained under ``tmp_path/ck``, then cancel it."""
    first = make_env("local", **{"execution.epoch.max-records": 25})
    stream = _job(first, tmp_path, count)
    first.get_checkpoint_config().set_externalized_checkpoint_retention("RETAIN_ON_CANCELLATION")
    stream.print()
    client = first.execute_async("first")
    deadline = time.time() + 60
    while time.time() < deadline and len(glob.glob(str(tmp_path / "ck" / "*" / "chk-*" / "_metadata"))) < at_least:
        time.sleep(0.05)
    client.cancel()
    client.wait(30)


def test_a_job_restored_with_s_fails_over_to_that_checkpoint_before_its_own_first(make_env, tmp_path):
    """Started from a retained checkpoint, the job loses its working state before any checkpoint of its own
    completed: it restarts from the checkpoint it was started from (as Flink does), not fail."""
    count = 3_000
    _retained_checkpoints(make_env, tmp_path, count, 1)
    chk = sorted(glob.glob(str(tmp_path / "ck" / "*" / "chk-*")), key=lambda p: int(p.rsplit("-", 1)[1]))[-1]
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 25,
            "execution.savepoint.path": chk,
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.delay": "0 ms",
        },
    )
    wiped: list[int] = []

    def on_epoch(stats):
        if not wiped:
            shutil.rmtree(tmp_path / "local-state")
            wiped.append(stats.epoch)

    env._on_epoch = on_epoch
    restored = (tmp_path / "restored-ck").as_uri()
    got = _job(env, tmp_path, count)
    env.enable_checkpointing(3_600_000)  # none of its own completes before the failure
    env.get_checkpoint_config().set_checkpoint_storage_dir(restored)
    assert _last_counts(got.execute_and_collect()) == dict(oracle_totals(count))
    assert wiped


def test_run_s_with_a_job_directory_restores_its_newest_checkpoint_that_loads(make_env, tmp_path, caplog):
    """``-s <checkpoints>/<job id>``: the newest retained checkpoint, past a damaged one, named in the log."""
    count = 3_000
    _retained_checkpoints(make_env, tmp_path, count, 2)
    [job_dir] = glob.glob(str(tmp_path / "ck" / "*"))
    chks = sorted(
        (p for p in glob.glob(job_dir + "/chk-*") if Path(p, "_metadata").exists()),
        key=lambda p: int(p.rsplit("-", 1)[1]),
    )
    newest, previous = chks[-1], chks[-2]
    keyed = sorted(glob.glob(newest + "/keyed-*"))
    Path(keyed[0]).write_bytes(Path(keyed[0]).read_bytes()[:-3])  # truncated
    env = make_env("local", **{"execution.epoch.max-records": 25, "execution.savepoint.path": job_dir})
    got = _job(env, tmp_path / "second", count).execute_and_collect()
    assert _last_counts(got) == dict(oracle_totals(count))
    previous_id = int(previous.rsplit("-", 1)[1])
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        f"cannot recover from checkpoint {int(newest.rsplit('-', 1)[1])}" in m and "truncated" in m for m in messages
    ), messages
    assert any(f"restoring checkpoint {previous_id}, the newest of" in m for m in messages), messages


def test_a_restore_gives_each_source_subtask_its_own_splits_back_at_the_same_parallelism():
    """Each subtask gets back what it held, in order (a file being read before the files queued behind it), as
    Flink's readers get their splits back; at another parallelism every split is dealt out, none lost or doubled."""
    from sparkpoint.connectors.base import SourceSplit
    from sparkpoint.runtime.restore import deal_splits

    a, b, c, d, e = (SourceSplit(name, position=(i, i)) for i, name in enumerate("abcde"))
    held = {0: [a, b], 1: [c], 2: [d, e]}
    assert deal_splits(held, 3) == held
    assert deal_splits({"0": [a, b], "1": [c], "2": []}, 3) == {0: [a, b], 1: [c], 2: []}  # keys as JSON has them
    for parallelism in (1, 2, 4):
        dealt = deal_splits(held, parallelism)
        assert sorted(dealt) == list(range(parallelism))
        assert sorted(s.split_id for splits in dealt.values() for s in splits) == list("abcde")
    # files: subtask 0 read f1 with f3 queued, subtask 1 read f2; at parallelism 1, f2 before f3 (as handed out)
    f1, f2, f3 = (SourceSplit(f"f{i}", (0, 0), info={"mtime": float(i)}) for i in (1, 2, 3))
    assert deal_splits({0: [f1, f3], 1: [f2]}, 1) == {0: [f1, f2, f3]}
