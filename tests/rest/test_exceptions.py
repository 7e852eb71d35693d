"""A failure and the restore after it, as Flink's exception history and restored-checkpoint statistics show them."""

from __future__ import annotations

from pathlib import Path

from sparkpoint.common import Duration, WatermarkStrategy
from sparkpoint.datastream.connectors.file_system import FileSource, StreamFormat
from tests.rest import flink_shapes as F
from tests.rest.job import rest_client, wait_for, write_input


class FailOnce:
    """Raises on line ``at`` the first time only (a marker file remembers it across the restore)."""

    def __init__(self, marker: Path, at: str):
        self.marker, self.at = marker, at

    def __call__(self, line: str) -> str:
        if line == self.at and not self.marker.exists():
            self.marker.write_text("failed once")
            raise RuntimeError(f"injected failure on {line!r}")
        return line


def test_a_failure_shows_in_the_exception_history_and_the_restore_in_the_checkpoints(make_env, tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKPOINT_HOME", str(tmp_path / "home"))
    lines = write_input(tmp_path / "in", 300)
    env = make_env(
        "local",
        **{
            "rest.enabled": True,
            "execution.checkpointing.interval": "1h",
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "10 ms",
            "execution.epoch.max-records": 50,
        },
    )
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "in"))
        .monitor_continuously(Duration.of_millis(100))
        .build()
    )
    env.from_source(source, WatermarkStrategy.no_watermarks(), "lines").uid("lines").map(
        FailOnce(tmp_path / "marker", lines[200])
    ).uid("fail-once").print()
    client = env.execute_async("fails-once")
    try:
        with rest_client(client.get_job_id()) as c:
            jid = client.get_job_id()
            history = wait_for(
                lambda: c.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"],
                60,
                "the failure in the exception history",
            )
            assert (tmp_path / "marker").exists()  # the failure really happened
            [entry] = history
            assert set(entry) >= F.EXCEPTION_ENTRY and "injected failure on" in entry["stacktrace"]
            assert entry["timestamp"] > 0
            wait_for(lambda: c.get(f"/jobs/{jid}").json()["state"] == "RUNNING", 30, "RUNNING again")
            stats = c.get(f"/jobs/{jid}/checkpoints").json()
            restored = stats["latest"]["restored"]
            assert stats["counts"]["restored"] == 1 and set(restored) == F.RESTORED
            on_disk = {int(p.parent.name[4:]) for p in (tmp_path / "ck" / jid).glob("chk-*/_metadata")}
            assert restored["id"] in on_disk and restored["is_savepoint"] is False
            details = c.get(f"/jobs/{jid}").json()
            assert details["timestamps"]["RESTARTING"] > 0 and details["timestamps"]["FAILING"] > 0
    finally:
        client.cancel()
        client.wait(30)
