"""Window evictors, as in ``pyflink.datastream.window``: which elements a firing window keeps.

Re-exported by :mod:`sparkpoint.datastream.window`, where PyFlink has them.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from sparkpoint.common.time import Time, to_millis

if TYPE_CHECKING:
    from sparkpoint.datastream.window import Window

__all__ = ["Evictor", "CountEvictor", "TimeEvictor"]


class Evictor(abc.ABC):
    """Removes elements from a window's contents before and/or after the function runs."""

    @abc.abstractmethod
    def evict_before(self, elements: list, size: int, window: Window, ctx: Any) -> list:
        """Returns the elements kept before the window function runs.

        Args:
            elements: The window's elements as ``(record, timestamp)`` pairs, oldest first.
            size: The number of elements.
            window: The window.
            ctx: The evictor's context.
        """

    @abc.abstractmethod
    def evict_after(self, elements: list, size: int, window: Window, ctx: Any) -> list:
        """Returns the elements kept after the window function ran.

        Args:
            elements: The window's elements as ``(record, timestamp)`` pairs, oldest first.
            size: The number of elements.
            window: The window.
            ctx: The evictor's context.
        """


class CountEvictor(Evictor):
    """Keeps at most ``max_count`` elements (the most recent ones)."""

    def __init__(self, max_count: int, do_evict_after: bool = False):
        self.max_count, self.do_evict_after = max_count, do_evict_after

    @staticmethod
    def of(max_count: int, do_evict_after: bool = False) -> CountEvictor:
        """Returns a count evictor.

        Args:
            max_count: How many elements to keep.
            do_evict_after: Evict after the window function instead of before it.
        """
        return CountEvictor(max_count, do_evict_after)

    def _evict(self, elements: list) -> list:
        return elements[-self.max_count :] if len(elements) > self.max_count else elements

    def evict_before(self, elements: list, size: int, window: Window, ctx: Any) -> list:
        """Keeps the ``max_count`` newest elements, unless eviction is after the function."""
        return elements if self.do_evict_after else self._evict(elements)

    def evict_after(self, elements: list, size: int, window: Window, ctx: Any) -> list:
        """Keeps the ``max_count`` newest elements, if eviction is after the function."""
        return self._evict(elements) if self.do_evict_after else elements


class TimeEvictor(Evictor):
    """Keeps elements whose timestamp is within ``window_size`` of the newest element."""

    def __init__(self, window_size: int, do_evict_after: bool = False):
        self.window_size, self.do_evict_after = window_size, do_evict_after

    @staticmethod
    def of(window_size: Time | int, do_evict_after: bool = False) -> TimeEvictor:
        """Returns a time evictor.

        Args:
            window_size: How far behind the newest element's timestamp elements are kept (``Time`` or milliseconds).
            do_evict_after: Evict after the window function instead of before it.
        """
        return TimeEvictor(to_millis(window_size), do_evict_after)

    def _evict(self, elements: list) -> list:
        stamped = [e for e in elements if e[1] is not None]
        if not stamped:
            return elements
        newest = max(ts for _, ts in stamped)
        return [e for e in elements if e[1] is None or e[1] > newest - self.window_size]

    def evict_before(self, elements: list, size: int, window: Window, ctx: Any) -> list:
        """Drops elements older than ``window_size`` behind the newest, unless eviction is after the function."""
        return elements if self.do_evict_after else self._evict(elements)

    def evict_after(self, elements: list, size: int, window: Window, ctx: Any) -> list:
        """Drops elements older than ``window_size`` behind the newest, if eviction is after the function."""
        return self._evict(elements) if self.do_evict_after else elements
