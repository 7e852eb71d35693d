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

#: Types whose values cannot be changed in place: passed as they are (exact types; a subclass, such as a Row
#: whose fields can be set, is copied).
_IMMUTABLE = frozenset({tuple, str, int, float, bool, bytes, complex, frozenset, type(None)})


def own(value: Any) -> Any:
    """``value``, or a shallow copy of it where a reduce could change it in place."""
    return value if type(value) in _IMMUTABLE else copy.copy(value)
