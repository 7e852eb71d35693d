"""The driver of a cluster job is SIGKILLed at random progress points and at fault-injection points
of the checkpoint protocol, and restarted each time from the newest completed checkpoint
(``sparkpoint run -s``): the committed output equals the pandas oracle, and no round of
the job needed a failover of its own."""

from __future__ import annotations

import pytest

from sparkpoint.testing.kill_loop import KillLoop

from .drivers import ROOT, SEED_JOB, compare, read_output, seed_oracle

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_kill_loop_of_the_driver_on_the_cluster(driver, monkeypatch):
    events = 600_000  # 15 epochs of 40,000: more than 3 kills x (2 + 1)
    monkeypatch.setenv("SPARKPOINT_HOME", str(driver.work / "home"))
    loop = KillLoop(
        SEED_JOB,
        ["--events", str(events), "--output", str(driver.output)],
        driver.checkpoints,
        driver.conf(),
        kills=3,
        seed=7,
        fault_share=0.34,
        epochs_per_round=2,
        cwd=str(ROOT),
        timeout_per_round=240,
    )
    result = loop.run()
    assert result.kills == 3, result
    assert any(result.restores), "no round restored from a checkpoint"
    print(
        f"{result.rounds} rounds, {result.kills} kills ({result.fault_kills} at fault points), "
        f"{result.seconds:.0f} s\n{driver.summary()}"
    )
    assert driver.failovers() == 0, f"failovers inside the rounds:\n{driver.summary()}"
    got, expected = read_output(driver.output), seed_oracle(events)
    assert got == expected, compare(got, expected)
