"""What a window holds between firings: its contents, as a strategy of the window operator.

Flink's ``WindowOperator`` keeps a window's contents in one ``InternalAppendingState`` whose kind follows
from the window function: a list of the elements (``process``, ``apply``), a reducing state (``reduce``),
an aggregating state (``aggregate``); with an evictor (``EvictingWindowOperator``), the elements with
their timestamps, and the reduce or aggregate runs at firing time. Each :class:`WindowContents` here is
one of these: it names the state, and knows how an element goes in, how a locally aggregated partial
merges in, how the contents are read and what the window function gets of them when the window fires.
The operator calls them through the state API only, with the window as the state's namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sparkpoint.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
)

__all__ = ["AggregatedContents", "ElementContents", "EvictingContents", "ReducedContents", "WindowContents"]

CONTENTS_STATE = "window-contents"


class WindowContents:
    """What a window holds between firings (one of the kinds below)."""

    def descriptor(self) -> StateDescriptor:
        """The state the contents live in (one per operator; the namespace is the window)."""
        raise NotImplementedError

    def add_all(self, state: Any, values: list) -> None:
        """Add elements, in their order (the batched paths)."""
        state.add_all(values)

    def add_run(self, state: Any, values: Sequence, timestamps: Sequence) -> None:
        """Add elements with their timestamps, in their order, as one by one would (their timestamps unkept)."""
        self.add_all(state, list(values))

    def merge_partial(self, state: Any, value: Any) -> None:
        """Merge a locally aggregated partial (a reduced value or an accumulator) into the contents."""
        raise TypeError(f"{type(self).__name__} takes no partials: only reduce and aggregate windows do")

    def read(self, state: Any) -> Any:
        """The contents of ``state``'s current window; ``None`` if it holds nothing (nothing to fire)."""
        raise NotImplementedError

    def fire(
        self, state: Any, state_window: Any, contents: Any, window: Any, ctx: Any, function: Callable[[list], None]
    ) -> None:
        """Hand the window function (``function``) its input of a firing of ``window``, whose ``contents`` are
        kept in ``state`` under ``state_window``."""
        raise NotImplementedError


class ElementContents(WindowContents):
    """The elements of the window, in arrival order (``process``, ``apply``; a ``ListState``)."""

    def descriptor(self) -> StateDescriptor:
        return ListStateDescriptor(CONTENTS_STATE)

    def read(self, state: Any) -> Any:
        return state.get() or None

    def fire(
        self, state: Any, state_window: Any, contents: Any, window: Any, ctx: Any, function: Callable[[list], None]
    ) -> None:
        function(list(contents))


class ReducedContents(WindowContents):
    """The elements reduced to one value as they arrive (``reduce``; a ``ReducingState``)."""

    def __init__(self, reduce_function: Any):
        self.reduce_function = reduce_function

    def descriptor(self) -> StateDescriptor:
        return ReducingStateDescriptor(CONTENTS_STATE, self.reduce_function)

    def merge_partial(self, state: Any, value: Any) -> None:
        state.add(value)  # a partial is a reduced value: reducing it in is merging it

    def read(self, state: Any) -> Any:
        return state.get()

    def fire(
        self, state: Any, state_window: Any, contents: Any, window: Any, ctx: Any, function: Callable[[list], None]
    ) -> None:
        function([contents])


class AggregatedContents(WindowContents):
    """The elements added to an accumulator as they arrive (``aggregate``; an ``AggregatingState``). The window
    function gets the accumulator; the internal window function turns it into the result."""

    def __init__(self, aggregate_function: Any):
        self.aggregate_function = aggregate_function

    def descriptor(self) -> StateDescriptor:
        return AggregatingStateDescriptor(CONTENTS_STATE, self.aggregate_function)

    def merge_partial(self, state: Any, value: Any) -> None:
        acc = state.get_accumulator()
        state.set_accumulator(value if acc is None else self.aggregate_function.merge(acc, value))

    def read(self, state: Any) -> Any:
        return state.get_accumulator()

    def fire(
        self, state: Any, state_window: Any, contents: Any, window: Any, ctx: Any, function: Callable[[list], None]
    ) -> None:
        function([contents])


class EvictingContents(ElementContents):
    """The elements with their timestamps, for an evictor (Flink's ``EvictingWindowOperator``): at a firing the
    evictor removes elements before and after the window function, and the window keeps what it left; a
    ``reduce`` or ``aggregate`` runs over the elements at firing time (``EvictingWindowFunction``)."""

    def __init__(self, evictor: Any):
        self.evictor = evictor

    def add_all(self, state: Any, values: list) -> None:
        raise TypeError("an evictor needs each element's timestamp: elements go in one by one")

    def add_run(self, state: Any, values: Sequence, timestamps: Sequence) -> None:
        state.add_all(list(zip(values, timestamps)))

    def fire(
        self, state: Any, state_window: Any, contents: Any, window: Any, ctx: Any, function: Callable[[list], None]
    ) -> None:
        items = list(contents)
        items = self.evictor.evict_before(items, len(items), window, ctx)
        function([v for v, _ in items])
        kept = self.evictor.evict_after(items, len(items), window, ctx)
        state.set_current_namespace(state_window)  # the window keeps what the evictor left
        state.update(list(kept))
