"""Flink's built-in metric names (records in and out and their rates, watermarks, late records dropped, the
job's checkpoint figures) over REST and Prometheus, against hand counts of the input and the job's own
``/jobs/:jid/checkpoints`` answer; the report path over Spark is covered by the ``spark`` run."""

from __future__ import annotations

import socket

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparkpoint.common import Duration, Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream.connectors.file_system import FileSource, StreamFormat
from sparkpoint.datastream.window import TumblingEventTimeWindows
from tests.rest.job import await_operation, rest_client, wait_for

# first file: event times 0 .. 100_000 (the watermark ends at 100_000 - 0 - 1); the second file, read once that
# watermark has reached the window: LATE events in already closed windows and ON_TIME events at 100_000
FIRST = [(f"k{i % 3}", i * 250) for i in range(401)]
LATE = [(f"k{i % 3}", (i * 7919) % 100_000) for i in range(30)]
ON_TIME = [(f"k{i % 3}", 100_000) for i in range(20)]


class EventTime(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


def _parse(line):
    key, ts = line.split(",")
    return key, int(ts)


def _lines(events) -> str:
    return "".join(f"{k},{ts}\n" for k, ts in events)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _vertex(c: httpx.Client, jid: str, name: str) -> dict:
    return next(v for v in c.get(f"/jobs/{jid}").json()["vertices"] if v["name"] == name)


def _values(c: httpx.Client, path: str, ids: list[str]) -> dict[str, str]:
    return {m["id"]: m["value"] for m in c.get(path, params={"get": ",".join(ids)}).json()}


@pytest.mark.parametrize("target", ["local", "spark"])
def test_builtin_metrics_equal_hand_counts_and_the_checkpoint_statistics(
    make_env, tmp_path, monkeypatch, request, target
):
    if target == "spark":
        request.getfixturevalue("spark")  # the shared SparkSession
    monkeypatch.setenv("SPARKPOINT_HOME", str(tmp_path / "home"))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text(_lines(FIRST))
    port = _free_port()
    env = make_env(
        target,
        **{
            "rest.enabled": True,
            "execution.epoch.max-records": 100,
            "execution.epoch.idle-pause": "20 ms",
            "execution.checkpointing.interval": "1h",
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
            "metrics.reporter.prom.port": str(port),
        },
    )
    env.set_parallelism(1)
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "in"))
        .monitor_continuously(Duration.of_millis(100))
        .build()
    )
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(
        EventTime()
    )
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
        .uid("events")
        .map(_parse)
        .name("parse")
        .uid("parse")
        .assign_timestamps_and_watermarks(strategy)
        .name("stamp")
        .uid("stamp")
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .reduce(lambda a, b: (a[0], max(a[1], b[1])))
        .name("window")
        .uid("window")
        .print()
    )
    client = env.execute_async(f"builtin-{target}")
    try:
        _check(client, tmp_path, port)
    finally:
        client.cancel()
        client.wait(60)


def _check(client, tmp_path, port) -> None:
    jid = client.get_job_id()
    n = len(FIRST) + len(LATE) + len(ON_TIME)
    with rest_client(jid) as c:
        window = _vertex(c, jid, "window")["id"]
        wpath = f"/jobs/{jid}/vertices/{window}/metrics"
        wait_for(
            lambda: _values(c, wpath, ["0.currentInputWatermark"]).get("0.currentInputWatermark") == "99999",
            90,
            "the first file's watermark at the window",
        )
        (tmp_path / "in" / "b.txt").write_text(_lines(LATE + ON_TIME))
        wait_for(lambda: _values(c, wpath, ["0.numRecordsIn"]).get("0.numRecordsIn") == str(n), 90, "every event")
        for name in ("events", "parse", "stamp"):
            vpath = f"/jobs/{jid}/vertices/{_vertex(c, jid, name)['id']}/metrics"
            got = _values(c, vpath, ["0.numRecordsOut", "0.numRecordsOutPerSecond", "0.numRecordsInPerSecond"])
            assert got["0.numRecordsOut"] == str(n), (name, got)
            assert float(got["0.numRecordsOutPerSecond"]) > 0 and float(got["0.numRecordsInPerSecond"]) >= 0
        got = _values(c, wpath, ["0.numLateRecordsDropped", "0.currentOutputWatermark", "0.numRecordsInPerSecond"])
        assert got["0.numLateRecordsDropped"] == str(len(LATE))  # every second-file event below 100_000
        assert got["0.currentOutputWatermark"] == "99999"  # the ON_TIME events do not advance it
        assert float(got["0.numRecordsInPerSecond"]) > 0

        op = await_operation(
            c, f"/jobs/{jid}/checkpoints/" + c.post(f"/jobs/{jid}/checkpoints", json={}).json()["request-id"]
        )
        assert op["operation"]["checkpointId"] >= 1
        stats = c.get(f"/jobs/{jid}/checkpoints").json()
        last, counts = stats["latest"]["completed"], stats["counts"]
        job = _values(
            c,
            f"/jobs/{jid}/metrics",
            [
                "lastCheckpointDuration",
                "lastCheckpointSize",
                "lastCheckpointExternalPath",
                "numberOfCompletedCheckpoints",
                "numberOfFailedCheckpoints",
                "totalNumberOfCheckpoints",
                "numberOfInProgressCheckpoints",
                "numRestarts",
                "uptime",
            ],
        )
    assert job["lastCheckpointDuration"] == str(last["end_to_end_duration"])
    assert job["lastCheckpointSize"] == str(last["checkpointed_size"]) and last["checkpointed_size"] > 0
    assert job["lastCheckpointExternalPath"] == last["external_path"]
    assert job["numberOfCompletedCheckpoints"] == str(counts["completed"]) and counts["completed"] >= 1
    assert job["numberOfFailedCheckpoints"] == str(counts["failed"]) == "0"
    assert job["totalNumberOfCheckpoints"] == str(counts["total"])
    assert job["numRestarts"] == "0" and int(job["uptime"]) > 0

    families = {
        f.name: f
        for f in text_string_to_metric_families(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text)
    }
    [late] = [
        s
        for s in families["flink_taskmanager_job_task_operator_numLateRecordsDropped"].samples
        if s.labels["operator_name"] == "window"
    ]
    assert late.value == len(LATE)
    assert late.labels["job_id"] == jid and late.labels["subtask_index"] == "0" and late.labels["task_name"] == "window"
    records_out = {
        s.labels["operator_name"]: s.value
        for s in families["flink_taskmanager_job_task_operator_numRecordsOut"].samples
    }
    assert records_out["events"] == records_out["parse"] == records_out["stamp"] == n
    [size] = families["flink_jobmanager_job_lastCheckpointSize"].samples
    assert size.value == last["checkpointed_size"] and set(size.labels) == {"host", "job_id", "job_name"}
    assert size.labels["job_id"] == jid
    assert families["flink_jobmanager_job_numberOfCompletedCheckpoints"].samples[0].value == counts["completed"]
