"""What a running function sees of its task, as in ``pyflink.datastream.functions`` (re-exported from there).

A function's ``open`` gets a ``RuntimeContext`` (keyed state, subtask index, metrics); the
contexts of process functions hand out a ``TimerService`` (clocks and timers of the current key).
"""

from __future__ import annotations

import abc
from typing import Any

__all__ = ["RuntimeContext", "TimerService"]


class RuntimeContext(abc.ABC):
    """What a running function can ask of its task (state, subtask index, ...)."""

    @abc.abstractmethod
    def get_task_name(self) -> str:
        """Returns the name of the operator the function runs in."""

    @abc.abstractmethod
    def get_number_of_parallel_subtasks(self) -> int:
        """Returns the operator's parallelism."""

    @abc.abstractmethod
    def get_max_number_of_parallel_subtasks(self) -> int:
        """Returns the operator's maximum parallelism (its number of key groups)."""

    @abc.abstractmethod
    def get_index_of_this_subtask(self) -> int:
        """Returns this subtask's index, from 0 to the parallelism minus 1."""

    @abc.abstractmethod
    def get_attempt_number(self) -> int:
        """Returns the job attempt this task runs in: 0 at first, one more after each restart."""

    @abc.abstractmethod
    def get_job_parameter(self, key: str, default_value: str) -> str:
        """Returns a global job parameter.

        Args:
            key: The parameter's name.
            default_value: What to return if the parameter is not set.
        """

    @abc.abstractmethod
    def get_state(self, state_descriptor: Any) -> Any:
        """Returns the current key's ``ValueState`` described by ``state_descriptor``.

        Args:
            state_descriptor: A ``ValueStateDescriptor``.

        Raises:
            StateError: If the operator is not on a keyed stream.
        """

    @abc.abstractmethod
    def get_list_state(self, state_descriptor: Any) -> Any:
        """Returns the current key's ``ListState`` described by ``state_descriptor``.

        Args:
            state_descriptor: A ``ListStateDescriptor``.
        """

    @abc.abstractmethod
    def get_map_state(self, state_descriptor: Any) -> Any:
        """Returns the current key's ``MapState`` described by ``state_descriptor``.

        Args:
            state_descriptor: A ``MapStateDescriptor``.
        """

    @abc.abstractmethod
    def get_reducing_state(self, state_descriptor: Any) -> Any:
        """Returns the current key's ``ReducingState`` described by ``state_descriptor``.

        Args:
            state_descriptor: A ``ReducingStateDescriptor``.
        """

    @abc.abstractmethod
    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        """Returns the current key's ``AggregatingState`` described by ``state_descriptor``.

        Args:
            state_descriptor: An ``AggregatingStateDescriptor``.
        """

    @abc.abstractmethod
    def get_metrics_group(self) -> Any:
        """Returns the operator's ``MetricGroup``, to register counters, meters, gauges and distributions."""


class TimerService(abc.ABC):
    """Timers and clocks of a keyed operator (PyFlink's ``TimerService``)."""

    @abc.abstractmethod
    def current_processing_time(self) -> int:
        """Returns the current processing time in epoch milliseconds."""

    @abc.abstractmethod
    def current_watermark(self) -> int:
        """Returns the operator's current event-time watermark in epoch milliseconds."""

    @abc.abstractmethod
    def register_processing_time_timer(self, timestamp: int) -> None:
        """Registers a timer for the current key that fires once processing time reaches ``timestamp``.

        Args:
            timestamp: Epoch milliseconds. A key has at most one timer per timestamp and domain.

        Note:
            Timers are checked once per epoch, so a processing-time timer fires at the first epoch at or after its
                time.
        """

    @abc.abstractmethod
    def register_event_time_timer(self, timestamp: int) -> None:
        """Registers a timer for the current key that fires once the watermark reaches ``timestamp``.

        Args:
            timestamp: Epoch milliseconds. A key has at most one timer per timestamp and domain.
        """

    @abc.abstractmethod
    def delete_processing_time_timer(self, timestamp: int) -> None:
        """Deletes the current key's processing-time timer at ``timestamp``, if there is one.

        Args:
            timestamp: The timer's time in epoch milliseconds.
        """

    @abc.abstractmethod
    def delete_event_time_timer(self, timestamp: int) -> None:
        """Deletes the current key's event-time timer at ``timestamp``, if there is one.

        Args:
            timestamp: The timer's time in epoch milliseconds.
        """
