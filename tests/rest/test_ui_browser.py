"""The web UI in a real browser: headless Chromium loads the pages of a running job's endpoint.

Chromium renders each page (``--dump-dom`` after a virtual-time budget, so the page's requests to the REST
API complete) and the figures in the DOM, found by their ``data-field`` attributes, must equal the job's own
declaration (uids, parallelism), a hand count of its input (records in and out), and what the REST API
answers in the same test (checkpoint counts, history, details per subtask, configuration). Screenshots
go to ``$SPARKPOINT_TEST_ARTIFACTS/ui`` (default ``test-artifacts/ui`` in the repository).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from tests.rest.job import await_operation, registry_entry, rest_client, wait_for

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
UIDS = ["lines", "pairs", "window-counts", "counts-sink"]  # what tests/rest/job.py declares, in order


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium, installed with apt-get when missing (the tests run as root)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log = ""
    for command in (
        ["apt-get", "install", "-y", "chromium"],
        ["apt-get", "update"],  # stale lists: update, retry
        ["apt-get", "install", "-y", "chromium"],
    ):
        if found:
            break
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as e:
            log += f"$ {' '.join(command)}: {e}\n"
            continue
        log += f"$ {' '.join(command)} (exit {done.returncode})\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}\n"
        found = shutil.which("chromium")
    assert found, f"chromium is missing and could not be installed with apt-get:\n{log}"
    return found


@pytest.fixture(scope="session")
def artifacts() -> Path:
    path = Path(os.environ.get("SPARKPOINT_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "ui"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _chromium(binary: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def dump(binary: str, url: str, budget_ms: int = 4000) -> Page:
    done = _chromium(binary, f"--virtual-time-budget={budget_ms}", "--dump-dom", url)
    assert done.returncode == 0 and "<html" in done.stdout, done.stderr[-2000:]
    page = Page()
    page.feed(done.stdout)
    assert page.body.get("data-state") == "ready", f"{url} did not render:\n{done.stdout[:3000]}"
    return page


def screenshot(binary: str, url: str, path: Path) -> None:
    done = _chromium(binary, "--virtual-time-budget=4000", "--window-size=1400,1000", f"--screenshot={path}", url)
    assert done.returncode == 0, done.stderr[-2000:]
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, (path, len(data))


class Page(HTMLParser):
    """The rendered DOM as (attributes of the nearest data-* scope, data-field, text) triples."""

    def __init__(self) -> None:
        super().__init__()
        self.body: dict = {}
        self.stack: list[dict] = []
        self.fields: list[tuple[dict, str, str]] = []
        self.elements: list[tuple[dict, dict]] = []  # (data-* scope above it, its own attributes)
        self._open: list[list] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "body":
            self.body = a
        scope = dict(self.stack[-1]) if self.stack else {}
        self.elements.append((dict(scope), a))
        scope.update({k: v for k, v in a.items() if k.startswith("data-") and k != "data-field"})
        self.stack.append(scope)
        self._open.append([a.get("data-field"), ""])

    def handle_endtag(self, tag: str) -> None:
        if not self.stack:
            return
        scope = self.stack.pop()
        field, text = self._open.pop()
        if field:
            self.fields.append((scope, field, text.strip()))
        if self._open:
            self._open[-1][1] += text

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1][1] += data

    def values(self, field: str, **scope: str) -> list[str]:
        return [
            text for s, f, text in self.fields if f == field and all(s.get(f"data-{k}") == v for k, v in scope.items())
        ]

    def bars(self, chart: str) -> dict[int, str]:
        """checkpoint id -> the value a bar of chart ``chart`` stands for."""
        return {
            int(a["data-bar"]): a["data-value"]
            for s, a in self.elements
            if "data-bar" in a and s.get("data-chart") == chart
        }

    def value(self, field: str, **scope: str) -> str | None:
        found = self.values(field, **scope)
        assert len(found) == 1, (field, scope, found)
        return found[0]

    def raw(self, field: str, **scope: str) -> str:
        """The API's number behind a figure shown in human units (its ``data-raw``)."""
        found = [
            a["data-raw"]
            for s, a in self.elements
            if a.get("data-field") == field and all(s.get(f"data-{k}") == v for k, v in scope.items())
        ]
        assert len(found) == 1, (field, scope, found)
        return found[0]

    def labels(self, chart: str) -> list[str]:
        """The bar labels a chart shows."""
        return [a["data-label"] for s, a in self.elements if "data-label" in a and s.get("data-chart") == chart]


