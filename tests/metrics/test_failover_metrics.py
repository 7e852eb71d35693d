"""Metrics across a failover inside one run: the driver goes back to the metrics the restored checkpoint
saw, so the epochs run again after it count once; the totals equal a hand count of the input."""

from __future__ import annotations

from pathlib import Path

import httpx

from sparkpoint.common import Duration, WatermarkStrategy
from sparkpoint.datastream import MapFunction
from sparkpoint.datastream.connectors.file_system import FileSource, StreamFormat
from tests.rest.job import await_operation, rest_client, wait_for

BEFORE = [(i * 13) % 97 for i in range(200)]  # read, then checkpointed
AFTER = [(i * 29) % 89 for i in range(150)]  # read and counted after the checkpoint, then read again
TRIGGER = [-1]  # fails the task once


class CountOrFail(MapFunction):
    def __init__(self, flag: str):
        self.flag = flag

    def open(self, runtime_context):
        group = runtime_context.get_metrics_group().add_group("failover")
        self.seen = group.counter("seen")
        self.odd = group.counter("odd")
        self.values = group.distribution("value")

    def map(self, line):
        value = int(line)
        if value < 0 and not Path(self.flag).exists():
            Path(self.flag).write_text("failed once")
            raise RuntimeError("a transient failure")
        self.seen.inc()
        self.values.update(value)
        if value % 2:
            self.odd.inc()
        return value


def _vertex(c: httpx.Client, jid: str, name: str) -> dict:
    return next(v for v in c.get(f"/jobs/{jid}").json()["vertices"] if v["name"] == name)


def _write(path: Path, values: list[int]) -> None:
    """Whole or not at all, as a monitored directory needs (a file is read as found: one found while still being
    written would be read empty and never again); a hidden name is skipped until the rename."""
    hidden = path.with_name("." + path.name)
    hidden.write_text("".join(f"{v}\n" for v in values))
    hidden.rename(path)


def test_counters_count_each_record_once_across_a_failover(make_env, tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKPOINT_HOME", str(tmp_path / "home"))
    (tmp_path / "in").mkdir()
    _write(tmp_path / "in" / "1.txt", BEFORE)
    env = make_env(
        "local",
        **{
            "rest.enabled": True,
            "execution.epoch.max-records": 20,
            "execution.epoch.idle-pause": "20 ms",
            "execution.checkpointing.interval": "1h",
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "100 ms",
        },
    )
    env.set_parallelism(1)
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "in"))
        .monitor_continuously(Duration.of_millis(50))
        .build()
    )
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "values")
        .uid("values")
        .map(CountOrFail(str(tmp_path / "flag")))
        .name("count")
        .uid("count")
        .print()
    )
    client = env.execute_async("failover-metrics")
    jid = client.get_job_id()
    try:
        with rest_client(jid) as c:
            vid = _vertex(c, jid, "count")["id"]
            path = f"/jobs/{jid}/vertices/{vid}/metrics"

            def value(mid: str) -> str:
                return {m["id"]: m["value"] for m in c.get(path, params={"get": mid}).json()}.get(mid, "")

            wait_for(lambda: value("0.numRecordsIn") == str(len(BEFORE)), 60, "the first file read")
            op = await_operation(
                c, f"/jobs/{jid}/checkpoints/" + c.post(f"/jobs/{jid}/checkpoints", json={}).json()["request-id"]
            )
            assert op["operation"]["checkpointId"] >= 1
            _write(tmp_path / "in" / "2.txt", AFTER)
            wait_for(lambda: value("0.count.failover.seen") == str(len(BEFORE) + len(AFTER)), 60, "the second file")
            _write(tmp_path / "in" / "3.txt", TRIGGER)
            wait_for(lambda: (tmp_path / "flag").exists(), 60, "the failure")
            everything = BEFORE + AFTER + TRIGGER
            wait_for(lambda: int(value("0.numRecordsIn") or 0) >= len(everything), 60, "every record after the restart")
            restarts = {
                m["id"]: m["value"] for m in c.get(f"/jobs/{jid}/metrics", params={"get": "numRestarts"}).json()
            }
            got = {
                m["id"].split(".", 1)[1]: m["value"]
                for m in c.get(
                    path,
                    params={
                        "get": ",".join(
                            f"0.{k}"
                            for k in (
                                "numRecordsIn",
                                "numRecordsOut",
                                "count.failover.seen",
                                "count.failover.odd",
                                "count.failover.value_count",
                                "count.failover.value_sum",
                                "count.failover.value_min",
                            )
                        )
                    },
                ).json()
            }
    finally:
        client.cancel()
        client.wait(60)
    assert restarts == {"numRestarts": "1"}
    # by hand: each record once, though the second file was read (and counted) twice
    assert got == {
        "numRecordsIn": str(len(everything)),
        "numRecordsOut": str(len(everything)),
        "count.failover.seen": str(len(everything)),
        "count.failover.odd": str(sum(1 for v in everything if v % 2)),
        "count.failover.value_count": str(len(everything)),
        "count.failover.value_sum": str(sum(everything)),
        "count.failover.value_min": "-1",
    }


