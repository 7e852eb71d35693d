"""Checkpoints of running jobs: retention, restore, corruption, declines, expiry, recovery.

These run on the in-process executor (the same task code Spark runs) so each takes
a second or two; the crash tests in tests/e2e run real processes and real Spark.
"""

from __future__ import annotations

import glob
import logging
import os
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.checkpoint.exceptions import CheckpointException
from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import KeyedProcessFunction
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.state import ValueStateDescriptor
from sparkpoint.errors import JobExecutionError, UserFunctionError
from sparkpoint.storage.exceptions import CorruptCheckpointError

N_KEYS = 7


def key_of(i: int) -> str:
    return f"k{(i * 7919) % N_KEYS}"


class Count(KeyedProcessFunction):
    """Emits (key, running count) per record: the last count per key must equal its total."""

    def open(self, ctx):
        self.n = ctx.get_state(ValueStateDescriptor("n"))

    def process_element(self, value, ctx):
        self.n.update((self.n.value() or 0) + 1)
        yield (value, self.n.value())


class FailOnce(Count):
    """Count, failing once (the first time key k3 reaches 40); ``flag`` records that it failed."""

    def __init__(self, flag: Path):
        self.flag = flag

    def process_element(self, value, ctx):
        if self.n.value() == 40 and value == "k3" and not self.flag.exists():
            self.flag.write_text("x")
            raise RuntimeError("transient failure")
        yield from super().process_element(value, ctx)


def counting_job(
    env,
    count: int,
    ckpt_dir: Path | str,
    interval_ms: int = 1,
    retained: int = 3,
    retention: str = "RETAIN_ON_CANCELLATION",
    rate=None,
    parallelism: int = 2,
):
    """Running counts per key at ``parallelism``; checkpoints into ``ckpt_dir`` (a local directory or a URL)."""
    env.enable_checkpointing(interval_ms)
    cc = env.get_checkpoint_config()
    cc.set_checkpoint_storage_dir(ckpt_dir.as_uri() if isinstance(ckpt_dir, Path) else ckpt_dir)
    cc.set_externalized_checkpoint_retention(retention)
    env.get_configuration().set("state.checkpoints.num-retained", retained)
    env.set_parallelism(parallelism)  # before the operators: each keeps the parallelism set when it is created
    src = DataGeneratorSource(key_of, count, num_splits=2, records_per_second=rate)
    return (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(Count())
        .uid("count")
    )


def oracle_totals(count: int) -> Counter:
    return Counter(key_of(i) for i in range(count))


def running_counts(count: int) -> Counter:
    """What a keyed count of the first ``count`` records emits, as ``(key, n)``: each key's counts 1..total once."""
    return Counter((k, n) for k, total in oracle_totals(count).items() for n in range(1, total + 1))


def chk_dirs(ckpt_dir: Path) -> list[str]:
    return sorted(glob.glob(str(ckpt_dir / "*" / "chk-*")), key=lambda p: int(p.rsplit("-", 1)[1]))


def completed_ids(ckpt_dir: Path) -> list[int]:
    return [int(d.rsplit("-", 1)[1]) for d in chk_dirs(ckpt_dir) if os.path.exists(d + "/_metadata")]


def run_until_checkpoints(env, stream, ckpt_dir: Path, n: int, timeout: float = 30):
    """Run the (fresh) job until its checkpoint ``n`` has completed, then cancel it. Older ones may be gone by
    then: only ``state.checkpoints.num-retained`` stay."""
    stream.print()
    client = env.execute_async("counting")
    deadline = time.time() + timeout
    while time.time() < deadline and max(completed_ids(ckpt_dir), default=0) < n:
        time.sleep(0.05)
    client.cancel()
    client.wait(30)
    return client


def test_retains_num_retained_and_keeps_them_on_cancel(make_env, tmp_path):
    env = make_env("local", **{"execution.epoch.max-records": 50})
    ck = tmp_path / "ck"
    stream = counting_job(env, 10**9, ck, retained=3, rate=20_000)
    run_until_checkpoints(env, stream, ck, 6)
    dirs = chk_dirs(ck)
    ids = [int(d.rsplit("-", 1)[1]) for d in dirs]
    assert len(ids) == 3 and ids == list(range(ids[0], ids[0] + 3)) and ids[0] >= 4
    assert all(os.path.exists(d + "/_metadata") for d in dirs)
    # files of subsumed checkpoints are gone, and nothing else is left in the job directory
    job_dir = Path(dirs[0]).parent
    assert {p.name for p in job_dir.iterdir() if p.name.startswith("chk-")} == {Path(d).name for d in dirs}


