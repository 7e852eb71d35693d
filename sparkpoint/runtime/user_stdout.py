"""What user functions print in a Python worker, sent to the driver's stdout with the task's reports.

PySpark gives a Python worker's stdout to its executor's log (the driver's stderr in ``local`` mode); PyFlink's
``print()`` in a function writes to the TaskManager's stdout, which a local job shows on the client's stdout.
:func:`captured_stdout` replaces ``sys.stdout`` of the worker while a task runs on Spark; :func:`take_printed`
hands over what was printed since, and the driver writes it to its stdout
(:meth:`~sparkpoint.runtime.job_output.JobOutput.emit_printed`). In-process tasks (``execution.target: local``)
print to the process's stdout directly.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["captured_stdout", "take_printed"]


class _Tap(io.TextIOBase):
    """A stdout that keeps what is written to it, for any thread, until taken. Code that writes bytes to
    ``sys.stdout.buffer`` or to its ``fileno()`` reaches the worker's own stdout (its log), as before."""

    def __init__(self, underlying: Any) -> None:
        super().__init__()
        self._parts: list[str] = []
        self._lock = threading.Lock()
        self.underlying = underlying

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.underlying, "encoding", None) or "utf-8"

    @property
    def buffer(self) -> Any:
        return self.underlying.buffer

    def fileno(self) -> int:
        return int(self.underlying.fileno())

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        with self._lock:
            self._parts.append(text)
        return len(text)

    def take(self) -> str:
        with self._lock:
            text, self._parts = "".join(self._parts), []
        return text


_tap: _Tap | None = None


@contextlib.contextmanager
def captured_stdout() -> Iterator[None]:
    """Keep what is printed meanwhile for :func:`take_printed`; what no report took by the end goes to the
    worker's own stdout (its log), as it would have."""
    global _tap
    previous = sys.stdout
    tap = _Tap(previous)
    sys.stdout, _tap = tap, tap
    try:
        yield
    finally:
        sys.stdout, _tap = previous, None
        left = tap.take()
        if left:
            previous.write(left)


def take_printed() -> str:
    """What user code printed since the last call, while :func:`captured_stdout` is on (else nothing)."""
    return _tap.take() if _tap is not None else ""
