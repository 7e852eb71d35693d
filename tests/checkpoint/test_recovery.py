"""Recovery inside one run: restart strategies, lost working state, corrupt checkpoints, notifications."""

from __future__ import annotations

import glob
import shutil
from pathlib import Path

import pytest

from sparkpoint.common import Configuration, WatermarkStrategy
from sparkpoint.datastream import CheckpointListener, MapFunction
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.restart import (
    ExponentialDelayRestart,
    FailureRateRestart,
    FixedDelayRestart,
    NoRestart,
    restart_strategy_from_config,
)
from tests.checkpoint.test_checkpointing import Count, key_of, oracle_totals


def _job(env, tmp_path: Path, count: int, fn=None):
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    env.get_configuration().set("state.checkpoints.num-retained", 3)
    env.set_parallelism(2)
    src = DataGeneratorSource(key_of, count, num_splits=2)
    return (env.from_source(src, WatermarkStrategy.no_watermarks(), "gen").uid("gen")
            .key_by(lambda k: k).process(fn or Count()).uid("count"))


def _last_counts(rows) -> dict:
    last: dict = {}
    for key, n in rows:
        last[key] = max(last.get(key, 0), n)
    return last


def test_wiped_local_state_is_rebuilt_from_the_latest_checkpoint(make_env, tmp_path):
    count = 3_000
    env = make_env("local", **{"execution.epoch.max-records": 25, "restart-strategy.type": "fixed-delay",
                               "restart-strategy.fixed-delay.delay": "0 ms"})
    wiped = []

    def on_epoch(stats):
        if stats.epoch == 12 and not wiped:
            shutil.rmtree(tmp_path / "local-state")
            wiped.append(stats.epoch)

    env._on_epoch = on_epoch
    got = _job(env, tmp_path, count).execute_and_collect()
    assert wiped
    assert _last_counts(got) == dict(oracle_totals(count))


def test_recovery_skips_a_corrupt_latest_checkpoint(make_env, tmp_path, caplog):
    """The newest retained checkpoint is damaged when a failure hits: recovery falls back to the previous one."""
    count = 3_000
    env = make_env("local", **{"execution.epoch.max-records": 25, "restart-strategy.type": "fixed-delay",
                               "restart-strategy.fixed-delay.delay": "0 ms"})
    damaged = []

    def on_epoch(stats):
        if stats.epoch == 15 and not damaged:
            chks = sorted((p for p in glob.glob(str(tmp_path / "ck" / "*" / "chk-*")) if Path(p, "_metadata").exists()),
                          key=lambda p: int(p.rsplit("-", 1)[1]))
            newest = chks[-1]
            keyed = sorted(glob.glob(newest + "/keyed-*"))
            Path(keyed[0]).write_bytes(Path(keyed[0]).read_bytes()[:-3])  # truncated
            damaged.append(newest)
            shutil.rmtree(tmp_path / "local-state")                       # and the working state is lost

    env._on_epoch = on_epoch
    got = _job(env, tmp_path, count).execute_and_collect()
    assert damaged
    assert _last_counts(got) == dict(oracle_totals(count))
    newest_id = int(damaged[0].rsplit("-", 1)[1])
    assert any(f"cannot recover from checkpoint {newest_id}" in r.message and "truncated" in r.message
               for r in caplog.records), [r.message for r in caplog.records]


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


def test_restart_strategies():
    fixed = FixedDelayRestart(2, 10)
    for _ in range(2):
        fixed.notify_failure()
        assert fixed.can_restart() and fixed.backoff_ms() == 10
    fixed.notify_failure()
    assert not fixed.can_restart()

    rate = FailureRateRestart(2, 60_000, 5)
    rate.notify_failure()
    rate.notify_failure()
    assert rate.can_restart()
    rate.notify_failure()
    assert not rate.can_restart()

    exp = ExponentialDelayRestart(100, 1_000, 2.0, 10)
    backoffs = []
    for _ in range(6):
        exp.notify_failure()
        backoffs.append(exp.backoff_ms())
    assert backoffs == [100, 200, 400, 800, 1000, 1000]

    assert not NoRestart().can_restart()


def test_restart_strategy_configuration():
    def conf(**kv):
        c = Configuration()
        for k, v in kv.items():
            c.set(k.replace("_", "."), v)
        return c

    assert isinstance(restart_strategy_from_config(Configuration(), checkpointing=False), NoRestart)
    assert isinstance(restart_strategy_from_config(Configuration(), checkpointing=True), FixedDelayRestart)
    s = restart_strategy_from_config(conf(**{"restart-strategy.type": "failure-rate"}), True)
    assert isinstance(s, FailureRateRestart)
    c = Configuration()
    c.set("restart-strategy.type", "exponential-delay")
    c.set("restart-strategy.exponential-delay.initial-backoff", "2 s")
    assert restart_strategy_from_config(c, True).initial_ms == 2000
    c.set("restart-strategy.type", "sometimes")
    with pytest.raises(ConfigurationError, match="sometimes"):
        restart_strategy_from_config(c, True)
