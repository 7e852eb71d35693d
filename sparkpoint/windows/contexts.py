"""The contexts the window operator hands to assigners, triggers and window functions.

All are bound to the operator's current key; the trigger context is moved from window to
window with ``at(window)``, and keeps trigger state in its own name space
(``trigger:<name>``), merged when windows merge.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Callable, Optional

from sparkpoint.datastream.state import StateDescriptor
from sparkpoint.time.timers import EVENT_TIME, PROCESSING_TIME

if TYPE_CHECKING:
    from sparkpoint.windows.operator import WindowOperator

__all__ = ["AssignerContext", "TriggerContext", "WindowContext"]


class AssignerContext:
    def __init__(self, op: WindowOperator):
        self.op = op

    def get_current_processing_time(self) -> int:
        return self.op.task.processing_time

    def get_runtime_context(self) -> Any:
        from sparkpoint.operators.base import OperatorRuntimeContext

        return OperatorRuntimeContext(self.op)


class TriggerContext:
    """Trigger.TriggerContext / OnMergeContext bound to the current key and a window."""

    def __init__(self, op: WindowOperator):
        self.op = op
        self.window: Any = None
        self.merged_windows: list = []

    def at(self, window: Any, merged_windows: Optional[list] = None) -> "TriggerContext":
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
        window = self.window
        return self.op.keyed_backend.create_state(_trigger_descriptor(state_descriptor), lambda: window)

    def merge_partitioned_state(self, state_descriptor: StateDescriptor) -> None:
        d = _trigger_descriptor(state_descriptor)
        table = self.op.keyed_backend.table(d.name, d.kind)
        entries = table.setdefault(self.op.keyed_backend.current_key_group, {})
        key = self.op.keyed_backend.current_key
        for w in self.merged_windows:
            val = entries.pop((key, w), None)
            if val is None:
                continue
            cur = entries.get((key, self.window))
            if cur is None:
                entries[(key, self.window)] = val
            elif d.kind == "reducing":
                entries[(key, self.window)] = d.reduce_function.reduce(cur, val)  # type: ignore[attr-defined]
            elif d.kind == "list":
                cur.extend(val)
            elif d.kind == "aggregating":
                entries[(key, self.window)] = d.agg_function.merge(cur, val)  # type: ignore[attr-defined]
            else:
                entries[(key, self.window)] = val


def _trigger_descriptor(d: StateDescriptor) -> StateDescriptor:
    """Trigger state lives in its own namespace of names (``trigger:<name>``)."""
    if d.name.startswith("trigger:"):
        return d
    c = copy.copy(d)
    c.name = "trigger:" + d.name
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

    def window_state(self) -> "_StateStore":
        window = self.window_
        return _StateStore(self.op, lambda: window, "window:")

    def global_state(self) -> "_StateStore":
        return _StateStore(self.op, lambda: None, "")

    def output(self, output_tag: Any, value: Any) -> None:
        raise NotImplementedError("use `yield output_tag, value` for side outputs")


class _StateStore:
    def __init__(self, op: WindowOperator, namespace_of: Callable[[], Any], prefix: str):
        self.op, self.namespace_of, self.prefix = op, namespace_of, prefix

    def _state(self, descriptor: StateDescriptor) -> Any:
        d = copy.copy(descriptor)
        d.name = self.prefix + descriptor.name
        return self.op.keyed_backend.create_state(d, self.namespace_of)

    get_state = get_list_state = get_map_state = get_reducing_state = get_aggregating_state = _state

