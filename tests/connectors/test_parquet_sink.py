"""The Parquet bulk file sink: exactly-once output readable by pyarrow, pandas and Spark."""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
from decimal import Decimal
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkpoint.common import Configuration, Encoder, Row, Types, WatermarkStrategy
from sparkpoint.common.time import Instant
from sparkpoint.connectors.files import FileCommitter
from sparkpoint.connectors.parquet import ParquetTypeError, arrow_schema
from sparkpoint.datastream.connectors.file_system import BucketAssigner, FileSink, OutputFileConfig, RollingPolicy
from sparkpoint.datastream.connectors.generator import NumberSequenceSource
from sparkpoint.datastream.formats.parquet import ParquetBulkWriters
from sparkpoint.errors import UserFunctionError

ORDER = Types.ROW_NAMED(
    ["id", "customer", "amount", "paid", "placed", "address", "items"],
    [
        Types.LONG(),
        Types.STRING(),
        Types.DOUBLE(),
        Types.BOOLEAN(),
        Types.SQL_TIMESTAMP(),
        Types.ROW_NAMED(["city", "zip"], [Types.STRING(), Types.INT()]),
        Types.LIST(Types.STRING()),
    ],
)
CITIES = ["Oslo", "Lima", "Pune"]
START = dt.datetime(2024, 3, 1)
PART = re.compile(r"^part-[0-9a-f]{12}-(\d+)-(\d+)$")


def to_order(n: Any) -> Row:
    """The record for sequence number ``n`` (the job's map function)."""
    n = int(n)
    return Row(
        id=n,
        customer=f"c{n % 13}",
        amount=n * 0.25,
        paid=n % 3 == 0,
        placed=START + dt.timedelta(seconds=n),
        address=Row(city=CITIES[n % 3], zip=1000 + n % 50),
        items=[f"sku{k}" for k in range(n % 4)],
    )


def oracle(count: int) -> pd.DataFrame:
    """The expected table, computed with pandas from the sequence numbers (not with the job's code)."""
    n = pd.Series(np.arange(count), dtype="int64")
    return pd.DataFrame(
        {
            "id": n,
            "customer": "c" + (n % 13).astype(str),
            "amount": n.astype("float64") / 4,
            "paid": (n % 3) == 0,
            "placed": pd.Timestamp(START) + pd.to_timedelta(n, unit="s"),
            "address.city": (n % 3).map(dict(enumerate(CITIES))),
            "address.zip": (1000 + n % 50).astype("int32"),
            "items": (n % 4).map(lambda k: tuple(f"sku{i}" for i in range(k))),
        }
    )


def visible_files(directory) -> list[str]:
    """Committed files, as a reader lists them: hidden (``.``) and ``_`` names excluded."""
    out = []
    for root, dirs, files in os.walk(str(directory)):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        out += [os.path.join(root, f) for f in files if not f.startswith((".", "_"))]
    return sorted(out)


def staged_files(directory) -> list[str]:
    return sorted(os.path.join(r, f) for r, _, fs in os.walk(str(directory)) for f in fs if ".inprogress." in f)


def read_committed(directory) -> pd.DataFrame:
    table = pa.concat_tables([pq.read_table(p) for p in visible_files(directory)])
    df = table.flatten().to_pandas()
    df["items"] = df["items"].map(tuple)
    return df.sort_values("id").reset_index(drop=True)


def parquet_sink(path, row_type=ORDER) -> FileSink:
    return (
        FileSink.for_bulk_format(str(path), ParquetBulkWriters.for_row_type(row_type))
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .build()
    )


def order_job(env, out, count: int, map_fn=to_order):
    env.set_parallelism(2)
    (
        env.from_source(NumberSequenceSource(0, count - 1, num_splits=2), WatermarkStrategy.no_watermarks(), "numbers")
        .uid("numbers")
        .map(map_fn, output_type=ORDER)
        .uid("orders")
        .sink_to(parquet_sink(out))
        .uid("parquet")
    )
    return env


class FileWatcher:
    """A job listener noting which part files are visible and which staged, at every epoch and checkpoint."""

    directory: ClassVar[str] = ""
    events: ClassVar[list] = []

    def __init__(self, job: Any):
        FileWatcher.events = []

    def _note(self, kind: str, n: int) -> None:
        FileWatcher.events.append(
            (
                kind,
                n,
                set(map(os.path.basename, visible_files(self.directory))),
                {os.path.basename(p)[1:].split(".inprogress.")[0] for p in staged_files(self.directory)},
            )
        )

    def on_epoch_completed(self, stats: Any) -> None:
        self._note("epoch", stats.epoch)

    def on_checkpoint_completed(self, checkpoint: Any) -> None:
        self._note("checkpoint", checkpoint.checkpoint_id)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("on_"):
            return lambda *args: None
        raise AttributeError(name)


