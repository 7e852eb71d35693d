"""``partition_custom``'s routing: the user's key selector picks a record's key, their partitioner its subtask."""

from __future__ import annotations

from typing import Any

from sparkpoint.datastream.functions import KeySelector, Partitioner

__all__ = ["CustomPartitioning"]


class CustomPartitioning:
    """A ``partition_custom`` edge's routing: the user's key selector, then their partitioner."""

    def __init__(self, partitioner: Partitioner, key_selector: KeySelector):
        self.partitioner = partitioner
        self.key_selector = key_selector

    def target(self, value: Any, num_partitions: int) -> int:
        """Returns the subtask a record goes to.

        Args:
            value: The record.
            num_partitions: The number of subtasks of the receiving operator.

        Raises:
            ValueError: If the partitioner returns anything but a subtask index.
        """
        p = self.partitioner.partition(self.key_selector.get_key(value), num_partitions)
        if not isinstance(p, int) or not 0 <= p < num_partitions:
            raise ValueError(
                f"partition_custom: the partitioner returned {p!r} for record {value!r}; "
                f"expected a subtask index from 0 to {num_partitions - 1}"
            )
        return p