def event_time(ms: int) -> str:
    """A watermark as the UI shows it: the UTC date-time of its milliseconds."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _base(job_id: str) -> str:
    entry = registry_entry(job_id)
    return f"{entry['scheme']}://{entry['address']}:{entry['port']}/"


def _everything_read(c: httpx.Client, job) -> dict:
    def done() -> dict | None:
        d = c.get(f"/jobs/{job.job_id}").json()
        lines = next(v for v in d["vertices"] if v["name"] == "lines")
        return d if lines["metrics"]["write-records"] == len(job.lines) else None

    return wait_for(done, 60, "every input line read")


def test_pages_show_the_jobs_figures(start_job, chromium, artifacts, tmp_path):
    job = start_job(600, **{"execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION"})
    jid, base = job.job_id, _base(job.job_id)
    with rest_client(jid) as c:
        details = _everything_read(c, job)
        ids = []
        for kind in ("FULL", "INCREMENTAL"):
            r = c.post(f"/jobs/{jid}/checkpoints", json={"checkpointType": kind})
            ids.append(
                await_operation(c, f"/jobs/{jid}/checkpoints/{r.json()['request-id']}")["operation"]["checkpointId"]
            )
        r = c.post(f"/jobs/{jid}/savepoints", json={"target-directory": (tmp_path / "savepoints").as_uri()})
        await_operation(c, f"/jobs/{jid}/savepoints/{r.json()['request-id']}")
        stats = c.get(f"/jobs/{jid}/checkpoints").json()
        listed = next(j for j in c.get("/jobs/overview").json()["jobs"] if j["jid"] == jid)
        config = c.get(f"/jobs/{jid}/checkpoints/config").json()
        job_config = c.get(f"/jobs/{jid}/config").json()["execution-config"]["user-config"]
        errors = c.get(f"/jobs/{jid}/exceptions").json()
        vertices = {v["id"]: v for v in details["vertices"]}
        watermarks = {
            vid: min(int(float(w["value"])) for w in c.get(f"/jobs/{jid}/vertices/{vid}/watermarks").json())
            for vid in vertices
        }
        subtasks = {vid: c.get(f"/jobs/{jid}/checkpoints/details/{ids[-1]}/subtasks/{vid}").json() for vid in vertices}
        pairs_vid = next(n["id"] for n in details["plan"]["nodes"] if n["description"].endswith("(uid pairs)"))
        sub_watermarks = {
            w["id"].split(".")[0]: int(float(w["value"]))
            for w in c.get(f"/jobs/{jid}/vertices/{pairs_vid}/watermarks").json()
        }
        [taskmanager] = [t["id"] for t in c.get("/taskmanagers").json()["taskmanagers"]]

    jobs = dump(chromium, base + "#/")
    assert jobs.value("job-state", job=jid) == "RUNNING" and jobs.value("job-id", job=jid) == jid
    assert jobs.value("job-name", job=jid) == listed["name"] == "rest-counts"
    started = datetime.fromtimestamp(listed["start-time"] / 1000, UTC)
    assert jobs.value("job-start", job=jid) == started.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]

    overview = dump(chromium, base + f"#/jobs/{jid}")
    by_uid = {overview.value("op-uid", vertex=vid): vid for vid in vertices}
    assert sorted(by_uid) == sorted(UIDS)  # the job's own declaration
    assert sorted(overview.values("graph-uid")) == sorted(f"uid {u}" for u in UIDS)
    for vid in by_uid.values():
        assert overview.value("op-parallelism", vertex=vid) == "2" == str(vertices[vid]["parallelism"])
    n = len(job.lines)  # by hand: every line once
    assert overview.value("op-records-out", vertex=by_uid["lines"]) == str(n)
    assert overview.value("op-records-in", vertex=by_uid["pairs"]) == str(n)
    assert overview.value("op-records-out", vertex=by_uid["pairs"]) == str(n)
    assert overview.value("op-records-in", vertex=by_uid["window-counts"]) == str(n)
    assert overview.value("op-late-records", vertex=by_uid["window-counts"]) == "0"  # the input is in order
    for uid in ("window-counts", "counts-sink"):  # downstream of the timestamps
        assert overview.raw("op-watermark", vertex=by_uid[uid]) == str(watermarks[by_uid[uid]]) != "0"
        assert overview.value("op-watermark", vertex=by_uid[uid]) == event_time(watermarks[by_uid[uid]])
    assert float(overview.value("epochs-per-second")) > 0

    pairs = by_uid["pairs"]
    vertex = dump(chromium, base + f"#/jobs/{jid}/vertices/{pairs}")
    assert vertex.value("vertex-parallelism") == "2" and vertex.value("vertex-name") == vertices[pairs]["name"]
    assert sum(int(x) for x in vertex.values("sub-records-out")) == n == int(vertex.value("vertex-records-out"))
    assert len(vertex.values("sub-status")) == 2 and set(vertex.values("sub-status")) == {"RUNNING"}
    for subtask, mark in sub_watermarks.items():
        assert vertex.raw("sub-watermark", subtask=subtask) == str(mark)
    assert set(vertex.values("sub-taskmanager")) == {taskmanager}

    check_checkpoints_page(dump(chromium, base + f"#/jobs/{jid}/checkpoints"), stats)
    check_details_page(dump(chromium, base + f"#/jobs/{jid}/checkpoints/{ids[-1]}"), subtasks)
    check_config_page(dump(chromium, base + f"#/jobs/{jid}/config"), config, job_config)
    exceptions = dump(chromium, base + f"#/jobs/{jid}/exceptions")
    assert exceptions.value("exception-count") == f"{len(errors['exceptionHistory']['entries'])} exception(s)"

    for name, route in (
        ("jobs", "#/"),
        ("overview", f"#/jobs/{jid}"),
        ("checkpoints", f"#/jobs/{jid}/checkpoints"),
        ("checkpoint", f"#/jobs/{jid}/checkpoints/{ids[-1]}"),
        ("config", f"#/jobs/{jid}/config"),
        ("exceptions", f"#/jobs/{jid}/exceptions"),
    ):
        screenshot(chromium, base + route, artifacts / f"{name}.png")


def check_checkpoints_page(page: Page, stats: dict) -> None:
    """Counts, latest, every history row and both charts equal ``GET /jobs/:jid/checkpoints``."""
    counts = stats["counts"]
    for key in ("completed", "failed", "total", "in_progress", "restored"):
        assert page.value("count-" + key.replace("_", "-")) == str(counts[key]), key
    history = stats["history"]
    assert sorted(int(x) for x in page.values("cp-id")) == sorted(h["id"] for h in history)
    assert any(h["is_savepoint"] for h in history) and any(not h["is_savepoint"] for h in history)
    for h in history:
        row = {"checkpoint": str(h["id"])}
        assert page.value("cp-status", **row) == h["status"]
        assert page.value("cp-savepoint", **row) == ("savepoint" if h["is_savepoint"] else "checkpoint")
        assert page.raw("cp-duration", **row) == str(h["end_to_end_duration"])
        assert page.raw("cp-state-size", **row) == str(h["state_size"])
        assert page.raw("cp-checkpointed-size", **row) == str(h["checkpointed_size"])
        assert re.fullmatch(r"\d+ ms|\d+\.\d s|\d+ min \d+ s", page.value("cp-duration", **row))  # human units
        assert re.fullmatch(r"\d+ B|\d+\.\d [KMGT]iB", page.value("cp-state-size", **row))
        assert page.value("cp-acks", **row) == f"{h['num_acknowledged_subtasks']}/{h['num_subtasks']}"
    assert page.bars("chart-duration") == {h["id"]: str(max(0, h["end_to_end_duration"])) for h in history}
    assert page.bars("chart-size") == {h["id"]: str(h["state_size"]) for h in history}
    latest = stats["latest"]
    assert page.value("latest-savepoint-path") == latest["savepoint"]["external_path"]
    assert page.value("latest-savepoint-id") == str(latest["savepoint"]["id"])
    assert page.value("latest-completed-id") == str(latest["completed"]["id"])
    assert page.value("latest-completed-path") == latest["completed"]["external_path"]


def check_details_page(page: Page, subtasks: dict) -> None:
    """Each operator's acks and every subtask's figures equal ``.../details/:cid/subtasks/:vid``."""
    for vid, sub in subtasks.items():
        assert page.value("vx-acks", vertex=vid) == f"{sub['num_acknowledged_subtasks']}/{sub['num_subtasks']}"
        assert page.value("vx-status", vertex=vid) == sub["status"]
        assert len(page.values("st-status", vertex=vid)) == sub["num_subtasks"] == len(sub["subtasks"])
        for s in sub["subtasks"]:
            at = {"vertex": vid, "subtask": str(s["index"])}
            assert page.raw("st-state-size", **at) == str(s["state_size"])
            assert page.raw("st-checkpointed-size", **at) == str(s["checkpointed_size"])
            assert page.raw("st-sync", **at) == str(s["checkpoint"]["sync"])
            assert page.raw("st-async", **at) == str(s["checkpoint"]["async"])


def check_config_page(page: Page, config: dict, job_config: dict) -> None:
    """Checkpoint settings equal ``/checkpoints/config``; job settings equal ``/config``'s user-config."""
    assert page.value("cfg-interval") == str(config["interval"]) and page.value("cfg-mode") == config["mode"]
    assert page.value("cfg-timeout") == str(config["timeout"])
    assert page.value("cfg-delete_on_cancellation") == "false"  # RETAIN_ON_CANCELLATION
    assert job_config and {k: page.value("job-config-value", key=k) for k in job_config} == {
        k: str(v) for k, v in job_config.items()
    }


