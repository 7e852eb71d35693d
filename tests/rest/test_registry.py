"""The local job registry lists the jobs whose processes run, with real processes: a killed job's entry goes,
and so does one whose pid the kernel gave to another process (the pid alone does not name the job)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from sparkpoint.rest.registry import JobRegistry

REGISTERS = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from sparkpoint.rest.registry import JobRegistry
    JobRegistry(Path(sys.argv[1])).register(sys.argv[2], "job", "127.0.0.1", 8081)
    print("registered", flush=True)
    time.sleep(120)
""")


def _registering(home: Path, job_id: str) -> subprocess.Popen:
    """A process that registers ``job_id`` as its own and stays (until killed)."""
    proc = subprocess.Popen([sys.executable, "-c", REGISTERS, str(home), job_id], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "registered"
    return proc


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)


def test_a_reused_pid_does_not_keep_a_killed_jobs_entry(tmp_path):
    registry = JobRegistry(tmp_path)
    killed = _registering(tmp_path, "a" * 32)
    other = _registering(tmp_path, "b" * 32)
    try:
        assert sorted(j["job_id"] for j in registry.jobs()) == ["a" * 32, "b" * 32]
        entry_path = registry.dir / f"{'a' * 32}.json"
        entry = json.loads(entry_path.read_text())
        assert entry["pid"] == killed.pid and entry["started"]  # the process, not just its pid
        _kill(killed)
        # the kernel reuses the killed job's pid for another process: its entry names a live pid again
        # (``other`` stands for that process: alive, started at another time)
        time.sleep(0.02)
        entry_path.write_text(json.dumps({**entry, "pid": other.pid}))
        assert [j["job_id"] for j in registry.jobs()] == ["b" * 32]  # the live one only
        assert not entry_path.exists()  # and the stale entry is removed
        _kill(other)
        assert registry.jobs() == [] and not list(registry.dir.glob("*.json"))
    finally:
        _kill(killed)
        _kill(other)


def test_an_entry_of_another_host_is_left_to_it_and_one_from_before_a_reboot_goes(tmp_path):
    registry = JobRegistry(tmp_path)
    live = _registering(tmp_path, "c" * 32)
    try:
        entry = json.loads((registry.dir / f"{'c' * 32}.json").read_text())
        name, boot, namespace = entry["host"].split("/", 2)
        elsewhere = {**entry, "job_id": "d" * 32, "host": f"{name}-elsewhere/{boot}/{namespace}"}
        (registry.dir / f"{'d' * 32}.json").write_text(json.dumps(elsewhere))
        rebooted = {**entry, "job_id": "e" * 32, "host": f"{name}/{'0' * 8}-{boot[9:]}/{namespace}"}
        (registry.dir / f"{'e' * 32}.json").write_text(json.dumps(rebooted))
        assert [j["job_id"] for j in registry.jobs()] == ["c" * 32]
        assert (registry.dir / f"{'d' * 32}.json").exists()  # another host's: not ours to remove
        assert not (registry.dir / f"{'e' * 32}.json").exists()  # from before this host booted: gone
        assert registry.find("c") is not None and registry.find("d") is None
    finally:
        _kill(live)
