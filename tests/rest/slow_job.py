"""A continuous-mode job with a bottleneck, for the back-pressure tests: ``numbers`` (paced at ``RATE``) -> key_by
-> ``slow`` (sleeps ``SLEEP_MS`` per record: it takes at most half of what the source offers) -> files.

Frames hold ``BUFFER`` records and a channel ``2`` frames, so the source soon blocks on the full channel.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sparkpoint.common import Encoder, WatermarkStrategy
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.functions import KeyedProcessFunction

SLEEP_MS = 5  # per record, in the slow keyed function
RATE = 400  # records per second the source is paced at: twice what the slow function takes
BUFFER = 10  # records per frame (sparkpoint.continuous.buffer-records)


class SlowPerRecord(KeyedProcessFunction):
    def process_element(self, value, ctx):
        time.sleep(SLEEP_MS / 1000)
        yield str(value)


def continuous_conf(tmp_path: Path, **extra: Any) -> dict:
    """Continuous mode with the REST endpoint, small frames and channels."""
    return {
        "sparkpoint.execution.mode": "continuous",
        "rest.enabled": True,
        "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
        "sparkpoint.continuous.buffer-records": BUFFER,
        "sparkpoint.continuous.channel-buffers": 2,
        "sparkpoint.rest.shutdown-grace": "1 s",
        **extra,
    }


def files(out: Path) -> Any:
    return FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()


def build_slow_job(env: Any, out: Path) -> None:
    """The job of the module, at parallelism 1."""
    env.set_parallelism(1)
    source = DataGeneratorSource(lambda i: i, None, records_per_second=RATE)
    numbers = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
    numbers.key_by(lambda i: i % 7).process(SlowPerRecord()).uid("slow").sink_to(files(out)).uid("files")
