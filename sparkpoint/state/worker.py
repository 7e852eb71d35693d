"""What kind of process runs tasks here: a long-lived worker, or one that may end with its job.

A Spark Python worker runs task after task of many epochs; it says so once with
:func:`mark_long_lived_worker`. State backends may then keep what a task released (an open
database) for the next task in the same process. Everywhere else (the driver's in-process
executor, tests, tools) every task cleans up after itself.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["is_long_lived_worker", "let_go_under", "mark_long_lived_worker", "on_let_go"]

_long_lived = False


def mark_long_lived_worker() -> None:
    """This process runs task after task (a Spark Python worker that is reused)."""
    global _long_lived
    _long_lived = True


def is_long_lived_worker() -> bool:
    """Whether :func:`mark_long_lived_worker` was called in this process."""
    return _long_lived


_holders: list[Callable[[str, bool], None]] = []


def on_let_go(let_go: Callable[[str, bool], None]) -> None:
    """Register ``let_go(directory, wait)``: it closes what this process keeps open under ``directory``
    and, if ``wait``, waits until other processes hold nothing open there either."""
    if let_go not in _holders:
        _holders.append(let_go)


def let_go_under(directory: str, wait: bool = False) -> None:
    """Before ``directory`` is removed: close what this process keeps open under it; ``wait`` (the directory
    is made anew at the same path next) until no other process holds anything open there either."""
    for let_go in list(_holders):
        let_go(directory, wait)
