"""Epochs sized by what is waiting (runtime/epoch_sizing.py): they grow while a source stops at its bound, shrink
when it catches up or an epoch takes longer than the checkpoint interval, and stay as configured when a job
sets the bounds."""

from __future__ import annotations

from sparkpoint.common import Configuration, WatermarkStrategy
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.runtime.deployments import TaskSettings
from sparkpoint.runtime.epoch_sizing import AT_BOUND, MAX_FACTOR, EpochSizer
from sparkpoint.runtime.task_messages import TaskReport

COUNT = 1_000_000


def _report(at_bound: bool) -> TaskReport:
    return TaskReport(0, 0, 0, metrics={"source": {"numRecordsOut": 1, **({AT_BOUND: 1} if at_bound else {})}})


def test_the_factor_doubles_with_a_backlog_and_halves_when_caught_up_or_slow():
    sizer = EpochSizer(adaptive=True, target_ms=10_000)
    factors = []
    for at_bound, ms in [(True, 100)] * 5 + [(True, 6_000), (True, 11_000), (False, 100), (False, 100)]:
        sizer.observe([_report(at_bound)], ms)
        factors.append(sizer.factor)
    assert factors == [2, 4, 8, MAX_FACTOR, MAX_FACTOR, MAX_FACTOR, 4, 2, 1]
    base = TaskSettings("j", "/tmp", True, 100_000, 16 << 20, False)
    sizer.factor = 4
    assert (sizer.settings(base).max_records, sizer.settings(base).max_bytes) == (400_000, 64 << 20)
    fixed = EpochSizer(adaptive=False, target_ms=10_000)
    fixed.observe([_report(True)], 100)
    assert fixed.factor == 1 and fixed.settings(base) is base


def test_epochs_grow_only_while_the_workers_memory_allows():
    sizer = EpochSizer(adaptive=True, target_ms=10_000, memory_budget=1_000)
    factors = []
    for resident in (100, 501, 500, 400, 1_001, 1_001, 0):  # over half the budget: no growth; over it: halve
        sizer.observe([_report(True)], 100, resident)
        factors.append(sizer.factor)
    assert factors == [2, 2, 4, 8, 4, 2, 4]
    conf = Configuration()
    assert EpochSizer.from_config(conf, None).memory_budget == 1 << 30
    conf.set("sparkpoint.epoch.memory-budget", "256 mb")
    assert EpochSizer.from_config(conf, None).memory_budget == 256 << 20


def test_configured_bounds_stay_fixed():
    conf = Configuration()
    assert EpochSizer.from_config(conf, None).adaptive and EpochSizer.from_config(conf, -1).target_ms == 10_000
    assert EpochSizer.from_config(conf, 2_000).target_ms == 2_000
    conf.set("execution.epoch.max-records", 5_000)
    assert not EpochSizer.from_config(conf, None).adaptive
    off = Configuration()
    off.set("sparkpoint.epoch.adaptive", "false")
    assert not EpochSizer.from_config(off, None).adaptive


def test_a_backlog_is_read_in_fewer_larger_epochs(make_env):
    epochs = {}
    budget = {"sparkpoint.epoch.memory-budget": "64 gb"}  # in-process tasks: the test process's memory counts
    for name, config in {"adaptive": budget, "fixed": {"execution.epoch.max-records": 100_000}}.items():
        env = make_env("local", **config)
        env.set_parallelism(1)
        source = DataGeneratorSource(lambda i: i % 7, COUNT, num_splits=1)
        env.from_source(source, WatermarkStrategy.no_watermarks(), "gen").uid("gen").filter(lambda x: x < 0).print()
        result = env.execute(name)
        epochs[name] = result.epochs
    # fixed: 10 epochs of 100,000 (and the end); adaptive: 100k, 200k, 400k, then 300k of the 800k bound
    assert epochs["fixed"] >= 10 and epochs["adaptive"] <= 6, epochs


def test_tasks_report_their_workers_memory_and_a_small_budget_keeps_epochs_small(make_env):
    env = make_env("local", **{"sparkpoint.epoch.memory-budget": "1 mb"})  # any worker holds more than that
    env.set_parallelism(1)
    source = DataGeneratorSource(lambda i: i % 7, COUNT, num_splits=1)
    env.from_source(source, WatermarkStrategy.no_watermarks(), "gen").uid("gen").filter(lambda x: x < 0).print()
    assert env.execute("over budget").epochs >= 10  # 100,000 records an epoch, as with fixed bounds


def test_with_sources_ahead_each_step_is_from_the_observed_epochs_own_size():
    """The next epoch's sources run ahead, sized before this epoch is observed: growth doubles the size the observed
    epoch read with (twice, not four times, an epoch seen at half the budget), and a shrink halves it."""
    sizer = EpochSizer(adaptive=True, target_ms=10_000, memory_budget=1_000)
    base = TaskSettings("j", "/tmp", True, 100, 1 << 20, False)
    deployed = {1: sizer.settings(base, 1).max_records, 2: sizer.settings(base, 2).max_records}  # 2 ran ahead
    for epoch in range(1, 5):
        sizer.observe([_report(True)], 100, 400, epoch)  # at 40 % of the budget: may double
        deployed[epoch + 2] = sizer.settings(base, epoch + 2).max_records
    assert deployed == {1: 100, 2: 100, 3: 200, 4: 200, 5: 400, 6: 400}
    assert all(deployed[e + 2] <= 2 * deployed[e] for e in range(1, 5))
    sizer.observe([_report(True)], 100, 1_001, 5)  # epoch 5 (400) over the budget: the next is half of it
    assert sizer.settings(base, 7).max_records == 200


def test_a_failover_starts_again_at_the_configured_bounds():
    """An epoch that failed may have been too large (a worker out of memory, its timeout): the same bounds after
    the restore would fail the same way."""
    sizer = EpochSizer(adaptive=True, target_ms=10_000)
    for _ in range(3):
        sizer.observe([_report(True)], 100)
    assert sizer.factor == 8
    sizer.failed()
    assert sizer.factor == 1
