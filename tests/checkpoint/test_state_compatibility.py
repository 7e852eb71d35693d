"""State compatibility on restore, as Flink's serializer snapshots: a savepoint records each state's kind and
type and its keys' type; a restore compares them with what the job declares before any epoch runs.

The savepoint is taken of a job whose keyed function holds three states: ``n`` (``Types.INT()``), ``row``
(``Types.ROW_NAMED(["count"], [Types.INT()])``) and ``raw`` (untyped, ints). Jobs then change one of them:

* ``n`` as ``STRING``: refused before any record is read, naming uid, state and both types; ``inspect
  --against`` says the same; the same change on the RocksDB backend, likewise;
* the key selector giving ``int`` instead of ``str``: refused in the first epoch, without restarts, and nothing
  of that epoch is written;
* ``raw`` declared ``STRING``: its stored ints are sampled and refuse it;
* ``row`` with a field added, and ``n`` untyped: restored, the added field is ``None`` in every restored row,
  and every key's count goes on to its total (a hand count of the generator's keys).
"""

from __future__ import annotations

import json
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from sparkpoint.checkpoint.loader import load_checkpoint
from sparkpoint.cli import main
from sparkpoint.common import Row, Time, Types, WatermarkStrategy
from sparkpoint.datastream import KeyedProcessFunction
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.state import StateTtlConfig, ValueStateDescriptor
from sparkpoint.errors import StateMigrationError
from sparkpoint.state.schema import Compatibility, StateSchema, compare_types, judge, migration, type_json

COUNT = 12_000
KEYS = 7
V1_TYPES = {"n": Types.INT(), "row": Types.ROW_NAMED(["count"], [Types.INT()]), "raw": None}


def key_of(i: int) -> str:
    return f"k{i % KEYS}"


class Counts(KeyedProcessFunction):
    """Counts each key's records in three states of the declared types; emits (key, n, restored row)."""

    def __init__(self, types: dict, marker: str = ""):
        self.types, self.marker = types, marker

    def open(self, ctx):
        self.states = {name: ctx.get_state(ValueStateDescriptor(name, t)) for name, t in self.types.items()}

    def process_element(self, value, ctx):
        if self.marker:
            Path(self.marker).touch()  # a record reached the keyed function
        n = self.states["n"]
        count = int(n.value() or 0) + 1
        n.update(count if self.types["n"] != Types.STRING() else str(count))
        row = self.states["row"].value()
        fields = self.types["row"].field_names or ()
        self.states["row"].update(Row(**{f: (count if f == "count" else value) for f in fields}))
        self.states["raw"].update((self.states["raw"].value() or 0) + 1)
        yield value, count, row


def build(env, types: dict, rate=None, key=None, marker: str = "", key_type=None):
    src = DataGeneratorSource(key_of, COUNT, num_splits=2, records_per_second=rate)
    stream = env.from_source(src, WatermarkStrategy.no_watermarks(), "gen").uid("gen")
    return stream.key_by(key or (lambda k: k), key_type).process(Counts(types, marker)).uid("count")


@pytest.fixture(scope="module", params=["hashmap", "rocksdb"])
def savepoint(request, tmp_path_factory):
    """A savepoint of the v1 job, part-way through its input, and the state backend it ran on."""
    from sparkpoint.common import Configuration
    from sparkpoint.datastream import StreamExecutionEnvironment

    tmp = tmp_path_factory.mktemp(f"sp-{request.param}")
    conf = Configuration()
    for k, v in {
        "execution.target": "local",
        "execution.epoch.idle-pause": "0 ms",
        "state.backend.type": request.param,
        "sparkpoint.local-state-dir": str(tmp / "local"),
        "execution.epoch.max-records": 200,
    }.items():
        conf.set(k, v)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    epochs: list = []
    env._on_epoch = epochs.append
    build(env, V1_TYPES, rate=8_000).print()
    client = env.execute_async("v1")
    deadline = time.monotonic() + 60
    while len(epochs) < 5 and time.monotonic() < deadline:  # some state in every key, however slow the start
        time.sleep(0.05)
    path = client.stop_with_savepoint(False, (tmp / "sp").as_uri()).result(timeout=60)
    client.wait(60)
    return path, request.param


