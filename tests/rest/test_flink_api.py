"""The REST API answers as Flink's does: field by field, with the figures of what the job really did.

Field sets come from Flink's reference (:mod:`tests.rest.flink_shapes`); values from the job's
input (records in = input lines, watermarks = the last timestamp minus the bound), the
checkpoint directory (completed checkpoints, state file sizes) and the committed output.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from sparkpoint.testing.kill_loop import read_committed_lines
from tests.rest import flink_shapes as F
from tests.rest.job import await_operation, rest_client, wait_for, window_oracle

BOUND_MS = 5_000


def _completed_on_disk(job) -> dict[int, Path]:
    return {int(p.parent.name[4:]): p.parent for p in job.checkpoints.glob("chk-*/_metadata")}


def _vertices(details: dict) -> dict[str, dict]:
    return {v["name"]: v for v in details["vertices"]}


def _read_everything(c, job) -> dict:
    """/jobs/:jid once the source has read every input line and the watermark has followed."""

    def done():
        d = c.get(f"/jobs/{job.job_id}").json()
        return d if _vertices(d)["lines"]["metrics"]["write-records"] == len(job.lines) else None

    details = wait_for(done, 60, "every input line read")
    window = next(v for v in details["vertices"] if v["name"].startswith("Window"))
    # bounded out-of-orderness: the watermark trails the highest timestamp read by the bound (and 1 ms)
    highest = int(job.lines[-1].split("\t")[0]) - BOUND_MS - 1

    def watermarks():
        values = {int(w["value"]) for w in c.get(f"/jobs/{job.job_id}/vertices/{window['id']}/watermarks").json()}
        return len(values) == 1 and 0 < values.pop() <= highest

    wait_for(watermarks, 30, "the window's watermark")
    return details


def test_job_overview_plan_config_and_metrics(start_job):
    job = start_job(600)
    jid = job.job_id
    with rest_client(jid) as c:
        details = _read_everything(c, job)
        assert set(details) == F.JOB_DETAILS and details["jid"] == jid and details["state"] == "RUNNING"
        assert details["isStoppable"] is True and details["job-type"] == "STREAMING"
        vertices = _vertices(details)
        window = next(v for n, v in vertices.items() if n.startswith("Window"))
        for v in details["vertices"]:
            assert set(v) == F.JOB_VERTEX and set(v["metrics"]) == F.IO_METRICS
            assert set(v["tasks"]) == F.EXECUTION_STATES and v["tasks"]["RUNNING"] == v["parallelism"] == 2
            assert re.fullmatch(r"[0-9a-f]{32}", v["id"]) and v["status"] == "RUNNING"
        assert window["metrics"]["read-records"] == len(job.lines)  # every line reached the window
        # the vertex ids are stable: derived from the uid, the same in the plan
        plan = c.get(f"/jobs/{jid}/plan").json()["plan"]
        assert set(plan) == F.PLAN and [n["id"] for n in plan["nodes"]] == [v["id"] for v in details["vertices"]]
        assert all(
            set(n) >= F.PLAN_NODE and all(set(i) == F.PLAN_INPUT for i in n.get("inputs", [])) for n in plan["nodes"]
        )
        by_id = {n["id"]: n for n in plan["nodes"]}
        assert by_id[window["id"]]["inputs"][0]["ship_strategy"] == "HASH"
        assert by_id[window["id"]]["inputs"][0]["id"] == vertices["Map"]["id"]
        overview = c.get("/overview").json()
        assert set(overview) == F.OVERVIEW and overview["jobs-running"] == 1
        dashboard = c.get("/config").json()
        assert set(dashboard) == F.DASHBOARD and set(dashboard["features"]) == F.DASHBOARD_FEATURES
        assert c.get("/jobs").json() == {"jobs": [{"id": jid, "status": "RUNNING"}]}
        listed = c.get("/jobs/overview").json()["jobs"]
        assert len(listed) == 1 and set(listed[0]) == F.JOBS_OVERVIEW_JOB and listed[0]["tasks"]["total"] == 8
        config = c.get(f"/jobs/{jid}/config").json()
        assert set(config) == F.JOB_CONFIG and set(config["execution-config"]) == F.EXECUTION_CONFIG
        assert config["execution-config"]["user-config"]["execution.epoch.max-records"] == "100"
        exceptions = c.get(f"/jobs/{jid}/exceptions").json()
        assert exceptions["exceptionHistory"] == {"entries": [], "truncated": False}
        # metrics under Flink's names: per subtask, summed over subtasks, and the job's
        per_subtask = c.get(
            f"/jobs/{jid}/vertices/{window['id']}/metrics", params={"get": "0.numRecordsIn,1.numRecordsIn"}
        ).json()
        assert sum(int(m["value"]) for m in per_subtask) == len(job.lines)
        [agg] = c.get(
            f"/jobs/{jid}/vertices/{window['id']}/subtasks/metrics",
            params={"get": "numRecordsIn", "agg": "min,max,avg,sum"},
        ).json()
        assert set(agg) == F.AGGREGATED_METRIC and agg["sum"] == len(job.lines)
        assert agg["min"] + agg["max"] == len(job.lines)  # two subtasks
        [late] = c.get(
            f"/jobs/{jid}/vertices/{window['id']}/subtasks/metrics", params={"get": "numLateRecordsDropped"}
        ).json()
        assert late["sum"] == 0  # the input is in order
        source_out = c.get(
            f"/jobs/{jid}/vertices/{vertices['lines']['id']}/subtasks/metrics",
            params={"get": "numRecordsOut", "agg": "sum"},
        ).json()
        assert source_out == [{"id": "numRecordsOut", "sum": float(len(job.lines))}]


def test_checkpoints_manual_triggers_details_and_subtasks(start_job):
    job = start_job(400, **{"execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION"})
    jid = job.job_id
    with rest_client(jid) as c:
        details = _read_everything(c, job)
        ids = []
        for kind in ("FULL", "INCREMENTAL", "CONFIGURED"):
            r = c.post(f"/jobs/{jid}/checkpoints", json={"checkpointType": kind})
            assert r.status_code == 202 and set(r.json()) == F.TRIGGERED
            op = await_operation(c, f"/jobs/{jid}/checkpoints/{r.json()['request-id']}")
            assert set(op) == F.OPERATION_STATUS and set(op["operation"]) == {"checkpointId"}
            ids.append(op["operation"]["checkpointId"])
        assert ids == sorted(ids) and len(set(ids)) == 3
        stats = c.get(f"/jobs/{jid}/checkpoints").json()
        on_disk = _completed_on_disk(job)
        assert set(ids) <= set(on_disk)
        assert set(stats) == F.CHECKPOINTING and set(stats["counts"]) == F.COUNTS
        assert stats["counts"]["completed"] == len(on_disk) and stats["counts"]["failed"] == 0
        assert stats["counts"]["total"] == len(on_disk) + stats["counts"]["in_progress"]
        assert set(stats["summary"]) == F.SUMMARY and all(set(s) == F.STATS for s in stats["summary"].values())
        completed = [h for h in stats["history"] if h["status"] == "COMPLETED"]
        assert sorted(h["id"] for h in completed) == sorted(on_disk)
        assert all(set(h) == F.COMPLETED_CHECKPOINT and h["tasks"] == {} for h in completed)
        # Flink counts every subtask of every vertex: the same figure for every checkpoint of the job
        all_subtasks = sum(v["parallelism"] for v in details["vertices"])
        assert all_subtasks == 2 * len(details["vertices"]) > 2
        assert {(h["num_subtasks"], h["num_acknowledged_subtasks"]) for h in completed} == {(all_subtasks,) * 2}
        assert stats["latest"]["completed"]["num_subtasks"] == all_subtasks
        durations = [h["end_to_end_duration"] for h in completed]
        assert stats["summary"]["end_to_end_duration"]["max"] == max(durations)
        assert stats["summary"]["end_to_end_duration"]["min"] == min(durations)
        assert set(stats["latest"]) == F.LATEST and stats["latest"]["savepoint"] is None
        latest = stats["latest"]["completed"]
        assert latest["id"] == max(on_disk) and latest["external_path"].endswith(f"/chk-{max(on_disk)}")
        job_metrics = {
            m["id"]: m["value"]
            for m in c.get(
                f"/jobs/{jid}/metrics",
                params={
                    "get": "numberOfCompletedCheckpoints,numberOfFailedCheckpoints,"
                    "lastCheckpointSize,lastCheckpointDuration"
                },
            ).json()
        }
        assert job_metrics == {
            "numberOfCompletedCheckpoints": str(len(on_disk)),
            "numberOfFailedCheckpoints": "0",
            "lastCheckpointSize": str(latest["checkpointed_size"]),
            "lastCheckpointDuration": str(latest["end_to_end_duration"]),
        }
        config = c.get(f"/jobs/{jid}/checkpoints/config").json()
        assert set(config) == F.CHECKPOINT_CONFIG and set(config["externalization"]) == F.EXTERNALIZATION
        assert (config["mode"], config["interval"]) == ("exactly_once", 3_600_000)
        assert config["externalization"] == {"enabled": True, "delete_on_cancellation": False}
        # one checkpoint in detail: every vertex, and the window's keyed state as the files on disk hold it
        cid = ids[-1]
        chk = on_disk[cid]
        detail = c.get(f"/jobs/{jid}/checkpoints/details/{cid}").json()
        assert set(detail) == F.COMPLETED_CHECKPOINT and detail["id"] == cid
        assert set(detail["tasks"]) == {v["id"] for v in details["vertices"]}
        assert all(
            set(t) == F.TASK_CHECKPOINT and t["num_acknowledged_subtasks"] == t["num_subtasks"] == 2
            for t in detail["tasks"].values()
        )
        assert detail["num_subtasks"] == detail["num_acknowledged_subtasks"] == all_subtasks
        window = next(v for v in details["vertices"] if v["name"].startswith("Window"))
        keyed_files = {int(p.name.rsplit("-t", 1)[1]): p.stat().st_size for p in chk.glob("keyed-s*-t*")}
        assert detail["tasks"][window["id"]]["state_size"] == sum(keyed_files.values()) > 0
        sub = c.get(f"/jobs/{jid}/checkpoints/details/{cid}/subtasks/{window['id']}").json()
        assert set(sub) == F.TASK_CHECKPOINT_WITH_SUBTASKS and set(sub["summary"]) == F.TASK_SUMMARY
        assert set(sub["summary"]["checkpoint_duration"]) == {"sync", "async"}
        assert [s["index"] for s in sub["subtasks"]] == [0, 1]
        for s in sub["subtasks"]:
            assert set(s) == F.COMPLETED_SUBTASK and s["status"] == "completed"
            assert s["state_size"] == keyed_files[s["index"]]
            assert set(s["checkpoint"]) == {"sync", "async"} and s["ack_timestamp"] >= detail["trigger_timestamp"]
        assert sub["summary"]["state_size"]["max"] == max(keyed_files.values())
        missing = c.get(f"/jobs/{jid}/checkpoints/details/{max(on_disk) + 50}")
        assert missing.status_code == 404 and set(missing.json()) == {"errors"}


def test_savepoint_disposal_and_stop_with_drain(start_job, tmp_path):
    job = start_job(500)
    jid = job.job_id
    target = (tmp_path / "savepoints" / "manual").as_uri()
    with rest_client(jid) as c:
        _read_everything(c, job)
        r = c.post(f"/jobs/{jid}/savepoints", json={"target-directory": target, "cancel-job": False})
        assert r.status_code == 202 and set(r.json()) == F.TRIGGERED
        op = await_operation(c, f"/jobs/{jid}/savepoints/{r.json()['request-id']}")
        location = op["operation"]["location"]
        assert location.startswith(target + "/savepoint-") and Path(location[7:], "_metadata").exists()
        stats = c.get(f"/jobs/{jid}/checkpoints").json()
        assert stats["latest"]["savepoint"]["external_path"] == location
        assert stats["latest"]["savepoint"]["is_savepoint"] is True
        disposal = c.post("/savepoint-disposal", json={"savepoint-path": location})
        assert disposal.status_code == 202
        done = await_operation(c, f"/savepoint-disposal/{disposal.json()['request-id']}")
        assert done == {"status": {"id": "COMPLETED"}, "operation": {}} and not Path(location[7:]).exists()
        # the last window is still open (the watermark trails the input): only --drain fires it
        oracle = window_oracle(job.lines)
        assert len(Counter(read_committed_lines(job.output))) < len(oracle)
        stop = c.post(f"/jobs/{jid}/stop", json={"drain": True, "targetDirectory": target})
        assert stop.status_code == 202
        final = await_operation(c, f"/jobs/{jid}/savepoints/{stop.json()['request-id']}")
        assert final["operation"]["location"].startswith(target + "/savepoint-")
    job.client.wait(30)
    assert job.client.get_job_status().result().name == "FINISHED"
    written = Counter()
    for line in read_committed_lines(job.output):
        start, channel, count = line.split("\t")
        written[(int(start), channel)] += int(count)
    assert written == oracle


def test_a_failed_checkpoint_in_counts_latest_history_and_metrics(start_job, monkeypatch):
    job = start_job(200, **{"execution.checkpointing.tolerable-failed-checkpoints": 5})
    jid = job.job_id
    with rest_client(jid) as c:
        details = _read_everything(c, job)
        window_id = next(v["id"] for v in details["vertices"] if v["name"].startswith("Window"))
        before = set(_completed_on_disk(job))
        monkeypatch.setenv("SPARKPOINT_FAIL_UPLOAD", "1")  # every keyed upload fails: the tasks decline
        r = c.post(f"/jobs/{jid}/checkpoints", json={"checkpointType": "FULL"})
        op = await_operation(c, f"/jobs/{jid}/checkpoints/{r.json()['request-id']}")
        monkeypatch.delenv("SPARKPOINT_FAIL_UPLOAD")
        assert (
            set(op["operation"]) == {"failureCause"}  # Flink's CheckpointInfo (a savepoint's is "failure-cause")
            and "upload failure injected" in op["operation"]["failureCause"]["stack-trace"]
        )
        assert set(_completed_on_disk(job)) == before  # nothing new completed on disk
        stats = c.get(f"/jobs/{jid}/checkpoints").json()
        failed = stats["latest"]["failed"]
        assert stats["counts"]["failed"] == 1 and set(failed) == F.FAILED_CHECKPOINT
        assert failed["status"] == "FAILED" and "upload failure injected" in failed["failure_message"]
        assert failed["failure_timestamp"] >= failed["trigger_timestamp"]
        assert [h["id"] for h in stats["history"] if h["status"] == "FAILED"] == [failed["id"]]
        [metric] = c.get(f"/jobs/{jid}/metrics", params={"get": "numberOfFailedCheckpoints"}).json()
        assert metric == {"id": "numberOfFailedCheckpoints", "value": "1"}
        detail = c.get(f"/jobs/{jid}/checkpoints/details/{failed['id']}").json()
        window = detail["tasks"][window_id]  # its subtasks declined: none acknowledged
        assert (window["status"], window["num_acknowledged_subtasks"], window["num_subtasks"]) == ("FAILED", 0, 2)
        assert detail["num_subtasks"] == sum(t["num_subtasks"] for t in detail["tasks"].values())
        assert (
            detail["num_acknowledged_subtasks"]
            == sum(t["num_acknowledged_subtasks"] for t in detail["tasks"].values())
            < detail["num_subtasks"]
        )
        assert (failed["num_subtasks"], failed["num_acknowledged_subtasks"]) == (
            detail["num_subtasks"],
            detail["num_acknowledged_subtasks"],
        )
        assert job.client.get_job_status().result().name == "RUNNING"  # tolerated


def test_a_savepoint_without_a_directory_and_a_cancel_of_a_finished_job_are_refused_as_flink_does(start_job, tmp_path):
    """``POST /jobs/:jid/savepoints`` with no target directory and no ``state.savepoints.dir``: 400 at once (it was
    accepted, then failed); ``PATCH /jobs/:jid`` of a job that FINISHED: 409 (it was accepted)."""
    job = start_job(200, **{"state.savepoints.dir": "", "sparkpoint.rest.shutdown-grace": "30 s"})
    jid = job.job_id
    with rest_client(jid) as c:
        _read_everything(c, job)
        r = c.post(f"/jobs/{jid}/savepoints", json={"cancel-job": False})
        assert r.status_code == 400
        assert r.json()["errors"] == [
            "Config key [state.savepoints.dir] is not set. Property [target-directory] must be provided."
        ]
        into = (tmp_path / "checkpoints" / "stop").as_uri()  # under an allowed root: the checkpoints directory
        stop = c.post(f"/jobs/{jid}/stop", json={"drain": True, "targetDirectory": into})
        # the endpoint serves on until the stop's outcome is read (or its grace passed)
        wait_for(lambda: c.get(f"/jobs/{jid}").json()["state"] == "FINISHED", 30, "the job's end")
        cancel = c.patch(f"/jobs/{jid}", params={"mode": "cancel"})
        assert cancel.status_code == 409 and "already reached another terminal state (FINISHED)" in cancel.text
        await_operation(c, f"/jobs/{jid}/savepoints/{stop.json()['request-id']}")
