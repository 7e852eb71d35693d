"""User metrics (PyFlink's ``sparkpoint.metrics`` through the runtime context) and Flink's metric names, read
over REST and scraped from the Prometheus endpoint, against hand counts of the job's input."""

from __future__ import annotations

import socket

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparkpoint.common import Duration, WatermarkStrategy
from sparkpoint.datastream import MapFunction
from sparkpoint.datastream.connectors.file_system import FileSource, StreamFormat
from sparkpoint.errors import ConfigurationError
from sparkpoint.metrics import Counter, MetricGroup
from sparkpoint.rest.prometheus import port_candidates
from tests.rest.job import await_operation, rest_client, wait_for

VALUES = [(i * 37) % 101 for i in range(400)]
SCOPE = "quality.channel.all"  # add_group("quality").add_group("channel", "all")


class Measure(MapFunction):
    def open(self, runtime_context):
        group = runtime_context.get_metrics_group()
        assert isinstance(group, MetricGroup)
        scoped = group.add_group("quality").add_group("channel", "all")
        self.big: Counter = scoped.counter("big")
        self.seen = scoped.counter("seen")
        self.events = scoped.meter("events", time_span_in_seconds=60)
        self.values = scoped.distribution("value")
        self.last = None
        scoped.gauge("last", lambda: self.last)
        scoped.gauge("seen_so_far", lambda: self.seen.get_count())

    def map(self, line):
        value = int(line)
        self.seen.inc()
        self.events.mark_event()
        self.values.update(value)
        if value >= 50:
            self.big.inc()
        self.last = value
        return value


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def metrics_job(make_env, tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKPOINT_HOME", str(tmp_path / "home"))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "values.txt").write_text("".join(f"{v}\n" for v in VALUES))
    port = _free_port()
    env = make_env(
        "local",
        **{
            "rest.enabled": True,
            "execution.epoch.max-records": 25,
            "execution.epoch.idle-pause": "20 ms",
            "execution.checkpointing.interval": "1h",
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
            "metrics.reporter.prom.port": f"{port}-{port + 3}",
        },
    )
    env.set_parallelism(2)
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "in"))
        .monitor_continuously(Duration.of_millis(100))
        .build()
    )
    env.from_source(source, WatermarkStrategy.no_watermarks(), "values").uid("values").rebalance().map(Measure()).uid(
        "measure"
    ).print()
    client = env.execute_async("metrics")
    yield client, port
    client.cancel()
    client.wait(30)


def _vertex(c: httpx.Client, jid: str, name: str) -> dict:
    return next(v for v in c.get(f"/jobs/{jid}").json()["vertices"] if v["name"] == name)


