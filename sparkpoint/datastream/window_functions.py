"""Functions that evaluate a whole window, as in ``pyflink.datastream.functions`` (re-exported from there).

``WindowedStream.process`` takes a ``ProcessWindowFunction``, ``WindowedStream.apply`` a
``WindowFunction``; the ``All`` variants do the same for ``window_all``. After a ``reduce`` or
``aggregate`` they receive the single pre-aggregated value as the window's elements.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from sparkpoint.datastream.functions import Function

__all__ = ["ProcessWindowFunction", "ProcessAllWindowFunction", "WindowFunction", "AllWindowFunction"]

# Type variables of the generic function classes, as PyFlink declares them, so that
# ``class F(ProcessWindowFunction[tuple, tuple, str, TimeWindow])`` works unchanged.
W = TypeVar("W")
W2 = TypeVar("W2")
IN = TypeVar("IN")
OUT = TypeVar("OUT")
KEY = TypeVar("KEY")


class ProcessWindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """Evaluates a whole window: ``process(key, context, elements)``."""

    class Context(abc.ABC, Generic[W2]):
        """What ``process`` can ask about the window being evaluated."""

        @abc.abstractmethod
        def window(self) -> Any:
            """Returns the window being evaluated (a ``TimeWindow`` or ``CountWindow``)."""

        @abc.abstractmethod
        def current_processing_time(self) -> int:
            """Returns the current processing time in epoch milliseconds."""

        @abc.abstractmethod
        def current_watermark(self) -> int:
            """Returns the current event-time watermark in epoch milliseconds."""

        @abc.abstractmethod
        def window_state(self) -> Any:
            """Returns a ``KeyedStateStore`` whose state is scoped to this key and window (cleared by ``clear``)."""

        @abc.abstractmethod
        def global_state(self) -> Any:
            """Returns a ``KeyedStateStore`` whose state is scoped to this key, across windows."""

    @abc.abstractmethod
    def process(self, key: Any, context: ProcessWindowFunction.Context, elements: Iterable) -> Iterable:
        """Evaluates one window of one key; returns or yields the results.

        Args:
            key: The key.
            context: The window's context: the window, clocks and per-window state.
            elements: The window's records (or the single pre-aggregated value after ``reduce``/``aggregate``).
        """

    def clear(self, context: ProcessWindowFunction.Context) -> None:
        """Called when a window is purged, to clear per-window state kept in ``context.window_state()``.

        Args:
            context: The context of the window being purged.
        """
        pass


class ProcessAllWindowFunction(Function, Generic[IN, OUT, W]):
    """Evaluates a whole window of a non-keyed stream: ``process(context, elements)``."""

    Context = ProcessWindowFunction.Context

    @abc.abstractmethod
    def process(self, context: ProcessWindowFunction.Context, elements: Iterable) -> Iterable:
        """Evaluates one window of the whole stream; returns or yields the results.

        Args:
            context: The window's context: the window, clocks and per-window state.
            elements: The window's records (or the single pre-aggregated value after ``reduce``/``aggregate``).
        """

    def clear(self, context: ProcessWindowFunction.Context) -> None:
        """Called when a window is purged, to clear per-window state.

        Args:
            context: The context of the window being purged.
        """
        pass


class WindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """Evaluates a whole window of a key from the window itself (``WindowedStream.apply``)."""

    @abc.abstractmethod
    def apply(self, key: Any, window: Any, inputs: Iterable) -> Iterable:
        """Evaluates one window of one key; returns or yields the results.

        Args:
            key: The key.
            window: The window (a ``TimeWindow`` or ``CountWindow``).
            inputs: The window's records.
        """


class AllWindowFunction(Function, Generic[IN, OUT, W]):
    """Evaluates a whole window of a non-keyed stream from the window itself (``AllWindowedStream.apply``)."""

    @abc.abstractmethod
    def apply(self, window: Any, inputs: Iterable) -> Iterable:
        """Evaluates one window; returns or yields the results.

        Args:
            window: The window.
            inputs: The window's records.
        """