def _env(make_env, savepoint, **conf):
    path, backend = savepoint
    env = make_env("local", **{"execution.savepoint.path": path, "state.backend.type": backend, **conf})
    env.set_parallelism(2)
    return env


def test_the_savepoint_records_each_state_kind_and_type_and_the_keys_classes(savepoint):
    meta = json.loads(Path(savepoint[0].removeprefix("file://"), "_metadata").read_text())
    schema = meta["body"]["operators"]["count"]["schema"]
    assert schema["states"] == {
        "n": {"kind": "value", "type": {"name": "INT"}, "ttl": False},
        "row": {
            "kind": "value",
            "type": {"name": "ROW", "children": [{"name": "INT"}], "fields": ["count"]},
            "ttl": False,
        },
        "raw": {"kind": "value", "type": None, "ttl": False},
    }
    assert schema["key_kinds"] == ["str"]


def test_a_changed_state_type_is_refused_before_any_record_is_read(make_env, savepoint, tmp_path):
    marker = tmp_path / "a-record-was-processed"
    env = _env(make_env, savepoint)
    build(env, {**V1_TYPES, "n": Types.STRING()}, marker=str(marker)).print()
    with pytest.raises(StateMigrationError) as err:
        env.execute("v2")
    assert "uid 'count'" in str(err.value) and "state 'n'" in str(err.value)
    assert "value state of INT" in str(err.value) and "value state of STRING" in str(err.value)
    assert not marker.exists()


class CountsWithTtl(Counts):
    """As :class:`Counts`, with a time-to-live on ``n``."""

    def open(self, ctx):
        ttl = StateTtlConfig.new_builder(Time.minutes(10)).build()
        self.states = {}
        for name, t in self.types.items():
            descriptor = ValueStateDescriptor(name, t)
            if name == "n":
                descriptor.enable_time_to_live(ttl)
            self.states[name] = ctx.get_state(descriptor)


def test_a_time_to_live_turned_on_is_refused_before_any_record_is_read(make_env, savepoint, tmp_path):
    """Stored values with a time-to-live carry their last access, others do not: as Flink, turning it on or off
    on a restored state is refused (the values read back were the TTL wrapper, or failed at the first access)."""
    marker = tmp_path / "a-record-was-processed"
    env = _env(make_env, savepoint)
    src = DataGeneratorSource(key_of, COUNT, num_splits=2)
    stream = env.from_source(src, WatermarkStrategy.no_watermarks(), "gen").uid("gen")
    stream.key_by(lambda k: k).process(CountsWithTtl(V1_TYPES, str(marker))).uid("count").print()
    with pytest.raises(StateMigrationError, match=r"uid 'count'.*state 'n'.*time-to-live was turned on"):
        env.execute("v2")
    assert not marker.exists()


def test_inspect_against_says_what_the_restore_does(savepoint, tmp_path):
    job = tmp_path / "v2_job.py"
    job.write_text(
        textwrap.dedent(f"""
        import sys
        from sparkpoint.common import Types
        from sparkpoint.datastream import StreamExecutionEnvironment
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_state_compatibility import V1_TYPES, build

        changes = {{"string": {{"n": Types.STRING()}},
                    "row": {{"row": Types.ROW_NAMED(["count", "last"], [Types.INT(), Types.STRING()])}}}}
        env = StreamExecutionEnvironment.get_execution_environment()
        build(env, {{**V1_TYPES, **changes[sys.argv[1]]}}).print()
        env.execute("v2")
    """)
    )
    refused = CliRunner().invoke(main, ["inspect", savepoint[0], "--against", str(job), "string"])
    assert refused.exit_code == 1, refused.output
    problem = [line for line in refused.output.splitlines() if line.startswith("  PROBLEM")]
    assert len(problem) == 1 and "uid 'count'" in problem[0] and "state 'n'" in problem[0], refused.output
    assert refused.output.splitlines()[-1] == "verdict: the job CANNOT be restored"
    migrated = CliRunner().invoke(main, ["inspect", savepoint[0], "--against", str(job), "row"])
    assert migrated.exit_code == 0, migrated.output
    assert any(
        line.startswith("  MIGRATE  count:") and "fields added: last" in line for line in migrated.output.splitlines()
    ), migrated.output


