"""User metrics as the driver adds them up. Continuous mode's long-running subtasks report at every barrier, and
each report adds what was counted since the one before (it added everything counted since the subtask started
again, so a counter read many times the records it counted; hand count: one per record). A gauge is read before
the function's ``close()`` (after it, one over what ``close()`` lets go failed)."""

from __future__ import annotations

from typing import Any, ClassVar

from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import MapFunction
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.runtime.job_listener import JobListener

RECORDS = 3_000


class Counted(MapFunction):
    def open(self, runtime_context):
        group = runtime_context.get_metrics_group()
        self.seen, self.marks, self.values = group.counter("seen"), group.meter("marks"), group.distribution("values")

    def map(self, value):
        self.seen.inc()
        self.marks.mark_event()
        self.values.update(value)
        return value


class Jobs(JobListener):
    started: ClassVar[list] = []

    def on_job_started(self, job: Any) -> None:
        Jobs.started.append(job)


def listener(job: Any) -> JobListener:
    return Jobs()


def test_a_long_running_subtasks_counters_count_each_record_once(make_env, tmp_path):
    env = make_env(
        "local",
        **{
            "sparkpoint.execution.mode": "continuous",
            "execution.checkpointing.interval": "50 ms",
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
            "execution.job-listeners": f"{__name__}:listener",
        },
    )
    env.set_parallelism(1)
    source = DataGeneratorSource(lambda i: i, RECORDS, records_per_second=10_000)
    env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers").map(Counted()).uid(
        "counted"
    ).print()
    env.execute("counted")
    figures = Jobs.started[-1].output.user_metrics.figures("counted", 0)
    assert figures["seen"] == figures["marks_count"] == figures["values_count"] == RECORDS
    assert figures["values_sum"] == sum(range(RECORDS)) and figures["values_max"] == RECORDS - 1


class Buffered(MapFunction):
    """Holds the records of its epoch in a buffer its gauge measures; ``close()`` lets the buffer go."""

    def open(self, runtime_context):
        self.buffer: list | None = []
        runtime_context.get_metrics_group().gauge("buffered", lambda: len(self.buffer))

    def map(self, value):
        self.buffer.append(value)
        return value

    def close(self):
        self.buffer = None


def test_a_gauge_is_read_before_its_function_closes(make_env, tmp_path):
    env = make_env("local", **{"execution.job-listeners": f"{__name__}:listener"})
    env.set_parallelism(1)
    env.from_collection(list(range(7))).map(Buffered()).uid("buffered").print()
    env.execute("gauged")
    assert Jobs.started[-1].output.user_metrics.figures("buffered", 0) == {"buffered": 7}