def test_user_metrics_and_flinks_names_over_rest_and_prometheus(metrics_job, capsys):
    client, port = metrics_job
    jid = client.get_job_id()
    n, big = len(VALUES), sum(1 for v in VALUES if v >= 50)  # by hand
    with rest_client(jid) as c:
        wait_for(lambda: _vertex(c, jid, "Map")["metrics"]["read-records"] == n, 60, "every value mapped")
        op = await_operation(
            c, f"/jobs/{jid}/checkpoints/" + c.post(f"/jobs/{jid}/checkpoints", json={}).json()["request-id"]
        )
        assert op["operation"]["checkpointId"] >= 1
        vid = _vertex(c, jid, "Map")["id"]
        ids = [m["id"] for m in c.get(f"/jobs/{jid}/vertices/{vid}/metrics").json()]
        assert f"0.Map.{SCOPE}.big" in ids and f"1.Map.{SCOPE}.value_max" in ids
        wanted = ",".join(
            f"{i}.Map.{SCOPE}.{m}"
            for i in (0, 1)
            for m in (
                "big",
                "seen",
                "seen_so_far",
                "last",
                "events_count",
                "value_count",
                "value_sum",
                "value_min",
                "value_max",
            )
        )
        values = {
            m["id"]: m["value"] for m in c.get(f"/jobs/{jid}/vertices/{vid}/metrics", params={"get": wanted}).json()
        }
        per = {
            i: {
                m: values[f"{i}.Map.{SCOPE}.{m}"]
                for m in (
                    "big",
                    "seen",
                    "seen_so_far",
                    "last",
                    "events_count",
                    "value_count",
                    "value_sum",
                    "value_min",
                    "value_max",
                )
            }
            for i in (0, 1)
        }
        assert sum(int(p["big"]) for p in per.values()) == big
        assert sum(int(p["seen"]) for p in per.values()) == n == sum(int(p["events_count"]) for p in per.values())
        # get_count() is the total over every epoch so far, not this epoch's (16 epochs of 25 records)
        assert all(p["seen_so_far"] == p["seen"] for p in per.values()), per
        assert all(int(p["last"]) in VALUES for p in per.values())
        assert sum(int(p["value_count"]) for p in per.values()) == n
        assert sum(int(p["value_sum"]) for p in per.values()) == sum(VALUES)
        assert min(int(p["value_min"]) for p in per.values()) == min(VALUES)
        assert max(int(p["value_max"]) for p in per.values()) == max(VALUES)
        completed = c.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"]

    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    # Flink's reporter: the key/value group's key stays in the name, its value is the label channel="all"
    assert not any(name.startswith("flink_taskmanager_job_task_operator_quality_channel_all") for name in families)
    samples = families["flink_taskmanager_job_task_operator_quality_channel_big"].samples
    assert sum(s.value for s in samples) == big and all(s.labels["channel"] == "all" for s in samples)
    [value_max] = {
        max(s.value for s in families["flink_taskmanager_job_task_operator_quality_channel_value_max"].samples)
    }
    assert value_max == max(VALUES)
    assert {s.labels["subtask_index"] for s in samples} == {"0", "1"}
    assert all(s.labels["job_id"] == jid and s.labels["operator_name"] == "Map" for s in samples)
    records_in = [
        s
        for s in families["flink_taskmanager_job_task_operator_numRecordsIn"].samples
        if s.labels["operator_name"] == "Map"
    ]
    assert sum(s.value for s in records_in) == n
    assert families["flink_jobmanager_job_numberOfCompletedCheckpoints"].samples[0].value == completed
    assert families["flink_jobmanager_job_uptime"].samples[0].value > 0


def test_a_bad_port_setting_is_named():
    assert port_candidates("9250-9252") == [9250, 9251, 9252] and port_candidates(9249) == [9249]
    with pytest.raises(ConfigurationError, match="metrics.reporter.prom.port"):
        port_candidates("high")
    with pytest.raises(ConfigurationError, match="within 0-65535"):
        port_candidates("9260-9250")


class Colliding(MapFunction):
    """User metrics Prometheus cannot take as they are: one named as a system metric, and one name under a
    key/value group in one operator and a plain group in another (``kind`` says which)."""

    def __init__(self, kind: str):
        self.kind = kind

    def open(self, runtime_context):
        group = runtime_context.get_metrics_group()
        self.numbered = group.counter("numRecordsIn")
        self.grouped = (group.add_group("k", "v") if self.kind == "kv" else group.add_group("k")).counter("c")

    def map(self, value):
        self.numbered.inc()
        self.grouped.inc()
        return value


def test_colliding_user_metrics_leave_the_prometheus_scrape_valid(make_env, tmp_path, monkeypatch):
    """Prometheus refuses a whole scrape with one name twice (or one series twice); the colliding metrics are left
    out, as Flink's reporter drops them, and the rest is there."""
    from sparkpoint.datastream.connectors.generator import DataGeneratorSource

    monkeypatch.setenv("SPARKPOINT_HOME", str(tmp_path / "home"))
    port = _free_port()
    env = make_env("local", **{"execution.epoch.idle-pause": "20 ms", "metrics.reporter.prom.port": str(port)})
    env.set_parallelism(1)
    numbers = env.from_source(
        DataGeneratorSource(int, None, records_per_second=200), WatermarkStrategy.no_watermarks(), "n"
    )
    numbers.map(Colliding("kv")).name("one").map(Colliding("plain")).name("other").print()
    client = env.execute_async("colliding")
    try:

        def scraped():
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            names = [f.name for f in text_string_to_metric_families(text)]  # raises on a scrape Prometheus refuses
            return text if "flink_taskmanager_job_task_operator_k_c" in names else None

        text = wait_for(scraped, 60, "a scrape with the user metrics")
        series = [line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]
        assert len(series) == len(set(series))  # each name and labels once
        assert text.count("# TYPE flink_taskmanager_job_task_operator_k_c ") == 1
    finally:
        client.cancel()
        client.wait(30)