def test_a_changed_key_type_fails_the_first_epoch_without_restarts(make_env, savepoint, tmp_path):
    out = tmp_path / "out"
    env = _env(
        make_env,
        savepoint,
        **{
            "execution.checkpointing.interval": "1 s",
            "state.checkpoints.dir": (tmp_path / "chk").as_uri(),
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 5,
            "restart-strategy.fixed-delay.delay": "5 s",
        },
    )
    from sparkpoint.common import Encoder
    from sparkpoint.datastream.connectors.file_system import FileSink

    stream = build(env, V1_TYPES, key=lambda k: int(k[1:]))
    stream.map(str).sink_to(FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()).uid("sink")
    t0 = time.monotonic()
    with pytest.raises(StateMigrationError) as err:
        env.execute("v2")
    message = str(err.value)
    assert "uid 'count'" in message and "keys of kind str" in message and "keys are of kind number" in message
    assert time.monotonic() - t0 < 20  # no restart: each would wait 5 s, restore and fail again
    written = [p for p in out.rglob("*") if p.is_file() and not p.name.startswith(".")] if out.exists() else []
    assert written == []


def test_untyped_state_given_a_type_is_checked_against_its_stored_values(make_env, savepoint):
    env = _env(make_env, savepoint)
    build(env, {**V1_TYPES, "raw": Types.STRING()}).print()
    with pytest.raises(
        StateMigrationError,
        match=r"state 'raw' was checkpointed as value state of PICKLED.*"
        r"a stored value, \d+ \(int\), is not of the declared STRING",
    ):
        env.execute("v2")


def test_an_added_row_field_and_an_untyped_state_are_migrated(make_env, savepoint):
    env = _env(make_env, savepoint)
    v2 = {"n": None, "row": Types.ROW_NAMED(["count", "last"], [Types.INT(), Types.STRING()]), "raw": None}
    got = build(env, v2).execute_and_collect()
    first: dict = {}
    last: dict = {}
    for key, n, row in got:
        if key not in first or n < first[key][0]:
            first[key] = (n, row)
        last[key] = max(last.get(key, 0), n)
    oracle: dict = {}
    for i in range(COUNT):
        oracle[key_of(i)] = oracle.get(key_of(i), 0) + 1
    assert last == oracle
    for key, (n, row) in first.items():
        assert n > 1, f"{key} restarted from empty state"
        assert row is not None and row.last is None and row["count"] == n - 1, (key, n, row)


def test_compatibility_rules():
    t = type_json
    row1 = t(Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.STRING()]))
    row2 = t(Types.ROW_NAMED(["a", "c"], [Types.LONG(), Types.DOUBLE()]))
    cases = [
        (Types.INT(), Types.INT(), Compatibility.COMPATIBLE_AS_IS),
        (Types.INT(), Types.LONG(), Compatibility.COMPATIBLE_AFTER_MIGRATION),
        (Types.LONG(), Types.INT(), Compatibility.INCOMPATIBLE),
        (Types.INT(), None, Compatibility.COMPATIBLE_AFTER_MIGRATION),
        (Types.INT(), Types.STRING(), Compatibility.INCOMPATIBLE),
        (Types.LIST(Types.INT()), Types.LIST(Types.STRING()), Compatibility.INCOMPATIBLE),
        (
            Types.MAP(Types.STRING(), Types.FLOAT()),
            Types.MAP(Types.STRING(), Types.DOUBLE()),
            Compatibility.COMPATIBLE_AFTER_MIGRATION,
        ),
        (Types.TUPLE([Types.INT()]), Types.TUPLE([Types.INT(), Types.INT()]), Compatibility.INCOMPATIBLE),
        (Types.ROW_NAMED(["a"], [Types.INT()]), Types.ROW_NAMED(["a"], [Types.STRING()]), Compatibility.INCOMPATIBLE),
    ]
    for old, new, want in cases:
        assert compare_types(t(old), t(new))[0] is want, (old, new)
    with_ttl, without = StateSchema("value", t(Types.INT()), True), StateSchema("value", t(Types.INT()), False)
    assert judge(with_ttl, without)[0] is judge(without, with_ttl)[0] is Compatibility.INCOMPATIBLE
    unknown = StateSchema("value", t(Types.INT()))  # from a checkpoint that did not record it
    assert judge(unknown, with_ttl) == (Compatibility.COMPATIBLE_AS_IS, "")
    assert judge(StateSchema.from_json(unknown.to_json()), with_ttl)[0] is Compatibility.COMPATIBLE_AS_IS  # kept
    assert compare_types(row1, row2)[0] is Compatibility.COMPATIBLE_AFTER_MIGRATION
    fn = migration(row1, row2)
    assert fn is not None
    moved = fn(Row(a=1, b="x"))
    assert (moved.a, moved.c, list(moved.as_dict())) == (1, None, ["a", "c"])
    assert fn(Row(a=1, c=2.5)).c == 2.5  # idempotent: a row in the new form already keeps its values
    nested = migration(
        t(Types.LIST(Types.ROW_NAMED(["a"], [Types.INT()]))),
        t(Types.LIST(Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.INT()]))),
    )
    assert nested is not None and [r.b for r in nested([Row(a=1), Row(a=2)])] == [None, None]


