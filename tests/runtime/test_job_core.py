"""The job's core and its scheduler seam: the core drives any ``Scheduler``, and reads time from its clock."""

from __future__ import annotations

import io
from collections import Counter

from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.runtime.clock import ManualClock
from sparkpoint.runtime.epoch_scheduler import EpochScheduler
from sparkpoint.runtime.job_assembly import JobParts
from sparkpoint.runtime.job_listener import JobListener
from sparkpoint.runtime.job_master import JobMaster
from sparkpoint.runtime.job_status import JobStatus
from sparkpoint.runtime.local_executor import LocalEpochExecutor
from sparkpoint.runtime.scheduler import Barrier, BarrierContext, Scheduler, SchedulerReport
from sparkpoint.runtime.translation import StreamGraphGenerator

WORDS = ["to", "be", "or", "not", "to", "be", "that", "is", "the", "question", "be"]


def _plan(env, name: str):
    return StreamGraphGenerator(env._pipeline(name), env.get_configuration()).translate()


def _core(env, name: str, clock: ManualClock, out: io.StringIO, scheduler_of=None) -> JobMaster:
    """The core with its parts and an epoch scheduler over the in-process executor, made here by hand."""
    plan, config = _plan(env, name), env.get_configuration()
    parts = JobParts.create(plan, config, out=out, clock=clock)
    scheduler: Scheduler = EpochScheduler(
        plan,
        config,
        LocalEpochExecutor(),
        tasks=parts.tasks,
        progress=parts.progress,
        schemas=parts.schemas,
        output=parts.output,
        savepoints=parts.savepoints,
        clock=clock,
    )
    if scheduler_of is not None:
        scheduler = scheduler_of(scheduler)
    return JobMaster(plan, config, parts, scheduler, clock)


class _Recorded:
    """A scheduler that delegates to another and writes down what the core asked of it."""

    def __init__(self, inner: Scheduler):
        self.inner, self.calls = inner, []
        self.traits = inner.traits

    def start(self, job_id: str) -> None:
        self.calls.append("start")
        self.inner.start(job_id)

    def run_until_barrier(self, epoch: int, context: BarrierContext) -> Barrier:
        self.calls.append(f"run {epoch}")
        return self.inner.run_until_barrier(epoch, context)

    def barrier_passed(self, barrier: Barrier, finished: bool, context: BarrierContext) -> None:
        self.calls.append(f"passed {barrier.epoch}{' finished' if finished else ''}")
        self.inner.barrier_passed(barrier, finished, context)

    def restart(self) -> None:
        self.calls.append("restart")
        self.inner.restart()

    def cancel(self) -> None:
        self.calls.append("cancel")
        self.inner.cancel()

    def stop(self) -> None:
        self.calls.append("stop")
        self.inner.stop()

    def report(self) -> SchedulerReport:
        return self.inner.report()


def test_the_core_runs_a_keyed_job_through_a_scheduler_to_finished(make_env):
    env = make_env("local", **{"execution.epoch.max-records": 4})
    env.set_parallelism(2)
    (
        env.from_collection(WORDS)
        .map(lambda w: (w, 1))
        .key_by(lambda p: p[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .print()
    )
    out, recorded = io.StringIO(), []

    def record(scheduler: Scheduler) -> Scheduler:
        recorded.append(_Recorded(scheduler))
        return recorded[0]

    core = _core(env, "words", ManualClock(), out, record)

    result = core.run()

    assert core.status is JobStatus.FINISHED and not result.cancelled
    # a reduce prints every running count: the last one per word is the word's count
    last: dict[str, int] = {}
    for line in out.getvalue().splitlines():
        word, n = eval(line.split("> ", 1)[1])  # "1> ('be', 2)" at parallelism 2
        assert n == last.get(word, 0) + 1
        last[word] = n
    assert last == dict(Counter(WORDS))
    calls = recorded[0].calls
    epochs = result.epochs
    assert calls == ["start"] + [
        c for e in range(epochs) for c in (f"run {e}", f"passed {e}" + (" finished" if e == epochs - 1 else ""))
    ] + ["stop"]


class _Stopper(JobListener):
    """Moves the driven clock on after every epoch, hears completed checkpoints, cancels after ``last``."""

    def __init__(self, clock: ManualClock, step_ms: int, last: int):
        self.clock, self.step_ms, self.last = clock, step_ms, last
        self.core: JobMaster | None = None
        self.checkpoints: list[tuple[int, int]] = []  # (barrier epoch, trigger timestamp)

    def on_epoch_completed(self, stats) -> None:
        self.clock.advance(self.step_ms)
        if stats.epoch == self.last and self.core is not None:
            self.core.cancel()

    def on_checkpoint_completed(self, checkpoint) -> None:
        self.checkpoints.append((checkpoint.metadata.barrier_epoch, checkpoint.trigger_timestamp))


def test_periodic_checkpoints_follow_the_driven_clock(make_env, tmp_path):
    """Interval 1000 ms, the clock driven 250 ms per epoch: a checkpoint at epoch 0 (the first barrier), then
    exactly when the clock has moved the interval on since the last trigger (epochs 4, 8, 12), none between."""
    env = make_env("local", **{"execution.epoch.max-records": 10})
    env.set_parallelism(1)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    env.from_source(
        DataGeneratorSource(lambda i: i, 10**9, num_splits=1), WatermarkStrategy.no_watermarks(), "gen"
    ).uid("gen").print()
    clock, out = ManualClock(start_ms=1_700_000_000_000), io.StringIO()
    core = _core(env, "driven", clock, out)
    listener = _Stopper(clock, 250, last=13)
    listener.core = core
    core.add_listener(listener)

    result = core.run()

    assert result.cancelled and result.epochs == 14
    # hand count: barriers at 0, 250, 500, ... ms; a trigger once 1000 ms passed since the last one
    assert listener.checkpoints == [
        (0, 1_700_000_000_000),
        (4, 1_700_000_001_000),
        (8, 1_700_000_002_000),
        (12, 1_700_000_003_000),
    ]
    assert [int(line) for line in out.getvalue().splitlines()] == list(range(14 * 10))
