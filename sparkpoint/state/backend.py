"""The state-backend seam: ``StateBackend`` builds a ``KeyedStateBackend`` per keyed operator and task.

As in Flink, a :class:`StateBackend` is a light factory (what the user configures, by
name); the :class:`KeyedStateBackend` it creates for a key-group range holds that
operator's working keyed state and timers, and snapshots and restores them per key group
as a :class:`~sparkpoint.state.snapshot.KeyedStateSnapshot`. Operators (windows
included) use only this API, so every backend runs every operator, and one conformance
suite (``tests/state/test_backend_conformance.py``) runs over every backend.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from sparkpoint.datastream.state import StateDescriptor
from sparkpoint.errors import StateError
from sparkpoint.state.handles import KeyedStateHandle
from sparkpoint.state.internal import STATE_KINDS, InternalKvState, UserFacingListState
from sparkpoint.state.key_groups import GENERATION, KeyGroupRange, shared_assigner
from sparkpoint.state.key_hash import KeyHash
from sparkpoint.state.migration import SchemaCheck
from sparkpoint.state.schema import StateSchema
from sparkpoint.state.snapshot import TIMERS, KeyedStateSnapshot, check_snapshot
from sparkpoint.state.timer_queue import KeyGroupedTimerQueue, SnapshottedTimerQueue
from sparkpoint.state.ttl import create_ttl_state

__all__ = ["KeyedStateBackend", "StateBackend"]


class StateBackend(abc.ABC):
    """Where working keyed state lives while a job runs: a factory of keyed backends."""

    #: The name in configuration (``state.backend.type``).
    name: str = ""
    #: True when keyed backends keep their working state between epochs themselves (a local
    #: database the next epoch opens again); False when the task saves a snapshot after each epoch.
    keeps_working_state: bool = False
    #: True when checkpoints upload only what changed since the last one (shared files).
    incremental: bool = False

    def configure(self, config: Mapping[str, Any]) -> StateBackend:
        """This backend with the options of the job's ``config`` applied (a copy when they change it)."""
        return self

    @abc.abstractmethod
    def create_keyed_backend(
        self, key_group_range: KeyGroupRange, max_parallelism: int, **options: Any
    ) -> KeyedStateBackend:
        """A keyed backend for one operator in one task, owning ``key_group_range``."""

    def read_handle(
        self, handle: KeyedStateHandle, key_groups: KeyGroupRange | None, max_parallelism: int
    ) -> dict[str, KeyedStateSnapshot]:
        """A checkpoint's ``handle`` in this backend's own format as snapshots of ``key_groups`` (all its key
        groups if ``None``), for any backend to restore."""
        raise StateError(f"{handle.what}: the {self.name} backend reads no files of format {handle.format!r}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class KeyedStateBackend(abc.ABC):
    """Keyed state and timers of one operator in one task's key-group range.

    The operator sets the current key before touching state; state objects
    (:meth:`get_partitioned_state`, :meth:`create_internal_state`) read and write that
    key's entry in their namespace. ``current_key`` and ``current_key_group`` may be read
    directly on hot paths.
    """

    backend_name = ""
    keeps_working_state = False
    working_dir = ""  # where a backend that keeps working state keeps it

    def __init__(self, key_group_range: KeyGroupRange, max_parallelism: int):
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self.assign_key_group = shared_assigner(max_parallelism)
        self.state_kinds: dict[str, str] = {}
        self.timer_queues: dict[str, SnapshottedTimerQueue] = {}
        self.current_key: Any = None
        self.current_key_group: int = -1
        self.current_processing_time = 0  # ms; the clock of state time-to-live
        # the range's bounds, compared inline on every record (KeyGroupRange.__contains__ is a call per record)
        self._first_group, self._last_group = key_group_range.start, key_group_range.end
        self.ttl_cleanups: dict[str, Callable[[str, Any], Any]] = {}  # state name -> drops expired values
        self.schema = SchemaCheck()  # the states' declared types, checked against what a checkpoint recorded

    def set_key_hash(self, key_hash: KeyHash) -> None:
        """Group keys by ``key_hash`` (of the stream's declared key type), as the stream routes them; before
        any key is set."""
        self.assign_key_group = shared_assigner(self.max_parallelism, key_hash)

    # -- current key and time ---------------------------------------------------------------

    def set_current_key(self, key: Any, key_group: int | None = None) -> None:
        """Make ``key`` current; ``key_group`` saves hashing it when the caller knows it."""
        if key_group is not None:
            kg = key_group
        else:
            try:
                kg = self.assign_key_group.cache[key]  # a key prefetched or seen before
            except (KeyError, TypeError):
                kg = self.assign_key_group(key)
        if not self._first_group <= kg <= self._last_group:
            raise StateError(f"key {key!r} belongs to key group {kg}, outside this task's range {self.key_group_range}")
        self.current_key = key
        self.current_key_group = kg

    def prefetch(self, keys: list) -> None:
        """A hint: the per-key state (namespace ``None``) of ``keys`` is about to be read. Backends that
        read from storage load it in one batch; the default hashes the keys' groups together into the
        assigner's cache, where :meth:`set_current_key` finds them."""
        # a key without a deterministic form (or whose hash fails): a hint only; set_current_key fails on it,
        # naming its record
        with contextlib.suppress(Exception):
            self.assign_key_group.learn(keys)

    def prefetch_limit(self) -> int:
        """How many records' keys one :meth:`prefetch` should cover: operators prefetch a batch in slices of
        this many (backends that hold every entry in memory: as many as a generation of the key groups' cache
        holds, so that a slice's keys are all found there)."""
        return GENERATION

    def get_current_key(self) -> Any:
        return self.current_key

    def get_current_key_group_index(self) -> int:
        return self.current_key_group

    def set_current_processing_time(self, now_ms: int) -> None:
        """The processing time state time-to-live is measured against."""
        self.current_processing_time = now_ms

    # -- state ------------------------------------------------------------------------------

    def create_internal_state(self, descriptor: StateDescriptor) -> Any:
        """A new state object for ``descriptor`` (namespace ``None`` until set), with its TTL if enabled:
        an :class:`InternalKvState` of the descriptor's kind (``InternalValueState``, ...).

        Raises :class:`StateError` if the name was registered with another kind, and
        :class:`~sparkpoint.errors.StateMigrationError` if its declared type cannot read what a
        checkpoint restored (state that can be migrated is migrated here, once per task).
        """
        declared = descriptor.name in self.schema.declared
        if not declared:
            self.schema.declare(descriptor)
        self.register_state(descriptor.name, descriptor.kind)
        if not declared:
            self.schema.migrate(self, descriptor)
        ttl = descriptor.ttl_config
        if ttl is not None and ttl.is_enabled():
            return create_ttl_state(self, descriptor)
        return self._create_internal_state(descriptor)

    def get_partitioned_state(self, namespace: Any, descriptor: StateDescriptor) -> Any:
        """A state object for user functions, for ``descriptor`` and bound to ``namespace``.

        As Flink's ``UserFacingListState``, list state refuses ``None`` elements here; the
        internal state of :meth:`create_internal_state` stores what an operator gives it.
        """
        state = self.create_internal_state(descriptor)
        state.set_current_namespace(namespace)
        return UserFacingListState(state) if descriptor.kind == "list" else state

    def register_state(self, name: str, kind: str) -> None:
        known = self.state_kinds.get(name)
        # a savepoint keeps an operator's timers under TIMERS: the state's entries would be lost (the constant is the
        # snapshot module's: the savepoint format's imports pyarrow, which starts a thread, and the Spark worker
        # daemon imports this module before it forks)
        if name == TIMERS:
            raise StateError(
                f"state name {name!r} is reserved (savepoints keep timers under it): name the state otherwise"
            )
        if known is None:
            if kind not in STATE_KINDS:
                raise StateError(f"state {name!r}: unknown state kind {kind!r}; known: {', '.join(STATE_KINDS)}")
            self.state_kinds[name] = kind
        elif known != kind:
            raise StateError(f"state {name!r} was registered as {known} state, now requested as {kind} state")

    def declared_schema(self) -> dict[str, StateSchema]:
        """``{state name: StateSchema}`` of every state this backend's operator declared (in this task)."""
        return dict(self.schema.declared)

    def registered_states(self) -> dict[str, str]:
        """``{state name: kind}`` of every state registered or restored."""
        return dict(self.state_kinds)

    @abc.abstractmethod
    def _create_internal_state(self, descriptor: StateDescriptor) -> InternalKvState:
        """The backend's own state object for ``descriptor`` (already registered, TTL handled)."""

    @abc.abstractmethod
    def get_keys(self, state_name: str, namespace: Any) -> Iterator[Any]:
        """The keys with an entry of ``state_name`` in ``namespace``."""

    @abc.abstractmethod
    def get_keys_and_namespaces(self, state_name: str) -> Iterator[tuple[Any, Any]]:
        """Every ``(key, namespace)`` with an entry of ``state_name``."""

    @abc.abstractmethod
    def clear_namespace(self, namespace: Any, state_names: Iterable[str] | None = None) -> None:
        """Remove the current key's entries in ``namespace`` of ``state_names`` (default: every state)."""

    @abc.abstractmethod
    def entry_count(self) -> int:
        """The number of ``(key, namespace)`` entries over all states."""

    # -- timers -----------------------------------------------------------------------------

    def get_timer_queue(self, name: str) -> SnapshottedTimerQueue:
        """The timer queue ``name`` (created on first use), snapshotted with the state."""
        queue = self.timer_queues.get(name)
        if queue is None:
            queue = self.timer_queues[name] = KeyGroupedTimerQueue(name)
        return queue

    def _snapshot_timers(self) -> dict[int, dict[str, list]]:
        out: dict[int, dict[str, list]] = {}
        for name, queue in self.timer_queues.items():
            for kg, timers in queue.snapshot_key_groups().items():
                out.setdefault(kg, {})[name] = timers
        return out

    def _restore_timers(self, timers: dict[int, dict[str, list]]) -> None:
        in_range = self.key_group_range.__contains__
        for kg, queues in timers.items():
            for name, entries in queues.items():
                self.get_timer_queue(name).restore_key_group(kg, entries, in_range)

    # -- snapshot and restore ---------------------------------------------------------------

    @abc.abstractmethod
    def snapshot(self, watermark: int | None = None) -> KeyedStateSnapshot:
        """Every entry and timer of this backend's key groups; later changes do not affect it."""

    def restore(self, snapshots: Iterable[KeyedStateSnapshot]) -> None:
        """Add the entries and timers of ``snapshots`` (of any key-group ranges) that fall in this
        backend's own range. Raises :class:`StateError` for another format version or max parallelism."""
        for snap in snapshots:
            check_snapshot(snap, self.max_parallelism, f"restore into key groups {self.key_group_range}")
            for name, kind in snap.state_kinds.items():
                self.register_state(name, kind)
            self._restore_entries(snap.entries)
            self._restore_timers(snap.timers)

    @abc.abstractmethod
    def _restore_entries(self, entries: dict[int, dict[str, dict]]) -> None:
        """Add ``{key_group: {state: {(key, ns): value}}}``, skipping key groups outside the range."""

    # -- working state kept between epochs (backends with ``keeps_working_state``) -----------

    def resume(self, epoch: int) -> None:
        """Continue from the working state committed at the end of ``epoch``."""
        raise StateError(f"the {self.backend_name} backend keeps no working state between epochs")

    def commit(self, epoch: int, watermark: int | None = None) -> int:
        """Make this epoch's changes (and the operator's ``watermark``) the working state of the end of
        ``epoch``; returns how many entries changed."""
        raise StateError(f"the {self.backend_name} backend keeps no working state between epochs")

    def committed_watermark(self) -> int | None:
        """The watermark committed with the working state."""
        return None

    def track_changes(self) -> None:
        """Record, from now on, what the epoch changes, for :meth:`epoch_changes` (backends that need to)."""

    def epoch_changes(self) -> list[tuple[bytes, bytes | None]] | None:
        """At the epoch's end (after :meth:`commit`, for backends that commit): every entry the epoch changed,
        as ``(key, new bytes or None)`` in the backend's own encoding (its state changelog, FLIP-158);
        ``None`` if the backend records none."""
        return None

    def apply_changes(self, changes: list[tuple[bytes, bytes | None]], epoch: int) -> None:
        """Replay one epoch's :meth:`epoch_changes` onto the committed state of the epoch before; the
        working state is then that of the end of ``epoch``."""
        raise StateError(f"the {self.backend_name} backend keeps no state changelog")

    def restore_in_place(self, materialize: Callable[[str], Any]) -> Any:
        """Replace the (empty) working state with the files ``materialize(path)`` writes; returns what
        ``materialize`` returns."""
        raise StateError(f"the {self.backend_name} backend cannot open checkpoint files as they are")

    def restore_handle_in_place(self, handle: KeyedStateHandle, on_watermark: Callable[[int | None], None]) -> bool:
        """Make a checkpoint's ``handle`` of exactly this backend's key groups its working state as it is, telling
        ``on_watermark`` the watermarks it was saved at; False if this backend cannot (the handle is then read as
        snapshots, :meth:`restore`)."""
        return False

    @classmethod
    def checkpoint_locally_all(
        cls, owners: list[Any], checkpoint_ids: list[int], key_groups: KeyGroupRange, max_parallelism: int
    ) -> Any:
        """The synchronous part of checkpoints ``checkpoint_ids`` for one task's keyed operators (``owners``, each
        with a backend of this class and a ``watermark``) whose backends keep working state: a local, consistent
        copy of their committed state, as :class:`~sparkpoint.state.checkpointing.SnapshotResources`."""
        raise StateError(f"the {cls.backend_name} backend keeps no working state between epochs")

    def dispose(self) -> None:
        """Release what the backend holds (files, handles); the default holds nothing."""