def test_delete_on_cancellation_removes_checkpoints(make_env, tmp_path):
    env = make_env("local", **{"execution.epoch.max-records": 50})
    ck = tmp_path / "ck"
    stream = counting_job(env, 10**9, ck, retention="DELETE_ON_CANCELLATION", rate=20_000)
    run_until_checkpoints(env, stream, ck, 2)
    assert chk_dirs(ck) == []


def test_restore_continues_ids_and_state(make_env, tmp_path, capsys, caplog):
    count = 3_000
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 20})
    stream = counting_job(env, count, ck, rate=2_000)
    run_until_checkpoints(env, stream, ck, 3)
    capsys.readouterr()
    restore_from = chk_dirs(ck)[-2]  # an older retained checkpoint, as in "roll back"
    restored_id = int(restore_from.rsplit("-", 1)[1])
    caplog.set_level(logging.INFO, logger="sparkpoint.checkpoint.coordinator")

    env2 = make_env(
        "local", **{"execution.epoch.max-records": 20, "execution.savepoint.path": restore_from + "/_metadata"}
    )
    ck2 = tmp_path / "ck2"
    stream2 = counting_job(env2, count, ck2, retention="RETAIN_ON_CANCELLATION")
    got = list(stream2.execute_and_collect())
    last = {}
    for key, n in got:
        last[key] = max(last.get(key, 0), n)
    # the restored counts continue exactly: every key ends at its total, no record counted twice
    assert last == dict(oracle_totals(count))
    # and every count after the restore point appears once per key
    for key in last:
        seen = sorted(n for k, n in got if k == key)
        assert seen == list(range(seen[0], last[key] + 1))
    # ids continue after the restored checkpoint (chk-860 -> chk-861); a finished job deletes its
    # checkpoints, so read the ids from the log
    triggered = [
        int(m.group(1)) for r in caplog.records if (m := re.match(r"checkpoint (\d+) triggered", r.getMessage()))
    ]
    assert triggered and triggered[0] == restored_id + 1
    # the restored job did write checkpoints into ck2 (so an empty ck2 below means they were removed,
    # not that none was ever written)
    completed_at = [
        m.group(2)
        for r in caplog.records
        if (m := re.match(r"checkpoint (\d+) completed: .* at (\S+)$", r.getMessage()))
    ]
    assert completed_at and all(loc.startswith(ck2.as_uri() + "/") for loc in completed_at)
    assert not list(ck2.glob("*"))  # and nothing of the finished job is left behind


def _corrupt_one_byte(path: str) -> None:
    data = bytearray(Path(path).read_bytes())
    data[len(data) // 2] ^= 0x01
    Path(path).write_bytes(bytes(data))


def test_corrupt_state_file_is_detected_on_restore(make_env, tmp_path):
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 50})
    run_until_checkpoints(env, counting_job(env, 10**9, ck, rate=20_000), ck, 2)
    target = chk_dirs(ck)[-1]
    keyed = sorted(glob.glob(target + "/keyed-*"))
    assert keyed
    _corrupt_one_byte(keyed[0])
    env2 = make_env("local", **{"execution.savepoint.path": target})
    counting_job(env2, 100, tmp_path / "ck2").print()
    with pytest.raises(CorruptCheckpointError, match=r"keyed-s\d-t\d fails its SHA-256"):
        env2.execute()


def test_missing_metadata_is_not_a_checkpoint(make_env, tmp_path):
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 50})
    run_until_checkpoints(env, counting_job(env, 10**9, ck, rate=20_000), ck, 2)
    target = chk_dirs(ck)[-1]
    os.remove(target + "/_metadata")
    env2 = make_env("local", **{"execution.savepoint.path": target})
    counting_job(env2, 100, tmp_path / "ck2").print()
    with pytest.raises(CorruptCheckpointError, match="_metadata is missing"):
        env2.execute()


