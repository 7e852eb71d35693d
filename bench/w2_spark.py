"""W2's peer: Spark Structured Streaming's own keyed count on its RocksDB state store.

Over the same files as sparkpoint (:mod:`bench.w2_data`)::

    readStream.text(dir)  (maxFilesPerTrigger=2: one pair of files = one micro-batch = one epoch)
      -> groupBy(value).count()          (state: RocksDBStateStoreProvider)
      -> writeStream update mode, foreachBatch: collect the updated rows of the sample keys
         (keys ending in "000"), trigger(availableNow=True)

Per micro-batch: ``triggerExecution`` time, input rows, state rows, and the RocksDB state
store's own metrics (bytes copied into the checkpoint, commit latencies); the size of the
checkpoint's ``state/`` folder after the run. The sample keys' last updated counts are
checked against the oracle.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from bench.w2_data import SAMPLE_SUFFIX, du

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
FILES_PER_BATCH = 2


class _StateDirWatcher:
    """Size of the checkpoint's ``state/`` folder after each micro-batch (polled: a batch that
    ends while the next already writes is measured a little late)."""

    def __init__(self, query: Any, state_dir: Path, interval_s: float = 0.1):
        self.query, self.state_dir, self.interval_s = query, state_dir, interval_s
        self.sizes: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="w2-spark-state", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                progress = self.query.lastProgress
            except Exception:  # noqa: BLE001 - the query may be ending
                progress = None
            if progress is not None and progress["batchId"] not in self.sizes:
                self.sizes[progress["batchId"]] = du(self.state_dir)
            self._stop.wait(self.interval_s)

    def stop(self) -> dict[int, int]:
        self._stop.set()
        self._thread.join()
        return self.sizes


def run_spark_count(spark: Any, input_dir: Path, checkpoint_dir: Path) -> dict[str, Any]:
    """Run the keyed count over ``input_dir`` until every file is read; per-batch figures."""
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
    sample: dict[str, int] = {}
    emitted: list[tuple[str, int]] = []

    def on_batch(df: Any, batch_id: int) -> None:
        for row in df.filter(F.col("value").endswith(SAMPLE_SUFFIX)).collect():
            sample[row["value"]] = int(row["count"])
            emitted.append((row["value"], int(row["count"])))

    counts = (
        spark.readStream.option("maxFilesPerTrigger", FILES_PER_BATCH).text(str(input_dir)).groupBy("value").count()
    )
    writer = (
        counts.writeStream.outputMode("update")
        .foreachBatch(on_batch)
        .option("checkpointLocation", str(checkpoint_dir))
        .trigger(availableNow=True)
    )
    t0 = time.perf_counter()
    query = writer.start()
    watcher = _StateDirWatcher(query, checkpoint_dir / "state")
    query.awaitTermination()
    seconds = time.perf_counter() - t0
    state_sizes = watcher.stop()
    if query.exception() is not None:
        raise RuntimeError(f"W2 streaming query failed: {query.exception()}")
    batches = []
    for p in query.recentProgress:
        ops = p.get("stateOperators") or [{}]
        op = ops[0]
        custom = op.get("customMetrics") or {}
        batches.append(
            {
                "batch": p["batchId"],
                "rows": int(p.get("numInputRows", 0)),
                "ms": int((p.get("durationMs") or {}).get("triggerExecution", 0)),
                "state_rows": op.get("numRowsTotal"),
                "state_rows_updated": op.get("numRowsUpdated"),
                "state_memory_bytes": op.get("memoryUsedBytes"),
                "commit_ms": op.get("commitTimeMs"),
                "rocksdb_bytes_copied": custom.get("rocksdbBytesCopied"),
                "rocksdb_files_copied": custom.get("rocksdbFilesCopied"),
                "rocksdb_files_reused": custom.get("rocksdbFilesReused"),
                "rocksdb_sst_bytes": custom.get("rocksdbSstFileSize"),
                "rocksdb_checkpoint_ms": custom.get("rocksdbCommitCheckpointLatency"),
                "rocksdb_commit_ms": custom.get("rocksdbCommitFileSyncLatencyMs"),
                "state_dir_bytes": state_sizes.get(p["batchId"]),
                "custom_metrics": custom,
            }
        )
    return {
        "seconds": seconds,
        "batches": batches,
        "sample": sample,
        "emitted": emitted,
        "state_dir_bytes_end": du(checkpoint_dir / "state"),
        "provider": spark.conf.get("spark.sql.streaming.stateStore.providerClass"),
        "changelog_checkpointing": spark.conf.get(
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "default"
        ),
    }
