"""The REST API of a job running on the shared SparkSession: the same figures as in-process."""

from __future__ import annotations

from tests.rest.job import await_operation, rest_client, wait_for


def test_job_on_spark_reports_records_and_checkpoints(spark, start_job):
    job = start_job(300, target="spark")
    jid = job.job_id
    with rest_client(jid) as c:

        def all_read():
            d = c.get(f"/jobs/{jid}").json()
            return d if {v["name"]: v for v in d["vertices"]}["lines"]["metrics"]["write-records"] == 300 else None

        details = wait_for(all_read, 120, "every input line read on Spark")
        window = next(v for v in details["vertices"] if v["name"].startswith("Window"))
        assert window["metrics"]["read-records"] == 300 and window["parallelism"] == 2
        r = c.post(f"/jobs/{jid}/checkpoints", json={"checkpointType": "FULL"})
        cid = await_operation(c, f"/jobs/{jid}/checkpoints/{r.json()['request-id']}", 120)["operation"]["checkpointId"]
        on_disk = sorted(int(p.parent.name[4:]) for p in job.checkpoints.glob("chk-*/_metadata"))
        assert cid in on_disk
        stats = c.get(f"/jobs/{jid}/checkpoints").json()
        assert stats["counts"]["completed"] == len(on_disk)
        sub = c.get(f"/jobs/{jid}/checkpoints/details/{cid}/subtasks/{window['id']}").json()
        chk = job.checkpoints / f"chk-{cid}"
        sizes = {int(p.name.rsplit("-t", 1)[1]): p.stat().st_size for p in chk.glob("keyed-*")}
        assert {s["index"]: s["state_size"] for s in sub["subtasks"]} == sizes