def test_a_running_job_refreshes_and_a_new_load_shows_new_figures(start_job, chromium):
    job = start_job(200)
    jid, base = job.job_id, _base(job.job_id)
    with rest_client(jid) as c:
        details = _everything_read(c, job)
    lines = next(v["id"] for v in details["vertices"] if v["name"] == "lines")
    first = dump(chromium, base + f"#/jobs/{jid}", budget_ms=7000)
    assert int(first.body["data-renders"]) >= 3  # polled every 2 s while the job runs
    assert first.value("op-records-out", vertex=lines) == "200"
    (job.root / "in" / "part-1.txt").write_text("".join(f"{200_000 + i}\tch-{i % 5}\n" for i in range(50)))
    with rest_client(jid) as c:
        wait_for(
            lambda: (
                next(v for v in c.get(f"/jobs/{jid}").json()["vertices"] if v["id"] == lines)["metrics"][
                    "write-records"
                ]
                == 250
            ),
            60,
            "the new file read",
        )
    assert dump(chromium, base + f"#/jobs/{jid}").value("op-records-out", vertex=lines) == "250"


def test_a_finished_job_is_rendered_once_and_no_longer_polled(start_job, chromium, tmp_path):
    job = start_job(50, **{"sparkpoint.rest.shutdown-grace": "60 s"})  # serves on until the stop is read
    jid, base = job.job_id, _base(job.job_id)
    with rest_client(jid) as c:
        _everything_read(c, job)
        target = (tmp_path / "savepoints" / "final").as_uri()
        r = c.post(f"/jobs/{jid}/stop", json={"targetDirectory": target, "drain": False})
        assert r.status_code == 202, r.text
        wait_for(lambda: c.get(f"/jobs/{jid}").json()["state"] == "FINISHED", 30, "the stopped job finished")
        stats = c.get(f"/jobs/{jid}/checkpoints").json()
        try:
            page = dump(chromium, base + f"#/jobs/{jid}/checkpoints", budget_ms=7000)
            assert page.body["data-renders"] == "1"  # no poll once the job is over
            assert page.value("latest-savepoint-path") == stats["latest"]["savepoint"]["external_path"]
            assert stats["latest"]["savepoint"]["external_path"].startswith(target)
            jobs = dump(chromium, base + "#/", budget_ms=5000)
            assert jobs.value("job-state", job=jid) == "FINISHED" and jobs.body["data-renders"] == "1"
        finally:
            await_operation(c, f"/jobs/{jid}/savepoints/{r.json()['request-id']}")  # lets the endpoint close


