"""``KeyedStream``: a stream partitioned by key, as in ``pyflink.datastream.data_stream`` (re-exported from there).

Its operators see keyed state and timers of the current record's key; its rolling aggregations
(``reduce``, ``sum``, ``min``, ...) and windows are per key.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

from sparkpoint.datastream.data_stream import DataStream
from sparkpoint.datastream.functions import (
    FilterFunction,
    FilterFunctionWrapper,
    FlatMapFunction,
    FlatMapFunctionWrapper,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    MapFunctionWrapper,
    ProcessFunction,
    ReduceFunction,
    ReduceFunctionWrapper,
    as_function,
)
from sparkpoint.datastream.transformations import KeyedTransformation, Partitioning, TransformationInput
from sparkpoint.datastream.window import CountSlidingWindowAssigner, CountTumblingWindowAssigner, WindowAssigner
from sparkpoint.datastream.windowed_stream import WindowedStream
from sparkpoint.errors import JobGraphError

__all__ = ["KeyedStream"]


class _KeyedRecordRow(MapFunction):
    def __init__(self, key_selector: KeySelector, key_typed: bool, record_typed: bool):
        self.key_selector, self.key_typed, self.record_typed = key_selector, key_typed, record_typed

    def map(self, value: Any) -> Any:
        from sparkpoint.common.types import Row

        key = self.key_selector.get_key(value)
        return Row(
            f0=key if self.key_typed else bytearray(pickle.dumps(key, 5)),
            f1=value if self.record_typed else bytearray(pickle.dumps(value, 5)),
        )


class KeyedStream(DataStream):
    """A stream partitioned by key: state and timers are per key."""

    def __init__(self, stream: DataStream, key_selector: KeySelector, key_type: Any = None):
        super().__init__(stream._env, stream._id, stream._type_info)
        self._key_selector = key_selector
        self._key_type = key_type

    def _keyed(self, operation: str, name: str, function: Any, output_type: Any = None) -> DataStream:
        tid = self._env._add_transformation(
            KeyedTransformation,
            name,
            [TransformationInput(self._id, Partitioning.HASH, self._key_selector, key_type=self._key_type)],
            operation=operation,
            function=function,
            key_selector=self._key_selector,
            output_type=output_type,
        )
        return DataStream(self._env, tid, output_type)

    def process(self, func: KeyedProcessFunction | ProcessFunction, output_type: Any = None) -> DataStream:
        """Applies a ``KeyedProcessFunction``: per record, with keyed state and timers of the record's key.

        Args:
            func: A ``KeyedProcessFunction`` (a ``ProcessFunction`` is accepted as in PyFlink).
            output_type: The type information of the results, or ``None``.
        """
        return self._keyed("keyed_process", "KeyedProcess", func, output_type)

    def map(self, func: Callable | MapFunction, output_type: Any = None) -> DataStream:
        """Applies a function to every record, with keyed state of the record's key in its runtime context.

        Args:
            func: A ``MapFunction`` or a plain callable.
            output_type: The type information of the results, or ``None``.
        """
        return self._keyed("map", "Map", as_function(func, MapFunction, MapFunctionWrapper), output_type)

    def flat_map(self, func: Callable | FlatMapFunction, output_type: Any = None) -> DataStream:
        """Applies a function that yields zero or more records per record, with keyed state.

        Args:
            func: A ``FlatMapFunction`` or a plain callable returning an iterable.
            output_type: The type information of the results, or ``None``.
        """
        return self._keyed(
            "flat_map", "FlatMap", as_function(func, FlatMapFunction, FlatMapFunctionWrapper), output_type
        )

    def filter(self, func: Callable | FilterFunction) -> DataStream:
        """Keeps the records for which a predicate is true, with keyed state in the runtime context.

        Args:
            func: A ``FilterFunction`` or a plain callable returning a truth value.
        """
        return self._keyed(
            "filter", "Filter", as_function(func, FilterFunction, FilterFunctionWrapper), self._type_info
        )

    def reduce(self, func: Callable | ReduceFunction) -> DataStream:
        """A rolling reduce per key (in ``RuntimeExecutionMode.BATCH``: only the final value per key)."""
        fn = as_function(func, ReduceFunction, ReduceFunctionWrapper)
        return self._keyed("reduce", "Keyed Reduce", fn, self._type_info)

    def _aggregate(self, name: str, position: int | str, how: str, by: bool = False) -> DataStream:
        return self.reduce(_FieldAggregator(position, how, by)).name(name)

    def sum(self, position_to_sum: int | str = 0) -> DataStream:
        """A rolling sum per key of one field (the whole record, if it is a number).

        Args:
            position_to_sum: The field's index, or its name for ``Row``s and dicts.

        Returns:
            The first record of the key with that field replaced by the running sum, after every record.
        """
        return self._aggregate("Keyed Sum", position_to_sum, "sum")

    def min(self, position_to_min: int | str = 0) -> DataStream:
        """A rolling minimum per key of one field.

        Args:
            position_to_min: The field's index, or its name.

        Returns:
            The key's first record with that field replaced by the running minimum.
        """
        return self._aggregate("Keyed Min", position_to_min, "min")

    def max(self, position_to_max: int | str = 0) -> DataStream:
        """A rolling maximum per key of one field.

        Args:
            position_to_max: The field's index, or its name.

        Returns:
            The key's first record with that field replaced by the running maximum.
        """
        return self._aggregate("Keyed Max", position_to_max, "max")

    def min_by(self, position_to_min_by: int | str = 0) -> DataStream:
        """Per key, the record with the smallest value in one field so far (the earlier one on ties).

        Args:
            position_to_min_by: The field's index, or its name.
        """
        return self._aggregate("Keyed MinBy", position_to_min_by, "min", by=True)

    def max_by(self, position_to_max_by: int | str = 0) -> DataStream:
        """Per key, the record with the largest value in one field so far (the earlier one on ties).

        Args:
            position_to_max_by: The field's index, or its name.
        """
        return self._aggregate("Keyed MaxBy", position_to_max_by, "max", by=True)

    def window(self, window_assigner: WindowAssigner) -> WindowedStream:
        """Windows each key's records.

        Args:
            window_assigner: The ``WindowAssigner`` (tumbling, sliding, session, global or count windows).

        Returns:
            A ``WindowedStream`` to set a trigger, evictor and lateness on and to aggregate.
        """
        return WindowedStream(self, window_assigner)

    def count_window(self, size: int, slide: int = 0) -> WindowedStream:
        """Windows each key's records into windows of ``size`` records.

        Args:
            size: The number of records per window.
            slide: If not 0, a window of ``size`` records starts every ``slide`` records.

        Note:
            As PyFlink's Python count assigners (a key's n-th record goes to ``CountWindow(n // size)``),
            not Java Flink's. A window is purged once it fired (PyFlink keeps it).
        """
        assigner = CountSlidingWindowAssigner.of(size, slide) if slide else CountTumblingWindowAssigner.of(size)
        return WindowedStream(self, assigner)

    def key_by(self, key_selector: Any, key_type: Any = None) -> KeyedStream:
        """Re-partitions the records by another key (the current key is dropped).

        Args:
            key_selector: A ``KeySelector``, a plain callable or a field position.
            key_type: The new key's type information, or ``None``.
        """
        return DataStream(self._env, self._id, self._type_info).key_by(key_selector, key_type)

    def union(self, *streams: DataStream) -> DataStream:
        """Not defined on a keyed stream.

        Raises:
            JobGraphError: Always; union the streams before ``key_by()``.
        """
        raise JobGraphError("union() is not defined on a KeyedStream; union before key_by()")

    def execute_and_collect(self, job_execution_name: str | None = None, limit: int | None = None) -> Any:
        """As PyFlink, where a keyed stream is internally ``Row(key, record)``: each record comes back as
        ``Row(f0=key, f1=record)``, the key (and the record) as pickled bytes when no type was declared."""
        rows = DataStream(self._env, self._id, self._type_info).map(
            _KeyedRecordRow(self._key_selector, self._key_type is not None, self._type_info is not None)
        )
        return rows.execute_and_collect(job_execution_name, limit)


class _FieldAggregator(ReduceFunction):
    """Flink's SumAggregator / ComparableAggregator over a field of tuples, Rows, lists or scalars."""

    keeps_its_arguments = True  # returns a new value or one of its arguments unchanged: none is copied for it

    def __init__(self, position: int | str, how: str, by: bool):
        self.position, self.how, self.by = position, how, by

    @staticmethod
    def _whole(v: Any) -> bool:
        """Whether a record is one value, aggregated whole (as PyFlink's: anything but a tuple, Row or list, and a
        dict here, whose field is its key; a ``str`` too, not its first character)."""
        return not isinstance(v, (tuple, list, dict))

    def _get(self, v: Any) -> Any:
        return v if self._whole(v) else v[self.position]

    def _with(self, v: Any, field: Any) -> Any:
        if self._whole(v):
            return field
        from sparkpoint.common.types import Row

        if isinstance(v, Row):
            vals = list(v)
            idx = v._fields.index(self.position) if isinstance(self.position, str) and v._fields else self.position
            vals[int(idx)] = field
            r = Row(*vals)
            r._fields = v._fields
            r.set_row_kind(v.get_row_kind())  # PyFlink changes the row in place: its kind stays
            return r
        if isinstance(v, tuple):
            vals = list(v)
            vals[int(self.position)] = field
            return tuple(vals)
        if isinstance(v, list):
            vals = list(v)
            vals[int(self.position)] = field
            return vals
        if isinstance(v, dict):
            d = dict(v)
            d[self.position] = field
            return d
        raise TypeError(f"cannot aggregate field {self.position!r} of {type(v).__name__}")

    def reduce(self, value1: Any, value2: Any) -> Any:
        a, b = self._get(value1), self._get(value2)
        if self.how == "sum":
            return self._with(value1, a + b)
        better = (b < a) if self.how == "min" else (b > a)
        if self.by:
            return value2 if better else value1
        return self._with(value1, b if better else a)
