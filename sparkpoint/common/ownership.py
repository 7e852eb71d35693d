"""A reduce's first argument as a value of its own.

The natural way to add into a Python list, dict or object is to change it and return it (``a[1] += b[1];
return a``, ``a[1].append(x); return a``). PyFlink's state gives every read a value of its own (it is
deserialized), so such a reduce counts right there. Held on the heap as one object, that value would be at once a
key's running result and every result emitted before it, or the contents of every sliding window a record falls
in, or a record another branch of the job still takes. :func:`own` gives what a reduce could change in place as
a deep copy, as PyFlink's deserialized value is (a shallow one shared the lists inside a tuple, which a reduce
appending to ``a[1]`` changed in every result before), and values that cannot change as they are, at little cost.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["own"]

_ATOM, _FROZEN, _MUTABLE = 0, 1, 2
#: Per type: whether its values are atoms (immutable, holding nothing), frozen containers (a tuple or frozenset
#: without attributes of its own: named tuples too; immutable only if what they hold is, which hashing tells) or
#: values that can be changed in place (copied; a Row, whose fields can be set, is one). Emptied when it grows past
#: :data:`_KNOWN_TYPES` (types made on the fly, named tuples of a job's functions, come and go).
_KINDS: dict[type, int] = {}
_ATOMS = (str, int, float, bytes, complex, type(None))
_ATOM_TYPES = frozenset({str, int, float, bytes, complex, bool, type(None)})
_CONTAINERS = (tuple, frozenset)
_KNOWN_TYPES = 1_000


def own(value: Any) -> Any:
    """``value``, or a deep copy of it where a reduce could change it, or anything it holds, in place."""
    t = type(value)
    kind = _KINDS.get(t)
    if kind is None:
        kind = _kind(t)
    if kind == _ATOM:
        return value
    if kind == _FROZEN:
        try:
            hash(value)  # a tuple holding a list, dict or set has no hash: that list could be changed in place
            return value
        except TypeError:
            pass
    if _holds_atoms(value):  # a shallow copy is a deep one, at a fraction of its cost
        return copy.copy(value)
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - something inside does not copy (a lock, a handle): its own fields at least
        return copy.copy(value)


def _holds_atoms(value: Any) -> bool:
    """Whether everything ``value`` holds (a list's or tuple's items, a dict's values, an object's attributes) is
    an atom: exact ``str``, ``int``, ``float``, ``bytes``, ``complex``, ``bool`` or ``None``."""
    if isinstance(value, dict):
        held: Any = value.values()
    elif isinstance(value, (list, tuple, set, frozenset)):
        held = value
    elif hasattr(value, "__dict__") and not hasattr(type(value), "__slots__"):
        held = vars(value).values()
    else:
        return False
    return _ATOM_TYPES.issuperset(map(type, held))


def _kind(t: type) -> int:
    if len(_KINDS) > _KNOWN_TYPES:
        _KINDS.clear()
    if t.__dictoffset__ != 0:  # instances have a __dict__: attributes can be set
        kind = _MUTABLE
    elif issubclass(t, _ATOMS):
        kind = _ATOM
    elif issubclass(t, _CONTAINERS):
        kind = _FROZEN
    else:
        kind = _MUTABLE
    _KINDS[t] = kind
    return kind
