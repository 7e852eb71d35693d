"""Jobs on a cluster whose executors do not share a disk: exact output, and no failover.

A keyed task must find its state whichever executor Spark runs it on; when nothing fails,
the job must not need to fail over to get there. Each job runs in a ``sparkpoint run``
child process with exactly-once checkpoints every second; its output is compared with a
pandas oracle over the generated input, and its failovers are counted by the job's own
report (transitions to RESTARTING).
"""

from __future__ import annotations

import pytest

from .drivers import LARGE_STATE_JOB, SEED_JOB, compare, large_state_oracle, read_output, seed_oracle

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_seed_job_on_the_cluster_is_exact_without_failover(driver):
    events = 200_000
    out = driver.run(SEED_JOB, ["--events", str(events), "--output", str(driver.output)], driver.conf())
    print(driver.summary())
    assert driver.failovers() == 0, f"failovers in steady state:\n{driver.summary()}\n{out[-4000:]}"
    assert driver.checkpoints_completed() >= 1, driver.summary()
    assert driver.sources_ahead() >= 1, driver.summary()  # the executors ran sources ahead of their epoch
    got, expected = read_output(driver.output), seed_oracle(events)
    assert got == expected, compare(got, expected)


def test_large_state_rocksdb_job_on_the_cluster_is_exact_without_failover(driver):
    """About 200,000 keys in RocksDB with incremental checkpoints; one line per key at the end."""
    from .large_state_job import KEY_STRIDE

    events, keys = 300_000, 200_000  # every key once, half of them twice
    conf = driver.conf(
        **{
            "state.backend.type": "rocksdb",
            "execution.checkpointing.incremental": "true",
            "execution.epoch.max-records": 50_000,
        }
    )
    out = driver.run(
        LARGE_STATE_JOB, ["--events", str(events), "--keys", str(keys), "--output", str(driver.output)], conf
    )
    print(driver.summary())
    assert driver.failovers() == 0, f"failovers in steady state:\n{driver.summary()}\n{out[-4000:]}"
    assert driver.checkpoints_completed() >= 1, driver.summary()
    got, expected = read_output(driver.output), large_state_oracle(events, keys, KEY_STRIDE)
    assert got == expected, compare(got, expected)
