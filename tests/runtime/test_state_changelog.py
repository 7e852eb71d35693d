"""The state changelog: a keyed task whose executor does not hold its working state rebuilds it.

In-process executor, both backends (real RocksDB). Removing a subtask's database between epochs is what a task
sees when Spark runs it on another executor: the next epoch must rebuild the state from the
latest checkpoint (or empty state) plus the changes of every epoch since, with no job failover,
and the counts must equal a hand count.
"""

from __future__ import annotations

import glob
import shutil
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.transformations import CollectTransformation, TransformationInput
from sparkpoint.errors import ConfigurationError, StateMissingError
from sparkpoint.state.changelog_segments import read_changes, write_changes
from sparkpoint.testing.kill_loop import read_committed_lines
from tests.checkpoint.test_checkpointing import Count, key_of, oracle_totals
from tests.checkpoint.test_savepoints import seed_job
from tests.e2e.test_exactly_once import oracle as window_oracle

BACKENDS = {
    "hashmap": {"state.backend.type": "hashmap", "state.changelog.enabled": "true"},
    "rocksdb": {"state.backend.type": "rocksdb", "state.changelog.enabled": "true"},
    # every checkpoint after the first references the changelog: a rebuild starts from one of them
    "rocksdb-changelog-checkpoints": {
        "state.backend.type": "rocksdb",
        "state.changelog.enabled": "true",
        "execution.checkpointing.incremental": "true",
        "state.changelog.periodic-materialize.interval": "-1",
    },
}


def _run(env, tmp_path: Path, count: int, wipe_at: set[int], checkpoints: bool, damage_changelog: bool = False):
    """Run the keyed count; remove subtask 1's working state after each epoch in ``wipe_at`` (and truncate
    that epoch's changelog file of subtask 1 if ``damage_changelog``)."""
    if checkpoints:
        env.enable_checkpointing(150)
        env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    env.set_parallelism(2)
    src = DataGeneratorSource(key_of, count, num_splits=2)
    stream = (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(Count())
        .uid("count")
    )
    wiped: list[int] = []

    def on_epoch(stats):
        if stats.epoch in wipe_at and stats.epoch not in wiped:  # once: a restored job runs epochs again
            if damage_changelog:
                logs = glob.glob(str(tmp_path / "ck" / "*" / "changelog" / "*" / f"{stats.epoch:010d}" / "s1-t1-*"))
                assert logs, "no changelog of the epoch"
                Path(logs[0]).write_bytes(Path(logs[0]).read_bytes()[:-2])
            dirs = glob.glob(str(tmp_path / "local-state" / "*" / "stage-1" / "task-1"))
            assert dirs, "no working state to remove"
            for d in dirs:
                shutil.rmtree(d)
            wiped.append(stats.epoch)

    env._on_epoch = on_epoch
    tid = env._add_transformation(CollectTransformation, "Collect", [TransformationInput(stream._id)])
    result = env.execute("changelog")
    env._remove_transformation(tid)
    last: dict = {}
    for key, n in result.collected:
        last[key] = max(last.get(key, 0), n)
    return result, last, wiped


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("checkpoints", [True, False], ids=["from-checkpoint", "from-empty-state"])
def test_a_task_away_from_its_state_rebuilds_it_without_a_failover(make_env, tmp_path, checkpoints, backend):
    count = 4_000
    conf = {"execution.epoch.max-records": 40, **BACKENDS[backend]}
    if not checkpoints:
        conf["state.changelog.dstl.dfs.base-path"] = (tmp_path / "changelog").as_uri()
    env = make_env("local", **conf)
    result, counts, wiped = _run(env, tmp_path, count, {6, 20, 21, 35}, checkpoints)
    assert wiped == [6, 20, 21, 35]
    assert counts == dict(oracle_totals(count))
    assert result.restarts == 0
    assert result.state_rebuilds == len(wiped)
    if checkpoints:  # later rebuilds start from a checkpoint, not from the first epoch
        assert result.checkpoints["counts"]["completed"] >= 2
    assert not glob.glob(str(tmp_path / "ck" / "*" / "changelog" / "*")), "the changelog outlived the job"


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_without_a_changelog_a_lost_state_fails_over_to_the_checkpoint(make_env, tmp_path, backend):
    count = 3_000
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 40,
            "state.backend.type": backend,
            "state.changelog.enabled": "false",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.delay": "0 ms",
        },
    )
    result, counts, wiped = _run(env, tmp_path, count, {15}, checkpoints=True)
    assert wiped == [15]
    assert counts == dict(oracle_totals(count))
    assert result.restarts == 1 and result.state_rebuilds == 0


