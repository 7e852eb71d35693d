"""Continuous mode in this process: every slot a thread, every channel a queue between threads.

Each slot gets its own copy of the plan (pickled and read back, as a Spark executor gets it): the subtasks of
one operator run at the same time in different slots and must not share a user function's instance (its
``open()`` keeps the subtask's state handles in its attributes).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import cloudpickle

from sparkpoint.runtime.continuous.channels import GATES
from sparkpoint.runtime.continuous.messages import SlotSpec
from sparkpoint.runtime.continuous.slot import make_gates, run_slot
from sparkpoint.runtime.graph import JobPlan

__all__ = ["InProcessLauncher", "ThreadSlots"]


class ThreadSlots:
    """The slots of one job attempt, each a thread of this process (a :class:`~.scheduler.SlotRun`)."""

    def __init__(self, plan: JobPlan, specs: list[SlotSpec], control_address: Any, authkey: bytes):
        self.key = specs[0].key
        gates = [make_gates(plan, spec) for spec in specs]  # all of them before any sender looks for one
        body = cloudpickle.dumps(plan)
        self.threads = [
            threading.Thread(
                target=run_slot,
                args=(cloudpickle.loads(body), spec, slot_gates, control_address, authkey),
                name=f"slot-{spec.slot}",
                daemon=True,
            )
            for spec, slot_gates in zip(specs, gates)
        ]
        for thread in self.threads:
            thread.start()

    def cancel(self, reason: str) -> None:
        GATES.drop(self.key)  # every subtask waiting on its gate ends

    def wait(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class InProcessLauncher:
    """An executor that runs its tasks in this process, as a :class:`~.scheduler.SlotLauncher`: its slots are
    :class:`ThreadSlots`, its control plane on 127.0.0.1."""

    def __init__(self, executor: Any):
        self.executor = executor

    def start(self, plan: JobPlan, job_id: str) -> None:
        self.executor.start(plan, job_id)

    def control_host(self) -> str:
        return "127.0.0.1"

    def launch_slots(self, plan: JobPlan, specs: list[SlotSpec], control_address: Any, authkey: bytes) -> ThreadSlots:
        return ThreadSlots(plan, specs, control_address, authkey)

    def stop(self) -> None:
        self.executor.stop()
