"""How a job plan (with the user's functions) is pickled for the executors.

Functions and classes of installed packages go by reference (executors import them); those
of the job's own modules go with their code. A code object keeps the file it was compiled
from, so that a user function failing on an executor shows the job's file and line in its
traceback (cloudpickle alone names every shipped function's file ``<dynamic-code>``).
"""

from __future__ import annotations

import io
import pickle
import sys
import types
from collections import ChainMap
from typing import Any

import cloudpickle

__all__ = ["dumps_plan"]

_BY_VALUE: set[str] = set()
_code_reduce = cloudpickle.Pickler.dispatch_table[types.CodeType]


def _code_keeping_file(code: types.CodeType) -> Any:
    constructor, args = _code_reduce(code)
    return constructor, tuple(code.co_filename if a == "<dynamic-code>" else a for a in args)


class _PlanPickler(cloudpickle.Pickler):
    dispatch_table = ChainMap({types.CodeType: _code_keeping_file}, cloudpickle.Pickler.dispatch_table)


def dumps_plan(plan: Any) -> bytes:
    """The plan's bytes for a broadcast; the job's own modules are registered to go by value first."""
    _register_user_modules()
    out = io.BytesIO()
    _PlanPickler(out, protocol=pickle.DEFAULT_PROTOCOL).dump(plan)
    return out.getvalue()


def _register_user_modules() -> None:
    """Ship the job's own modules by value: executors need not be able to import them.

    Functions and classes of installed packages are pickled by reference (executors
    import them); those of modules that live outside the Python installation (the job
    script's helpers, a test module) are pickled with their code.
    """
    import sysconfig
    from pathlib import Path

    installed = {
        Path(p).resolve()
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (p := sysconfig.get_paths().get(key))
    }
    own = Path(__file__).resolve().parents[2]  # the sparkpoint package
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not path or name == "__main__" or name in _BY_VALUE:
            continue
        resolved = Path(path).resolve()
        if resolved.is_relative_to(own) or any(resolved.is_relative_to(p) for p in installed):
            continue
        if "site-packages" in resolved.parts or "dist-packages" in resolved.parts:
            continue
        try:
            cloudpickle.register_pickle_by_value(module)
            _BY_VALUE.add(name)
        except (ValueError, TypeError):
            pass
