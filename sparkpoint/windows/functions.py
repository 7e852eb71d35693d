"""Internal window functions: how a window's contents become output.

Every user-facing form (``reduce``, ``aggregate``, ``process``, ``apply``, with or
without a window function, keyed or all-windows) becomes one ``InternalWindowFunction``
whose ``process(key, window, ctx, contents)`` returns an iterable of results.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.common.ownership import own
from sparkpoint.errors import null_reduce_message

__all__ = [
    "InternalWindowFunction",
    "PassThroughWindowFunction",
    "ProcessWindowAdapter",
    "ProcessAllWindowAdapter",
    "ApplyWindowAdapter",
    "ApplyAllWindowAdapter",
    "AggregateResultAdapter",
    "EvictingWindowFunction",
]


class InternalWindowFunction:
    function: Any = None

    def open(self, runtime_context: Any) -> None:
        if self.function is not None and hasattr(self.function, "open"):
            self.function.open(runtime_context)

    def close(self) -> None:
        if self.function is not None and hasattr(self.function, "close"):
            self.function.close()

    def process(self, key: Any, window: Any, ctx: Any, contents: Iterable) -> Iterable:
        raise NotImplementedError

    def clear(self, ctx: Any) -> None:
        if self.function is not None and hasattr(self.function, "clear"):
            self.function.clear(ctx)


class PassThroughWindowFunction(InternalWindowFunction):
    """Emits the contents as they are (``reduce`` without a window function)."""

    def process(self, key: Any, window: Any, ctx: Any, contents: Iterable) -> Iterable:
        return contents


class AggregateResultAdapter(InternalWindowFunction):
    """Turns the accumulator into the result, then hands it to an optional inner function."""

    def __init__(self, agg: Any, inner: InternalWindowFunction):
        self.agg, self.inner, self.function = agg, inner, None

    def open(self, runtime_context: Any) -> None:
        self.inner.open(runtime_context)

    def close(self) -> None:
        self.inner.close()

    def process(self, key: Any, window: Any, ctx: Any, contents: Iterable) -> Iterable:
        return self.inner.process(key, window, ctx, [self.agg.get_result(acc) for acc in contents])

    def clear(self, ctx: Any) -> None:
        self.inner.clear(ctx)


class ProcessWindowAdapter(InternalWindowFunction):
    def __init__(self, function: Any):
        self.function = function

    def process(self, key: Any, window: Any, ctx: Any, contents: Iterable) -> Iterable:
        return self.function.process(key, ctx, contents)


class ProcessAllWindowAdapter(InternalWindowFunction):
    def __init__(self, function: Any):
        self.function = function

    def process(self, key: Any, window: Any, ctx: Any, contents: Iterable) -> Iterable:
        return self.function.process(ctx, contents)


class ApplyWindowAdapter(InternalWindowFunction):
    def __init__(self, function: Any):
        self.function = function

    def process(self, key: Any, window: Any, ctx: Any, contents: Iterable) -> Iterable:
        apply = self.function.apply if hasattr(self.function, "apply") else self.function
        return apply(key, window, contents)


class ApplyAllWindowAdapter(InternalWindowFunction):
    def __init__(self, function: Any):
        self.function = function

    def process(self, key: Any, window: Any, ctx: Any, contents: Iterable) -> Iterable:
        apply = self.function.apply if hasattr(self.function, "apply") else self.function
        return apply(window, contents)


class EvictingWindowFunction(InternalWindowFunction):
    """With an evictor, reduce/aggregate are applied to the (evicted) elements at fire time."""

    def __init__(self, inner: InternalWindowFunction, reduce_function: Any, aggregate_function: Any):
        self.inner, self.reduce_function, self.aggregate_function = inner, reduce_function, aggregate_function
        self.function = getattr(inner, "function", None)

    def open(self, runtime_context: Any) -> None:
        self.inner.open(runtime_context)

    def close(self) -> None:
        self.inner.close()

    def clear(self, ctx: Any) -> None:
        self.inner.clear(ctx)

    def process(self, key: Any, window: Any, ctx: Any, contents: Iterable) -> Iterable:
        items = list(contents)
        if self.reduce_function is not None and items:
            acc = own(items[0])  # the list state's element, which every window the record is in holds
            for v in items[1:]:
                acc = self.reduce_function.reduce(acc, v)
                if acc is None:
                    raise TypeError(null_reduce_message(f"the window reduce (window {window!r})", key))
            items = [acc]
        elif self.aggregate_function is not None:
            agg = self.aggregate_function
            acc = agg.create_accumulator()
            for v in items:
                acc = agg.add(v, acc)
            items = [acc]
        return self.inner.process(key, window, ctx, items)
