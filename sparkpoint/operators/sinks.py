"""Sink nodes at run time: writers that stage output, and the print/collect sinks."""

from __future__ import annotations

from typing import Any

from sparkpoint.operators.base import Output, StreamOperator, TaskContext

__all__ = ["SinkOperator", "PrintOperator", "CollectOperator", "SideOutputOperator"]


class SinkOperator(StreamOperator):
    """Runs a :class:`~sparkpoint.connectors.base.SinkWriter`; its committables go to the driver."""

    def __init__(self, uid: str, name: str, sink: Any):
        super().__init__(uid, name)
        self.sink = sink
        self.writer: Any = None
        self.aborted = False  # a thread of the ended attempt still running must not write past the abort

    def setup(self, task: TaskContext, operator_state: dict | None) -> None:
        super().setup(task, operator_state)
        self.writer = self.new_writer(task.epoch, (operator_state or {}).get("writer"))
        if hasattr(self.writer, "now_ms"):
            self.writer.now_ms = task.processing_time

    def new_writer(self, epoch: int, state: Any) -> Any:
        """The sink's writer for ``epoch`` from its ``state``, told the job's attempt (a file writer names its
        staged parts by it: a task of a failed attempt still running never writes into the next one's)."""
        task = self.task
        writer = self.sink.create_writer(task.subtask_index, task.parallelism, task.job_id, epoch, state)
        if hasattr(writer, "attempt"):
            writer.attempt = task.attempt
        return writer

    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        if values:
            self._not_aborted()
            try:
                self.writer.write(values, timestamps)
            except Exception as e:  # a writer's error may name the record it failed on
                raise self.fail(getattr(e, "record", values[0]), e) from e

    def prepare_commit(self) -> list:
        self._not_aborted()
        return self.writer.prepare_commit()

    def abort(self) -> None:
        """The task failed: the writer lets go of what it staged (never committed) and what it holds open. The sink
        takes nothing after it (a subtask's thread still in user code when its slot ended may go on to the sink)."""
        self.aborted = True
        if self.writer is not None:
            self.writer.abort()

    def _not_aborted(self) -> None:
        if self.aborted:
            raise RuntimeError(f"sink {self.uid!r} was aborted: its task's attempt ended")

    def snapshot_operator_state(self) -> dict | None:
        return {"writer": self.writer.snapshot_state()}


class PrintOperator(StreamOperator):
    """``DataStream.print()``: records go to the driver, which prints them in order."""

    def __init__(self, uid: str, name: str, sink_identifier: str | None = None):
        super().__init__(uid, name)
        self.sink_identifier = sink_identifier
        self.lines: list = []

    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        self.lines.extend(values)


class CollectOperator(PrintOperator):
    """``execute_and_collect()``: records go back to the driver."""


class SideOutputOperator(StreamOperator):
    """Forwards the records of one side output of its input."""

    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        out.values.extend(values)
        out.timestamps.extend(timestamps)
