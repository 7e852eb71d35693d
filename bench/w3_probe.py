"""A job listener summing sparkpoint's task time per phase over a run (``EpochStats.phase_ms``).

It lives in its own module so that the JobMaster, which loads it by name
(``execution.job-listeners: bench.w3_probe:listener``), and ``bench/w3.py`` run as a script share it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sparkpoint.runtime.job_listener import JobListener

__all__ = ["PHASES", "LISTENER", "listener", "with_probe"]

#: ``execution.job-listeners`` entry of this listener.
LISTENER = "bench.w3_probe:listener"


class Phases(JobListener):
    def __init__(self) -> None:
        self.phase_ms: Counter = Counter()
        self.epochs = 0

    def reset(self) -> None:
        self.phase_ms.clear()
        self.epochs = 0

    def on_epoch_completed(self, stats: Any) -> None:
        self.epochs += 1
        self.phase_ms.update(getattr(stats, "phase_ms", {}))


PHASES = Phases()


def listener(job: Any) -> Phases:
    return PHASES


def with_probe(listeners: Any = None) -> str:
    """``execution.job-listeners`` with :data:`LISTENER` added to the listeners already named (if any)."""
    names = [n.strip() for n in str(listeners or "").replace(";", ",").split(",") if n.strip()]
    return ",".join(names if LISTENER in names else [*names, LISTENER])
