"""Exactly-once in continuous mode, proven by killing the driver for real.

The seed job of ``test_exactly_once`` with ``sparkpoint.execution.mode: continuous``: its subtasks run as
long-running slots and checkpoint barriers flow with the records. The driver (``sparkpoint run`` in a child process)
is SIGKILLed at random progress points and at fault-injection points of the checkpoint protocol, and restored each
time from the newest completed checkpoint. Each barrier is an epoch for the job's core (its ``epoch N:`` line, the
held sources of a killed round), and a source subtask reads at most ``execution.epoch.max-records`` between two
barriers, so every kill lands before the input is read. Every kill is counted, fault-point kills among them; the
committed output must equal the pandas oracle: every window once, with the exact count.
"""

from __future__ import annotations

from collections import Counter

import pytest

from sparkpoint.testing.kill_loop import ALL_FAULT_POINTS, KillLoop, KillLoopResult, read_committed_lines
from tests.e2e.test_exactly_once import JOB, ROOT, checkpoint_conf, oracle, reporting

CONTINUOUS = {"sparkpoint.execution.mode": "continuous"}


def assert_kills_landed(result: KillLoopResult, kills: int) -> None:
    """Every planned kill happened (the loop checks each died by signal 9), some at fault points of the protocol,
    and rounds after a kill restored from a checkpoint."""
    summary = (
        f"{result.rounds} rounds in {result.seconds:.1f} s, {result.kills} kills ({result.fault_kills} at fault "
        f"points, {result.fallback_kills} fault rounds ended by the driver); plans {result.plans}"
    )
    print(summary)
    assert result.kills == kills, summary
    assert sum(result.fault_kills.values()) >= 1, f"no kill at a fault point: {summary}"
    assert any(r is not None for r in result.restores), f"no round restored from a checkpoint: {result.restores}"


def test_continuous_kill_loop_local_executor(tmp_path):
    """Eight kills, slots as threads of the driver process."""
    n = 800_000  # 20 slices of 40,000: more than 8 kills x (1 + 1)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    conf = {**checkpoint_conf(ckpt, "local"), **CONTINUOUS, "sparkpoint.local-state-dir": str(tmp_path / "local")}
    conf["execution.checkpointing.interval"] = "500 ms"  # kills wait for checkpoints: twice as many rounds a second
    loop = KillLoop(
        JOB,
        ["--events", str(n), "--output", str(out)],
        ckpt,
        conf,
        kills=8,
        seed=21,
        fault_share=0.4,
        fault_points=ALL_FAULT_POINTS,  # in-process, the asynchronous upload and the sink's commit are the driver's
        epochs_per_round=1,
        cwd=str(ROOT),
        timeout_per_round=120,
    )
    result = loop.run()
    assert_kills_landed(result, 8)
    got, expected = Counter(read_committed_lines(out)), oracle(n)
    assert got == expected, (
        f"{sum(got.values())} lines committed, {len(expected)} expected; "
        f"missing {len(expected - got)}, extra {len(got - expected)}"
    )


@pytest.mark.spark
@pytest.mark.slow
def test_continuous_kill_loop_on_spark(tmp_path):
    """Three kills on a real local Spark: the slots are one barrier stage's tasks in Spark's Python workers, and
    the driver, its JVM and the workers die together."""
    n = 1_000_000  # 25 slices: more than 3 kills x (4 + 1)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    conf = {**checkpoint_conf(ckpt, "spark"), **CONTINUOUS, **reporting(tmp_path / "reports")}
    conf["sparkpoint.local-state-dir"] = str(tmp_path / "local")
    loop = KillLoop(
        JOB,
        ["--events", str(n), "--output", str(out)],
        ckpt,
        conf,
        kills=3,
        seed=12,
        fault_share=0.34,
        epochs_per_round=4,
        cwd=str(ROOT),
        timeout_per_round=120,
    )
    result = loop.run()
    assert_kills_landed(result, 3)
    assert Counter(read_committed_lines(out)) == oracle(n)
