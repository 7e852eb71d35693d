"""Operator (non-keyed) state: named list states of one subtask.

Flink redistributes operator list state on rescaling either by splitting the union of
all subtasks' lists evenly (``get_list_state``) or by giving every subtask the whole
union (``get_union_list_state``); the mode is recorded with each state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.datastream.state import ListState, ListStateDescriptor, OperatorStateStore
from sparkpoint.errors import StateMigrationError

__all__ = ["DefaultOperatorStateStore", "OperatorListState", "redistribute_operator_state"]

_MODES = {
    "split": "even-split list state (get_list_state)",
    "union": "union list state (get_union_list_state)",
    "broadcast": "broadcast state (get_broadcast_state)",
}
_GETTERS = {"split": "get_list_state", "union": "get_union_list_state", "broadcast": "get_broadcast_state"}


class OperatorListState(ListState):
    def __init__(self, values: list):
        self.values = values

    def get(self) -> Iterable:
        return list(self.values)

    def add(self, value: Any) -> None:
        self.values.append(value)

    def add_all(self, values: list) -> None:
        self.values.extend(values)

    def update(self, values: list) -> None:
        self.values[:] = list(values or [])

    def clear(self) -> None:
        self.values.clear()


class DefaultOperatorStateStore(OperatorStateStore):
    """The operator state of one subtask; snapshot is ``{name: (mode, list)}``."""

    def __init__(self, restored: dict[str, tuple[str, list]] | None = None, owner: str = ""):
        self.states: dict[str, tuple[str, list]] = {k: (m, list(v)) for k, (m, v) in (restored or {}).items()}
        self.restored = restored is not None
        self.owner = owner  # the operator, as its errors name it

    def _get(self, descriptor: ListStateDescriptor, mode: str) -> ListState:
        mode_values = self.states.get(descriptor.name)
        if mode_values is None:
            mode_values = self.states[descriptor.name] = (mode, [])
        elif mode_values[0] != mode:
            # as Flink ("Incompatible assignment mode"): the recorded mode would go on in every checkpoint
            owner = f"{self.owner}: " if self.owner else ""
            raise StateMigrationError(
                f"{owner}operator state {descriptor.name!r} was checkpointed as {_MODES[mode_values[0]]}, and the "
                f"job reads it with {_GETTERS[mode]}: a list state's mode cannot change (read it with "
                f"{_GETTERS.get(mode_values[0], mode_values[0])}, or give the new state another name)"
            )
        return OperatorListState(mode_values[1])

    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState:
        return self._get(state_descriptor, "split")

    def get_union_list_state(self, state_descriptor: ListStateDescriptor) -> ListState:
        return self._get(state_descriptor, "union")

    def snapshot(self) -> dict[str, tuple[str, list]]:
        return {k: (m, list(v)) for k, (m, v) in self.states.items()}


def redistribute_operator_state(
    per_subtask: list[dict[str, tuple[str, list]] | None], new_parallelism: int
) -> list[dict[str, tuple[str, list]]]:
    """Flink's round-robin (even-split) and union redistribution of operator list state; broadcast state
    (mode ``"broadcast"``, the same map on every subtask) is copied to every new subtask. At the same parallelism
    each subtask keeps its own, but for union state: every subtask gets all of it, as in Flink."""
    if len(per_subtask) == new_parallelism:
        kept = [dict(s or {}) for s in per_subtask]
        unions: dict[str, list] = {}
        for snap in per_subtask:
            for name, (mode, values) in (snap or {}).items():
                if mode == "union":
                    unions.setdefault(name, []).extend(values)
        for snap in kept:
            snap.update((name, ("union", list(values))) for name, values in unions.items())
        return kept
    out: list[dict[str, tuple[str, list]]] = [{} for _ in range(new_parallelism)]
    names: dict[str, str] = {}
    merged: dict[str, list] = {}
    for snap in per_subtask:
        for name, (mode, values) in (snap or {}).items():
            names[name] = mode
            merged.setdefault(name, []).extend(values)
    for name, mode in names.items():
        values = merged[name]
        for i in range(new_parallelism):
            if mode == "broadcast":  # every old subtask has the same map: new subtask i takes old i % n's
                old = per_subtask[i % len(per_subtask)] or next(s for s in per_subtask if s and name in s)
                out[i][name] = (mode, list(old.get(name, (mode, []))[1]))
            else:
                out[i][name] = (mode, list(values) if mode == "union" else values[i::new_parallelism])
    return out
