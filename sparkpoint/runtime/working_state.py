"""Where backends that keep working state (rocksdb) keep it on an executor, and its housekeeping.

A keyed operator's database lives in Spark's local dirs of the executor that runs the task
(``SPARK_LOCAL_DIRS``, which Spark gives its Python workers), unless
``sparkpoint.local-state-dir`` names a local directory (the in-process executor uses that
directory or the driver's default). The path is
``<root>/<job>-<attempt>/stage-<s>/task-<i>/op-<crc32(uid)>``: one database per job attempt,
operator and subtask. A new attempt (after a failover) starts from a checkpoint, so the
first task of an attempt on an executor removes what older attempts of the same job left
there. Spark's local dirs are a new directory per application, which Spark removes when the
application ends but not when it is killed: there the first task of a job's attempt marks its
directory with its executor's owner (:func:`claim_in_spark_dirs`) and removes those of the
host's other applications whose owner is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import logging
import os
import re
import shutil
import tempfile
import zlib

from sparkpoint.common.processes import ProcessIdentity
from sparkpoint.state.worker import let_go_under

__all__ = ["JobWorkingDirs", "claim_in_spark_dirs", "default_local_state_dir", "drop_older_attempts", "working_dir"]

logger = logging.getLogger(__name__)


def default_local_state_dir() -> str:
    """Where tasks keep working state when ``sparkpoint.local-state-dir`` is not set."""
    return os.path.join(tempfile.gettempdir(), "sparkpoint-local-state")


def _root(local_state_dir: str, executor_local: bool) -> str:
    spark_dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
    local = local_state_dir.removeprefix("file://")
    if (executor_local and spark_dirs) or "://" in local:  # RocksDB needs a local directory
        return os.path.join(spark_dirs.split(",")[0] or tempfile.gettempdir(), "sparkpoint-state")
    return local


def working_dir(
    local_state_dir: str, executor_local: bool, namespace: str, stage_id: int, subtask: int, uid: str
) -> str:
    """The working directory of operator ``uid`` in subtask ``subtask`` of stage ``stage_id``."""
    return os.path.join(
        _root(local_state_dir, executor_local),
        namespace,
        f"stage-{stage_id}",
        f"task-{subtask}",
        f"op-{zlib.crc32(uid.encode()):08x}",
    )


def drop_older_attempts(local_state_dir: str, executor_local: bool, job_id: str, namespace: str) -> None:
    """Remove the working state of this job's earlier attempts (``<job>-<k>``, ``k`` below ``namespace``'s: a task
    of an earlier attempt still running must not remove a later one's)."""
    root = _root(local_state_dir, executor_local)
    mine = namespace[len(job_id) + 1 :]
    for path in glob.glob(os.path.join(glob.escape(root), glob.escape(job_id) + "-*")):
        suffix = os.path.basename(path)[len(job_id) + 1 :]
        if suffix.isdigit() and (not mine.isdigit() or int(suffix) < int(mine)):
            let_go_under(path)
            shutil.rmtree(path, ignore_errors=True)


def claim_in_spark_dirs(local_state_dir: str, executor_local: bool, namespace: str) -> list[str]:
    """In a Spark worker keeping working state in Spark's local dirs: mark ``namespace`` as owned by this
    executor's Python daemon (its pid and start time, in ``<namespace>/.owner``), and remove the namespaces
    of every application on this host (``<spark.local.dir>/*/sparkpoint-state/*``) whose owner is gone: a
    killed application's directory is never removed by Spark, and a new one gets a new directory. A
    namespace without an owner file, or whose owner lives, is not touched. Returns those removed."""
    spark_dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
    root = _root(local_state_dir, executor_local)
    if not (executor_local and spark_dirs) or root != os.path.join(spark_dirs.split(",")[0], "sparkpoint-state"):
        return []
    owner = json.dumps(ProcessIdentity.of(os.getppid()).to_json())  # the daemon (or executor) that forked us
    mine = os.path.join(root, namespace)
    os.makedirs(mine, exist_ok=True)
    marker = os.path.join(mine, ".owner")
    if not os.path.exists(marker):
        with open(marker + f".{os.getpid()}", "w") as f:
            f.write(owner)
        os.replace(marker + f".{os.getpid()}", marker)
    removed = []
    parent = os.path.dirname(os.path.dirname(root))  # spark.local.dir, shared by the host's applications
    for other in glob.glob(os.path.join(glob.escape(parent), "*", "sparkpoint-state", "*", ".owner")):
        try:
            with open(other) as f:
                gone = ProcessIdentity.from_json(json.load(f)).gone()
        except (OSError, ValueError, AttributeError):
            continue
        if gone:
            path = os.path.dirname(other)
            let_go_under(path)
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    if removed:
        logger.info("removed the working state of applications that are gone: %s", removed)
    return removed