def test_exactly_once_job_output_equals_the_pandas_oracle(make_env, tmp_path):
    count = 3_000
    out = tmp_path / "orders"
    FileWatcher.directory = str(out)
    env = make_env(
        "local", **{"execution.epoch.max-records": 400, "execution.job-listeners": f"{__name__}:FileWatcher"}
    )
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    job_id = order_job(env, out, count).execute("parquet").get_job_id()

    pd.testing.assert_frame_equal(read_committed(out), oracle(count), check_dtype=False)
    assert staged_files(out) == []  # nothing left staged
    names = [PART.match(os.path.basename(p)) for p in visible_files(out)]
    assert all(names) and {os.path.basename(p)[5:17] for p in visible_files(out)} == {job_id[:12]}
    epochs_with_output = [e for e in FileWatcher.events if e[0] == "epoch" and e[3]]
    # one file per subtask and epoch: each epoch that wrote staged exactly one file per subtask
    assert len(epochs_with_output) >= 4
    assert all(len(staged) == 2 for _, _, _, staged in epochs_with_output)
    assert len(names) == sum(len(e[3]) for e in epochs_with_output)


def test_staged_files_stay_invisible_until_their_checkpoint_completes(make_env, tmp_path):
    out = tmp_path / "orders"
    FileWatcher.directory = str(out)
    env = make_env(
        "local", **{"execution.epoch.max-records": 300, "execution.job-listeners": f"{__name__}:FileWatcher"}
    )
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    order_job(env, out, 2_000).execute()
    events = FileWatcher.events
    assert any(e[0] == "checkpoint" for e in events)
    seen_staged: set = set()
    commits = 0
    for (kind, _, visible, staged), (_, _, before, _) in zip(events, [("", 0, set(), set())] + events):
        assert not staged & visible
        if visible != before:  # files appear only when a checkpoint completes (the commit)
            assert kind == "checkpoint" and before <= visible and (visible - before) <= seen_staged
            commits += 1
        seen_staged |= staged
    assert commits >= 3
    final = set(map(os.path.basename, visible_files(out)))
    assert seen_staged and final == seen_staged  # every staged file was committed


def test_a_failover_restores_exactly_once_and_drops_the_aborted_attempts_files(make_env, tmp_path, caplog):
    count = 2_000
    flag = tmp_path / "failed-once"

    def fragile(n: Any) -> Row:
        if int(n) == 1_500 and not flag.exists():
            flag.write_text("x")
            raise RuntimeError("first attempt dies")
        return to_order(n)

    out = tmp_path / "orders"
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 200,
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.delay": "0 ms",
        },
    )
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    with caplog.at_level(logging.INFO, logger="sparkpoint.datastream.connectors.file_sink"):
        order_job(env, out, count, fragile).execute()
    assert flag.exists()
    assert re.search(
        rf"removed [1-9]\d* staged part file\(s\) of an aborted attempt under {re.escape(str(out))}", caplog.text
    )
    pd.testing.assert_frame_equal(read_committed(out), oracle(count), check_dtype=False)
    assert staged_files(out) == []


def test_recover_removes_staged_files_no_checkpoint_refers_to(tmp_path):
    out = tmp_path / "orders"
    sink = parquet_sink(out)
    committed = sink.create_writer(0, 1, "feedfacefeedface", 0, None)
    committed.write([to_order(1)], [None])
    keep = committed.prepare_commit()  # pre-committed by the restored checkpoint
    aborted = sink.create_writer(1, 2, "feedfacefeedface", 1, {"part_counter": 5})
    aborted.write([to_order(2), to_order(3)], [None, None])
    leftovers = aborted.prepare_commit()  # staged after the barrier, never committed
    unclosed = sink.create_writer(0, 2, "feedfacefeedface", 2, {"part_counter": 9})
    unclosed.write([to_order(4)], [None])  # a task that died before prepare_commit
    assert len(staged_files(out)) == 3 and visible_files(out) == []
    other_job = sink.create_writer(0, 1, "0ther0ther0ther", 0, None)
    other_job.write([to_order(5)], [None])
    others = other_job.prepare_commit()  # staged by another job writing there
    FileCommitter().commit(keep)
    sink.recover(keep, {0: {"part_counter": 1, "job": "feedfacefeed"}})
    assert staged_files(out) == [others[0].staged_path]  # only the restored job's leftovers go
    assert [os.path.basename(p) for p in visible_files(out)] == ["part-feedfacefeed-0-0"]
    assert pq.read_table(visible_files(out)[0]).column("id").to_pylist() == [1]
    assert not any(os.path.exists(c.staged_path) for c in leftovers)


