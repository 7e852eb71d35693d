"""A reduce's first argument as a value of its own.

The natural way to add into a Python list, dict or object is to change it and return it (``a[1] += b[1];
return a``). PyFlink's state gives every read a value of its own (it is deserialized), so such a reduce counts
right there. Held on the heap as one object, that value would be at once a key's running result and every result
emitted before it, or the contents of every sliding window a record falls in, or a record another branch of the
job still takes. :func:`own` gives what a reduce may change in place as a shallow copy (enough for a function that
changes the value's own fields or items), and values of immutable types as they are, at no cost.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["own"]

#: Per type: whether its values can be changed in place (and are copied). Types whose values cannot are passed
#: as they are: the immutable built-ins, and tuples whose instances hold nothing else (named tuples); a Row, whose
#: fields can be set, is copied. Emptied when it grows past :data:`_KNOWN_TYPES` (types made on the fly, named
#: tuples of a job's functions, come and go).
_MUTABLE: dict[type, bool] = {}
_IMMUTABLE = (tuple, str, int, float, bytes, complex, frozenset, type(None))
_KNOWN_TYPES = 1_000


def own(value: Any) -> Any:
    """``value``, or a shallow copy of it where a reduce could change it in place."""
    t = type(value)
    mutable = _MUTABLE.get(t)
    if mutable is None:
        if len(_MUTABLE) > _KNOWN_TYPES:
            _MUTABLE.clear()
        mutable = _MUTABLE[t] = not (issubclass(t, _IMMUTABLE) and not _has_dict(t))
    return copy.copy(value) if mutable else value


def _has_dict(t: type) -> bool:
    return t.__dictoffset__ != 0  # instances have a __dict__: attributes can be set
