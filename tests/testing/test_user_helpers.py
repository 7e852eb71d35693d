"""``sparkpoint.testing`` holds what a user needs to test their own job; the suite's servers are not in it.

The exactly-once example (``examples/exactly_once_check.py``, the recipe of ``docs/testing.md``) runs
as a user runs it: it kills ``examples/running_counts.py`` with the kill loop and compares the output
with its oracle. It must pass on the job, and fail on the job's variant that keeps its counts outside
keyed state.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import sparkpoint.testing
from sparkpoint.testing import job_report, kill_loop
from sparkpoint.testing.kill_loop import read_committed_lines

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "exactly_once_check.py"
SERVERS = ("kafka_server", "postgres_server", "s3_server", "spark_cluster", "local_server")


def test_the_servers_of_the_test_suite_are_not_in_the_package():
    for name in SERVERS:
        assert importlib.util.find_spec(f"sparkpoint.testing.{name}") is None, name
        assert importlib.util.find_spec(f"tests.servers.{name}") is not None, name


def test_the_public_helpers_come_from_the_package():
    for name in sparkpoint.testing.__all__:
        home = kill_loop if hasattr(kill_loop, name) else job_report
        assert getattr(sparkpoint.testing, name) is getattr(home, name), name
    with pytest.raises(AttributeError, match="has no attribute 'KafkaServer'"):
        sparkpoint.testing.KafkaServer  # noqa: B018


def test_importing_the_fault_points_does_not_load_the_kill_loop():
    """Every task imports ``sparkpoint.testing.faults``; the kill loop and its imports stay out."""
    code = (
        "import sys, sparkpoint.testing.faults; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('sparkpoint'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = out.split()
    assert "sparkpoint.testing.faults" in loaded
    assert not [
        m
        for m in loaded
        if m.startswith(("sparkpoint.testing.kill_loop", "sparkpoint.testing.job_report", "sparkpoint.storage"))
    ], loaded


def _run_example(work: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "--events", "16000", "--kills", "2", "--seed", "3", "--work", str(work), *extra],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )


def test_the_exactly_once_example_passes_on_a_job_with_keyed_state(tmp_path):
    run = _run_example(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 kills" in run.stdout and "exactly once: 16000 lines" in run.stdout, run.stdout
    # the output again, against a count of the input made here: each key's records numbered 1..c, each once
    keys = Counter(line.split("\t")[0] for f in (tmp_path / "in").iterdir() for line in f.read_text().splitlines())
    numbers: dict[str, list[int]] = {}
    for line in read_committed_lines(tmp_path / "out"):
        key, n = line.split("\t")
        numbers.setdefault(key, []).append(int(n))
    assert sum(keys.values()) == 16000
    assert {k: sorted(v) for k, v in numbers.items()} == {k: list(range(1, c + 1)) for k, c in keys.items()}


def test_the_exactly_once_example_catches_counts_kept_outside_keyed_state(tmp_path):
    run = _run_example(tmp_path, "--plain-dict")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "NOT exactly once" in run.stdout, run.stdout
