"""Stopping a running task: when the job is cancelled, or when its epoch's bound passed.

A :class:`TaskInterrupter` stops the task that runs in one thread of its process by raising
:class:`EpochInterrupted` inside it, wherever it is (in a user function too):

- on the process's main thread (a Spark executor's Python worker; the driver when the job runs
  in-process from the main thread) by a signal, ``SIGALRM``: a deadline is a timer
  (``setitimer``), an interrupt from another thread a ``pthread_kill``. A signal also ends a
  blocking call (``time.sleep``, a read from a socket);
- on another thread by an asynchronous exception, which ends Python code but not a blocking call:
  such a task stops when the call returns.

:class:`EpochInterrupted` is a ``BaseException``: a user function's ``except Exception`` does
not swallow it, and operators do not take it for the function's own failure. It says where the
task was when it was stopped: the operator whose code was running (its name and uid, found on
the stack) and the innermost line.
"""

from __future__ import annotations

import ctypes
import gc
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["EpochInterrupted", "TaskInterrupter", "where_running", "CANCELLED"]

CANCELLED = "the job was cancelled"  # the reason of an interrupt that a cancel asked for
OUTSIDE_OPERATOR_GRACE_S = 2.0  # a task at its deadline in no operator's code (just started: it may have waited
# for a core that hung tasks held) goes on this long, so the hung ones fail first and are the ones named
LOCK_RETRY_S = 0.01  # a signal that found the lock held comes back after this long
STARTING_THREAD_WAIT_S = 1.0  # an interrupt waits at most this long for a thread being started to run


class EpochInterrupted(BaseException):
    """Raised inside a running task to stop it; ``reason``: why, ``where``: what was running."""

    def __init__(self, reason: str = "", where: str = ""):
        super().__init__(reason, where)
        self.reason = reason
        self.where = where

    def __str__(self) -> str:
        return f"{self.reason}: {self.where}" if self.where else self.reason


def _operator_on_stack(frame: FrameType | None) -> Any:
    from sparkpoint.operators.base import StreamOperator

    while frame is not None:
        op = frame.f_locals.get("self") if "self" in frame.f_code.co_varnames else None
        if isinstance(op, StreamOperator):
            return op
        frame = frame.f_back
    return None


def where_running(frame: FrameType | None) -> str:
    """The operator whose method is on the stack at ``frame`` (the innermost one), and the innermost line."""
    if frame is None:
        return "no code of the task"
    line = f"{frame.f_code.co_name} at {frame.f_code.co_filename}:{frame.f_lineno}"
    op = _operator_on_stack(frame)
    if op is not None:
        return f"operator {op.name!r} (uid {op.uid!r}) was still running, in {line}"
    return f"the task's own code was running (no operator's), in {line}"


def _raise_in_thread(thread_id: int, error: Any) -> None:
    """An asynchronous exception in thread ``thread_id`` (None clears one not raised yet).

    CPython gives it to the first thread state with that id, and a thread being started carries its parent's id
    until it runs: an interrupt posted then lands in the new thread (a task's checkpoint upload, say), which dies
    before it says it started, and the task waits in ``Thread.start()`` for ever. So it is posted only while no
    thread is starting: ``threading`` lists a thread as starting (``_limbo``), under its lock, before it makes
    the thread's state, and lists it as started only once the thread runs with its own id."""
    lock, starting = getattr(threading, "_active_limbo_lock", None), getattr(threading, "_limbo", None)
    deadline = time.monotonic() + STARTING_THREAD_WAIT_S
    while lock is not None and starting is not None:
        with lock:
            if not starting or time.monotonic() > deadline:
                _set_async_exc(thread_id, error)
                return
        time.sleep(LOCK_RETRY_S / 10)
    _set_async_exc(thread_id, error)


def _set_async_exc(thread_id: int, error: Any) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(error) if error is not None else ctypes.c_void_p(0)
    )


class TaskInterrupter:
    """Stops the task running (in :meth:`running`) in one thread of this process, once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: int | None = None
        self._main = False
        self._raised = False  # one interrupt per task run
        self._extended = False  # its deadline was put off once (see OUTSIDE_OPERATOR_GRACE_S)
        self._posted = False  # an asynchronous exception was posted (another thread than the main)
        self._deadline_reason = ""
        self._pending: EpochInterrupted | None = None  # what the signal handler raises on an interrupt
        self.last: EpochInterrupted | None = None  # the latest interrupt, with where the task was

    @contextmanager
    def running(self, deadline_ms: int | None = None, reason: str = "") -> Iterator[None]:
        """Run a task in this thread: interruptible, and (on the main thread) stopped at ``deadline_ms``
        (wall clock) for ``reason``; another thread's deadline is its caller's to keep (:meth:`interrupt`).

        The process's cycle collector is on again afterwards if it was on before: an interrupt that lands while
        the task turns it back on (after turning it off for its records) must not leave it off in this process."""
        collecting = gc.isenabled()
        main = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
        with self._lock:
            self._thread, self._main, self._raised, self._posted = threading.get_ident(), main, False, False
            self._extended = False
            self._deadline_reason, self._pending, self.last = reason, None, None
        previous: Any = None
        if main:
            previous = signal.signal(signal.SIGALRM, self._on_signal)
            if deadline_ms is not None:
                signal.setitimer(signal.ITIMER_REAL, max(0.001, deadline_ms / 1000 - time.time()))
        try:
            yield
        finally:
            with self._lock:
                thread, posted = self._thread, self._posted
                self._thread = None
            if main:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
            elif posted and thread is not None:
                _raise_in_thread(thread, None)  # not raised yet: it must not land after the task
            if collecting:
                gc.enable()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # A handler runs between two bytecodes of the main thread, which may hold the lock itself (in running()):
        # never wait for it here, come back a moment later instead.
        if not self._lock.acquire(blocking=False):
            signal.setitimer(signal.ITIMER_REAL, LOCK_RETRY_S)
            return
        try:
            if self._thread is None or self._raised:
                return
            if self._pending is None and not self._extended and _operator_on_stack(frame) is None:
                self._extended = True  # the deadline, outside any operator: once, a little later
                signal.setitimer(signal.ITIMER_REAL, OUTSIDE_OPERATOR_GRACE_S)
                return
            self._raised = True
            error = self._pending or EpochInterrupted(self._deadline_reason)
        finally:
            self._lock.release()
        error.where = where_running(frame)
        self.last = error
        raise error

    def interrupt(self, reason: str) -> bool:
        """Stop the running task now (from another thread); False when none runs or it was stopped already."""
        with self._lock:
            if self._thread is None or self._raised:
                return False
            if self._main:
                self._pending = EpochInterrupted(reason)
                signal.pthread_kill(self._thread, signal.SIGALRM)
                return True
            self._raised = self._posted = True
            self.last = EpochInterrupted(reason, where_running(sys._current_frames().get(self._thread)))
            _raise_in_thread(self._thread, EpochInterrupted)
            return True

    def explain(self, error: EpochInterrupted, task: str) -> EpochInterrupted:
        """``error`` (raised as a bare class by an asynchronous interrupt) with its reason and where ``task`` was."""
        known = self.last if self.last is not None else error
        return EpochInterrupted(known.reason or error.reason, f"{task}: {known.where or 'its code was running'}")
