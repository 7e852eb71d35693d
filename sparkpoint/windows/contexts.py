"""The contexts the window operator hands to assigners, triggers and window functions.

All are bound to the operator's current key; the trigger context is moved from window to
window with ``at(window)``, and keeps trigger state in its own name space
(``trigger:<name>``, namespace = the window), merged with ``merge_namespaces`` when windows
merge. Per-window state of window functions is named ``window:<name>``.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from sparkpoint.datastream.state import StateDescriptor
from sparkpoint.datastream.triggers import Trigger
from sparkpoint.errors import StateError
from sparkpoint.time.timers import EVENT_TIME, PROCESSING_TIME

if TYPE_CHECKING:
    from sparkpoint.windows.operator import WindowOperator

__all__ = ["AssignerContext", "TriggerContext", "WindowContext", "TRIGGER_STATE_PREFIX", "WINDOW_STATE_PREFIX"]

TRIGGER_STATE_PREFIX = "trigger:"
WINDOW_STATE_PREFIX = "window:"


class AssignerContext:
    def __init__(self, op: WindowOperator):
        self.op = op

    def get_current_processing_time(self) -> int:
        return self.op.task.processing_time

    def get_runtime_context(self) -> Any:
        from sparkpoint.operators.base import OperatorRuntimeContext

        return OperatorRuntimeContext(self.op)


class TriggerContext(Trigger.OnMergeContext):
    """Trigger.TriggerContext / OnMergeContext bound to the current key and a window."""

    def __init__(self, op: WindowOperator):
        self.op = op
        self.window: Any = None
        self.merged_windows: list = []

    def at(self, window: Any, merged_windows: list | None = None) -> TriggerContext:
        self.window = window
        self.merged_windows = merged_windows or []
        return self

    def get_current_processing_time(self) -> int:
        return self.op.task.processing_time

    def get_current_watermark(self) -> int:
        return self.op.watermark

    def _timer(self, domain: str, time: int, delete: bool = False) -> None:
        b = self.op.keyed_backend
        if delete:
            self.op.timers.delete(domain, time, b.current_key, self.window)
        else:
            self.op.timers.register(domain, time, b.current_key, self.window, b.current_key_group)

    def register_event_time_timer(self, time: int) -> None:
        self._timer(EVENT_TIME, time)

    def register_processing_time_timer(self, time: int) -> None:
        self._timer(PROCESSING_TIME, time)

    def delete_event_time_timer(self, time: int) -> None:
        self._timer(EVENT_TIME, time, delete=True)

    def delete_processing_time_timer(self, time: int) -> None:
        self._timer(PROCESSING_TIME, time, delete=True)

    def get_partitioned_state(self, state_descriptor: StateDescriptor) -> Any:
        return self.op.keyed_backend.get_partitioned_state(
            self.window, _prefixed(state_descriptor, TRIGGER_STATE_PREFIX)
        )

    def merge_partitioned_state(self, state_descriptor: StateDescriptor) -> None:
        """Merge the state of the merged windows into the window of this context (``OnMergeContext``)."""
        if self.merged_windows:
            state = self.op.keyed_backend.create_internal_state(_prefixed(state_descriptor, TRIGGER_STATE_PREFIX))
            state.merge_namespaces(self.window, self.merged_windows)


def _prefixed(d: StateDescriptor, prefix: str) -> StateDescriptor:
    """``d`` under the name ``<prefix><name>``: window and trigger state live in their own names."""
    if d.name.startswith(prefix):
        return d
    c = copy.copy(d)
    c.name = prefix + d.name
    return c


class WindowContext:
    """``ProcessWindowFunction.Context``."""

    def __init__(self, op: WindowOperator):
        self.op = op
        self.window_: Any = None

    def window(self) -> Any:
        return self.window_

    def current_processing_time(self) -> int:
        return self.op.task.processing_time

    def current_watermark(self) -> int:
        return self.op.watermark

    def window_state(self) -> _StateStore:
        return _StateStore(self.op, self.window_, WINDOW_STATE_PREFIX)

    def global_state(self) -> _StateStore:
        return _StateStore(self.op, None, "")

    def output(self, output_tag: Any, value: Any) -> None:
        raise NotImplementedError("use `yield output_tag, value` for side outputs")


class _StateStore:
    """Keyed state of the current key in one namespace (a window, or ``None`` for per-key state)."""

    def __init__(self, op: WindowOperator, namespace: Any, prefix: str):
        self.op, self.namespace, self.prefix = op, namespace, prefix

    def _state(self, descriptor: StateDescriptor) -> Any:
        if self.namespace is not None and self.op.merging:  # as Flink's (and PyFlink's) merging window state store
            raise StateError(
                f"operator {self.op.uid!r}: per-window state (context.window_state(), {descriptor.name!r}) is not "
                f"allowed when using merging windows: a session's state would stay behind when it merges into "
                f"another; use context.global_state() or the window's elements"
            )
        d = copy.copy(descriptor)
        d.name = self.prefix + descriptor.name
        return self.op.keyed_backend.get_partitioned_state(self.namespace, d)

    get_state = get_list_state = get_map_state = get_reducing_state = get_aggregating_state = _state
