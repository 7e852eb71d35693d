"""Where backends that keep working state (rocksdb) keep it on an executor, and its housekeeping.

A keyed operator's database lives in Spark's local dirs of the executor that runs the task
(``SPARK_LOCAL_DIRS``, which Spark gives its Python workers), unless
``sparkpoint.local-state-dir`` names a local directory (the in-process executor uses that
directory or the driver's default). The path is
``<root>/<job>-<attempt>/stage-<s>/task-<i>/op-<crc32(uid)>``: one database per job attempt,
operator and subtask. A new attempt (after a failover) starts from a checkpoint, so the
first task of an attempt on an executor removes what older attempts of the same job left
there.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
import zlib

__all__ = ["drop_older_attempts", "working_dir"]


def _root(local_state_dir: str, executor_local: bool) -> str:
    spark_dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
    local = local_state_dir.removeprefix("file://")
    if (executor_local and spark_dirs) or "://" in local:  # RocksDB needs a local directory
        return os.path.join(spark_dirs.split(",")[0] or tempfile.gettempdir(), "sparkpoint-state")
    return local


def working_dir(local_state_dir: str, executor_local: bool, namespace: str, stage_id: int, subtask: int,
                uid: str) -> str:
    """The working directory of operator ``uid`` in subtask ``subtask`` of stage ``stage_id``."""
    return os.path.join(_root(local_state_dir, executor_local), namespace, f"stage-{stage_id}", f"task-{subtask}",
                        f"op-{zlib.crc32(uid.encode()):08x}")


def drop_older_attempts(local_state_dir: str, executor_local: bool, job_id: str, namespace: str) -> None:
    """Remove the working state of this job's earlier attempts (``<job>-<k>`` other than ``namespace``)."""
    root = _root(local_state_dir, executor_local)
    for path in glob.glob(os.path.join(glob.escape(root), glob.escape(job_id) + "-*")):
        suffix = os.path.basename(path)[len(job_id) + 1:]
        if suffix.isdigit() and os.path.basename(path) != namespace:
            shutil.rmtree(path, ignore_errors=True)
