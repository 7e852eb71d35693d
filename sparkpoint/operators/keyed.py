"""Keyed runtime operators: keyed state, timers, and the keyed process/reduce operators.

A keyed operator owns a key-group range and a keyed backend for it, built by the job's
:class:`~sparkpoint.state.backend.StateBackend`. Its keyed state (including timers) is
snapshotted per key group at the end of every task and restored at the start of the
next, from the executor's local disk (see :mod:`sparkpoint.state.local_store`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from sparkpoint.common.ownership import own
from sparkpoint.common.watermark_strategy import MAX_WATERMARK
from sparkpoint.datastream.functions import KeySelector, bound_call
from sparkpoint.datastream.state import ValueStateDescriptor
from sparkpoint.datastream.time_domain import TimeDomain
from sparkpoint.errors import StateError, StateMigrationError, null_reduce_message
from sparkpoint.operators.base import (
    IDLE,
    Output,
    StreamOperator,
    TaskContext,
    first_failing,
    first_out_of_range,
    out_of_range_error,
)
from sparkpoint.state.backend import KeyedStateBackend, StateBackend
from sparkpoint.state.backend_loader import load_state_backend
from sparkpoint.state.key_groups import KeyGroupRange, key_kind
from sparkpoint.state.key_hash import KeyHash
from sparkpoint.state.schema import OperatorSchema, key_refusal
from sparkpoint.state.snapshot import KeyedStateSnapshot
from sparkpoint.time.timers import EVENT_TIME, PROCESSING_TIME, InternalTimerService

__all__ = ["TimeDomain", "KeyedOperator", "KeyedProcessOperator", "StreamGroupedReduceOperator"]


class KeyedOperator(StreamOperator):
    """Base of operators on a keyed stream: a key selector, keyed state, timers."""

    keyed = True

    def __init__(self, uid: str, name: str, function: Any, key_selector: KeySelector):
        super().__init__(uid, name, function)
        self.key_selector = key_selector
        self.keyed_backend: KeyedStateBackend = None  # type: ignore[assignment]
        self.timers: InternalTimerService = None  # type: ignore[assignment]
        self.key_kinds: frozenset | None = None  # of the keys of this task's first keyed batch
        self.expected_key_kinds: tuple[str, ...] = ()  # the restored state's keys, checked on the first batch

    def create_keyed_backend(
        self,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
        state_backend: StateBackend | None = None,
        key_hash: KeyHash | None = None,
        **options: Any,
    ) -> None:
        """Build this operator's keyed backend (``state_backend``, default hashmap) and timer service, grouping
        keys by ``key_hash`` (default: pickled keys); ``options`` go to the backend (``working_dir`` of backends
        that keep working state)."""
        backend = state_backend if state_backend is not None else load_state_backend(None)
        self.keyed_backend = backend.create_keyed_backend(key_group_range, max_parallelism, **options)
        if key_hash is not None:
            self.keyed_backend.set_key_hash(key_hash)
        self.timers = InternalTimerService(
            {domain: self.keyed_backend.get_timer_queue(domain) for domain in (EVENT_TIME, PROCESSING_TIME)}
        )

    def setup(self, task: TaskContext, operator_state: dict | None) -> None:
        super().setup(task, operator_state)
        self.timers.current_processing_time = task.processing_time
        self.keyed_backend.set_current_processing_time(task.processing_time)

    # keyed snapshot ---------------------------------------------------------------------
    def snapshot_keyed_state(self) -> KeyedStateSnapshot:
        return self.keyed_backend.snapshot(watermark=self.watermark)

    def resume_keyed_state(self, epoch: int) -> None:
        """Continue from the working state the backend committed at the end of ``epoch``."""
        self.keyed_backend.resume(epoch)
        self.advance_watermark(self.keyed_backend.committed_watermark())

    def commit_keyed_state(self, epoch: int) -> int:
        """Make this epoch's state changes (and watermark) the backend's working state."""
        return self.keyed_backend.commit(epoch, self.watermark)

    def advance_watermark(self, watermark: int | None) -> None:
        """Take the watermark restored state was saved at (its timers are judged against it)."""
        if watermark is not None:
            self.watermark = max(self.watermark, watermark)
        self.timers.current_watermark = self.watermark

    def restore_watermark(self, watermark: int | None) -> None:
        """Take the watermark of a checkpoint or savepoint this operator restores, unless it is the end of event
        time: a drained stop's savepoint holds +inf, and a job restored from it starts event time anew (as Flink,
        which keeps no watermark in a snapshot); kept, it would drop every record the new run reads as late."""
        if watermark != MAX_WATERMARK:
            self.advance_watermark(watermark)

    def restore_keyed_state(self, snapshot: KeyedStateSnapshot) -> None:
        self.keyed_backend.restore([snapshot])
        self.restore_watermark(snapshot.watermark)

    # state schema -----------------------------------------------------------------------
    def expect_schema(self, schema: OperatorSchema | None, key_kinds: tuple[str, ...] = ()) -> None:
        """Check the states this operator declares against ``schema`` (what its restored state recorded), and
        the keys of its first batch against ``key_kinds``."""
        if schema is not None:
            self.keyed_backend.schema.expect(f"operator {self.name!r} (uid {self.uid!r})", dict(schema.states))
        self.expected_key_kinds = tuple(key_kinds)

    def state_schema(self) -> OperatorSchema:
        """The states declared in this task and the kinds of the keys it saw."""
        return OperatorSchema(self.keyed_backend.declared_schema(), tuple(sorted(self.key_kinds or ())))

    def _sample_keys(self, keys: list) -> None:
        """Step 1 of a restore's key check: keys of other kinds than the checkpoint's cannot find their state
        (their bytes, and so their key groups and entries, differ)."""
        self.key_kinds = frozenset(map(key_kind, keys[:1000])) - {"None"}
        old = set(self.expected_key_kinds)
        if old and self.key_kinds and not old & self.key_kinds:
            raise StateMigrationError(
                key_refusal(
                    f"operator {self.name!r} (uid {self.uid!r})",
                    old,
                    self.key_kinds,
                    f"the key selector's, first key {keys[0]!r}",
                )
            )

    # keys -------------------------------------------------------------------------------
    def keys_of(self, values: list, key_selector: KeySelector | None = None) -> list:
        get_key = bound_call(key_selector or self.key_selector, "get_key")
        try:
            keys = [get_key(v) for v in values]
        except Exception as e:
            raise StateError(
                f"key selector of operator {self.name!r} (uid {self.uid!r}) failed on record "
                f"{first_failing(get_key, values)!r}: {type(e).__name__}: {e}"
            ) from e
        if self.key_kinds is None and keys:
            self._sample_keys(keys)
        return keys

    def prefetched(self, keys: list, values: list, timestamps: list) -> Iterator[Iterator[tuple]]:
        """The records as ``(value, timestamp, key)`` in slices whose keys' state the backend read together
        (:meth:`KeyedStateBackend.prefetch`, at most ``prefetch_limit()`` records a slice)."""
        step = self.keyed_backend.prefetch_limit()
        for lo in range(0, len(values), step):
            hi = lo + step
            self.keyed_backend.prefetch(keys[lo:hi])
            yield zip(values[lo:hi], timestamps[lo:hi], keys[lo:hi])

    def set_key(self, key: Any, kg: int | None = None) -> None:
        self.keyed_backend.set_current_key(key, kg)

    def fire_timers(self, domain: str, until: int, on_timer: Callable[[int, Any, Any], None]) -> None:
        def fire(ts: int, key: Any, ns: Any, kg: int) -> None:
            self.keyed_backend.set_current_key(key, kg)
            on_timer(ts, key, ns)

        self.timers.advance(domain, until, fire)


class _KeyedTimerService:
    def __init__(self, op: KeyedOperator):
        self.op = op

    def current_processing_time(self) -> int:
        return self.op.task.processing_time

    def current_watermark(self) -> int:
        return self.op.watermark

    def _reg(self, domain: str, ts: int) -> None:
        if first_out_of_range([ts]) is not None:  # it would never fire: no watermark passes Long.MAX_VALUE
            raise out_of_range_error(ts, "a timer was registered for")
        b = self.op.keyed_backend
        self.op.timers.register(domain, ts, b.current_key, None, b.current_key_group)

    def register_event_time_timer(self, timestamp: int) -> None:
        self._reg(EVENT_TIME, timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._reg(PROCESSING_TIME, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self.op.timers.delete(EVENT_TIME, timestamp, self.op.keyed_backend.current_key, None)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self.op.timers.delete(PROCESSING_TIME, timestamp, self.op.keyed_backend.current_key, None)


class _KeyedContext:
    def __init__(self, op: KeyedOperator):
        self.op = op
        self.ts: int | None = None
        self.domain: TimeDomain | None = None
        self._timer_service = _KeyedTimerService(op)

    def get_current_key(self) -> Any:
        return self.op.keyed_backend.current_key

    def timer_service(self) -> _KeyedTimerService:
        return self._timer_service

    def timestamp(self) -> int | None:
        return self.ts

    def time_domain(self) -> TimeDomain | None:
        return self.domain


class KeyedProcessOperator(KeyedOperator):
    """A ``KeyedProcessFunction``: per-record processing with keyed state and timers."""

    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        self.process_keyed(self.function.process_element, self.keys_of(values), values, timestamps, out)  # type: ignore[union-attr]

    def process_keyed(self, method: Callable, keys: list, values: list, timestamps: list, out: Output) -> None:
        """``method(record, context)`` for every record, its key current (the keys' entries read together)."""
        ctx = self._context()
        set_key = self.keyed_backend.set_current_key
        for records in self.prefetched(keys, values, timestamps):  # the prefetch's errors name no record
            v = None
            try:
                for v, t, k in records:
                    set_key(k)
                    ctx.ts = t
                    out.emit_all(method(v, ctx), t)
            except Exception as e:
                raise self.fail(v, e) from e

    def _context(self) -> _KeyedContext:
        return _KeyedContext(self)

    def _on_timer(self, domain: TimeDomain, out: Output) -> Callable[[int, Any, Any], None]:
        ctx = self._context()
        ctx.domain = domain
        on_timer = self.function.on_timer  # type: ignore[union-attr]

        def fire(ts: int, key: Any, ns: Any) -> None:
            ctx.ts = ts
            try:
                out.emit_all(on_timer(ts, ctx), ts)
            except Exception as e:
                raise self.fail(f"<timer {ts} of key {key!r}>", e) from e

        return fire

    def process_watermark(self, watermark: int | None, out: Output) -> int | None:
        if watermark is not IDLE and watermark > self.watermark:
            self.watermark = watermark
            self.fire_timers(EVENT_TIME, watermark, self._on_timer(TimeDomain.EVENT_TIME, out))
        return watermark

    def process_processing_time(self, now: int, out: Output) -> None:
        self.fire_timers(PROCESSING_TIME, now, self._on_timer(TimeDomain.PROCESSING_TIME, out))


def null_reduce_result(op: StreamOperator, key: Any) -> str:
    """What a reduce function that returned None is told (in Flink, a null result fails in its serializer)."""
    return null_reduce_message(f"operator {op.name!r} (uid {op.uid!r})", key)


class StreamGroupedReduceOperator(KeyedOperator):
    """``KeyedStream.reduce`` / ``sum`` / ``min`` / ``max``: emits the running result per record."""

    STATE = ValueStateDescriptor("_reduce_state")

    def open(self) -> None:
        super().open()
        self.state = self.keyed_backend.get_partitioned_state(None, self.STATE)

    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        reduce = self.function.reduce  # type: ignore[union-attr]
        mine = _same if getattr(self.function, "keeps_its_arguments", False) else own
        set_key = self.keyed_backend.set_current_key
        state = self.state
        for records in self.prefetched(self.keys_of(values), values, timestamps):
            v = None
            try:
                for v, t, k in records:
                    set_key(k)
                    cur = state.value()
                    new = v if cur is None else reduce(mine(cur), v)  # the results emitted before stay as they were
                    if new is None:  # it would read as empty: the value would start over from the next record
                        raise TypeError(null_reduce_result(self, k))
                    state.update(new)
                    out.collect(new, t)
            except Exception as e:
                raise self.fail(v, e) from e


def _same(value: Any) -> Any:
    return value