def _start(make_env, tmp_path, flag: str, **extra):
    env = make_env(
        "local",
        **{
            "rest.enabled": True,
            "execution.epoch.max-records": 20,
            "execution.epoch.idle-pause": "20 ms",
            "execution.checkpointing.interval": "1h",
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
            "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "100 ms",
            **extra,
        },
    )
    env.set_parallelism(1)
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "in"))
        .monitor_continuously(Duration.of_millis(50))
        .build()
    )
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "values")
        .uid("values")
        .map(CountOrFail(flag))
        .name("count")
        .uid("count")
        .print()
    )
    client = env.execute_async("failover-metrics")
    return client, client.get_job_id()


def _metric(c: httpx.Client, jid: str, mid: str) -> str:
    path = f"/jobs/{jid}/vertices/{_vertex(c, jid, 'count')['id']}/metrics"
    return {m["id"]: m["value"] for m in c.get(path, params={"get": mid}).json()}.get(mid, "")


def test_a_job_started_from_a_checkpoint_counts_from_0_and_once_across_its_failover(make_env, tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKPOINT_HOME", str(tmp_path / "home"))
    (tmp_path / "in").mkdir()
    _write(tmp_path / "in" / "1.txt", BEFORE)
    (tmp_path / "done").write_text("no failure in the first job")
    first, jid = _start(make_env, tmp_path, str(tmp_path / "done"))
    try:
        with rest_client(jid) as c:
            wait_for(lambda: _metric(c, jid, "0.numRecordsIn") == str(len(BEFORE)), 60, "the first file read")
            await_operation(
                c, f"/jobs/{jid}/checkpoints/" + c.post(f"/jobs/{jid}/checkpoints", json={}).json()["request-id"]
            )
            location = c.get(f"/jobs/{jid}/checkpoints").json()["latest"]["completed"]["external_path"]
    finally:
        first.cancel()
        first.wait(60)
    # the second job starts from that checkpoint (its metrics at 0, as in Flink), reads the second file and fails
    _write(tmp_path / "in" / "2.txt", AFTER)
    second, jid = _start(make_env, tmp_path, str(tmp_path / "flag"), **{"execution.savepoint.path": location})
    try:
        with rest_client(jid) as c:
            wait_for(lambda: _metric(c, jid, "0.count.failover.seen") == str(len(AFTER)), 60, "the second file")
            _write(tmp_path / "in" / "3.txt", TRIGGER)
            wait_for(lambda: (tmp_path / "flag").exists(), 60, "the failure")
            wait_for(lambda: int(_metric(c, jid, "0.numRecordsIn") or 0) >= len(AFTER) + 1, 60, "the replay")
            got = [_metric(c, jid, f"0.{m}") for m in ("numRecordsIn", "count.failover.seen", "count.failover.odd")]
            restarts = {
                m["id"]: m["value"] for m in c.get(f"/jobs/{jid}/metrics", params={"get": "numRestarts"}).json()
            }
    finally:
        second.cancel()
        second.wait(60)
    assert restarts == {"numRestarts": "1"}
    again = AFTER + TRIGGER  # by hand: what the second job read, each record once
    assert got == [str(len(again)), str(len(again)), str(sum(1 for v in again if v % 2))]
