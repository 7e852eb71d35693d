"""Where continuous mode's subtasks spend their time, how old their records are, how long barriers align: Flink's
``busyTimeMsPerSecond``/``backPressuredTimeMsPerSecond``/``idleTimeMsPerSecond``, the back-pressure endpoint, the
latency histograms and the checkpoints' alignment durations, over REST and Prometheus.

Real jobs run in this process, each with a hand expectation: a keyed function that sleeps ``SLEEP_MS`` per record
(tests/rest/slow_job.py) is busy at least that long per record it took, and its source, paced at twice what it can
take, spends most of its time blocked on the full channel; records queue behind frames of ``BUFFER`` records, so
some wait at least as long as a frame takes; a keyed two-input function whose one input passes an operator that
sleeps per record waits for that input's barrier.
"""

from __future__ import annotations

import socket
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparkpoint.common import Types, WatermarkStrategy
from sparkpoint.datastream.co_functions import KeyedCoProcessFunction
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.functions import MapFunction
from sparkpoint.datastream.state import ValueStateDescriptor
from tests.rest.job import rest_client, wait_for
from tests.rest.slow_job import BUFFER, SLEEP_MS, build_slow_job, continuous_conf, files

pytestmark = pytest.mark.slow

LATENCY = "flink_taskmanager_job_latency_operator_id_operator_subtask_index_latency"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _vertices(c: httpx.Client, jid: str) -> dict[str, dict]:
    return {v["name"]: v for v in c.get(f"/jobs/{jid}").json()["vertices"]}


@pytest.fixture
def slow_job(make_env, tmp_path, monkeypatch):
    """numbers (paced at RATE) -> key_by -> a function sleeping SLEEP_MS per record -> files; REST and Prometheus."""
    monkeypatch.setenv("SPARKPOINT_HOME", str(tmp_path / "home"))
    port = _free_port()
    conf = {"execution.checkpointing.interval": "1h", "metrics.reporter.prom.port": str(port)}
    env = make_env("local", **continuous_conf(tmp_path, **conf))
    build_slow_job(env, tmp_path / "out")
    started = time.time()
    client = env.execute_async("slow")
    yield client.get_job_id(), port, started
    client.cancel()
    client.wait(60)


def test_a_slow_function_is_busy_its_source_backpressured_and_records_wait(slow_job):
    jid, port, started = slow_job
    with rest_client(jid) as c:
        source, slow = (_vertices(c, jid)[name]["id"] for name in ("numbers", "KeyedProcess"))

        def backpressured() -> dict | None:
            info = c.get(f"/jobs/{jid}/vertices/{source}/backpressure").json()
            return info if info["subtasks"][0]["ratio"] > 0.5 else None

        at_source = wait_for(backpressured, 60, "the source backpressured")
        at_slow = c.get(f"/jobs/{jid}/vertices/{slow}/backpressure").json()
        details = _vertices(c, jid)
        metric_ids = [m["id"] for m in c.get(f"/jobs/{jid}/metrics").json()]
        latency_ids = [i for i in metric_ids if i.startswith("latency.")]
        got = c.get(f"/jobs/{jid}/metrics", params={"get": ",".join(latency_ids)}).json()
        latency = {m["id"]: float(m["value"]) for m in got}
        rates = c.get(
            f"/jobs/{jid}/vertices/{slow}/metrics",
            params={"get": "0.busyTimeMsPerSecond,0.backPressuredTimeMsPerSecond,0.idleTimeMsPerSecond"},
        ).json()
        aggregated = c.get(
            f"/jobs/{jid}/vertices/{source}/subtasks/metrics", params={"get": "backPressuredTimeMsPerSecond"}
        ).json()
    uptime_ms = (time.time() - started) * 1000

    # the source always has records due (RATE is twice what the slow function takes): blocked, not idle
    (s,) = at_source["subtasks"]
    assert at_source["status"] == "ok" and at_source["backpressureLevel"] == s["backpressureLevel"] == "high"
    assert s["idleRatio"] < 0.3 and s["ratio"] + s["idleRatio"] + s["busyRatio"] <= 1.05, s
    assert at_source["end-timestamp"] <= time.time() * 1000
    # the slow function never waits: busy, neither blocked (its sink is chained) nor idle for long
    (k,) = at_slow["subtasks"]
    assert at_slow["backpressureLevel"] == k["backpressureLevel"] == "ok" and k["ratio"] == 0.0, k
    assert k["busyRatio"] > 0.5 and k["idleRatio"] < 0.3 and k["busyRatio"] + k["idleRatio"] <= 1.05, k
    by_id = {m["id"]: float(m["value"]) for m in rates}
    assert by_id["0.busyTimeMsPerSecond"] > 500 and by_id["0.backPressuredTimeMsPerSecond"] == 0
    assert 500 < aggregated[0]["max"] <= 1000

    # by hand: it slept SLEEP_MS for every record it took, within the time the job has run (but for the frames it
    # had taken and not run yet when the figures were read, at most a channel's two: a frame's records are counted
    # as it is taken, its time as it is spent)
    slow_io, source_io = details["KeyedProcess"]["metrics"], details["numbers"]["metrics"]
    in_flight = 2 * BUFFER
    assert slow_io["read-records"] > in_flight
    assert (slow_io["read-records"] - in_flight) * SLEEP_MS <= slow_io["accumulated-busy-time"] <= uptime_ms
    assert source_io["accumulated-backpressured-time"] > source_io["accumulated-idle-time"]
    assert source_io["accumulated-backpressured-time"] + source_io["accumulated-idle-time"] <= uptime_ms

    # Flink's latency histogram of the slow function's input (granularity single); none for the source
    name = f"latency.operator_id.{slow}.operator_subtask_index.0.latency"
    assert {i.rsplit("_", 1)[0] for i in latency_ids} == {name}, latency_ids
    stats = {i.rsplit("_", 1)[1]: v for i, v in latency.items()}
    assert set(stats) == {"min", "max", "mean", "median", "stddev", "p75", "p90", "p95", "p98", "p99", "p999"}
    assert 0 <= stats["min"] <= stats["median"] <= stats["p75"] <= stats["p99"] <= stats["max"] <= uptime_ms
    assert stats["min"] <= stats["mean"] <= stats["max"]
    assert stats["max"] >= BUFFER * SLEEP_MS, stats  # a frame waited at least while the one before it was taken

    families = {f.name: f for f in text_string_to_metric_families(httpx.get(f"http://127.0.0.1:{port}/metrics").text)}
    blocked = families["flink_taskmanager_job_task_backPressuredTimeMsPerSecond"].samples
    task = {s.labels["task_id"]: s.value for s in blocked}
    assert task[source] > 500 and task[slow] == 0
    busy = {s.labels["task_id"]: s.value for s in families["flink_taskmanager_job_task_busyTimeMsPerSecond"].samples}
    assert busy[slow] > 500
    quantiles = {
        s.labels["quantile"]: s.value
        for s in families[LATENCY].samples
        if s.name == LATENCY and s.labels["operator_id"] == slow and s.labels["operator_subtask_index"] == "0"
    }
    assert list(quantiles) == ["0.5", "0.75", "0.95", "0.98", "0.99", "0.999"]
    assert 0 <= quantiles["0.5"] <= quantiles["0.99"] <= quantiles["0.999"]
    (count,) = [s.value for s in families[LATENCY].samples if s.name == LATENCY + "_count"]
    assert count >= 1