def test_a_string_in_an_int_column_names_the_sink_field_and_record(make_env, tmp_path):
    def bad(n: Any) -> Row:
        row = to_order(n)
        return (
            row
            if int(n) != 77
            else Row(
                id=77,
                customer="c",
                amount=1.0,
                paid=True,
                placed=START,
                address=Row(city="Oslo", zip="not-a-zip"),
                items=[],
            )
        )

    out = tmp_path / "orders"
    env = make_env("local", **{"execution.epoch.max-records": 50})
    order_job(env, out, 200, bad)
    with pytest.raises(UserFunctionError) as info:
        env.execute()
    message = str(info.value)
    assert f"Parquet sink {out}" in message and "field 'address'" in message
    assert "Row(id=77, customer='c'" in message and "zip='not-a-zip'" in message
    top = Types.ROW_NAMED(["n"], [Types.INT()])
    writer = parquet_sink(tmp_path / "plain", top).create_writer(0, 1, "ab" * 8, 0, None)
    for record, what in [
        (Row(n="7"), "field 'n' (int32) cannot hold str '7' of record Row(n='7')"),
        ((1.5,), "field 'n' (int32) cannot hold float 1.5 of record (1.5,)"),
        ((2**40,), "field 'n' (int32)"),
        ((1, 2), "record (1, 2) is not a row of 1 fields ['n']"),
    ]:
        with pytest.raises(ParquetTypeError, match=re.escape(what)):
            writer.write([Row(n=1), record], [None, None])


def test_column_types_and_values_read_back(tmp_path):
    t = Types.ROW_NAMED(
        [
            "b",
            "s",
            "i",
            "l",
            "big",
            "f",
            "d",
            "dec",
            "str",
            "bool",
            "date",
            "time",
            "ts",
            "inst",
            "raw",
            "ints",
            "m",
            "tup",
        ],
        [
            Types.BYTE(),
            Types.SHORT(),
            Types.INT(),
            Types.LONG(),
            Types.BIG_INT(),
            Types.FLOAT(),
            Types.DOUBLE(),
            Types.BIG_DEC(),
            Types.STRING(),
            Types.BOOLEAN(),
            Types.SQL_DATE(),
            Types.SQL_TIME(),
            Types.SQL_TIMESTAMP(),
            Types.INSTANT(),
            Types.PRIMITIVE_ARRAY(Types.BYTE()),
            Types.BASIC_ARRAY(Types.INT()),
            Types.MAP(Types.STRING(), Types.LONG()),
            Types.TUPLE([Types.INT(), Types.STRING()]),
        ],
    )
    assert arrow_schema(t).types == [
        pa.int8(),
        pa.int16(),
        pa.int32(),
        pa.int64(),
        pa.decimal128(38, 0),
        pa.float32(),
        pa.float64(),
        pa.decimal128(38, 18),
        pa.string(),
        pa.bool_(),
        pa.date32(),
        pa.time64("us"),
        pa.timestamp("us"),
        pa.timestamp("ms", tz="UTC"),
        pa.binary(),
        pa.list_(pa.int32()),
        pa.map_(pa.string(), pa.int64()),
        pa.struct([("f0", pa.int32()), ("f1", pa.string())]),
    ]
    row = (
        -1,
        2,
        3,
        2**40,
        10**20,
        0.5,
        0.1,
        Decimal("3.25"),
        "ø",
        True,
        dt.date(2024, 2, 29),
        dt.time(1, 2, 3),
        dt.datetime(2024, 1, 1, 5),
        Instant.of_epoch_milli(1_000),
        b"\x00\x01",
        [1, None],
        {"k": 5},
        (1, "x"),
    )
    out = tmp_path / "types"
    sink = parquet_sink(out, t)
    writer = sink.create_writer(0, 1, "cd" * 8, 0, None)
    writer.write([row, (None,) * len(row)], [None, None])
    FileCommitter().commit(writer.prepare_commit())
    got = pq.read_table(visible_files(out)[0]).to_pylist()
    assert got[1] == dict.fromkeys(t.get_field_names())
    expected = dict(zip(t.get_field_names(), row))
    expected.update(
        big=Decimal(10**20),
        inst=dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC),
        m=[("k", 5)],
        tup={"f0": 1, "f1": "x"},
    )
    assert got[0] == expected


