"""A running job with a REST endpoint, for the REST tests: lines ``ts<TAB>channel`` from files.

``lines`` (uid) reads the files continuously, ``pairs`` maps a line to ``(channel, 1)``,
``window-counts`` sums per channel in 60 s event-time windows, ``counts-sink`` writes
``start<TAB>channel<TAB>count`` lines. The job never ends by itself: a test stops or cancels it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from sparkpoint.common import Duration, Encoder, Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import ProcessWindowFunction, TumblingEventTimeWindows
from sparkpoint.datastream.connectors.file_system import BucketAssigner, FileSink, FileSource, StreamFormat
from sparkpoint.rest.registry import JobRegistry

WINDOW_MS = 60_000


class CountPerWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield f"{context.window().start}\t{key}\t{sum(c for _, c in elements)}"


class LineTimestamp(TimestampAssigner):
    def extract_timestamp(self, value: str, record_timestamp: int) -> int:
        return int(value.split("\t", 1)[0])


def write_input(directory: Path, n: int, channels: int = 5) -> list[str]:
    """``n`` lines, a line every 997 ms of event time, over ``channels`` channels."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f"{i * 997}\tch-{i % channels}" for i in range(n)]
    (directory / "part-0.txt").write_text("\n".join(lines) + "\n")
    return lines


def window_oracle(lines: list[str]) -> Counter:
    """Counts per (window start, channel), by hand."""
    out: Counter = Counter()
    for line in lines:
        ts, channel = line.split("\t")
        out[(int(ts) // WINDOW_MS * WINDOW_MS, channel)] += 1
    return out


def build_job(env: Any, input_dir: Path, output_dir: Path) -> None:
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(input_dir))
        .monitor_continuously(Duration.of_millis(100))
        .build()
    )
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5)).with_timestamp_assigner(
        LineTimestamp()
    )
    sink = (
        FileSink.for_row_format(str(output_dir), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .build()
    )
    (
        env.from_source(source, strategy, "lines")
        .uid("lines")
        .map(lambda line: (line.split("\t")[1], 1))
        .uid("pairs")
        .key_by(lambda p: p[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(WINDOW_MS)))
        .process(CountPerWindow())
        .uid("window-counts")
        .sink_to(sink)
        .uid("counts-sink")
    )


def wait_for(predicate: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} not reached within {timeout} s")


def registry_entry(job_id: str) -> dict:
    return wait_for(lambda: JobRegistry().find(job_id), what=f"job {job_id} in the registry")


@contextmanager
def rest_client(job_id: str, token: str | None = None, verify: Any = True) -> Iterator[httpx.Client]:
    entry = registry_entry(job_id)
    headers = {"Authorization": f"Bearer {token or entry.get('token')}"} if (token or entry.get("token")) else {}
    with httpx.Client(
        base_url=f"{entry['scheme']}://{entry['address']}:{entry['port']}", headers=headers, timeout=30, verify=verify
    ) as client:
        yield client


def await_operation(client: httpx.Client, path: str, timeout: float = 60.0) -> dict:
    def done() -> dict | None:
        r = client.get(path)
        assert r.status_code == 200, r.text
        body = r.json()
        return body if body["status"]["id"] == "COMPLETED" else None

    return wait_for(done, timeout, what=f"{path} COMPLETED")
