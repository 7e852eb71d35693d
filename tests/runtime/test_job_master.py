"""The JobMaster's parts seen from outside: its status machine, its listeners, its layering."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.errors import UserFunctionError
from sparkpoint.runtime.job_status import IllegalJobStatusTransition, JobStatus, JobStatusMachine
from tests.checkpoint.test_checkpointing import Count, FailOnce, key_of, oracle_totals
from tests.runtime.recording_listener import RecordingJobListener

ROOT = Path(__file__).resolve().parents[2]
RECORDER = "tests.runtime.recording_listener:RecordingJobListener"


def test_status_machine_allows_flinks_transitions_and_refuses_others():
    heard = []
    m = JobStatusMachine("j", lambda old, new, err: heard.append((old.name, new.name)))
    assert m.status is JobStatus.CREATED
    with pytest.raises(IllegalJobStatusTransition, match="CREATED to FINISHED"):
        m.transition(JobStatus.FINISHED)
    for s in (
        JobStatus.RUNNING,
        JobStatus.FAILING,
        JobStatus.RESTARTING,
        JobStatus.RUNNING,
        JobStatus.CANCELLING,
        JobStatus.CANCELED,
    ):
        m.transition(s)
    assert m.is_terminal()
    with pytest.raises(IllegalJobStatusTransition, match="CANCELED to RUNNING"):
        m.transition(JobStatus.RUNNING)
    assert heard == [
        ("CREATED", "RUNNING"),
        ("RUNNING", "FAILING"),
        ("FAILING", "RESTARTING"),
        ("RESTARTING", "RUNNING"),
        ("RUNNING", "CANCELLING"),
        ("CANCELLING", "CANCELED"),
    ]


def _counting(env, count: int, fn=None, rate=None):
    env.set_parallelism(2)
    src = DataGeneratorSource(key_of, count, num_splits=2, records_per_second=rate)
    return (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(fn or Count())
        .uid("count")
    )


def test_listener_from_config_hears_a_finished_job(make_env, tmp_path):
    count = 1_000
    env = make_env("local", **{"execution.epoch.max-records": 100, "execution.job-listeners": RECORDER})
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    stream = _counting(env, count)
    stream.print()
    result = env.execute("listened")
    events = RecordingJobListener.events[result.get_job_id()]
    assert RecordingJobListener.statuses(result.get_job_id()) == [("CREATED", "RUNNING"), ("RUNNING", "FINISHED")]
    epochs = [e[1] for e in events if e[0] == "epoch"]
    # 2 splits of 500 records, 100 per subtask and epoch: every epoch heard, in order, the last one finished
    assert [s.epoch for s in epochs] == list(range(len(epochs))) and len(epochs) >= 5
    assert [s.finished for s in epochs] == [False] * (len(epochs) - 1) + [True]
    assert epochs[-1].total_records_in == count
    checkpoints = [e for e in events if e[0] == "checkpoint"]
    ids = [e[1] for e in checkpoints]
    assert ids and ids == sorted(set(ids)) and all(e[3] for e in checkpoints)  # _metadata written when heard


def test_listener_hears_failover_and_restart(make_env, tmp_path):
    flag = tmp_path / "failed-once"
    count = 2_000
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 20,
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "0 ms",
            "execution.job-listeners": [RECORDER],
        },
    )
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    got = _counting(env, count, FailOnce(flag)).execute_and_collect()
    last: dict = {}
    for key, n in got:
        last[key] = max(last.get(key, 0), n)
    assert flag.exists() and last == dict(oracle_totals(count))
    job_id = [
        j
        for j, ev in RecordingJobListener.events.items()
        if ("status", JobStatus.FAILING, JobStatus.RESTARTING) in [e[:3] for e in ev]
    ]
    assert len(job_id) == 1
    assert RecordingJobListener.statuses(job_id[0]) == [
        ("CREATED", "RUNNING"),
        ("RUNNING", "FAILING"),
        ("FAILING", "RESTARTING"),
        ("RESTARTING", "RUNNING"),
        ("RUNNING", "FINISHED"),
    ]


def test_listener_hears_failure_and_cancel(make_env, tmp_path):
    class Boom(Count):
        def process_element(self, value, ctx):
            raise RuntimeError("always")

    env = make_env("local", **{"restart-strategy.type": "none", "execution.job-listeners": RECORDER})
    _counting(env, 10, Boom()).print()
    before = set(RecordingJobListener.events)
    with pytest.raises(UserFunctionError):
        env.execute()
    (failed,) = set(RecordingJobListener.events) - before
    assert RecordingJobListener.statuses(failed) == [
        ("CREATED", "RUNNING"),
        ("RUNNING", "FAILING"),
        ("FAILING", "FAILED"),
    ]

    env2 = make_env("local", **{"execution.epoch.max-records": 50, "execution.job-listeners": RECORDER})
    _counting(env2, 10**9, rate=1_000).print()
    client = env2.execute_async("cancelled")
    time.sleep(0.5)
    client.cancel()
    client.wait(30)
    assert RecordingJobListener.statuses(client.get_job_id()) == [
        ("CREATED", "RUNNING"),
        ("RUNNING", "CANCELLING"),
        ("CANCELLING", "CANCELED"),
    ]


def test_the_runtime_does_not_import_the_rest_package():
    code = (
        "import sys, sparkpoint.runtime.job_master, sparkpoint.runtime.local_executor;"
        "print(sorted(m for m in sys.modules if m.startswith('sparkpoint.rest')))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


class _RecordingCommitter:
    def __init__(self, log):
        self.log = log

    def commit(self, committables):
        self.log.extend(committables)


class _Sink:
    def __init__(self):
        self.committed: list = []

    def create_committer(self):
        return _RecordingCommitter(self.committed)


def test_sink_committer_commits_exactly_the_epochs_a_completed_checkpoint_covers():
    from types import SimpleNamespace

    from sparkpoint.runtime.sink_committer import SinkCommitter

    sink = _Sink()
    plan = SimpleNamespace(nodes={7: SimpleNamespace(sink=sink)}, collect_nodes=frozenset)
    c = SinkCommitter(plan, exactly_once=True)  # type: ignore[arg-type]
    c.add_epoch(0, {7: ["e0"]})
    c.add_epoch(1, {7: ["e1"]})
    c.on_checkpoint_triggered(1)  # barrier after epoch 1: covers e0, e1
    c.add_epoch(2, {7: ["e2"]})
    c.on_checkpoint_triggered(2)  # covers e0, e1, e2
    c.add_epoch(3, {7: ["e3"]})
    assert c.pending_committables() == {7: ["e0", "e1", "e2", "e3"]} and sink.committed == []
    c.forget([1])  # checkpoint 1 was aborted: nothing committed
    assert sink.committed == []
    c.on_checkpoint_completed(2)
    assert sink.committed == ["e0", "e1", "e2"] and c.pending_committables() == {7: ["e3"]}

    at_least_once = SinkCommitter(plan, exactly_once=False)  # type: ignore[arg-type]
    at_least_once.add_epoch(4, {7: ["e4"]})
    assert sink.committed[-1] == "e4" and at_least_once.pending_committables() == {}


def test_job_client_reports_the_job_masters_status(make_env):
    """JobClient.get_job_status() follows the JobMaster's status machine, not a guess from the future."""
    import time as _time

    from sparkpoint.common import WatermarkStrategy
    from sparkpoint.datastream import JobStatus
    from sparkpoint.datastream.connectors.generator import DataGeneratorSource

    env = make_env("local", **{"execution.epoch.max-records": 10})
    env.from_source(
        DataGeneratorSource(lambda i: i, 1_000_000, num_splits=1, records_per_second=200),
        WatermarkStrategy.no_watermarks(),
        "gen",
    ).print()
    client = env.execute_async("status")
    deadline = _time.time() + 30
    while client.get_job_status().result() is not JobStatus.RUNNING and _time.time() < deadline:
        _time.sleep(0.05)
    assert client.get_job_status().result() is JobStatus.RUNNING
    client.cancel()
    client.wait(60)
    assert client.get_job_status().result() is JobStatus.CANCELED

    done = make_env("local")
    done.from_collection([1, 2, 3]).print()
    finished = done.execute_async("done")
    finished.wait(60)
    finished.cancel()  # too late: the job had already finished
    assert finished.get_job_status().result() is JobStatus.FINISHED
