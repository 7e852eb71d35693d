"""The stateless and non-keyed operators: map, filter, flat_map, process, timestamps/watermarks."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from itertools import compress
from typing import Any

import cloudpickle

from sparkpoint.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK, WatermarkOutput, observe_batch
from sparkpoint.datastream.functions import bound_call
from sparkpoint.errors import StateError
from sparkpoint.operators.base import IDLE, Output, StreamOperator, TaskContext, extract_timestamps

__all__ = ["MapOperator", "FlatMapOperator", "FilterOperator", "ProcessOperator", "TimestampsAndWatermarksOperator"]


class MapOperator(StreamOperator):
    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        f = bound_call(self.function, "map")
        mapped: list = []
        try:
            mapped.extend(map(f, values))  # on a failure, holds the results of the records before it
            if len(mapped) < len(values):  # the function raised StopIteration: map() took it for the end
                raise RuntimeError("the function raised StopIteration")
        except Exception as e:
            raise self.fail(values[len(mapped)], e) from e
        out.values.extend(mapped)
        out.timestamps.extend(timestamps)


class FilterOperator(StreamOperator):
    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        f = bound_call(self.function, "filter")
        keep: list = []
        truths: list[bool] = []
        try:
            keep.extend(map(f, values))  # on a failure, holds the results of the records before it
            if len(keep) < len(values):  # the function raised StopIteration: map() took it for the end
                raise RuntimeError("the function raised StopIteration")
            truths.extend(map(bool, keep))  # each result's truth once, at C speed
        except Exception as e:
            raise self.fail(values[len(keep) if len(keep) < len(values) else len(truths)], e) from e
        out.values.extend(compress(values, truths))
        out.timestamps.extend(compress(timestamps, truths))


class FlatMapOperator(StreamOperator):
    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        f = bound_call(self.function, "flat_map")
        v = None
        try:
            for v, t in zip(values, timestamps):
                out.emit_all(f(v), t)
        except Exception as e:
            raise self.fail(v, e) from e


class _ProcessContext:
    def __init__(self, op: ProcessOperator):
        self.op = op
        self.ts: int | None = None

    def timestamp(self) -> int | None:
        return self.ts

    def timer_service(self) -> _NonKeyedTimerService:
        return _NonKeyedTimerService(self.op)


class _NonKeyedTimerService:
    def __init__(self, op: StreamOperator):
        self.op = op

    def current_processing_time(self) -> int:
        return self.op.task.processing_time

    def current_watermark(self) -> int:
        return self.op.watermark

    def _unsupported(self, *args: Any) -> None:
        raise StateError(
            f"operator {self.op.name!r} (uid {self.op.uid!r}): timers need a keyed stream "
            f"(key_by(...).process(KeyedProcessFunction))"
        )

    register_processing_time_timer = register_event_time_timer = _unsupported
    delete_processing_time_timer = delete_event_time_timer = _unsupported


class ProcessOperator(StreamOperator):
    """A ``ProcessFunction`` on a non-keyed stream."""

    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        process_each_with(self, self.function.process_element, _ProcessContext(self), values, timestamps, out)  # type: ignore[union-attr]


def process_each_with(
    op: StreamOperator, method: Callable[[Any, Any], Any], ctx: Any, values: list, timestamps: list, out: Output
) -> None:
    """``method(record, ctx)`` for every record (``ctx.ts`` its timestamp), what it returns or yields emitted."""
    v = None
    try:
        for v, t in zip(values, timestamps):
            ctx.ts = t
            out.emit_all(method(v, ctx), t)
    except Exception as e:
        raise op.fail(v, e) from e


class TimestampsAndWatermarksOperator(StreamOperator):
    """``assign_timestamps_and_watermarks``: stamps records and replaces the watermark.

    Its generator is operator state of the subtask (pickled), so watermarks continue
    across epochs and restores. Only the end-of-input watermark (+inf) passes through. With ``batch``
    (``RuntimeExecutionMode.BATCH``) it emits no watermark of its own: the end of input is the only one.
    """

    def __init__(self, uid: str, name: str, strategy: Any, batch: bool = False):
        super().__init__(uid, name)
        self.strategy = strategy
        self.batch = batch
        self.assigner = strategy.create_timestamp_assigner()
        self.generator: Any = None
        self.output = WatermarkOutput()

    def setup(self, task: TaskContext, operator_state: dict | None) -> None:
        super().setup(task, operator_state)
        if operator_state and "generator" in operator_state:
            self.generator = pickle.loads(operator_state["generator"])
        else:  # a new generator: a first run, or a restore at another parallelism (restore._watermark_generators_anew)
            self.generator = self.strategy.create_watermark_generator()
        if operator_state and operator_state.get("watermark") is not None:
            self.output.watermark = operator_state["watermark"]
        if hasattr(self.generator, "set_current_processing_time"):
            self.generator.set_current_processing_time(task.processing_time)

    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        gen = self.generator
        if self.assigner is not None:
            new_ts = extract_timestamps(self, self.assigner, values, timestamps)
        else:
            new_ts = list(timestamps)
        if new_ts:  # an assigner's timestamps are all ints (extract_timestamps)
            seen = new_ts
            if self.assigner is None and None in new_ts:  # no timestamp: the generator is given Long.MIN, as Flink's
                seen = [MIN_WATERMARK if t is None else t for t in new_ts]
            observe_batch(gen, values, seen, self.output)
        out.take(values, new_ts)

    def process_watermark(self, watermark: int | None, out: Output) -> int | None:
        if watermark == MAX_WATERMARK:
            self.watermark = MAX_WATERMARK
            return MAX_WATERMARK
        if self.batch:
            return self.watermark  # held until the end of input
        if hasattr(self.generator, "set_current_processing_time"):  # idleness: a long-running task's clock moves
            self.generator.set_current_processing_time(self.task.processing_time)
        self.generator.on_periodic_emit(self.output)
        if self.output.idle:
            return IDLE
        self.watermark = max(self.watermark, self.output.watermark)
        return self.watermark

    def snapshot_operator_state(self) -> dict | None:
        return {"generator": cloudpickle.dumps(self.generator), "watermark": self.output.watermark}
