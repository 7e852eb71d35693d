"""``dumps``: pickle, and cloudpickle only where pickle cannot, or would write what another process cannot read.

cloudpickle writes a job's functions and the classes of its script by value, which a Spark worker or a later
run needs; it also calls a Python hook for every container it writes, so it writes a dict of tuples at about
half pickle's speed (6.1 against 3.5 us an entry of a window state, measured). Data whose every class is
importable by name (builtins, sparkpoint's, a job's modules) pickles the same both ways. pickle refuses a
lambda or a class it cannot find again by its name (one defined in a function, or shipped by value into a
worker whose ``__main__`` is not the job's script); and where the job's script is ``__main__`` (the driver,
the in-process executor) it writes that script's classes by name, which no other process finds (a checkpoint
restored on Spark, ``sparkpoint inspect``). Both go by cloudpickle; the second only for bytes that may be
read elsewhere (``portable``: not an exchange's, read by the next stage in the same process or, on Spark, in a
worker where pickle refuses the job's classes anyway). A caller that names itself (``sticky``) goes straight to
cloudpickle once its data needed it, rather than trying pickle first every time.
"""

from __future__ import annotations

import pickle
from typing import Any

import cloudpickle

__all__ = ["dumps"]

_MAIN = b"__main__"  # how a pickle names the module of a class written by name from a script
_needs_cloudpickle: set[str] = set()  # callers whose data needed cloudpickle in this process


def dumps(obj: Any, sticky: str = "", portable: bool = True) -> bytes:
    """``obj`` pickled (highest protocol), by cloudpickle where pickle refuses it or, ``portable``, names
    ``__main__``."""
    if not sticky or sticky not in _needs_cloudpickle:
        try:
            body = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
            if not portable or _MAIN not in body:
                return body
        except (pickle.PicklingError, AttributeError, TypeError):
            pass
        if sticky:
            _needs_cloudpickle.add(sticky)
    return cloudpickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
