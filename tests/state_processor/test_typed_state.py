"""Keyed state as typed Spark DataFrames, read by the executors, and the diff of two savepoints.

The job keeps, per user, state of every declared kind (a named row, a map, a list, a timestamp) and two untyped
states; a savepoint is taken while it runs. The oracle is a pandas fold over exactly the records the
savepoint's source position says were read (independent of the job's state).
"""

from __future__ import annotations

import ast
import datetime
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from sparkpoint.checkpoint.loader import load_checkpoint
from sparkpoint.common import Configuration, Row, Types, WatermarkStrategy
from sparkpoint.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from sparkpoint.state_processor import SavepointReader, SavepointWriter
from sparkpoint.state_processor.state_rows import StateRead

USERS = ["ann", "bob", "cy", "dee", "eve"]
ITEMS = ["plum", "fig", "kiwi"]
COUNT = 200_000
T0 = datetime.datetime(2026, 1, 1)
ROOT = Path(__file__).resolve().parents[2]
ROW = Types.ROW_NAMED(["item", "qty", "price"], [Types.STRING(), Types.INT(), Types.DOUBLE()])


def record(i: int) -> tuple:
    return USERS[i % 5], ITEMS[(i // 5) % 3], 1 + i % 4, 0.5 * (i % 7) + 1.0, i


class EveryKind(KeyedProcessFunction):
    def open(self, ctx):
        self.last = ctx.get_state(ValueStateDescriptor("last", ROW))
        self.per_item = ctx.get_map_state(MapStateDescriptor("per_item", Types.STRING(), Types.INT()))
        self.prices = ctx.get_list_state(ListStateDescriptor("prices", Types.DOUBLE()))
        self.seen_at = ctx.get_state(ValueStateDescriptor("seen_at", Types.SQL_TIMESTAMP()))
        self.count = ctx.get_state(ValueStateDescriptor("count"))  # untyped: its values are all ints
        self.mixed = ctx.get_state(ValueStateDescriptor("mixed"))  # untyped: a str for ann, an int for the others

    def process_element(self, r, ctx):
        user, item, qty, price, i = r
        self.last.update(Row(item=item, qty=qty, price=price))
        self.per_item.put(item, (self.per_item.get(item) or 0) + qty)
        if i < 500:  # short lists
            self.prices.add(price)
        self.seen_at.update(T0 + datetime.timedelta(seconds=i))
        self.count.update((self.count.value() or 0) + 1)
        self.mixed.update(item if user == "ann" else i)
        yield r


def _savepoint(tmp_path, name: str, seconds: float) -> str:
    conf = Configuration()
    for k, v in {
        "execution.target": "local",
        "execution.epoch.max-records": 500,
        "sparkpoint.local-state-dir": str(tmp_path / "ls"),
        "execution.epoch.idle-pause": "0 ms",
        "parallelism.default": 2,
    }.items():
        conf.set(k, v)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    source = DataGeneratorSource(record, COUNT, num_splits=1, records_per_second=4_000)
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda r: r[0], key_type=Types.STRING())
        .process(EveryKind())
        .uid("every-kind")
        .key_by(by_item)  # untyped tuple keys, more of them as the job runs
        .process(EveryKind())
        .uid("by-item")
        .add_sink(_discard())
    )
    client = env.execute_async(name)
    time.sleep(seconds)
    assert not client.get_job_execution_result().done(), "the job ended before the savepoint"
    path = client.stop_with_savepoint(False, (tmp_path / name).as_uri()).result(timeout=60)
    client.wait(60)
    return path


def by_item(r: tuple) -> tuple:
    return r[1], r[4] // 1000


def _discard():
    from sparkpoint.datastream.functions import SinkFunction

    class Discard(SinkFunction):
        def invoke(self, value, context):
            pass

    return Discard()


