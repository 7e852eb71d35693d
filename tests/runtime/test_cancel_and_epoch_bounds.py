"""A cancel stops the running epoch (Spark's job group cancelled, tasks interrupted) and the job ends CANCELED;
an epoch past its bound (``execution.checkpointing.timeout``, ``sparkpoint.epoch.timeout``) fails the attempt
naming the operator that was still running, and the restart strategy decides what follows."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.checkpoint.exceptions import CheckpointException
from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import JobStatus, MapFunction
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.stream_execution_environment import set_cli_defaults
from sparkpoint.errors import EpochTimeoutError, JobCancellationException
from sparkpoint.runtime.job_listener import JobListener
from tests.checkpoint.test_checkpointing import Count, key_of, oracle_totals


class HangAfter(MapFunction):
    """Passes records on; at its first record ``after_s`` seconds after it was made (the job has run epochs by
    then: tasks are made anew every epoch, so a count of records would restart) it writes ``started`` and
    hangs: in one blocking call (``time.sleep``) or in a loop of short sleeps, for ``hang_s``; with ``once``,
    only if ``started`` was not written yet; with ``after_file``, only once that file exists too."""

    def __init__(
        self,
        after_s: float,
        started: Path,
        hang_s: float = 3600,
        blocking: bool = True,
        once: bool = False,
        after_file: Path | None = None,
    ):
        self.at, self.started, self.hang_s, self.blocking, self.once = (
            time.time() + after_s,
            str(started),
            hang_s,
            blocking,
            once,
        )
        self.after_file = str(after_file) if after_file is not None else None

    def map(self, value: Any) -> Any:
        if self.after_file is not None and not Path(self.after_file).exists():
            return value
        if time.time() >= self.at and not (self.once and Path(self.started).exists()):
            Path(self.started).write_text("hanging")
            if self.blocking:
                time.sleep(self.hang_s)
            else:
                until = time.time() + self.hang_s
                while time.time() < until:
                    time.sleep(0.02)
        return value


class Touches(JobListener):
    """Writes ``path`` when a checkpoint completes."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_checkpoint_completed(self, checkpoint: Any) -> None:
        self.path.write_text("completed")


