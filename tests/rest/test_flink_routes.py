"""Flink REST routes that tools and dashboards read: a vertex's subtasks and their times, accumulators, task
managers, the JobManager's configuration; subsumed checkpoints marked discarded, in-progress ones timed live.

Each answer is compared with what is known independently: the records the job was given, the configuration it
was started with, the checkpoint directories on disk.
"""

from __future__ import annotations

import time
from pathlib import Path

from sparkpoint.checkpoint.stats import CheckpointStats
from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import MapFunction
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from tests.rest.job import await_operation, rest_client, wait_for

EVENTS = 3_000


class CountSeen(MapFunction):
    def open(self, runtime_context):
        self.seen = runtime_context.get_metrics_group().counter("seen")

    def map(self, value):
        self.seen.inc()
        return value


def _start(make_env, tmp_path, monkeypatch, **config):
    monkeypatch.setenv("SPARKPOINT_HOME", str(tmp_path / "home"))
    env = make_env(
        "local",
        **{
            "rest.enabled": True,
            "execution.checkpointing.interval": "1h",
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
            "state.checkpoints.num-retained": 1,
            "execution.epoch.max-records": 100,
            **config,
        },
    )
    env.set_parallelism(2)
    source = DataGeneratorSource(lambda i: i, None, num_splits=2, records_per_second=2_000)
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
    stream.map(CountSeen()).uid("count-seen").name("count-seen").print()
    return env.execute_async("routes")


def test_vertex_subtasks_accumulators_task_managers_and_config(make_env, tmp_path, monkeypatch):
    client = _start(make_env, tmp_path, monkeypatch, **{"rest.token": "s3cret-token"})
    jid = client.get_job_id()
    try:
        with rest_client(jid) as c:
            details = wait_for(lambda: c.get(f"/jobs/{jid}").json(), what="job details")
            vertex = next(v for v in details["vertices"] if v["name"] == "count-seen")
            wait_for(
                lambda: c.get(f"/jobs/{jid}").json()["vertices"][1]["metrics"]["write-records"] > 200, 30, "records"
            )
            one = c.get(f"/jobs/{jid}/vertices/{vertex['id']}").json()
            job_metrics = {v["id"]: v["metrics"] for v in c.get(f"/jobs/{jid}").json()["vertices"]}
            accumulated = c.get(f"/jobs/{jid}/accumulators").json()["user-task-accumulators"]
            times = c.get(f"/jobs/{jid}/vertices/{vertex['id']}/subtasktimes").json()
            managers = c.get("/taskmanagers").json()["taskmanagers"]
            config = {e["key"]: e["value"] for e in c.get("/jobmanager/config").json()}
            missing = c.get(f"/jobs/{jid}/vertices/{'f' * 32}")
    finally:
        client.cancel()
        client.wait(30)
    assert [s["subtask"] for s in one["subtasks"]] == [0, 1] and one["parallelism"] == 2
    # the subtasks' records add up to the vertex's (taken a moment later: at least as many)
    assert 0 < sum(s["metrics"]["write-records"] for s in one["subtasks"]) <= job_metrics[vertex["id"]]["write-records"]
    [seen] = [a for a in accumulated if a["name"] == "count-seen.seen"]
    assert int(seen["value"]) >= sum(s["metrics"]["read-records"] for s in one["subtasks"]) > 0
    assert all(t["timestamps"]["RUNNING"] == details["timestamps"]["RUNNING"] for t in times["subtasks"])
    assert {s["taskmanager-id"] for s in one["subtasks"]} == {managers[0]["id"]}
    assert config["state.checkpoints.num-retained"] == "1" and config["state.checkpoints.dir"].endswith("/ck")
    assert "s3cret-token" not in config.values() and "rest.token" in config  # shown, value hidden
    assert missing.status_code == 404


def test_subsumed_checkpoints_are_marked_discarded(make_env, tmp_path, monkeypatch):
    client = _start(make_env, tmp_path, monkeypatch)
    jid = client.get_job_id()
    try:
        with rest_client(jid) as c:
            for _ in range(3):
                r = c.post(f"/jobs/{jid}/checkpoints", json={})
                await_operation(c, f"/jobs/{jid}/checkpoints/{r.json()['request-id']}")
            history = c.get(f"/jobs/{jid}/checkpoints").json()["history"]
    finally:
        client.cancel()
        client.wait(30)
    completed = sorted((h for h in history if h["status"] == "COMPLETED"), key=lambda h: h["id"])
    assert len(completed) >= 3
    for h in completed:
        on_disk = Path(h["external_path"].removeprefix("file://"), "_metadata").exists()
        assert h["discarded"] == (h is not completed[-1]), h  # num-retained 1: all but the newest subsumed
        assert h["discarded"] != on_disk or h is completed[-1], h


def test_an_in_progress_checkpoint_shows_how_long_it_has_been_running():
    started = int(time.time() * 1000) - 5_000
    running = CheckpointStats(7, "IN_PROGRESS", False, started, 3).to_json()
    assert 5_000 <= running["end_to_end_duration"] < 60_000
    done = CheckpointStats(8, "COMPLETED", False, started, 3, end_to_end_duration=1_234).to_json()
    assert done["end_to_end_duration"] == 1_234 and done["discarded"] is False
