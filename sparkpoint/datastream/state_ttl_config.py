"""Time-to-live of keyed state, as ``StateTtlConfig`` in ``pyflink.datastream.state`` (re-exported from there).

TTL is measured in processing time. Expired values are dropped when read and, with background
cleanup (on by default, as in Flink) or ``cleanup_full_snapshot``, from every snapshot.
"""

from __future__ import annotations

import abc
from enum import Enum
from typing import Any

from sparkpoint.common.time import Time, to_millis

__all__ = ["StateTtlConfig"]


class StateTtlConfig:
    """Time-to-live of keyed state, with PyFlink's builder and getters.

    Build with ``StateTtlConfig.new_builder(Time.seconds(1))...build()`` and attach with
    ``StateDescriptor.enable_time_to_live``. Whether a state backend honours it is up to
    the backend (the ``hashmap`` backend refuses TTL it cannot enforce).
    """

    class UpdateType(Enum):
        """When a value's time-to-live starts again."""

        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility(Enum):
        """Whether a read may return a value that expired but has not been cleaned up yet."""

        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(Enum):
        """The time TTL is measured in; only processing time, as in Flink."""

        ProcessingTime = 0

    def __init__(
        self,
        update_type: StateTtlConfig.UpdateType,
        state_visibility: StateTtlConfig.StateVisibility,
        ttl_time_characteristic: StateTtlConfig.TtlTimeCharacteristic,
        ttl: Time,
        cleanup_strategies: StateTtlConfig.CleanupStrategies,
    ):
        self._update_type = update_type
        self._state_visibility = state_visibility
        self._ttl_time_characteristic = ttl_time_characteristic
        self._ttl = ttl
        self._cleanup_strategies = cleanup_strategies

    @staticmethod
    def new_builder(ttl: Time) -> StateTtlConfig.Builder:
        """Returns a builder of a TTL configuration.

        Args:
            ttl: The time-to-live (a ``Time`` or ``Duration``).
        """
        return StateTtlConfig.Builder(ttl)

    def get_update_type(self) -> StateTtlConfig.UpdateType:
        """Returns when a value's time-to-live starts again."""
        return self._update_type

    def get_state_visibility(self) -> StateTtlConfig.StateVisibility:
        """Returns whether expired values not yet cleaned up are visible."""
        return self._state_visibility

    def get_ttl(self) -> Time:
        """Returns the time-to-live."""
        return self._ttl

    def get_ttl_time_characteristic(self) -> StateTtlConfig.TtlTimeCharacteristic:
        """Returns the time TTL is measured in (processing time)."""
        return self._ttl_time_characteristic

    def is_enabled(self) -> bool:
        """Returns whether TTL applies (its update type is not ``Disabled``)."""
        return self._update_type != StateTtlConfig.UpdateType.Disabled

    def get_cleanup_strategies(self) -> StateTtlConfig.CleanupStrategies:
        """Returns the configured cleanups of expired values."""
        return self._cleanup_strategies

    @property
    def ttl_ms(self) -> int:
        """The time-to-live in milliseconds."""
        return to_millis(self._ttl)

    def __repr__(self) -> str:
        return (
            f"StateTtlConfig<update_type={self._update_type}, state_visibility={self._state_visibility},"
            f"ttl_time_characteristic ={self._ttl_time_characteristic},ttl={self._ttl}>"
        )

    class Builder:
        """Builds a :class:`StateTtlConfig` (defaults as Flink's: on create and write, never return expired)."""

        def __init__(self, ttl: Time):
            self._ttl = ttl
            self._update_type = StateTtlConfig.UpdateType.OnCreateAndWrite
            self._state_visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self._ttl_time_characteristic = StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            self._is_cleanup_in_background = True
            self._strategies: dict = {}

        def set_update_type(self, update_type: StateTtlConfig.UpdateType) -> StateTtlConfig.Builder:
            """Sets when a value's time-to-live starts again.

            Args:
                update_type: A ``StateTtlConfig.UpdateType``.
            """
            self._update_type = update_type
            return self

        def update_ttl_on_create_and_write(self) -> StateTtlConfig.Builder:
            """Restarts a value's time-to-live when it is written (the default)."""
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> StateTtlConfig.Builder:
            """Restarts a value's time-to-live when it is read or written."""
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(self, state_visibility: StateTtlConfig.StateVisibility) -> StateTtlConfig.Builder:
            """Sets whether expired values not yet cleaned up are visible.

            Args:
                state_visibility: A ``StateTtlConfig.StateVisibility``.
            """
            self._state_visibility = state_visibility
            return self

        def return_expired_if_not_cleaned_up(self) -> StateTtlConfig.Builder:
            """Lets reads return expired values until they are cleaned up."""
            return self.set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)

        def never_return_expired(self) -> StateTtlConfig.Builder:
            """Makes reads never return an expired value (the default)."""
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(
            self, ttl_time_characteristic: StateTtlConfig.TtlTimeCharacteristic
        ) -> StateTtlConfig.Builder:
            """Sets the time TTL is measured in.

            Args:
                ttl_time_characteristic: ``TtlTimeCharacteristic.ProcessingTime``, the only one.
            """
            self._ttl_time_characteristic = ttl_time_characteristic
            return self

        def use_processing_time(self) -> StateTtlConfig.Builder:
            """Measures TTL in processing time (the default and only choice)."""
            return self.set_ttl_time_characteristic(StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)

        def cleanup_full_snapshot(self) -> StateTtlConfig.Builder:
            """Drops expired values from every snapshot."""
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT] = (
                StateTtlConfig.CleanupStrategies.EMPTY_STRATEGY
            )
            return self

        def cleanup_incrementally(
            self, cleanup_size: int, run_cleanup_for_every_record: bool
        ) -> StateTtlConfig.Builder:
            """Records an incremental cleanup, as PyFlink's builder does.

            Args:
                cleanup_size: How many entries to check per cleanup step.
                run_cleanup_for_every_record: Whether each record access runs a step.

            Note:
                Expired values are dropped on read and, with background cleanup, from every snapshot; the
                incremental strategy is recorded but needs no separate pass.
            """
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.INCREMENTAL_CLEANUP] = (
                StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy(cleanup_size, run_cleanup_for_every_record)
            )
            return self

        def cleanup_in_rocksdb_compact_filter(
            self, query_time_after_num_entries: int, periodic_compaction_time: Any = None
        ) -> StateTtlConfig.Builder:
            """Records RocksDB compaction-filter cleanup, as PyFlink's builder does.

            Args:
                query_time_after_num_entries: How many entries the filter processes before it reads the clock again.
                periodic_compaction_time: How often files are compacted (a ``Duration``; 30 days if omitted).

            Note:
                Expired values are dropped on read and, with background cleanup, from every snapshot, on any backend.
            """
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.ROCKSDB_COMPACTION_FILTER] = (
                StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy(
                    query_time_after_num_entries, periodic_compaction_time
                )
            )
            return self

        def disable_cleanup_in_background(self) -> StateTtlConfig.Builder:
            """Turns off background cleanup (on by default, as in Flink)."""
            self._is_cleanup_in_background = False
            return self

        def set_ttl(self, ttl: Time) -> StateTtlConfig.Builder:
            """Sets the time-to-live.

            Args:
                ttl: A ``Time`` or ``Duration``.
            """
            self._ttl = ttl
            return self

        def build(self) -> StateTtlConfig:
            """Returns the ``StateTtlConfig``."""
            return StateTtlConfig(
                self._update_type,
                self._state_visibility,
                self._ttl_time_characteristic,
                self._ttl,
                StateTtlConfig.CleanupStrategies(dict(self._strategies), self._is_cleanup_in_background),
            )

    class CleanupStrategies:
        """Which cleanups of expired state are configured (expired state is always dropped on read)."""

        class Strategies(Enum):
            """The kinds of cleanup strategy."""

            FULL_STATE_SCAN_SNAPSHOT = 0
            INCREMENTAL_CLEANUP = 1
            ROCKSDB_COMPACTION_FILTER = 2

        class CleanupStrategy(abc.ABC):
            """Base of the cleanup strategies."""

            pass

        class EmptyCleanupStrategy(CleanupStrategy):
            """A strategy with no settings (full-snapshot cleanup)."""

            pass

        class IncrementalCleanupStrategy(CleanupStrategy):
            """Incremental cleanup's settings.

            Args:
                cleanup_size: How many entries to check per cleanup step.
                run_cleanup_for_every_record: Whether each record access runs a step.
            """

            def __init__(self, cleanup_size: int, run_cleanup_for_every_record: bool):
                self._cleanup_size = cleanup_size
                self._run_cleanup_for_every_record = run_cleanup_for_every_record

            def get_cleanup_size(self) -> int:
                """Returns how many entries a cleanup step checks."""
                return self._cleanup_size

            def run_cleanup_for_every_record(self) -> bool:
                """Returns whether each record access runs a cleanup step."""
                return self._run_cleanup_for_every_record

        class RocksdbCompactFilterCleanupStrategy(CleanupStrategy):
            """RocksDB compaction-filter cleanup's settings.

            Args:
                query_time_after_num_entries: How many entries the filter processes before it reads the clock again.
                periodic_compaction_time: How often files are compacted (30 days if ``None``).
            """

            def __init__(self, query_time_after_num_entries: int, periodic_compaction_time: Any = None):
                from sparkpoint.common.time import Duration

                self._query_time_after_num_entries = query_time_after_num_entries
                self._periodic_compaction_time = periodic_compaction_time or Duration.of_days(30)

            def get_query_time_after_num_entries(self) -> int:
                """Returns how many entries the filter processes before it reads the clock again."""
                return self._query_time_after_num_entries

            def get_periodic_compaction_time(self) -> Any:
                """Returns how often files are compacted."""
                return self._periodic_compaction_time

        EMPTY_STRATEGY: StateTtlConfig.CleanupStrategies.CleanupStrategy

        def __init__(self, strategies: dict, is_cleanup_in_background: bool):
            self._strategies = strategies
            self._is_cleanup_in_background = is_cleanup_in_background

        def is_cleanup_in_background(self) -> bool:
            """Returns whether background cleanup is on: expired values are dropped from every snapshot."""
            return self._is_cleanup_in_background

        def in_full_snapshot(self) -> bool:
            """Returns whether expired values are dropped from every full snapshot."""
            return StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT in self._strategies

        def get_incremental_cleanup_strategy(
            self,
        ) -> StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy | None:
            """Returns the incremental cleanup's settings, or ``None``."""
            return self._strategies.get(StateTtlConfig.CleanupStrategies.Strategies.INCREMENTAL_CLEANUP)

        def get_rocksdb_compact_filter_cleanup_strategy(
            self,
        ) -> StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy | None:
            """Returns the compaction-filter cleanup's settings, or ``None``."""
            return self._strategies.get(StateTtlConfig.CleanupStrategies.Strategies.ROCKSDB_COMPACTION_FILTER)


StateTtlConfig.CleanupStrategies.EMPTY_STRATEGY = StateTtlConfig.CleanupStrategies.EmptyCleanupStrategy()