@pytest.mark.spark
def test_on_spark_a_changed_key_type_is_refused_in_the_task(spark, make_env, savepoint):
    path, backend = savepoint
    env = make_env("spark", **{"execution.savepoint.path": path, "state.backend.type": backend})
    env.set_parallelism(2)
    build(env, V1_TYPES, key=lambda k: int(k[1:])).print()
    with pytest.raises(StateMigrationError, match=r"uid 'count'.*keys of kind str.*keys are of kind number"):
        env.execute("v2 on spark")


def test_inspect_shows_each_state_type_and_the_keys_classes(savepoint):
    r = CliRunner().invoke(main, ["inspect", savepoint[0]])
    assert r.exit_code == 0, r.output
    lines = [line.strip() for line in r.output.splitlines()]
    assert "keys: str" in lines
    assert any(line.startswith("n: ") and line.endswith("keys; value state of INT") for line in lines), r.output
    assert any(line.startswith("row: ") and line.endswith("; value state of ROW<count INT>") for line in lines)
    assert any(line.startswith("raw: ") and line.endswith("; value state of PICKLED (untyped)") for line in lines)


class LazyCounts(Counts):
    """As :class:`Counts`, declaring its states at its first record (in an epoch) instead of in ``open()``."""

    def open(self, ctx):
        self.ctx, self.states = ctx, None

    def process_element(self, value, ctx):
        if self.states is None:
            self.states = {name: self.ctx.get_state(ValueStateDescriptor(name, t)) for name, t in self.types.items()}
        row = self.states["row"].value()
        if row is not None:
            assert row["last"] is None or isinstance(row["last"], str)  # an unmigrated row has no field 'last'
        yield from super().process_element(value, ctx)


def test_state_declared_lazily_is_migrated_in_every_subtask_even_one_idle_at_first(make_env, savepoint):
    """After the restore only k0 arrives for a while, so one subtask declares (and migrates) the state epochs
    before the other does: the other must still migrate its key groups when its records come."""
    sources = load_checkpoint(savepoint[0]).driver_state["sources"]["gen"]
    read = max((s.position for ss in sources["splits"].values() for s in ss), default=0) * 2
    skew_until = read + 2_000

    def skewed(i: int) -> str:
        return "k0" if i < skew_until else key_of(i)

    env = _env(make_env, savepoint, **{"execution.epoch.max-records": 200})
    v2 = {"n": Types.INT(), "row": Types.ROW_NAMED(["count", "last"], [Types.INT(), Types.STRING()]), "raw": None}
    src = DataGeneratorSource(skewed, COUNT, num_splits=2)
    got = (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(LazyCounts(v2))
        .uid("count")
        .execute_and_collect()
    )
    first: dict = {}
    for key, n, row in got:
        if key not in first or n < first[key][0]:
            first[key] = (n, row)
    assert set(first) == {key_of(i) for i in range(KEYS)}
    for key, (n, row) in first.items():
        assert n > 1 and row is not None and row.last is None and row["count"] == n - 1, (key, n, row)


_OPENED: list = []


