"""User functions on keyed streams, as keyed process functions the keyed operator runs.

* :class:`KeyedFunctionAdapter` runs a map/flat_map/filter function on a keyed stream
  (so it may use keyed state);
* :class:`BatchReduceFunction` is a keyed reduce in ``RuntimeExecutionMode.BATCH``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.common.ownership import own
from sparkpoint.common.watermark_strategy import MAX_WATERMARK
from sparkpoint.datastream.functions import KeyedProcessFunction, ReduceFunction
from sparkpoint.datastream.state import ValueStateDescriptor
from sparkpoint.errors import null_reduce_message

__all__ = ["KeyedFunctionAdapter", "BatchReduceFunction"]


class KeyedFunctionAdapter(KeyedProcessFunction):
    """Runs a map/flat_map/filter function on a keyed stream (so it may use keyed state)."""

    def __init__(self, kind: str, fn: Any):
        self.kind, self.fn = kind, fn

    def open(self, runtime_context: Any) -> None:
        self.fn.open(runtime_context)

    def close(self) -> None:
        self.fn.close()

    def process_element(self, value: Any, ctx: Any) -> Iterable:
        if self.kind == "map":
            return (self.fn.map(value),)
        if self.kind == "flat_map":
            return self.fn.flat_map(value)
        return (value,) if self.fn.filter(value) else ()


class BatchReduceFunction(KeyedProcessFunction):
    """A keyed reduce in ``RuntimeExecutionMode.BATCH``: only the final value per key.

    Flink's batch execution emits a keyed reduce's result once per key, when the
    key's input is exhausted; here that is the end of input (the +inf watermark).
    """

    def __init__(self, reduce_function: ReduceFunction):
        self.reduce_function = reduce_function

    def open(self, runtime_context: Any) -> None:
        self.reduce_function.open(runtime_context)
        self.state = runtime_context.get_state(ValueStateDescriptor("_batch_reduce_state"))

    def close(self) -> None:
        self.reduce_function.close()

    def process_element(self, value: Any, ctx: Any) -> None:
        current = self.state.value()
        new = value if current is None else self.reduce_function.reduce(own(current), value)
        if new is None:  # it would read as empty: the value would start over from the next record
            raise TypeError(null_reduce_message("the keyed reduce", ctx.get_current_key()))
        self.state.update(new)
        ctx.timer_service().register_event_time_timer(MAX_WATERMARK)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable:
        result = self.state.value()
        self.state.clear()
        return () if result is None else (result,)
