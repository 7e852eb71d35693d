"""Two-input runtime operators (Flink's ``CoProcessOperator``, ``KeyedCoProcessOperator``,
``CoBroadcastWithNonKeyedOperator``, ``CoBroadcastWithKeyedOperator``).

A two-input operator takes the records of input 1 in :meth:`process_batch` and those of
input 2 in :meth:`process_batch2`. Within an epoch the task hands it input 1's records,
then input 2's, except for the broadcast operators, which take the broadcast side (input 2)
first, so that rules arriving in an epoch apply to that epoch's events. Flink leaves the
interleaving of two inputs open; both orders are ones a Flink job can see. The watermark is
the minimum of both inputs', as for any operator with several inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sparkpoint.datastream.functions import KeySelector
from sparkpoint.datastream.state import MapStateDescriptor, StateDescriptor
from sparkpoint.operators.base import Output, StreamOperator, TaskContext
from sparkpoint.operators.basic import _NonKeyedTimerService, process_each_with
from sparkpoint.operators.keyed import KeyedProcessOperator, _KeyedContext
from sparkpoint.state.broadcast_state import BroadcastStateStore

__all__ = ["CoProcessOperator", "KeyedCoProcessOperator", "BroadcastProcessOperator", "KeyedBroadcastProcessOperator"]


class _Context:
    """The context of a non-keyed two-input function: the record's timestamp, clocks, broadcast state."""

    def __init__(self, op: StreamOperator, read_only: bool = True):
        self.op = op
        self.ts: int | None = None
        self.read_only = read_only

    def timestamp(self) -> int | None:
        return self.ts

    def timer_service(self) -> _NonKeyedTimerService:
        return _NonKeyedTimerService(self.op)

    def current_processing_time(self) -> int:
        return self.op.task.processing_time

    def current_watermark(self) -> int:
        return self.op.watermark

    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> Any:
        return self.op.broadcast_states.get(state_descriptor, self.read_only)  # type: ignore[attr-defined]


class CoProcessOperator(StreamOperator):
    """A ``CoProcessFunction`` (and ``CoMapFunction``/``CoFlatMapFunction``) on two non-keyed streams."""

    broadcast_first = False

    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        process_each_with(self, self.function.process_element1, _Context(self), values, timestamps, out)  # type: ignore[union-attr]

    def process_batch2(self, values: list, timestamps: list, out: Output) -> None:
        process_each_with(self, self.function.process_element2, _Context(self), values, timestamps, out)  # type: ignore[union-attr]


class KeyedCoProcessOperator(KeyedProcessOperator):
    """A ``KeyedCoProcessFunction`` on two keyed streams: keyed state and timers per key, shared by both."""

    broadcast_first = False

    def __init__(self, uid: str, name: str, function: Any, key_selector: KeySelector, key_selector2: KeySelector):
        super().__init__(uid, name, function, key_selector)
        self.key_selector2 = key_selector2

    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        self.process_keyed(self.function.process_element1, self.keys_of(values), values, timestamps, out)  # type: ignore[union-attr]

    def process_batch2(self, values: list, timestamps: list, out: Output) -> None:
        keys = self.keys_of(values, self.key_selector2)
        self.process_keyed(self.function.process_element2, keys, values, timestamps, out)  # type: ignore[union-attr]


class _BroadcastStateMixin:
    """Broadcast state kept as operator state of the subtask (see :mod:`sparkpoint.state.broadcast_state`)."""

    broadcast_first = True
    descriptors: tuple = ()
    broadcast_states: BroadcastStateStore

    def setup(self, task: TaskContext, operator_state: dict | None) -> None:
        super().setup(task, operator_state)  # type: ignore[misc]
        what = f"operator {self.name!r} (uid {self.uid!r})"  # type: ignore[attr-defined]
        self.broadcast_states = BroadcastStateStore(self.descriptors, operator_state, what)

    def snapshot_operator_state(self) -> dict | None:
        return {**(super().snapshot_operator_state() or {}), **self.broadcast_states.snapshot()}  # type: ignore[misc]


class BroadcastProcessOperator(_BroadcastStateMixin, StreamOperator):
    """A ``BroadcastProcessFunction``: a non-keyed stream (input 1) and a broadcast stream (input 2)."""

    def __init__(self, uid: str, name: str, function: Any, descriptors: tuple):
        super().__init__(uid, name, function)
        self.descriptors = descriptors

    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        process_each_with(self, self.function.process_element, _Context(self), values, timestamps, out)  # type: ignore[union-attr]

    def process_batch2(self, values: list, timestamps: list, out: Output) -> None:
        ctx = _Context(self, read_only=False)
        process_each_with(self, self.function.process_broadcast_element, ctx, values, timestamps, out)  # type: ignore[union-attr]


class _KeyedBroadcastContext(_KeyedContext):
    """``ReadOnlyContext`` / ``OnTimerContext`` of a ``KeyedBroadcastProcessFunction``."""

    def current_processing_time(self) -> int:
        return self.op.task.processing_time

    def current_watermark(self) -> int:
        return self.op.watermark

    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> Any:
        return self.op.broadcast_states.get(state_descriptor, True)  # type: ignore[attr-defined]


class _KeyedBroadcastSideContext(_Context):
    """The ``Context`` of ``process_broadcast_element`` on a keyed stream: writable state, every key's state."""

    def apply_to_keyed_state(self, state_descriptor: StateDescriptor, function: Callable[[Any, Any], None]) -> None:
        """``function(key, state)`` for every key of this subtask with an entry of ``state_descriptor``."""
        backend = self.op.keyed_backend  # type: ignore[attr-defined]
        previous = backend.current_key
        state = backend.get_partitioned_state(None, state_descriptor)
        try:
            for key in list(backend.get_keys(state_descriptor.name, None)):
                backend.set_current_key(key)
                function(key, state)
        finally:
            if previous is not None:
                backend.set_current_key(previous)


class KeyedBroadcastProcessOperator(_BroadcastStateMixin, KeyedCoProcessOperator):
    """A ``KeyedBroadcastProcessFunction``: a keyed stream (input 1) and a broadcast stream (input 2)."""

    def __init__(self, uid: str, name: str, function: Any, key_selector: KeySelector, descriptors: tuple):
        super().__init__(uid, name, function, key_selector, None)  # type: ignore[arg-type]
        self.descriptors = descriptors

    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        self.process_keyed(self.function.process_element, self.keys_of(values), values, timestamps, out)  # type: ignore[union-attr]

    def process_batch2(self, values: list, timestamps: list, out: Output) -> None:
        ctx = _KeyedBroadcastSideContext(self, read_only=False)
        process_each_with(self, self.function.process_broadcast_element, ctx, values, timestamps, out)  # type: ignore[union-attr]

    def _context(self) -> _KeyedContext:
        return _KeyedBroadcastContext(self)