def test_builder_rules_and_options(tmp_path):
    factory = ParquetBulkWriters.for_row_type(ORDER)
    builder = FileSink.for_bulk_format(str(tmp_path), factory)
    with pytest.raises(ValueError, match="on_checkpoint_rolling_policy"):
        builder.with_rolling_policy(RollingPolicy.default_rolling_policy())
    sink = (
        builder.with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
        .with_bucket_check_interval(1000)
        .with_output_file_config(
            OutputFileConfig.builder().with_part_prefix("orders").with_part_suffix(".parquet").build()
        )
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .build()
    )
    writer = sink.create_writer(0, 1, "ef" * 8, 0, None)
    writer.write([to_order(5)], [None])
    (committable,) = writer.prepare_commit()
    assert os.path.basename(committable.final_path) == "orders-efefefefefef-0-0.parquet"
    with pytest.raises(TypeError, match="bulk writer factory"):
        FileSink.for_bulk_format(str(tmp_path), Encoder.simple_string_encoder())
    with pytest.raises(TypeError, match="no Parquet column type"):
        ParquetBulkWriters.for_row_type(Types.ROW_NAMED(["x"], [Types.PICKLED_BYTE_ARRAY()]))
    with pytest.raises(TypeError, match="needs a row type"):
        ParquetBulkWriters.for_row_type(Types.STRING())
    conf = Configuration()
    conf.set("parquet.compression", "gzip")
    assert ParquetBulkWriters.for_row_type(ORDER, conf, utc_timestamp=True).compression == "gzip"
    assert arrow_schema(ORDER, utc_timestamp=True).field("placed").type == pa.timestamp("us", tz="UTC")
    with pytest.raises(ValueError, match="unsupported codec 'LZO'"):
        ParquetBulkWriters.for_row_type(ORDER, {"parquet.compression": "lzo"})


def test_spark_reads_the_committed_output(spark, make_env, tmp_path):
    count = 600
    out = tmp_path / "orders"
    env = make_env("spark", **{"execution.epoch.max-records": 200})
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    order_job(env, out, count).execute()
    df = spark.read.parquet(str(out))
    assert df.count() == count
    got = df.selectExpr("id", "customer", "address.city AS city", "size(items) AS n_items").toPandas()
    expected = oracle(count)
    got = got.sort_values("id").reset_index(drop=True)
    assert got["customer"].tolist() == expected["customer"].tolist()
    assert got["city"].tolist() == expected["address.city"].tolist()
    assert got["n_items"].tolist() == expected["items"].map(len).tolist()


def test_nested_rows_are_written_with_their_current_values_and_by_their_names(tmp_path):
    """A Row changed in place keeps its values apart from the tuple it was made as, and a named Row may hold its
    fields in another order than the struct's: both as PyFlink's row coder writes them (by value, by name)."""
    inner = Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.STRING()])
    t = Types.ROW_NAMED(["id", "nested", "many"], [Types.INT(), inner, Types.LIST(inner)])
    changed = Row(1, "made")
    changed[1] = "changed"
    listed = Row(a=3, b="made")
    listed["b"] = "changed too"
    rows = [Row(1, changed, [listed]), Row(2, Row(b="bee", a=7), [Row(b="c", a=4), None]), Row(3, None, None)]
    out = tmp_path / "nested"
    writer = parquet_sink(out, t).create_writer(0, 1, "ef" * 8, 0, None)
    writer.write(rows, [None] * 3)
    FileCommitter().commit(writer.prepare_commit())
    assert pq.read_table(visible_files(out)[0]).to_pylist() == [
        {"id": 1, "nested": {"a": 1, "b": "changed"}, "many": [{"a": 3, "b": "changed too"}]},
        {"id": 2, "nested": {"a": 7, "b": "bee"}, "many": [{"a": 4, "b": "c"}, None]},
        {"id": 3, "nested": None, "many": None},
    ]


def test_a_nested_row_with_other_names_is_written_by_position_not_as_nulls(tmp_path):
    """As a top-level row whose names are not the schema's."""
    t = Types.ROW_NAMED(["nested"], [Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.STRING()])])
    out = tmp_path / "names"
    writer = parquet_sink(out, t).create_writer(0, 1, "ab" * 8, 0, None)
    writer.write([Row(Row(x=5, y="five"))], [None])
    FileCommitter().commit(writer.prepare_commit())
    assert pq.read_table(visible_files(out)[0]).to_pylist() == [{"nested": {"a": 5, "b": "five"}}]