def _oracle(path: str, key=lambda r: r[0]) -> pd.DataFrame:
    """Per key, the state the records read by the savepoint's source position make."""
    splits = [s for ss in load_checkpoint(path).driver_state["sources"]["gen"]["splits"].values() for s in ss]
    read = splits[0].position if splits else COUNT
    assert 0 < read < COUNT
    df = pd.DataFrame([record(i) for i in range(read)], columns=["user", "item", "qty", "price", "i"])
    df["key"] = [key(r) for r in df.itertuples(index=False)]
    return df


@pytest.fixture(scope="module")
def savepoints(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("typed")
    return _savepoint(tmp, "early", 1.0), _savepoint(tmp, "later", 2.5)


def test_declared_types_become_spark_types(spark, savepoints):
    early = savepoints[0]
    reader = SavepointReader.read(spark, early)
    oracle = _oracle(early)
    last = reader.read_keyed_state("every-kind", "last")
    assert last.schema.simpleString() == (
        "struct<key_group:int,key:string,value:struct<item:string,qty:int,price:double>>"
    )
    want = oracle.groupby("key").last()
    got = {r.key: r.value for r in last.collect()}
    assert {k: (v.item, v.qty, v.price) for k, v in got.items()} == {
        k: (r["item"], r["qty"], r["price"]) for k, r in want.iterrows()
    }

    per_item = reader.read_keyed_state("every-kind", "per_item")
    assert dict(per_item.dtypes)["value"] == "map<string,int>"
    sums = oracle.groupby(["key", "item"]).qty.sum()
    assert {r.key: r.value for r in per_item.collect()} == {
        k: {item: int(n) for item, n in sums[k].items()} for k in oracle.key.unique()
    }

    prices = reader.read_keyed_state("every-kind", "prices")
    assert dict(prices.dtypes)["value"] == "array<double>"
    first = oracle[oracle.i < 500]
    assert {r.key: r.value for r in prices.collect()} == {k: g.price.tolist() for k, g in first.groupby("key")}

    seen_at = reader.read_keyed_state("every-kind", "seen_at")
    assert dict(seen_at.dtypes)["value"] == "timestamp_ntz"  # the same wall-clock time on every executor
    assert {r.key: r.value for r in seen_at.collect()} == {
        k: T0 + datetime.timedelta(seconds=int(i)) for k, i in oracle.groupby("key").i.last().items()
    }


def test_untyped_state_is_inferred_or_pickled(spark, savepoints):
    early = savepoints[0]
    reader = SavepointReader.read(spark, early)
    oracle = _oracle(early)
    count = reader.read_keyed_state("every-kind", "count")
    assert dict(count.dtypes)["value"] == "bigint"
    assert {r.key: r.value for r in count.collect()} == oracle.groupby("key").size().to_dict()

    mixed = reader.read_keyed_state("every-kind", "mixed")
    assert dict(mixed.dtypes)["value"] == "binary"
    lasts = oracle.groupby("key").last()
    want = {k: (r["item"] if k == "ann" else r["i"]) for k, r in lasts.iterrows()}
    assert {r.key: reader.unpickle(r.value) for r in mixed.collect()} == want

    # untyped tuple keys: a struct of their fields; a type given when reading is checked value by value
    items = _oracle(early, key=lambda r: by_item(tuple(r)))
    by_key = reader.read_keyed_state("by-item", "count", value_type=Types.INT())
    assert by_key.schema.simpleString() == "struct<key_group:int,key:struct<f0:string,f1:bigint>,value:int>"
    assert {(r.key.f0, r.key.f1): r.value for r in by_key.collect()} == items.groupby("key").size().to_dict()
    with pytest.raises(Exception, match="operator 'by-item', state 'last', key group .* is not of type INT"):
        reader.read_keyed_state("by-item", "last", value_type=Types.INT()).collect()


def test_timers_are_typed_without_any(spark, savepoints):
    reader = SavepointReader.read(spark, savepoints[0])
    timers = reader.read_timers("every-kind")
    assert timers.count() == 0
    assert timers.schema.simpleString() == "struct<key_group:int,domain:string,timestamp:bigint,key:string>"
    # no timers and no declared key type: the sampled key kinds tell what they can; (str, number) keys say
    # nothing of the number (an int or a float), so the keys stay pickled
    assert dict(reader.read_timers("by-item").dtypes)["key"] == "binary"


def test_executors_read_the_state_one_task_per_file(spark, savepoints, monkeypatch):
    path = savepoints[0]
    files = [f for f in load_checkpoint(path).metadata.operators["every-kind"].keyed_state if f.state == "count"]
    assert len(files) == 2  # a savepoint's file holds one state of one subtask

    def not_here(*_):
        raise AssertionError("state read on the driver")

    monkeypatch.setattr(StateRead, "snapshot", not_here)
    df = SavepointReader.read(spark, path).read_keyed_state("every-kind", "count")
    assert df.rdd.getNumPartitions() == 2
    assert df.count() == len(USERS)


def test_diff_of_two_savepoints(spark, savepoints, tmp_path):
    early, later = savepoints
    before = _oracle(early, key=lambda r: by_item(tuple(r))).groupby("key").size().to_dict()
    after = _oracle(later, key=lambda r: by_item(tuple(r))).groupby("key").size().to_dict()
    assert set(after) > set(before)
    diff = SavepointReader.read(spark, early).diff(later, "by-item", "count")
    got = {((r.key.f0, r.key.f1), r.change, r.before, r.after) for r in diff.collect()}
    want = {(k, "added", None, n) for k, n in after.items() if k not in before}
    want |= {(k, "changed", before[k], n) for k, n in after.items() if k in before and before[k] != n}
    assert got == want

    # a key taken out of one state: removed there; per key, the states that differ
    kept = {k: n for k, n in before.items() if k != min(before)}
    trimmed = str(tmp_path / "trimmed")
    rows = [{"f0": k[0], "f1": k[1], "n": n} for k, n in kept.items()]
    SavepointWriter.from_existing_savepoint(early).with_keyed_state(
        "by-item", "count", rows, key=["f0", "f1"], value="n"
    ).write(trimmed)
    per_key = SavepointReader.diff(SavepointReader.read(spark, early), trimmed, "by-item")
    assert dict(per_key.dtypes)["states"] == "array<string>"
    assert [((r.key.f0, r.key.f1), r.change, r.states) for r in per_key.collect()] == [
        (min(before), "changed", ["count"])
    ]


def test_inspect_diff_counts_the_changed_keys(savepoints):
    early, later = savepoints
    before = _oracle(early, key=lambda r: by_item(tuple(r))).groupby("key").size().to_dict()
    after = _oracle(later, key=lambda r: by_item(tuple(r))).groupby("key").size().to_dict()
    added = [k for k in after if k not in before]
    changed = [k for k in before if after[k] != before[k]]
    r = subprocess.run(
        [sys.executable, "-m", "sparkpoint.cli", "inspect", early, "--diff", later, "--uid", "by-item"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    assert f"    count: {len(added):,} keys added, 0 keys removed, {len(changed):,} keys changed" in r.stdout, r.stdout
    section = r.stdout.split("    count:")[1]
    shown = re.search(r"added: (.*?)( \.\.\.)?\n", section)
    assert shown is not None and shown[1] == ", ".join(repr(k) for k in ast.literal_eval(f"[{shown[1]}]"))
    assert set(ast.literal_eval(f"[{shown[1]}]")) <= set(added) and len(ast.literal_eval(f"[{shown[1]}]")) == 5
    bad = subprocess.run(
        [sys.executable, "-m", "sparkpoint.cli", "inspect", early, "--diff", later, "--uid", "nope"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 1 and "no keyed state of uid nope" in bad.stderr


def test_a_rewritten_savepoint_keeps_the_types_of_the_states_it_carries(spark, savepoints, tmp_path):
    out = str(tmp_path / "rewritten")
    SavepointWriter.from_existing_savepoint(savepoints[0]).with_keyed_state(
        "every-kind", "count", [{"k": u, "n": 1} for u in USERS], key="k", value="n"
    ).write(out)
    schema = load_checkpoint(out).metadata.operators["every-kind"].schema
    assert schema is not None and "count" not in schema.states and schema.key_kinds == ("str",)
    reader = SavepointReader.read(spark, out)
    assert dict(reader.read_keyed_state("every-kind", "per_item").dtypes)["value"] == "map<string,int>"
    assert {r.key: r.value for r in reader.read_keyed_state("every-kind", "count").collect()} == dict.fromkeys(USERS, 1)


def test_the_readme_example_runs(spark, savepoints, capsys):
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## State as DataFrames.*?```python\n(.*?)```", text, re.S)
    assert block is not None
    code = re.sub(
        r'SavepointReader\.read\(spark, "[^"]+"\)', f"SavepointReader.read(spark, {savepoints[0]!r})", block[1]
    )
    code = re.sub(r'^after = "[^"]+"', f"after = {savepoints[1]!r}", code, flags=re.M)
    assert savepoints[0] in code and savepoints[1] in code
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own example
    out = capsys.readouterr().out
    assert "|-- value: struct" in out and "|    |-- price: double" in out
    assert "|change|" in out.replace(" ", "") and "changed" in out


def test_bytes_decimals_and_a_state_on_one_side(spark, tmp_path):
    from decimal import Decimal

    rows = [{"k": f"k{i}", "blob": bytes([i, 0, 255]), "amount": Decimal(f"{i}.{i:02d}")} for i in range(6)]
    first = str(tmp_path / "first")
    (
        SavepointWriter.new_savepoint(128)
        .with_keyed_state("op", "blob", rows, key="k", value="blob")
        .with_keyed_state("op", "amount", rows, key="k", value="amount")
        .write(first)
    )
    reader = SavepointReader.read(spark, first)
    blob = reader.read_keyed_state("op", "blob")
    assert dict(blob.dtypes)["value"] == "binary"
    assert {r.key: bytes(r.value) for r in blob.collect()} == {r["k"]: r["blob"] for r in rows}
    amount = reader.read_keyed_state("op", "amount")
    assert dict(amount.dtypes)["value"] == "decimal(3,2)"
    assert {r.key: r.value for r in amount.collect()} == {r["k"]: r["amount"] for r in rows}

    # the second savepoint: one amount changed, k5 gone from it, and a state the first does not have
    second = str(tmp_path / "second")
    changed = [{**r, "amount": Decimal("9.99") if r["k"] == "k1" else r["amount"]} for r in rows if r["k"] != "k5"]
    (
        SavepointWriter.from_existing_savepoint(first)
        .with_keyed_state("op", "amount", changed, key="k", value="amount")
        .with_keyed_state("op", "extra", [{"k": "k0", "n": 1}, {"k": "new", "n": 2}], key="k", value="n")
        .write(second)
    )
    per_key = {r.key: (r.change, r.states) for r in reader.diff(second, "op").collect()}
    assert per_key == {
        "k0": ("changed", ["extra"]),
        "k1": ("changed", ["amount"]),
        "k5": ("changed", ["amount"]),  # still in blob
        "new": ("added", ["extra"]),
    }
    extra = {(r.key, r.change, r.before, r.after) for r in reader.diff(second, "op", "extra").collect()}
    assert extra == {("k0", "added", None, 1), ("new", "added", None, 2)}
    amounts = {(r.key, r.change, r.before, r.after) for r in reader.diff(second, "op", "amount").collect()}
    assert amounts == {("k1", "changed", Decimal("1.01"), Decimal("9.99")), ("k5", "removed", Decimal("5.05"), None)}
