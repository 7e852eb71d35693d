"""W3's peers on Spark Structured Streaming, over the same event files as sparkpoint's job.

* ``run_native``: the JVM engine's ``groupBy(key).count()`` on the RocksDB state store (update
  mode, one file per micro-batch); the keys whose count reached 5 are collected per batch;
* ``run_tws``: Spark's Python stateful API, ``transformWithStateInPandas`` with a ``ValueState``
  count per key that emits a key when its 5th event arrives: exactly what sparkpoint's job does.

Both read ``ts<TAB>channel<TAB>id<TAB>behavior`` lines; the key is the first 5 hex digits of the id.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from bench.w3_job import NTH

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

__all__ = ["run_native", "run_tws", "NTH"]


def _keys(spark: Any, input_dir: Path, digits: int = 5, files_per_trigger: int = 1) -> Any:
    from pyspark.sql import functions as F

    return (
        spark.readStream.option("maxFilesPerTrigger", files_per_trigger)
        .text(str(input_dir))
        .select(F.substring(F.split("value", "\t").getItem(2), 1, digits).alias("key"))
    )


@contextlib.contextmanager
def _rocksdb_state_store(spark: Any) -> Iterator[None]:
    """The session's queries started inside use the RocksDB state store; the previous provider is put back after
    (so that later queries in the same session, such as W1's, keep the default one)."""
    key = "spark.sql.streaming.stateStore.providerClass"
    previous = spark.conf.get(key, None)
    spark.conf.set(key, ROCKSDB_PROVIDER)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


def _finish(query: Any, t0: float, what: str) -> float:
    query.awaitTermination()
    seconds = time.perf_counter() - t0
    if query.exception() is not None:
        raise RuntimeError(f"W3 {what} query failed: {query.exception()}")
    return seconds


def run_native(spark: Any, input_dir: Path, checkpoint_dir: Path, files_per_trigger: int = 1) -> dict[str, Any]:
    """``groupBy(key).count()``, RocksDB state store, ``files_per_trigger`` files a micro-batch; returns seconds and
    the keys that reached ``NTH``."""
    from pyspark.sql import functions as F

    reached: set[str] = set()

    def on_batch(df: Any, batch_id: int) -> None:
        reached.update(r["key"] for r in df.filter(F.col("count") >= NTH).select("key").collect())

    counts = _keys(spark, input_dir, files_per_trigger=files_per_trigger).groupBy("key").count()
    seconds, batches = _run_available_now(spark, counts, "update", on_batch, checkpoint_dir, "native")
    return {"seconds": seconds, "keys": reached, "batches": batches}


def _run_available_now(
    spark: Any, frame: Any, mode: str, on_batch: Any, checkpoint_dir: Path, what: str
) -> tuple[float, int]:
    """Run ``frame`` to the end of its input on the RocksDB state store; seconds and micro-batches."""
    with _rocksdb_state_store(spark):
        t0 = time.perf_counter()
        query = (
            frame.writeStream.outputMode(mode)
            .foreachBatch(on_batch)
            .option("checkpointLocation", str(checkpoint_dir))
            .trigger(availableNow=True)
            .start()
        )
        seconds = _finish(query, t0, what)
    return seconds, len(query.recentProgress)


def _processor() -> Any:
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import LongType, StructField, StructType

    class FifthEvent(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.count = handle.getValueState("count", StructType([StructField("n", LongType(), True)]))

        def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
            n = self.count.get()[0] if self.count.exists() else 0
            before = n
            for pdf in rows:
                n += len(pdf)
            self.count.update((n,))
            if before < NTH <= n:
                yield pd.DataFrame({"key": [key[0]]})

        def close(self) -> None:
            pass

    return FifthEvent()


def run_tws(spark: Any, input_dir: Path, checkpoint_dir: Path, digits: int = 5) -> dict[str, Any]:
    """``transformWithStateInPandas`` doing what sparkpoint's job does (keys of ``digits`` hex digits);
    seconds and the keys emitted."""
    emitted: list[str] = []

    def on_batch(df: Any, batch_id: int) -> None:
        emitted.extend(r["key"] for r in df.collect())

    out = (
        _keys(spark, input_dir, digits)
        .groupBy("key")
        .transformWithStateInPandas(
            statefulProcessor=_processor(), outputStructType="key string", outputMode="Append", timeMode="None"
        )
    )
    seconds, batches = _run_available_now(spark, out, "append", on_batch, checkpoint_dir, "transformWithStateInPandas")
    return {"seconds": seconds, "emitted": emitted, "batches": batches}
