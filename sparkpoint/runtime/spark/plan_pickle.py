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

from sparkpoint.errors import JobGraphError

__all__ = ["dumps_plan"]

_BY_VALUE: set[str] = set()
_code_reduce = cloudpickle.Pickler.dispatch_table[types.CodeType]


def _code_keeping_file(code: types.CodeType) -> Any:
    constructor, args = _code_reduce(code)
    return constructor, tuple(code.co_filename if a == "<dynamic-code>" else a for a in args)


class _PlanPickler(cloudpickle.Pickler):
    dispatch_table = ChainMap({types.CodeType: _code_keeping_file}, cloudpickle.Pickler.dispatch_table)


def dumps_plan(plan: Any) -> bytes:
    """The plan's bytes for a broadcast; the job's own modules are registered to go by value first.

    Raises:
        JobGraphError: something of the plan does not pickle; names the operator whose function holds it.
    """
    _register_user_modules()
    try:
        return _dumps(plan)
    except Exception as e:  # noqa: BLE001 - whatever the pickler met: named by operator below
        raise _not_picklable(plan, e) from e


def _dumps(obj: Any) -> bytes:
    """``obj`` pickled as the plan is (the job's own modules by value, code objects keeping their file)."""
    out = io.BytesIO()
    _PlanPickler(out, protocol=pickle.DEFAULT_PROTOCOL).dump(obj)
    return out.getvalue()


def _not_picklable(plan: Any, error: Exception) -> JobGraphError:
    """The error for a plan that does not pickle: the first operator whose factory (its function) does not."""
    for node in getattr(plan, "nodes", {}).values():
        try:
            _dumps(node.factory)
        except Exception as e:  # noqa: BLE001 - this operator's function is what does not pickle
            return JobGraphError(
                f"the function of operator {node.name!r} (uid {node.effective_uid()!r}) cannot be sent to the "
                f"executors: {type(e).__name__}: {e}. A function must pickle (cloudpickle): open clients, locks and "
                f"connections in open(), not in __init__ or in what a lambda captures"
            )
    return JobGraphError(f"the job's plan cannot be sent to the executors: {type(error).__name__}: {error}")


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