def test_with_a_token_the_page_is_opened_once_with_it_then_runs_on_a_cookie(start_job, chromium):
    token = "t" * 40
    job = start_job(50, **{"rest.token": token})
    jid, base = job.job_id, _base(job.job_id)
    with httpx.Client(base_url=base, timeout=30) as anonymous:
        assert anonymous.get("/").status_code == 401
        assert anonymous.get("/web/app.js").status_code == 401
        assert anonymous.get("/?token=wrong").status_code == 401
        login = anonymous.get(f"/?token={token}", follow_redirects=False)
        assert login.status_code == 303 and login.headers["location"] == "/"
        cookie = login.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and token in cookie
        assert anonymous.get("/jobs/overview").status_code == 200  # the cookie now travels
        assert anonymous.get("/web/app.css").status_code == 200 and anonymous.get("/web/x.js").status_code == 404
    page = dump(chromium, base + f"?token={token}#/")  # the browser follows the redirect
    assert page.value("job-id", job=jid) == jid
    assert page.values("error") == []


def test_charts_stay_readable_over_many_checkpoints(start_job, chromium, artifacts):
    """Thirty checkpoints: a bar for each, but at most ten labels (they used to overlap from about twenty)."""
    job = start_job(200)
    jid, base = job.job_id, _base(job.job_id)
    with rest_client(jid) as c:
        for _ in range(30):
            r = c.post(f"/jobs/{jid}/checkpoints", json={"checkpointType": "FULL"})
            await_operation(c, f"/jobs/{jid}/checkpoints/{r.json()['request-id']}")
        history = c.get(f"/jobs/{jid}/checkpoints").json()["history"]
    page = dump(chromium, base + f"#/jobs/{jid}/checkpoints")
    assert set(page.bars("chart-duration")) == {h["id"] for h in history} and len(history) >= 30
    labels = page.labels("chart-duration")
    assert 2 <= len(labels) <= 11 and str(max(h["id"] for h in history)) in labels
    screenshot(chromium, base + f"#/jobs/{jid}/checkpoints", artifacts / "checkpoints-many.png")


