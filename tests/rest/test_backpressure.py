"""``GET /jobs/:jid/vertices/:vid/backpressure`` and the time, latency and alignment figures of an epoch-mode job.

An epoch's task measures none of them (continuous mode does: tests/metrics/test_continuous_metrics.py), so the
job of tests/rest/job.py shows Flink's shapes with 0 everywhere and no latency histogram.
"""

from __future__ import annotations

import jsonschema

from sparkpoint.rest.openapi import response_schema
from tests.rest.job import await_operation, rest_client, wait_for

TIME_METRICS = ("busyTimeMsPerSecond", "backPressuredTimeMsPerSecond", "idleTimeMsPerSecond")


def test_an_epoch_mode_job_shows_flinks_shapes_with_zeros(start_job):
    job = start_job(300)
    jid = job.job_id
    with rest_client(jid) as c:

        def everything_read() -> dict | None:
            d = c.get(f"/jobs/{jid}").json()
            lines = next(v for v in d["vertices"] if v["name"] == "lines")
            return d if lines["metrics"]["write-records"] == len(job.lines) else None

        details = wait_for(everything_read, 60, "every input line read")
        r = c.post(f"/jobs/{jid}/checkpoints", json={})
        cid = await_operation(c, f"/jobs/{jid}/checkpoints/{r.json()['request-id']}")["operation"]["checkpointId"]
        schema = response_schema("/jobs/{jobid}/vertices/{vertexid}/backpressure", "get", 200)
        for vertex in details["vertices"]:
            vid = vertex["id"]
            answer = c.get(f"/jobs/{jid}/vertices/{vid}/backpressure")
            assert answer.status_code == 200, answer.text
            info = answer.json()
            jsonschema.validate(info, schema)
            assert info["status"] == "ok" and info["backpressureLevel"] == "ok"
            assert [s["subtask"] for s in info["subtasks"]] == list(range(vertex["parallelism"]))
            for s in info["subtasks"]:
                assert (s["ratio"], s["idleRatio"], s["busyRatio"]) == (0, 0, 0)
                assert s["backpressureLevel"] == "ok" and s["attempt-number"] == 0
            m = vertex["metrics"]
            assert [m[f"accumulated-{k}-time"] for k in ("busy", "backpressured", "idle")] == [0, 0, 0]
            wanted = ",".join(f"{i}.{name}" for i in range(vertex["parallelism"]) for name in TIME_METRICS)
            values = c.get(f"/jobs/{jid}/vertices/{vid}/metrics", params={"get": wanted}).json()
            assert len(values) == 3 * vertex["parallelism"] and {v["value"] for v in values} == {"0"}, values
            sub = c.get(f"/jobs/{jid}/checkpoints/details/{cid}/subtasks/{vid}").json()
            assert [s["alignment"]["duration"] for s in sub["subtasks"]] == [0] * vertex["parallelism"]
            assert sub["summary"]["alignment"]["duration"]["max"] == 0
        assert not [m["id"] for m in c.get(f"/jobs/{jid}/metrics").json() if m["id"].startswith("latency.")]
        missing = c.get(f"/jobs/{jid}/vertices/{'f' * 32}/backpressure")
        assert missing.status_code == 404 and "has no vertex" in missing.json()["errors"][0]