class JobWorkingDirs:
    """The driver's housekeeping of a job's working directories under ``sparkpoint.local-state-dir``.

    Each attempt of a job works in ``<root>/<job>-<attempt>``. While the job runs, its driver holds
    an exclusive lock on ``<root>/.owners/<job>.lock``; a lock nobody holds belongs to a job that
    is gone (ended, or SIGKILLed: the kernel releases the lock). So at its start a job removes the
    directories of gone jobs (a killed run's state, which ``run -s`` never reads: it restores from a
    checkpoint), on every failover those of its own earlier attempts, and at its end its own. The
    directories of a job that is alive, or of one that never took a lock there, are never touched.
    On a shared file system (an fsspec URL) locks do not reach other hosts: there only a job's own
    attempts are removed.
    """

    def __init__(self, local_state_dir: str, job_id: str):
        self.job_id = job_id
        self.url = local_state_dir
        self.local = "://" not in local_state_dir or local_state_dir.startswith("file://")
        self.root = local_state_dir.removeprefix("file://")
        self._lock: int | None = None

    def claim(self) -> list[str]:
        """Lock this job's claim and remove gone jobs' directories; returns those removed."""
        if not self.local:
            return []
        owners = os.path.join(self.root, ".owners")
        os.makedirs(owners, exist_ok=True)
        self._lock = os.open(os.path.join(owners, f"{self.job_id}.lock"), os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        removed = []
        for lock in sorted(os.listdir(owners)):  # a job that never took a lock here is not judged
            job = lock.removesuffix(".lock")
            if job == self.job_id or not lock.endswith(".lock") or _alive(owners, job):
                continue
            for name in os.listdir(self.root):
                m = _ATTEMPT_DIR.match(name)
                if m is not None and m.group(1) == job:
                    shutil.rmtree(os.path.join(self.root, name), ignore_errors=True)
                    removed.append(name)
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(owners, lock))
        return removed

    def start_attempt(self, attempt: int) -> None:
        """A failover started ``attempt``: the earlier attempts' directories are dead."""
        self._remove(range(attempt))

    def drop(self, last_attempt: int) -> None:
        """The job ended: every attempt's directory, and its claim."""
        self._remove(range(last_attempt + 1))
        if self._lock is not None:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.root, ".owners", f"{self.job_id}.lock"))
            os.close(self._lock)
            self._lock = None

    def _remove(self, attempts: range) -> None:
        import fsspec

        try:
            fs, root = fsspec.core.url_to_fs(self.url)
            for attempt in attempts:
                path = f"{root.rstrip('/')}/{self.job_id}-{attempt}"
                if fs.exists(path):
                    fs.rm(path, recursive=True)
        except OSError as e:
            logger.warning("could not remove the working state of job %s: %s", self.job_id, e)


_ATTEMPT_DIR = re.compile(r"^(.+)-(\d+)$")


def _alive(owners: str, job_id: str) -> bool:
    """Whether a driver holds job ``job_id``'s lock (a job without a lock file is gone)."""
    try:
        fd = os.open(os.path.join(owners, f"{job_id}.lock"), os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False
