"""The embedded Spark (sparkpoint starts it, local master) listens on loopback only, without a web UI,
and a failing task's trace does not bury the job's own error."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HOLD = textwrap.dedent("""
    import sys, time
    from sparkpoint.common import WatermarkStrategy
    from sparkpoint.datastream import StreamExecutionEnvironment
    from sparkpoint.datastream.connectors.generator import NumberSequenceSource

    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_source(NumberSequenceSource(0, 9), WatermarkStrategy.no_watermarks(), "n").uid("n") \\
        .map(lambda v: time.sleep(120) if v == 9 else v).uid("hold").print()
    env.execute("hold")
""")


def _listening_ports(pid: int) -> list[tuple[str, int]]:
    """(address, port) of the TCP sockets ``pid`` listens on, from /proc (IPv4 and IPv6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # LISTEN
                address, port = local.split(":")
                found.append((_address(address), int(port, 16)))
    return found


def _address(hex_address: str) -> str:
    """/proc/net/tcp* addresses: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    ordered = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    address = ipaddress.ip_address(ordered)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


def _java_children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid), "java"], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


def test_the_embedded_spark_listens_on_loopback_only_and_has_no_web_ui(tmp_path):
    job = tmp_path / "hold.py"
    job.write_text(HOLD)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparkpoint.cli", "run", "-p", "1", str(job)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        ports: list[tuple[str, int]] = []
        deadline = time.time() + 90
        while time.time() < deadline and not ports:
            time.sleep(1)
            for java in _java_children(proc.pid):
                ports = _listening_ports(java)
        assert ports, "the Spark JVM never listened"
        time.sleep(3)  # the block manager and the driver's RPC are up once the first epoch runs
        ports = [p for java in _java_children(proc.pid) for p in _listening_ports(java)]
        assert all(ipaddress.ip_address(address).is_loopback for address, _ in ports), ports
        assert 4040 not in {port for _, port in ports}, ports
    finally:
        proc.kill()
        proc.wait(30)
        for java in _java_children(proc.pid):
            os.kill(java, 9)


FAILING = textwrap.dedent("""
    from sparkpoint.common import WatermarkStrategy
    from sparkpoint.datastream import StreamExecutionEnvironment
    from sparkpoint.datastream.connectors.generator import NumberSequenceSource

    def check(v):
        if v == 77:
            raise ValueError("77 is bad")
        return v

    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_source(NumberSequenceSource(0, 99), WatermarkStrategy.no_watermarks(), "n").uid("n") \\
        .map(check).uid("check").print()
    env.execute("failing")
""")


def test_a_failing_task_on_the_embedded_spark_ends_with_the_jobs_error_not_a_java_trace(tmp_path):
    job = tmp_path / "failing.py"
    job.write_text(FAILING)
    proc = subprocess.run(
        [sys.executable, "-m", "sparkpoint.cli", "run", "-p", "1", str(job)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 1
    assert not [line for line in proc.stderr.splitlines() if line.strip().startswith("at org.apache")], proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (
        "The job failed: user function of operator 'Map' (uid 'check') failed in epoch 0 on record 77 "
        "from sequence number 77: ValueError: 77 is bad"
    ), last
    assert f'File "{job}", line 8, in check' in proc.stderr


SESSION_LATER = textwrap.dedent("""
    import json, sys
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    from sparkpoint.common import WatermarkStrategy
    from sparkpoint.datastream import StreamExecutionEnvironment
    from sparkpoint.datastream.connectors.generator import NumberSequenceSource

    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_source(NumberSequenceSource(0, 99), WatermarkStrategy.no_watermarks(), "n").uid("n") \\
        .map(lambda v: v * 2).uid("double").print()
    env.execute("context only")
    sc = SparkContext._active_spark_context
    jvm_session = sc._jvm.org.apache.spark.sql.classic.SparkSession.getDefaultSession().isDefined()
    spark = SparkSession.builder.getOrCreate()  # asked for after the job: made on the job's context
    rows = spark.range(5).count()
    json.dump({"session_during_job": jvm_session, "same_context": spark.sparkContext is sc, "rows": rows,
               "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
               "app_name": sc.appName}, open(sys.argv[1], "w"))
""")


def test_a_job_runs_on_a_spark_context_and_a_session_asked_for_later_shares_it(tmp_path):
    """Started by sparkpoint, Spark is a SparkContext (the runtime runs RDD jobs; the JVM's SparkSession costs
    about 1.7 s of every start); a script that wants a session after gets one on the same context and settings."""
    job, report = tmp_path / "later.py", tmp_path / "report.json"
    job.write_text(SESSION_LATER)
    done = subprocess.run(
        [sys.executable, "-m", "sparkpoint.cli", "run", "-p", "1", str(job), str(report)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(int(v) for v in done.stdout.split() if v.isdigit()) == [2 * i for i in range(100)]
    got = json.loads(report.read_text())
    assert got == {
        "session_during_job": False,
        "same_context": True,
        "rows": 5,
        "shuffle_partitions": "8",  # sparkpoint's default for a session it starts
        "app_name": "sparkpoint",  # (no pipeline.name set)
    }, got