def test_declined_checkpoints_fail_the_job_past_tolerance(make_env, tmp_path, monkeypatch, caplog):
    """Past the tolerable number of failed checkpoints the job fails over, as Flink's does: with no checkpoint
    completed it starts over from nothing, and once the restart strategy allows no more, it fails saying why."""
    monkeypatch.setenv("SPARKPOINT_FAIL_UPLOAD", "1")
    restarts = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 1}
    env = make_env(
        "local", **{"execution.epoch.max-records": 20, "restart-strategy.fixed-delay.delay": "0 ms"}, **restarts
    )
    stream = counting_job(env, 2_000, tmp_path / "ck")
    env.get_checkpoint_config().set_tolerable_checkpoint_failure_number(2)
    stream.print()
    with pytest.raises(
        CheckpointException,
        match=r"tolerable number of failed checkpoints \(2\).*"
        r"CHECKPOINT_DECLINED.*upload failure injected",
    ):
        env.execute()
    assert [r for r in caplog.records if "restart 1 " in r.getMessage() and "from the job's start" in r.getMessage()]


def test_expired_checkpoints_are_aborted(make_env, tmp_path, monkeypatch):
    """Slow snapshot uploads (injected) exceed the timeout: each checkpoint expires with a
    recorded reason, and past the tolerable number the job fails saying so."""
    monkeypatch.setenv("SPARKPOINT_SLOW_UPLOAD_MS", "300")
    env = make_env("local", **{"execution.epoch.max-records": 20, "restart-strategy.type": "none"})
    stream = counting_job(env, 10**9, tmp_path / "ck", rate=2_000)
    cc = env.get_checkpoint_config()
    cc.set_checkpoint_timeout(100)
    cc.set_tolerable_checkpoint_failure_number(3)
    stream.print()
    with pytest.raises(
        CheckpointException,
        match=r"tolerable number of failed checkpoints \(3\).*"
        r"CHECKPOINT_EXPIRED: not acknowledged within 100 ms",
    ):
        env.execute()


def _chattr(flag: str, path: Path) -> bool:
    import shutil
    import subprocess

    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


def test_read_only_storage_fails_checkpoints_then_the_job(make_env, tmp_path):
    """Storage turns read-only mid-run: checkpoints fail, the job goes on, then fails saying why.

    (Exceeding the tolerable failures is a job failure; like any failure it goes through the
    restart strategy, so this job runs with none.)"""
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 50, "restart-strategy.type": "none"})
    stream = counting_job(env, 10**9, ck, rate=20_000)
    env.get_checkpoint_config().set_tolerable_checkpoint_failure_number(2)
    stream.print()
    client = env.execute_async("read-only")
    deadline = time.time() + 30
    while time.time() < deadline and not any(os.path.exists(d + "/_metadata") for d in chk_dirs(ck)):
        time.sleep(0.05)
    job_dir = Path(chk_dirs(ck)[0]).parent
    if not _chattr("+i", job_dir):
        client.cancel()
        client.wait(30)
        pytest.skip("cannot make a directory immutable here (chattr)")
    try:
        with pytest.raises(CheckpointException, match=r"tolerable number of failed checkpoints \(2\).*IO_EXCEPTION"):
            client.wait(60)
        status = client.get_job_status().result()
        assert status.name == "FAILED"
    finally:
        _chattr("-i", job_dir)
    # the checkpoints completed before the storage went read-only are still intact
    assert any(os.path.exists(d + "/_metadata") for d in chk_dirs(ck))


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_failure_restores_latest_checkpoint_in_the_same_run(make_env, tmp_path, backend):
    """A user function fails once mid-job: the job restores chk-N and still counts exactly (with rocksdb,
    the failed attempt's databases are left behind and the new attempt's are restored from chk-N)."""
    count = 2_000
    flag = tmp_path / "failed-once"
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 20,
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "0 ms",
            "state.backend.type": backend,
            "execution.checkpointing.incremental": "true",
        },
    )
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    env.set_parallelism(2)
    src = DataGeneratorSource(key_of, count, num_splits=2)
    got = list(
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(FailOnce(flag))
        .uid("count")
        .execute_and_collect()
    )
    assert flag.exists()
    last = {}
    for key, n in got:
        last[key] = max(last.get(key, 0), n)
    assert last == dict(oracle_totals(count))


