"""Ended jobs stay visible, as Flink keeps them: archived, listed by ``list -a``, served by ``history-server``.

A job that fails after some checkpoints is archived into ``jobmanager.archive.fs.dir`` (and the local job
store) with its final status, the failure in its exception history and its checkpoint statistics; ``sparkpoint
list -a`` lists it among the terminated jobs; ``sparkpoint history-server`` serves its archived answers and the
web UI. Each is compared with what the job did: the error it raised, the checkpoints it wrote on disk.
"""

from __future__ import annotations

import os
import subprocess
import sys

import httpx

from tests.rest.history_job import ROOT, archived_failed_job, start_history_server


def test_an_ended_job_is_archived_listed_and_served(make_env, tmp_path, monkeypatch):
    jid, archive, answers = archived_failed_job(make_env, tmp_path, monkeypatch)
    home = tmp_path / "home"
    assert answers[f"/jobs/{jid}"]["state"] == "FAILED"
    assert "boom at 400" in answers[f"/jobs/{jid}/exceptions"]["root-exception"]
    stats = answers[f"/jobs/{jid}/checkpoints"]
    on_disk = sorted(int(p.parent.name.split("-")[1]) for p in (tmp_path / "ck" / jid).glob("chk-*/_metadata"))
    assert on_disk and stats["counts"]["completed"] == len(on_disk)  # retained on failure: every one is there
    assert all(f"/jobs/{jid}/checkpoints/details/{cid}" in answers for cid in on_disk)
    assert (home / "archive" / jid).exists()  # the local job store too

    cli = {**os.environ, "SPARKPOINT_HOME": str(home)}
    listed = subprocess.run(
        [sys.executable, "-m", "sparkpoint.cli", "list", "-a"], capture_output=True, text=True, env=cli, cwd=ROOT
    )
    assert f" : {jid} : doomed (FAILED)" in listed.stdout, listed.stdout + listed.stderr

    server, base = start_history_server(archive, home)
    try:
        jobs = httpx.get(f"{base}/jobs/overview").json()["jobs"]
        assert [(j["jid"], j["state"], j["name"]) for j in jobs] == [(jid, "FAILED", "doomed")]
        assert httpx.get(f"{base}/jobs/{jid}/exceptions").json() == answers[f"/jobs/{jid}/exceptions"]
        assert httpx.get(f"{base}/jobs/{jid}/checkpoints").json()["counts"] == stats["counts"]
        assert httpx.get(f"{base}/overview").json()["jobs-failed"] == 1
        assert httpx.get(f"{base}/config").json()["features"]["web-history"] is True
        assert "<html" in httpx.get(f"{base}/").text.lower()
        assert httpx.get(f"{base}/jobs/{jid}/no-such-thing").status_code == 404
    finally:
        server.terminate()
        server.wait(30)
