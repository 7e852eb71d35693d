"""Operator list state redistribution on rescaling: even-split and union, as Flink does."""

from __future__ import annotations

import time

import pytest

from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import CheckpointedFunction, MapFunction
from sparkpoint.datastream.connectors.generator import NumberSequenceSource
from sparkpoint.datastream.state import ListStateDescriptor
from sparkpoint.errors import StateMigrationError
from sparkpoint.runtime.restore import load_checkpoint
from sparkpoint.state.operator_state import DefaultOperatorStateStore, redistribute_operator_state


def test_even_split_and_union_redistribution():
    old = [
        {"offsets": ("split", [1, 2, 3]), "seen": ("union", ["a"])},
        {"offsets": ("split", [4, 5]), "seen": ("union", ["b", "c"])},
    ]
    new = redistribute_operator_state(old, 3)
    assert sorted(v for s in new for v in s["offsets"][1]) == [1, 2, 3, 4, 5]  # each element exactly once
    assert max(len(s["offsets"][1]) for s in new) - min(len(s["offsets"][1]) for s in new) <= 1
    assert all(sorted(s["seen"][1]) == ["a", "b", "c"] for s in new)  # union: everything, everywhere
    back = redistribute_operator_state(new, 1)
    assert sorted(back[0]["offsets"][1]) == [1, 2, 3, 4, 5]
    same = redistribute_operator_state(old, 2)  # a failover, or a restore at the same parallelism
    assert [s["offsets"] for s in same] == [("split", [1, 2, 3]), ("split", [4, 5])]  # each subtask its own
    assert all(s["seen"] == ("union", ["a", "b", "c"]) for s in same)  # union: everything, everywhere, still


class Remember(MapFunction, CheckpointedFunction):
    """Remembers every value it saw in even-split list state."""

    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_list_state(ListStateDescriptor("seen"))
        self.seen = list(self.state.get()) if context.is_restored() else []

    def snapshot_state(self, context):
        self.state.update(self.seen)

    def map(self, value):
        self.seen.append(value)
        return (value, len(self.seen))


def _savepoint(make_env, tmp_path, function) -> str:
    """A savepoint of ``function`` (uid ``remember``) at parallelism 2, taken half a second into the job."""
    env = make_env("local", **{"execution.epoch.max-records": 5})
    env.set_parallelism(2)
    src = NumberSequenceSource(1, 10**6, num_splits=2)
    env.from_source(src, WatermarkStrategy.no_watermarks(), "n").uid("n").map(function).uid("remember").print()
    client = env.execute_async("remember")
    time.sleep(0.5)
    path = client.stop_with_savepoint(False, (tmp_path / "sp").as_uri()).result(timeout=60)
    client.wait(60)
    return path


def _restored_run(make_env, savepoint: str, function, parallelism: int) -> list:
    """``function`` restored from ``savepoint`` at ``parallelism``, over one new value per subtask (the old source's
    state dropped explicitly, as ``-n``)."""
    env = make_env(
        "local", **{"execution.savepoint.path": savepoint, "execution.savepoint.ignore-unclaimed-state": True}
    )
    env.set_parallelism(parallelism)
    source = NumberSequenceSource(1, parallelism, num_splits=parallelism)
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "n2").uid("n2")
    return list(stream.map(function).uid("remember").execute_and_collect())


def test_operator_state_survives_a_savepoint_at_another_parallelism(make_env, tmp_path):
    path = _savepoint(make_env, tmp_path, Remember())
    before = load_checkpoint(path).driver_state["operator_states"]["remember"]
    remembered = sorted(v for snap in before.values() for v in snap["seen"][1])
    assert remembered

    # the old source's state is dropped explicitly (-n); the map's state is spread over 3 subtasks
    out = _restored_run(make_env, path, Remember(), 3)
    # three subtasks, each with a third of what two subtasks remembered, plus the one new value each
    assert sorted(n for _, n in out) != [1, 1, 1]
    assert sum(n for _, n in out) == len(remembered) + 3
    assert max(n for _, n in out) - min(n for _, n in out) <= 1


class RememberAll(Remember):
    """Remembers every value it saw in union list state: restored, each subtask starts from all of them."""

    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_union_list_state(ListStateDescriptor("seen"))
        self.seen = list(self.state.get()) if context.is_restored() else []


def test_union_state_restored_at_the_same_parallelism_is_all_of_it_on_every_subtask(make_env, tmp_path):
    """As Flink's round-robin repartitioner: union list state goes whole to every subtask, whether the parallelism
    changed or not (a failover, a restore at the same parallelism)."""
    path = _savepoint(make_env, tmp_path, RememberAll())
    before = load_checkpoint(path).driver_state["operator_states"]["remember"]
    remembered = [v for snap in before.values() for v in snap["seen"][1]]
    assert remembered and all(len(snap["seen"][1]) < len(remembered) for snap in before.values())

    out = _restored_run(make_env, path, RememberAll(), 2)
    assert sorted(n for _, n in out) == [len(remembered) + 1] * 2  # all of it, and the one new value each


def test_a_list_state_read_in_another_mode_than_checkpointed_is_refused():
    """As Flink ("Incompatible assignment mode"): union state read as even-split would stay union in every later
    checkpoint and give each subtask everything; even-split read as union, only a share."""
    union = DefaultOperatorStateStore({"offsets": ("union", [("p0", 5)])})
    with pytest.raises(StateMigrationError, match=r"'offsets'.*union.*get_union_list_state.*get_list_state"):
        union.get_list_state(ListStateDescriptor("offsets", None))
    split = DefaultOperatorStateStore({"offsets": ("split", [("p0", 5)])})
    with pytest.raises(StateMigrationError, match=r"'offsets'.*even-split.*get_list_state.*get_union_list_state"):
        split.get_union_list_state(ListStateDescriptor("offsets", None))
    assert list(split.get_list_state(ListStateDescriptor("offsets", None)).get()) == [("p0", 5)]  # same mode: fine


def test_a_job_that_reads_its_even_split_state_as_union_state_fails_on_restore_naming_it(make_env, tmp_path):
    path = _savepoint(make_env, tmp_path, Remember())
    with pytest.raises(StateMigrationError, match=r"uid 'remember'.*'seen'.*even-split"):
        _restored_run(make_env, path, RememberAll(), 2)