class WaitsAtFirstOpen(Counts):
    """An open() that waits for what only a task has: its first call in the process, the driver's probe on a
    restore, would wait an hour."""

    def open(self, ctx):
        if not _OPENED:
            _OPENED.append(ctx)
            time.sleep(3600)
        super().open(ctx)


def test_an_open_that_hangs_on_the_driver_does_not_hang_the_restore(make_env, savepoint, monkeypatch):
    from sparkpoint.runtime import state_probe

    monkeypatch.setattr(state_probe, "PROBE_TIMEOUT_S", 1.0)
    _OPENED.clear()
    env = _env(make_env, savepoint)
    src = DataGeneratorSource(key_of, COUNT, num_splits=2)
    t0 = time.monotonic()
    got = list(
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(WaitsAtFirstOpen(V1_TYPES))
        .uid("count")
        .execute_and_collect()
    )
    assert time.monotonic() - t0 < 60 and _OPENED  # the first open() waited, and the restore went on
    last: dict = {}
    for key, n, _ in got:
        last[key] = max(last.get(key, 0), n)
    assert last == {k: sum(1 for i in range(COUNT) if key_of(i) == k) for k in last} and len(last) == KEYS


def test_key_kinds_tell_keys_that_can_find_each_others_state():
    from sparkpoint.state.key_groups import key_bytes, key_kind

    assert key_kind(1) == key_kind(1.0) == key_kind(True) == "number" and key_bytes(1) == key_bytes(1.0)
    assert key_kind("1") == "str" != key_kind(1)
    assert key_kind(("a", 2)) == key_kind(Row("b", 3.5)) == "tuple<str, number>" != key_kind(("a", "2"))


def test_a_declared_key_type_of_another_kind_is_refused_before_any_record_is_read(make_env, savepoint, tmp_path):
    marker = tmp_path / "a-record-was-processed"
    env = _env(make_env, savepoint)
    build(env, V1_TYPES, key=lambda k: int(k[1:]), key_type=Types.INT(), marker=str(marker)).print()
    with pytest.raises(
        StateMigrationError,
        match=r"uid 'count'.*keys of kind str.*keys are of kind number \(as "
        r"key_by's key_type declares\)",
    ):
        env.execute("v2")
    assert not marker.exists()
    same = _env(make_env, savepoint)  # the same kind declared: restored, every count goes on
    got = list(build(same, V1_TYPES, key_type=Types.STRING()).execute_and_collect())
    assert {k: max(n for kk, n, _ in got if kk == k) for k, _, _ in got} == {
        k: sum(1 for i in range(COUNT) if key_of(i) == k) for k in (key_of(i) for i in range(KEYS))
    }


class CountsWithoutRaw(Counts):
    """v2 of the keyed function: the untyped state ``raw`` is gone (declared no more)."""

    def process_element(self, value, ctx):
        n = self.states["n"]
        count = int(n.value() or 0) + 1
        n.update(count)
        yield value, count


def test_a_state_declared_no_more_is_carried_and_the_job_checkpoints(make_env, savepoint, tmp_path):
    """The restored job no longer declares ``raw``: its checkpoints record the restored schema for it (no subtask
    declared it since; that failed every checkpoint, and so the job), and the counts go on to the hand count's
    totals."""
    env = _env(
        make_env,
        savepoint,
        **{"execution.checkpointing.interval": "100 ms", "state.checkpoints.dir": (tmp_path / "ck").as_uri()},
    )
    src = DataGeneratorSource(key_of, COUNT, num_splits=2, records_per_second=20_000)
    stream = env.from_source(src, WatermarkStrategy.no_watermarks(), "gen").uid("gen")
    v2 = {"n": Types.INT(), "row": V1_TYPES["row"]}
    got: list = []
    stream.key_by(lambda k: k).process(CountsWithoutRaw(v2)).uid("count").add_sink(lambda v, _: got.append(v))
    result = env.execute("v2")
    last: dict = {}
    for key, n in got:
        last[key] = max(last.get(key, 0), n)
    assert last == Counter(key_of(i) for i in range(COUNT))  # each key's count goes on to its total
    completed = [c for c in result.checkpoints["history"] if c["status"] == "COMPLETED"]
    assert completed, result.checkpoints["history"]