class SlowMap(MapFunction):
    def map(self, value):
        time.sleep(ALIGN_SLEEP_MS / 1000)
        return value


ALIGN_SLEEP_MS = 20


class CountBoth(KeyedCoProcessFunction):
    def open(self, runtime_context):
        self.n = runtime_context.get_state(ValueStateDescriptor("n", Types.LONG()))

    def process_element1(self, value, ctx):
        self.n.update((self.n.value() or 0) + 1)
        yield f"a\t{value}"

    def process_element2(self, value, ctx):
        self.n.update((self.n.value() or 0) + 1)
        yield f"b\t{value}"


def test_a_checkpoint_aligns_while_one_input_is_slow(make_env, tmp_path, monkeypatch):
    """Input a passes a map sleeping ALIGN_SLEEP_MS per record (paced at twice what it takes, so records always
    queue before it); input b arrives at once. The keyed function's barrier comes on b first and waits for a's:
    at least one record's sleep."""
    monkeypatch.setenv("SPARKPOINT_HOME", str(tmp_path / "home"))
    env = make_env("local", **continuous_conf(tmp_path, **{"execution.checkpointing.interval": "300 ms"}))
    env.set_parallelism(1)
    paced, none = 2 * 1000 // ALIGN_SLEEP_MS, WatermarkStrategy.no_watermarks()
    a = env.from_source(DataGeneratorSource(lambda i: i, None, records_per_second=paced), none, "a")
    b = env.from_source(DataGeneratorSource(lambda i: i, None, records_per_second=paced), none, "b")
    slow = a.uid("a").rebalance().map(SlowMap()).uid("slow")
    both = slow.key_by(lambda v: v % 5).connect(b.uid("b").key_by(lambda v: v % 5)).process(CountBoth()).uid("both")
    both.sink_to(files(tmp_path / "out")).uid("files")
    client = env.execute_async("align")
    jid = client.get_job_id()
    try:
        with rest_client(jid) as c:
            vertices = _vertices(c, jid)
            keyed = vertices["Keyed Co-Process"]["id"]

            def completed() -> list | None:
                history = c.get(f"/jobs/{jid}/checkpoints").json()["history"]
                done = [h["id"] for h in history if h["status"] == "COMPLETED"]
                return done if len(done) >= 2 else None

            done = wait_for(completed, 90, "two completed checkpoints")
            details = {cid: c.get(f"/jobs/{jid}/checkpoints/details/{cid}/subtasks/{keyed}").json() for cid in done}
            sources = [
                c.get(f"/jobs/{jid}/checkpoints/details/{done[0]}/subtasks/{vertices[n]['id']}").json() for n in "ab"
            ]
    finally:
        client.cancel()
        client.wait(60)
    durations = []
    for cid, sub in details.items():
        (subtask,) = sub["subtasks"]
        aligned = subtask["alignment"]["duration"]
        assert aligned > 0, (cid, subtask)
        summary = sub["summary"]["alignment"]["duration"]
        assert summary["min"] == summary["max"] == aligned, (cid, summary)
        durations.append(aligned)
    assert max(durations) >= ALIGN_SLEEP_MS, durations
    for sub in sources:  # a source has one input: the driver's
        assert [s["alignment"]["duration"] for s in sub["subtasks"]] == [0]
