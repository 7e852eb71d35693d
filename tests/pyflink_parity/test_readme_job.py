"""The job at the top of README.md is a valid PyFlink program, and sparkpoint writes what PyFlink writes for it.

``expected/readme_job.txt`` is the output (part files' lines, sorted) of PyFlink 2.3.0 running README.md's first
Python block with ``sparkpoint`` replaced by ``pyflink`` in its imports, in a directory whose ``events/`` holds the
300 events :func:`write_events` makes; this test runs the same block unchanged through ``sparkpoint run`` (in
this process's Python, ``execution.target: local``) over the same events and compares.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).parent / "expected" / "readme_job.txt"


def readme_job() -> str:
    """README.md's first Python block."""
    match = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert match is not None, "README.md has no Python block"
    return match.group(1)


def write_events(directory: Path) -> None:
    """300 behaviour events ``ts\\tuser\\titem\\tbehavior``, out of order by less than the job's 50 s bound."""
    rng = random.Random(7)
    base = 1_499_000_000_000
    lines = []
    for i in range(300):
        ts = base + i * 1_500 - rng.randrange(0, 40_000)
        lines.append(f"{ts}\tu{rng.randrange(4)}\ti{rng.randrange(9)}\t{rng.choice(['pv', 'buy', 'cart', 'fav'])}")
    directory.mkdir()
    (directory / "part-0.tsv").write_text("\n".join(lines) + "\n")


def test_the_readme_job_writes_what_pyflink_writes(tmp_path):
    job = readme_job()
    assert "from pyflink" not in job and "from sparkpoint" in job
    write_events(tmp_path / "events")
    (tmp_path / "job.py").write_text(job)
    cmd = [sys.executable, "-m", "sparkpoint.cli", "run", "-D", "execution.target=local", "job.py"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    parts = [p for p in (tmp_path / "out").rglob("*") if p.is_file() and not p.name.startswith(".")]
    got = sorted(line for p in parts for line in p.read_text().splitlines())
    expected = EXPECTED.read_text().splitlines()
    assert len(expected) == 120
    assert got == expected