def test_no_restart_strategy_fails_the_job(make_env, tmp_path):
    class Boom(Count):
        def process_element(self, value, ctx):
            raise RuntimeError("always")

    env = make_env("local", **{"restart-strategy.type": "none"})
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    env.from_collection(["a"]).key_by(lambda k: k).process(Boom()).uid("boom").print()
    with pytest.raises((UserFunctionError, JobExecutionError), match="uid 'boom'"):
        env.execute()


def test_checkpoints_on_another_fsspec_file_system(make_env, tmp_path):
    """Checkpoint storage goes through fsspec: here the in-memory file system (one process)."""
    import fsspec

    base = f"memory://ck-{os.getpid()}-{int(time.time() * 1000)}"
    env = make_env("local", **{"execution.epoch.max-records": 50})
    # slow enough that the checkpoint restored below is well before record 2,000 even on a busy machine
    stream = counting_job(env, 10**9, tmp_path / "unused", rate=1_000)
    env.get_checkpoint_config().set_checkpoint_storage_dir(base)
    stream.print()
    client = env.execute_async("memory-fs")
    fs, root = fsspec.core.url_to_fs(base)
    deadline = time.time() + 30
    done = []
    while time.time() < deadline and not done:
        done = [p for p in fs.glob(root + "/*/chk-*/_metadata")]
        time.sleep(0.05)
    client.cancel()
    client.wait(30)
    assert done
    latest = sorted(fs.glob(root + "/*/chk-*/_metadata"), key=lambda p: int(p.split("chk-")[1].split("/")[0]))[-1]
    env2 = make_env("local", **{"execution.savepoint.path": "memory://" + latest})
    got = list(counting_job(env2, 2_000, tmp_path / "ck2").execute_and_collect())
    assert got  # restored from the in-memory checkpoint and ran to the end
    fs.rm(root, recursive=True)


def test_stateful_tasks_acknowledge_with_both_snapshot_durations(make_env, tmp_path, monkeypatch):
    """A keyed task's ack carries the synchronous part (its barrier-epoch snapshot) and the asynchronous
    part (the upload), as Flink's AcknowledgeCheckpoint does."""
    from sparkpoint.checkpoint.coordinator import CheckpointCoordinator
    from sparkpoint.checkpoint.messages import ExecutionVertexId

    acks = []
    original = CheckpointCoordinator.receive_acknowledge_message

    def recording(self, ack):
        acks.append(ack)
        return original(self, ack)

    monkeypatch.setattr(CheckpointCoordinator, "receive_acknowledge_message", recording)
    env = make_env("local", **{"execution.epoch.max-records": 50})
    run_until_checkpoints(env, counting_job(env, 20_000, tmp_path / "ck", rate=5_000), tmp_path / "ck", 2)
    task_acks = [a for a in acks if isinstance(a.task, ExecutionVertexId)]
    assert task_acks, "no stateful task acknowledged"
    assert all(a.sync_duration_ms > 0 and a.async_duration_ms > 0 for a in task_acks), task_acks


@pytest.mark.parametrize("target", ["local", "spark"])
def test_execute_and_collect_gives_each_record_once_across_a_failover(make_env, tmp_path, request, caplog, target):
    """With exactly-once checkpoints, collected records reach the client when a checkpoint covering their epoch
    completes (Flink's checkpointed collect buffer): the epochs a failover runs again are not seen twice."""
    from tests.runtime.test_job_master import _counting

    if target == "spark":
        request.getfixturevalue("spark")
    flag = tmp_path / "failed-once"
    restarts = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 2}
    env = make_env(
        target, **{"execution.epoch.max-records": 20, "restart-strategy.fixed-delay.delay": "0 ms"}, **restarts
    )
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    got = list(_counting(env, 2_000, FailOnce(flag)).execute_and_collect())
    restored = [r.getMessage() for r in caplog.records if "; restart 1 " in r.getMessage()]
    assert flag.exists() and restored and "from the job's start" not in restored[0], restored  # a checkpoint restored
    assert Counter(got) == running_counts(2_000)