class Failures(JobListener):
    """The errors the job's status changes carried."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def on_status_change(self, job_id: str, old: Any, new: Any, error: BaseException | None) -> None:
        if error is not None:
            self.errors.append(error)


def _job(env: Any, count: int, hang: HangAfter, rate: int | None = None, keyed: bool = False) -> Any:
    """gen -> slow map -> count by key (``keyed``: gen -> count by key -> slow map, in the keyed stage)."""
    env.set_parallelism(2)
    src = DataGeneratorSource(key_of, count, num_splits=2, records_per_second=rate)
    stream = env.from_source(src, WatermarkStrategy.no_watermarks(), "gen").uid("gen")
    if keyed:
        return stream.key_by(lambda k: k).process(Count()).uid("count").map(hang).name("slow map").uid("slow-map")
    return stream.map(hang).name("slow map").uid("slow-map").key_by(lambda k: k).process(Count()).uid("count")


def _wait_for(path: Path, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not path.exists():
        assert time.time() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.fixture
def handles():
    """The handles of the jobs created while the test runs (to reach their JobMaster)."""
    created: list = []
    set_cli_defaults({"on_job_created": created.append})
    yield created
    set_cli_defaults({})


@pytest.mark.spark
def test_cancel_of_a_hung_spark_job_cancels_its_job_group_and_ends_canceled(spark, make_env, tmp_path):
    started = tmp_path / "started"
    env = make_env("spark", **{"execution.epoch.max-records": 100})
    _job(env, 10**6, HangAfter(3, started)).filter(lambda v: False).print()
    client = env.execute_async("hung")
    _wait_for(started)
    t0 = time.time()
    client.cancel()
    result = client.wait(30)  # before: the task slept on, and so did the job
    took = time.time() - t0
    jid = client.get_job_id()
    assert result.cancelled and client.get_job_status().result() is JobStatus.CANCELED
    assert took < 15, took
    tracker = spark.sparkContext.statusTracker()  # the epoch that was running (or its sources, run ahead)
    hung = tracker.getJobIdsForGroup(f"sparkpoint-{jid}-{result.epochs}")
    assert hung and "FAILED" in [tracker.getJobInfo(j).status for j in hung]  # cancelled: Spark says FAILED
    jobs = {j for e in range(result.epochs + 2) for j in tracker.getJobIdsForGroup(f"sparkpoint-{jid}-{e}")}
    assert not set(tracker.getActiveJobsIds()) & jobs


def test_execute_of_a_cancelled_job_raises_and_a_blocking_call_on_the_main_thread_is_interrupted(
    make_env, tmp_path, handles
):
    started = tmp_path / "started"
    env = make_env("local", **{"execution.epoch.max-records": 50})
    _job(env, 10**6, HangAfter(1, started, hang_s=60)).filter(lambda v: False).print()

    def cancel_when_hung() -> None:
        _wait_for(started)
        handles[0].cancel()

    threading.Thread(target=cancel_when_hung, daemon=True).start()
    t0 = time.time()
    with pytest.raises(JobCancellationException, match=r"Job [0-9a-f]{32} was cancelled"):
        env.execute("cancelled")  # on this (the main) thread: the sleep is ended by a signal
    assert time.time() - t0 < 30
    assert handles[0].status() is JobStatus.CANCELED


def test_cancel_stops_a_looping_function_on_another_thread(make_env, tmp_path):
    started = tmp_path / "started"
    env = make_env("local", **{"execution.epoch.max-records": 50})
    _job(env, 10**6, HangAfter(1, started, hang_s=120, blocking=False)).filter(lambda v: False).print()
    client = env.execute_async("cancelled")
    _wait_for(started)
    t0 = time.time()
    client.cancel()
    assert client.wait(30).cancelled and time.time() - t0 < 10
    assert client.get_job_status().result() is JobStatus.CANCELED


@pytest.mark.spark
def test_an_epoch_past_the_checkpoint_timeout_fails_naming_the_operator_and_expires_the_checkpoint(
    spark, make_env, tmp_path, handles
):
    started = tmp_path / "started"
    env = make_env(
        "spark",
        **{
            "execution.epoch.max-records": 100,
            "restart-strategy.type": "none",
            "execution.checkpointing.timeout": "3 s",
        },
    )
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    # the hang comes after a checkpoint completed, in an epoch that carries the next one: the pending
    # checkpoint's own expiry (the first epoch's hang, with none pending, is the test after the next)
    completed = tmp_path / "completed"
    _job(env, 10**6, HangAfter(0, started, after_file=completed), keyed=True).filter(lambda v: False).print()
    set_cli_defaults({"on_job_created": lambda h: (handles.append(h), h.add_listener(Touches(completed)))})
    t0 = time.time()
    with pytest.raises(CheckpointException) as info:  # none tolerated (Flink's default): the job's failure
        env.execute("hung")
    message = str(info.value)
    assert "tolerable number of failed checkpoints (0)" in message and "CHECKPOINT_EXPIRED" in message, message
    assert "did not end within its epoch bound" in message, message
    assert "uid 'slow-map'" in message and "'slow map'" in message, message
    assert "execution.checkpointing.timeout = 3000 ms" in message, message
    assert "in map at " in message and "test_cancel_and_epoch_bounds.py" in message, message
    assert time.time() - t0 < 60
    history = handles[0].master.coordinator.stats.to_json()["history"]
    assert any("CHECKPOINT_EXPIRED" in (h.get("failure_message") or "") for h in history), history


def test_an_epoch_past_sparkpoint_epoch_timeout_fails_over_and_the_job_completes_exactly(make_env, tmp_path, handles):
    started, count = tmp_path / "started", 2_000
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 100,
            "sparkpoint.epoch.timeout": "3 s",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "0 ms",
        },
    )
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    failures = Failures()
    stream = _job(env, count, HangAfter(1, started, hang_s=120, blocking=False, once=True), rate=1000)
    set_cli_defaults({"on_job_created": lambda h: (handles.append(h), h.add_listener(failures))})
    got = stream.execute_and_collect()
    last: dict = {}
    for key, n in got:
        last[key] = max(last.get(key, 0), n)
    assert started.exists() and last == dict(oracle_totals(count))
    timeouts = [e for e in failures.errors if isinstance(e, EpochTimeoutError)]
    assert any("uid 'slow-map'" in str(t) and "sparkpoint.epoch.timeout = 3000 ms" in str(t) for t in timeouts), (
        failures.errors
    )
    assert handles[0].master.restarts >= 1  # the hang's; a loaded machine may add a slow epoch's (3 allowed)


def test_the_next_checkpoint_due_bounds_an_epoch_only_when_its_expiry_would_fail_the_job(tmp_path):
    """With nothing pending, the bound is the timeout after the next checkpoint is due (not before now); a job
    that tolerates failed checkpoints gets no such bound until it has used them up, nor does one without
    checkpoints; a pending checkpoint's own expiry comes first."""
    from sparkpoint.checkpoint.coordinator import CheckpointCoordinator, CheckpointSettings
    from sparkpoint.common import Configuration
    from sparkpoint.runtime.clock import ManualClock
    from sparkpoint.runtime.epoch_guard import EpochGuard
    from sparkpoint.storage.checkpoint_storage import FsCheckpointStorage

    def coordinator(**conf: str) -> CheckpointCoordinator:
        storage = FsCheckpointStorage((tmp_path / "ck").as_uri(), "f" * 32)
        return CheckpointCoordinator(CheckpointSettings(Configuration(conf)), storage, "f" * 32, "job", 128, {})

    class Ran:
        def run_epoch(self, *args: Any, **kwargs: Any) -> list:
            return []

    clock = ManualClock(100_000)
    guard = EpochGuard(Ran(), Configuration({}), None, clock)  # type: ignore[arg-type]
    guard.run_epoch(0, {}, None, None)  # the attempt's first epoch ended: its tasks run
    on = {"execution.checkpointing.interval": "10 s", "execution.checkpointing.timeout": "3 s"}
    c = coordinator(**on)
    c.last_trigger_ms = 95_000  # the next is due at 105,000: it expires at 108,000
    bound = guard.bound(c)
    assert bound is not None and bound.expires_ms == 108_000 and bound.due_ms == 105_000
    assert bound.key == "execution.checkpointing.timeout" and bound.checkpoint_id is None
    assert abs(bound.deadline_ms - (time.time() * 1000 + 8_000)) < 1_000
    c.last_trigger_ms = 50_000  # overdue: due now, so 3 s from now
    assert guard.bound(c).expires_ms == 103_000  # type: ignore[union-attr]
    assert guard.bound(coordinator()) is None  # checkpoints off
    tolerant = coordinator(**on, **{"execution.checkpointing.tolerable-failed-checkpoints": "1"})
    assert guard.bound(tolerant) is None
    tolerant.expire_untriggered("a test's", 105_000, 3)  # one failure: the next expiry would be fatal
    assert tolerant.failure_manager.continuous_failures == 1 and guard.bound(tolerant) is not None
    with pytest.raises(CheckpointException, match="checkpoint 2 failed: CHECKPOINT_EXPIRED: a test's"):
        tolerant.expire_untriggered("a test's", 115_000, 4)  # each takes an id of its own
    failed = sorted((s.id, s.status, s.barrier_epoch) for s in tolerant.stats.history())
    assert failed == [(1, "FAILED", 3), (2, "FAILED", 4)], failed


