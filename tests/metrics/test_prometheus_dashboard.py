"""A Flink Grafana dashboard's panels fill from sparkpoint's Prometheus endpoint.

The selectors below are those of the PromQL a Flink dashboard runs (job overview, throughput, back pressure,
watermarks, task manager JVM panels): each must find samples carrying every label the query groups or filters
by. Label values keep only ``[a-zA-Z0-9:_]``, as Flink's reporter writes them (an operator named
``Window(Process)`` is ``WindowProcess``). The process figures are checked against the process itself: its
resident memory read from ``/proc``, its thread count, a running job.
"""

from __future__ import annotations

import re
import socket
import threading

import httpx
from prometheus_client.parser import text_string_to_metric_families

from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from tests.rest.job import wait_for

# (metric, labels the dashboard's query filters or groups by)
DASHBOARD = [
    ("flink_jobmanager_numRunningJobs", {"host"}),
    ("flink_jobmanager_job_uptime", {"job_name", "job_id"}),
    ("flink_jobmanager_job_numRestarts", {"job_name"}),
    ("flink_jobmanager_job_lastCheckpointDuration", {"job_name"}),
    ("flink_jobmanager_job_numberOfCompletedCheckpoints", {"job_name"}),
    ("flink_taskmanager_job_task_operator_numRecordsIn", {"job_name", "task_name", "operator_name", "subtask_index"}),
    ("flink_taskmanager_job_task_operator_numRecordsOutPerSecond", {"job_name", "tm_id", "operator_name"}),
    ("flink_taskmanager_job_task_operator_currentOutputWatermark", {"job_name", "operator_name", "subtask_index"}),
    ("flink_taskmanager_job_task_busyTimeMsPerSecond", {"job_name", "task_name", "subtask_index", "tm_id"}),
    ("flink_taskmanager_job_task_backPressuredTimeMsPerSecond", {"job_name", "task_name", "subtask_index"}),
    ("flink_taskmanager_job_task_idleTimeMsPerSecond", {"job_name", "task_name", "host"}),
    ("flink_taskmanager_Status_JVM_CPU_Load", {"tm_id", "host"}),
    ("flink_taskmanager_Status_JVM_Memory_Heap_Used", {"tm_id"}),
    ("flink_taskmanager_Status_JVM_Threads_Count", {"tm_id"}),
    ("flink_taskmanager_Status_JVM_GarbageCollector_Generation0_Count", {"tm_id"}),
    ("flink_jobmanager_Status_JVM_Memory_Heap_Used", {"host"}),
    ("flink_jobmanager_Status_JVM_CPU_Time", {"host"}),
]
LABEL_VALUE = re.compile(r"^[a-zA-Z0-9:_]*$")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _resident_bytes() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def test_a_flink_dashboards_queries_find_their_series(make_env, tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKPOINT_HOME", str(tmp_path / "home"))
    port = _free_port()
    env = make_env(
        "local",
        **{"execution.epoch.max-records": 100, "metrics.reporter.prom.port": str(port), "pipeline.name": "dash"},
    )
    env.set_parallelism(2)
    source = DataGeneratorSource(lambda i: (f"k{i % 5}", i), None, num_splits=2, records_per_second=2_000)
    (
        env.from_source(source, WatermarkStrategy.for_monotonous_timestamps(), "numbers (generated)")
        .key_by(lambda r: r[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .name("Window(Process)")
        .print()
    )
    client = env.execute_async("dash board/job")
    try:

        def scrape() -> dict:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
            return {f.name: f for f in text_string_to_metric_families(text)}

        families = wait_for(
            lambda: (f := scrape()).get("flink_taskmanager_job_task_operator_numRecordsIn") and f, 30, "a scrape"
        )
        rss, threads = _resident_bytes(), threading.active_count()
    finally:
        client.cancel()
        client.wait(30)
    for metric, wanted in DASHBOARD:
        assert metric in families, f"{metric}: no such series"
        samples = families[metric].samples
        assert samples and all(wanted <= set(s.labels) and all(s.labels[k] for k in wanted) for s in samples), (
            metric,
            [s.labels for s in samples],
        )
    for family in families.values():
        for sample in family.samples:
            assert all(LABEL_VALUE.match(v) for v in sample.labels.values()), (sample.name, sample.labels)
    operators = {
        s.labels["operator_name"] for s in families["flink_taskmanager_job_task_operator_numRecordsIn"].samples
    }
    assert "WindowProcess" in operators and "numbersgenerated" in operators
    [job_name] = {s.labels["job_name"] for s in families["flink_jobmanager_job_uptime"].samples}
    assert job_name == "dashboardjob"
    [running] = families["flink_jobmanager_numRunningJobs"].samples
    assert running.value == 1
    [heap] = families["flink_taskmanager_Status_JVM_Memory_Heap_Used"].samples
    assert 0.5 * rss < heap.value < 2 * rss  # the process's resident memory, read from /proc a moment later
    [count] = families["flink_taskmanager_Status_JVM_Threads_Count"].samples
    assert abs(count.value - threads) <= 4
    [load] = families["flink_taskmanager_Status_JVM_CPU_Load"].samples
    assert 0 <= load.value <= 1