def test_a_damaged_changelog_is_named_and_never_read_as_state(tmp_path):
    root = (tmp_path / "cl").as_uri()
    changes = [(b"k1", b"v1"), (b"k2", None)]
    write_changes(root, 7, 1, 0, "count", changes, watermark=1234)
    assert read_changes(root, 7, 1, 0, "count") == (changes, 1234)
    path = next((tmp_path / "cl").rglob("*.log"))
    path.write_bytes(path.read_bytes()[:-1] + b"\x00")
    with pytest.raises(StateMissingError, match=r"'count'.*epoch 7 is damaged"):
        read_changes(root, 7, 1, 0, "count")
    with pytest.raises(StateMissingError, match=r"epoch 8 is missing"):
        read_changes(root, 8, 1, 0, "count")


def test_the_changelog_setting_is_checked(make_env, tmp_path):
    env = make_env("local", **{"state.changelog.enabled": "sometimes"})
    env.from_collection([1, 2, 3]).key_by(lambda v: v).process(Count()).uid("count").print()
    with pytest.raises(ConfigurationError, match="state.changelog.enabled"):
        env.execute()


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_windows_and_their_timers_are_rebuilt_from_the_changelog(make_env, tmp_path, backend):
    """The seed job: window contents, event-time timers and the watermark come back with the replayed epochs."""
    n = 6_000
    env = make_env("local", **{"execution.epoch.max-records": 200, **BACKENDS[backend]})
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    out = tmp_path / "out"
    seed_job(env, n, out)
    wiped: list[int] = []

    def on_epoch(stats):
        if stats.epoch in (3, 9, 10) and stats.epoch not in wiped:
            for d in glob.glob(str(tmp_path / "local-state" / "*" / "stage-1" / "task-*")):
                shutil.rmtree(d)
            wiped.append(stats.epoch)

    env._on_epoch = on_epoch
    result = env.execute("seed")
    assert wiped == [3, 9, 10]
    assert result.restarts == 0 and result.state_rebuilds == 2 * len(wiped)
    assert Counter(read_committed_lines(out)) == window_oracle(n)


def test_a_damaged_changelog_makes_the_job_fail_over_and_lose_nothing(make_env, tmp_path, caplog):
    """The state is gone from its executor and the changelog the rebuild needs is damaged: the rebuild
    names the file and the job restores its latest checkpoint, once; the counts stay exact."""
    count = 3_000
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 40,
            **BACKENDS["rocksdb"],
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.delay": "0 ms",
        },
    )
    result, last, damaged = _run(env, tmp_path, count, {12}, checkpoints=True, damage_changelog=True)
    assert damaged == [12] and last == dict(oracle_totals(count))
    assert result.restarts == 1 and result.state_rebuilds == 0
    assert any("'count'" in r.message and "epoch 12 is damaged" in r.message for r in caplog.records), [
        r.message for r in caplog.records
    ]


@pytest.mark.spark
def test_auto_keeps_no_changelog_on_spark_in_this_process(spark, make_env, tmp_path):
    """``state.changelog.enabled: auto`` (the default) is on only where executors may not share a disk: a local[n]
    session runs every task in this process, so its job writes no changelog (it did when the scheduler asked the
    executor before it had its session). With ``true`` the same job writes one, so the check can see it."""
    seen = {}
    for setting in ("auto", "true"):
        env = make_env("spark", **{"execution.epoch.max-records": 200, "state.changelog.enabled": setting})
        env.enable_checkpointing(100)
        env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / setting).as_uri())
        env.set_parallelism(2)
        src = DataGeneratorSource(key_of, 1_000, num_splits=2)
        stream = env.from_source(src, WatermarkStrategy.no_watermarks(), "gen").key_by(lambda k: k).process(Count())
        segments: list[str] = []
        env._on_epoch = lambda stats, root=tmp_path / setting, found=segments: found.extend(
            glob.glob(str(root / "*" / "changelog" / "*" / "*" / "*.log"))
        )
        counts: Counter = Counter()
        for key, n in stream.execute_and_collect():
            counts[key] = max(counts[key], n)
        assert counts == oracle_totals(1_000)
        seen[setting] = bool(segments)
    assert seen == {"auto": False, "true": True}