def test_an_attempts_first_epoch_is_not_bounded_by_the_checkpoint_due_while_it_restores(tmp_path):
    """The first epoch of an attempt restores the tasks' state: no checkpoint falls due before it ended (Flink
    triggers none until every task runs), so only a pending checkpoint or sparkpoint.epoch.timeout bounds it."""
    from sparkpoint.checkpoint.coordinator import CheckpointCoordinator, CheckpointSettings
    from sparkpoint.common import Configuration
    from sparkpoint.runtime.clock import ManualClock
    from sparkpoint.runtime.epoch_guard import EpochGuard
    from sparkpoint.storage.checkpoint_storage import FsCheckpointStorage

    storage = FsCheckpointStorage((tmp_path / "ck").as_uri(), "f" * 32)
    conf = Configuration({"execution.checkpointing.interval": "10 s", "execution.checkpointing.timeout": "3 s"})
    c = CheckpointCoordinator(CheckpointSettings(conf), storage, "f" * 32, "job", 128, {})

    class Ran:
        def run_epoch(self, *args, **kwargs):
            return []

    guard = EpochGuard(Ran(), Configuration({}), None, ManualClock(100_000))  # type: ignore[arg-type]
    guard.attempt_started()
    assert guard.bound(c) is None
    guard.run_epoch(0, {}, None, c)  # the first epoch ended: the tasks run
    assert guard.bound(c) is not None
    guard.attempt_started()  # a restart: restoring again
    assert guard.bound(c) is None


def test_an_epoch_between_checkpoints_that_hangs_fails_when_the_next_checkpoint_would_have_expired(
    make_env, tmp_path, handles
):
    """After a checkpoint completed, the next epochs carry none until the next falls due; one of them hangs. It
    is stopped when that checkpoint, which cannot trigger, would expire, and the checkpoint counts as expired:
    with its own id, in the statistics, and (none tolerated) failing the job naming the operator. Before,
    nothing bounded such an epoch and the map slept for its two minutes."""
    started, completed, ck = tmp_path / "started", tmp_path / "completed", tmp_path / "ck"
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 100,
            "restart-strategy.type": "none",
            "execution.checkpointing.timeout": "2 s",
        },
    )
    env.enable_checkpointing(5_000)  # the epochs after a completion carry none for seconds, even on a slow machine
    env.get_checkpoint_config().set_checkpoint_storage_dir(ck.as_uri())
    hang = HangAfter(0, started, hang_s=120, blocking=False, after_file=completed)
    _job(env, 10**6, hang, rate=2_000).filter(lambda v: False).print()
    set_cli_defaults({"on_job_created": lambda h: (handles.append(h), h.add_listener(Touches(completed)))})
    t0 = time.time()
    with pytest.raises(CheckpointException) as info:
        env.execute("hung between checkpoints")
    took = time.time() - t0
    message = str(info.value)
    assert started.exists()
    assert "tolerable number of failed checkpoints (0)" in message and "CHECKPOINT_EXPIRED" in message, message
    assert "not triggered within 2000 ms of being due" in message, message
    assert "counted from when the next checkpoint was due" in message, message
    assert "uid 'slow-map'" in message and "in map at " in message, message
    assert took < 60, took
    stats = handles[0].master.coordinator.stats
    done = [s.id for s in stats.history() if s.status == "COMPLETED"]
    failed = [s for s in stats.history() if s.status == "FAILED"]
    assert done and len(failed) == 1 and failed[0].id > max(done), (done, failed)
    assert "not triggered within 2000 ms" in (failed[0].failure_reason or "")
