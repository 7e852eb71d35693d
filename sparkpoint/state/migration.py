"""State migration on restore: a declared state checked against what the checkpoint recorded of it.

A keyed backend holds one :class:`SchemaCheck`. When an operator first declares a state in a task
(``get_state``, ``create_internal_state``), the check compares the descriptor's kind and type with
the :class:`~sparkpoint.state.schema.StateSchema` the restored checkpoint recorded (Flink's
``RocksDBKeyedStateBackend.tryRegisterKvStateInformation`` asks the new serializer the same):

1. another kind, or an incompatible type: :class:`~sparkpoint.errors.StateMigrationError`, naming
   the operator, the state, both types and what to do;
2. compatible after migration (a row with fields added or removed, ...): every stored value of the
   task's key groups is rewritten in the new form, as Flink migrates state eagerly on restore;
3. untyped state that gets a type: stored values are sampled, and one that cannot be of the
   declared type refuses the restore as in 1.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator
from typing import Any

from sparkpoint.errors import StateMigrationError
from sparkpoint.state.schema import (
    Compatibility,
    StateSchema,
    judge,
    migration,
    refusal,
    state_type_json,
    type_text,
    value_fits,
)
from sparkpoint.state.ttl import TtlValue

__all__ = ["SchemaCheck", "SAMPLED_VALUES"]

#: How many stored entries of untyped state are read to check a newly declared type.
SAMPLED_VALUES = 100


class SchemaCheck:
    """The declared states of one keyed backend, checked against the ones a checkpoint recorded."""

    def __init__(self) -> None:
        self.owner = "keyed state"  # "operator 'n' (uid 'u')", for messages
        self.expected: dict[str, StateSchema] = {}  # what the restored checkpoint recorded
        self.declared: dict[str, StateSchema] = {}  # what this task declared
        self._pending: dict[str, tuple[StateSchema, StateSchema]] = {}  # name -> (old, new), to migrate

    def expect(self, owner: str, states: dict[str, StateSchema]) -> None:
        self.owner, self.expected = owner, dict(states)

    def declare(self, descriptor: Any) -> None:
        """Record ``descriptor``'s schema; raise if the recorded one cannot be read as it (Step 1)."""
        name = descriptor.name
        ttl = getattr(descriptor, "ttl_config", None) is not None
        new = StateSchema(descriptor.kind, state_type_json(descriptor.kind, descriptor.type_info), ttl)
        self.declared[name] = new
        old = self.expected.get(name)
        if old is None or old == new:
            return
        verdict, why = judge(old, new)
        if verdict is Compatibility.INCOMPATIBLE:
            self._refuse(name, old, new, why)
        if verdict is Compatibility.COMPATIBLE_AS_IS and not why:
            return  # the same but for what an older checkpoint did not record
        self._pending[name] = (old, new)

    def migrate(self, backend: Any, descriptor: Any) -> None:
        """Steps 2 and 3 for a state :meth:`declare` found to differ, once it is registered."""
        pending = self._pending.pop(descriptor.name, None)
        if pending is None:
            return
        old, new = pending
        if old.type is None:
            self._sample(backend, descriptor, old, new)
            return
        fn = migration(old.type, new.type)
        if fn is not None:
            _rewrite(backend, descriptor, fn)

    def _sample(self, backend: Any, descriptor: Any, old: StateSchema, new: StateSchema) -> None:
        for value in itertools.islice(_stored_values(backend, descriptor), SAMPLED_VALUES):
            if not value_fits(value, new.type):  # a list state's type is its elements' type
                self._refuse(
                    descriptor.name,
                    old,
                    new,
                    f"a stored value, {value!r} ({type(value).__name__}), is not of the declared {type_text(new.type)}",
                )

    def _refuse(self, name: str, old: StateSchema, new: StateSchema, why: str) -> None:
        raise StateMigrationError(refusal(self.owner, name, old, new, why))


def _entries(backend: Any, descriptor: Any, writes: bool) -> Iterator[Any]:
    """Each stored ``(key, namespace)`` of ``descriptor``'s state, made current, with a state object on it
    (``writes``: the caller changes entries, so they are listed first, not read as they are iterated). The state
    object is the stored form, TTL values as stored: read through their TTL, they would be dropped when expired
    or touched (``OnReadAndWrite``), and written through it, stamped anew."""
    raw = copy.copy(descriptor)
    raw.ttl_config = None
    state = backend._create_internal_state(raw)
    saved = backend.current_key, backend.current_key_group
    slots = backend.get_keys_and_namespaces(descriptor.name)
    try:
        for key, namespace in list(slots) if writes else slots:
            backend.set_current_key(key)
            state.set_current_namespace(namespace)
            yield state
    finally:
        backend.current_key, backend.current_key_group = saved


def _user(value: Any) -> Any:
    """A stored value as the user's: a TTL value's own."""
    return value.value if isinstance(value, TtlValue) else value


def _kept(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` on a stored value; a TTL value keeps its timestamp (Flink migrates inside the TTL wrapper)."""

    def apply(value: Any) -> Any:
        return TtlValue(fn(value.value), value.last_access) if isinstance(value, TtlValue) else fn(value)

    return apply


def _stored_values(backend: Any, descriptor: Any) -> Iterator[Any]:
    for state in _entries(backend, descriptor, writes=False):
        kind = descriptor.kind
        if kind == "list":
            yield from [_user(v) for v in state.get() or []]
        elif kind == "map":
            yield {k: _user(v) for k, v in state.items()}
        elif kind == "aggregating":
            yield _user(state.get_accumulator())
        else:
            yield _user(state.get() if kind == "reducing" else state.value())


def _rewrite(backend: Any, descriptor: Any, fn: Callable[[Any], Any]) -> None:
    """Every stored value of the state of ``descriptor`` (this backend's key groups) through ``fn``."""
    kind, each = descriptor.kind, _kept(fn)
    for state in _entries(backend, descriptor, writes=True):
        if kind == "value":
            state.update(each(state.value()))
        elif kind == "list":
            state.update([each(v) for v in list(state.get() or [])])
        elif kind == "map":
            stored = dict(state.items())
            migrated = fn({k: _user(v) for k, v in stored.items()})
            state.clear()
            state.put_all(
                {
                    k: TtlValue(v, stored[k].last_access) if isinstance(stored.get(k), TtlValue) else v
                    for k, v in migrated.items()
                }
            )
        elif kind == "aggregating":
            state.set_accumulator(each(state.get_accumulator()))
        else:  # reducing: the one value, written back whole
            value = state.get()
            state.clear()
            state.add(each(value))