def test_the_history_server_shows_an_ended_job(make_env, tmp_path, monkeypatch, chromium, artifacts):
    """A failed job's archive in the web UI of `sparkpoint history-server`: listed FAILED, its operators with
    their records, its exception, its checkpoints; figures it has no archive of show as "-"."""
    from tests.rest.history_job import archived_failed_job, start_history_server

    jid, archive, answers = archived_failed_job(make_env, tmp_path, monkeypatch)
    server, base = start_history_server(archive, tmp_path / "home")
    try:
        jobs = dump(chromium, base + "/#/")
        assert jobs.value("job-state", job=jid) == "FAILED" and jobs.value("job-name", job=jid) == "doomed"
        overview = dump(chromium, base + f"/#/jobs/{jid}")
        assert overview.value("job-state") == "FAILED"
        details = answers[f"/jobs/{jid}"]
        for v in details["vertices"]:
            assert overview.value("op-records-out", vertex=v["id"]) == str(v["metrics"]["write-records"])
        assert overview.value("epochs") == "-"  # metrics are not archived
        exceptions = dump(chromium, base + f"/#/jobs/{jid}/exceptions")
        entries = answers[f"/jobs/{jid}/exceptions"]["exceptionHistory"]["entries"]
        assert exceptions.value("exception-count") == f"{len(entries)} exception(s)" and entries
        checkpoints = dump(chromium, base + f"/#/jobs/{jid}/checkpoints")
        counts = answers[f"/jobs/{jid}/checkpoints"]["counts"]
        assert checkpoints.value("count-completed") == str(counts["completed"]) != "0"
        screenshot(chromium, base + f"/#/jobs/{jid}", artifacts / "history-overview.png")
    finally:
        server.terminate()
        server.wait(30)
