"""A reduce's first argument as a value of its own.

The natural way to add into a Python list, dict or object is to change it and return it (``a[1] += b[1];
return a``, ``a[1].append(x); return a``). PyFlink's state gives every read a value of its own (it is
deserialized), so such a reduce counts right there. Held on the heap as one object, that value would be at once a
key's running result and every result emitted before it, or the contents of every sliding window a record falls
in, or a record another branch of the job still takes. :func:`own` gives what a reduce could change in place, or
anything it holds, as a copy as deep as PyFlink's deserialized value (a pickle round trip, else ``deepcopy``;
a shallow copy where it holds atoms alone), and values that cannot change as they are, at little cost.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

__all__ = ["own"]

_ATOM, _FROZEN, _MUTABLE = 0, 1, 2
#: Per type: whether its values are atoms (immutable, holding nothing), frozen containers (a tuple or frozenset
#: without attributes of its own: named tuples too; frozen only if what they hold is, at any depth) or values that
#: can be changed in place (copied; a Row, whose fields can be set, is one). Emptied when it grows past
#: :data:`_KNOWN_TYPES` (types made on the fly, named tuples of a job's functions, come and go).
_KINDS: dict[type, int] = {}
_ATOMS = (str, int, float, bytes, complex, type(None))
_ATOM_TYPES = frozenset({str, int, float, bytes, complex, bool, type(None)})
_CONTAINERS = (tuple, frozenset)
_FLAT = (list, set, tuple, frozenset)
_KNOWN_TYPES = 1_000


def own(value: Any) -> Any:
    """``value``, or a copy of it where a reduce could change it, or anything it holds, in place."""
    t = type(value)
    kind = _KINDS.get(t)
    if kind is None:
        kind = _kind_of(t)
    if kind == _ATOM or (kind == _FROZEN and _frozen(value)):
        return value
    if _holds_atoms(value):  # a shallow copy is a deep one, at a fraction of its cost
        return copy.copy(value)
    try:
        return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))  # several times faster than deepcopy
    except Exception:  # noqa: BLE001 - a value that does not pickle (a local class, a lambda inside)
        pass
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - something inside does not copy (a lock, a handle): its own fields at least
        return copy.copy(value)


def _frozen(value: Any) -> bool:
    """Whether nothing a frozen container holds, at any depth, can change (a loop over the items is cheaper than
    one over their types at C speed for the few items of a record)."""
    for item in value:
        t = type(item)
        if t in _ATOM_TYPES:
            continue
        kind = _KINDS.get(t)
        if kind is None:
            kind = _kind_of(t)
        if kind == _MUTABLE or (kind == _FROZEN and not _frozen(item)):
            return False
    return True


def _holds_atoms(value: Any) -> bool:
    """Whether ``value`` is a plain list, set, tuple, dict or object (or a tuple subclass that copies itself, as a
    Row does) whose items, values or attributes are all atoms: exact ``str``, ``int``, ``float``, ``bytes``,
    ``complex``, ``bool`` or ``None``."""
    t = type(value)
    if t is dict:
        held: Any = value.values()
    elif t in _FLAT or (issubclass(t, _FLAT) and hasattr(t, "__copy__")):  # a Row copies its current values
        held = value
    elif t.__dictoffset__ != 0 and not issubclass(t, (dict, *_FLAT)) and "__slots__" not in t.__dict__:
        held = vars(value).values()
    else:
        return False
    return _ATOM_TYPES.issuperset(map(type, held))


def _kind_of(t: type) -> int:
    if len(_KINDS) > _KNOWN_TYPES:
        _KINDS.clear()
    if t.__dictoffset__ != 0 or "__slots__" in t.__dict__ and not issubclass(t, _CONTAINERS):
        kind = _MUTABLE  # attributes can be set (or slots of its own: a subclass of an atom whose slots can be set)
    elif issubclass(t, _ATOMS):
        kind = _ATOM
    elif issubclass(t, _CONTAINERS):
        kind = _FROZEN
    else:
        kind = _MUTABLE
    _KINDS[t] = kind
    return kind
