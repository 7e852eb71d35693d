"""An interrupt from another thread reaches the task's own thread, also while the task starts threads.

CPython gives an asynchronous exception to the first thread state with the target's id, and a thread being
started carries its parent's id until it runs: an interrupt posted then went to the new thread (a task's
checkpoint upload), which died before it said it started, and the task then waited in ``Thread.start()``
for ever (a cancel that never ended).
"""

from __future__ import annotations

import threading
import time

from sparkpoint.runtime.task_interrupt import EpochInterrupted, TaskInterrupter

TRIALS = 40


def _interrupt_a_task_that_starts_threads() -> str:
    interrupter, ready, outcome = TaskInterrupter(), threading.Event(), []

    def child() -> None:
        try:
            time.sleep(0.0005)
        except EpochInterrupted:
            outcome.append("landed in a child")

    def task() -> None:
        try:
            with interrupter.running():
                ready.set()
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline:
                    threading.Thread(target=child, daemon=True).start()
        except EpochInterrupted:
            outcome.append("interrupted")

    thread = threading.Thread(target=task, daemon=True)
    thread.start()
    assert ready.wait(5)
    time.sleep(0.005)
    assert interrupter.interrupt("stop")
    thread.join(5)
    if thread.is_alive():
        return "hung"
    return outcome[0] if outcome else "ran to its end"


def test_an_interrupt_reaches_a_task_that_keeps_starting_threads():
    hook, lost = threading.excepthook, []
    threading.excepthook = lambda args: lost.append(args) if args.exc_type is EpochInterrupted else hook(args)
    try:
        outcomes = [_interrupt_a_task_that_starts_threads() for _ in range(TRIALS)]
    finally:
        threading.excepthook = hook
    assert outcomes == ["interrupted"] * TRIALS and not lost, (outcomes, len(lost))
