"""A failover waits for the failed epoch's Spark tasks to end before the restored attempt runs.

Spark fails a job as soon as one task fails and cancels the others, but a cancelled Python task goes on until
its worker is killed (``spark.python.task.killTimeout`` after Spark saw the cancel): seconds in which it could
still write beside the attempt that follows (a file sink's staged part, a transactional producer opened late).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import MapFunction
from sparkpoint.datastream.connectors.number_seq import NumberSequenceSource

pytestmark = [pytest.mark.spark, pytest.mark.slow]

LINGER_S = 8.0


class LingerThenFail(MapFunction):
    """In the first attempt (no file ``failed`` yet) subtask 1 works on its first record for ``LINGER_S``, noting
    the time in ``alive`` every 50 ms, and subtask 0 fails once subtask 1 has begun. A later attempt notes in
    ``restored`` when each of its records came."""

    def __init__(self, directory: str):
        self.directory = directory

    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        d = Path(self.directory)
        if (d / "failed").exists():
            with open(d / "restored", "a") as f:
                f.write(f"{time.time()}\n")
        elif self.subtask == 1:
            (d / "lingering").touch()
            end = time.time() + LINGER_S
            with open(d / "alive", "a") as f:
                while time.time() < end:
                    f.write(f"{time.time()}\n")
                    f.flush()
                    time.sleep(0.05)
        else:
            end = time.time() + LINGER_S
            while not (d / "lingering").exists() and time.time() < end:
                time.sleep(0.01)
            (d / "failed").write_text("subtask 0 failed")
            raise RuntimeError("subtask 0 fails while subtask 1 still works")
        return value


def test_the_restored_attempt_runs_only_once_the_failed_epochs_tasks_ended(spark, make_env, tmp_path):
    env = make_env(
        "spark",
        **{
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 1,
            "restart-strategy.fixed-delay.delay": "0 ms",
        },
    )
    env.set_parallelism(2)
    seq = env.from_source(NumberSequenceSource(0, 9, num_splits=2), WatermarkStrategy.no_watermarks(), "seq")
    out = list(seq.map(LingerThenFail(str(tmp_path))).execute_and_collect())
    assert sorted(out) == list(range(10))
    alive = [float(t) for t in (tmp_path / "alive").read_text().split()]
    restored = [float(t) for t in (tmp_path / "restored").read_text().split()]
    assert alive and len(restored) == 10
    assert alive[-1] - alive[0] < LINGER_S - 1, "Spark did not stop the cancelled task: the case shows nothing"
    assert max(alive) < min(restored), (
        f"the restored attempt ran {max(alive) - min(restored):.2f} s while a task of the failed one still worked"
    )
