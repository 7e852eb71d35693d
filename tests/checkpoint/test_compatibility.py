"""``inspect --against`` and an actual restore decide the same way: one matching function.

A savepoint of a job with uids ``gen`` and ``count`` is compared with, and restored into, a
job whose keyed operator is now ``count-v2``: ``gen`` MATCHes, ``count`` is DROPPED and
``count-v2`` is EMPTY. The report says so, and the restore does exactly that.
"""

from __future__ import annotations

import runpy
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from sparkpoint.checkpoint.loader import load_checkpoint
from sparkpoint.cli import main
from sparkpoint.connectors.generator import split_length
from sparkpoint.errors import JobGraphError

COUNT = 20_000

JOB = textwrap.dedent("""
    import sys

    from sparkpoint.common import WatermarkStrategy
    from sparkpoint.datastream import KeyedProcessFunction, StreamExecutionEnvironment
    from sparkpoint.datastream.connectors.generator import DataGeneratorSource
    from sparkpoint.datastream.state import ValueStateDescriptor

    COUNT = 20_000


    def key_of(i):
        return f"k{(i * 7919) % 7}"


    class Count(KeyedProcessFunction):
        def open(self, ctx):
            self.n = ctx.get_state(ValueStateDescriptor("n"))

        def process_element(self, value, ctx):
            self.n.update((self.n.value() or 0) + 1)
            yield (value, self.n.value())


    def build(env, uid, rate=None):
        env.set_parallelism(2)
        src = DataGeneratorSource(key_of, COUNT, num_splits=2, records_per_second=rate)
        return (env.from_source(src, WatermarkStrategy.no_watermarks(), "gen").uid("gen")
                .key_by(lambda k: k).process(Count()).uid(uid))


    if __name__ == "__main__":
        env = StreamExecutionEnvironment.get_execution_environment()
        build(env, sys.argv[1]).print()
        env.execute("compatibility")
""")


@pytest.fixture
def job_file(tmp_path) -> Path:
    path = tmp_path / "compat_job.py"
    path.write_text(JOB)
    return path


def _savepoint(make_env, job_file: Path, tmp_path: Path) -> str:
    build = runpy.run_path(str(job_file))["build"]
    env = make_env("local", **{"execution.epoch.max-records": 200})
    build(env, "count", rate=10_000).print()
    client = env.execute_async("before")
    time.sleep(0.5)
    assert not client.get_job_execution_result().done()
    path = client.stop_with_savepoint(False, (tmp_path / "sp").as_uri()).result(timeout=60)
    client.wait(60)
    return path


def _records_read(path: str) -> int:
    """How many records the savepoint's source positions say were read (from the split positions)."""
    sources = load_checkpoint(path).driver_state["sources"]["gen"]
    open_splits = [s for ss in sources["splits"].values() for s in ss]
    unread = set(sources["enumerator"]) | {s.split_id for s in open_splits}
    finished = [k for k in range(2) if f"seq-{k}" not in unread]
    return sum(s.position for s in open_splits) + sum(split_length(COUNT, 2, k) for k in finished)


def _verdict(path: str, job_file: Path, *extra: str) -> tuple[int, list[str]]:
    r = CliRunner().invoke(main, ["inspect", path, *extra, "--against", str(job_file), "count-v2"])
    return r.exit_code, r.output.splitlines()


def test_inspect_against_and_restore_agree_on_changed_uids(make_env, job_file, tmp_path):
    path = _savepoint(make_env, job_file, tmp_path)
    build = runpy.run_path(str(job_file))["build"]

    # what inspect --against says
    code, lines = _verdict(path, job_file)
    verdicts = sorted(tuple(line.split()[:2]) for line in lines if line.startswith("  "))
    assert verdicts == [("DROPPED", "count:"), ("EMPTY", "count-v2:"), ("MATCH", "gen:")]
    assert code == 1 and lines[-1] == "verdict: the job CANNOT be restored"
    code_n, lines_n = _verdict(path, job_file, "-n")
    assert code_n == 0 and lines_n[-1] == "verdict: the job can be restored"

    # and what a restore does: without -n it fails on the dropped uid ...
    env = make_env("local", **{"execution.savepoint.path": path})
    build(env, "count-v2").print()
    with pytest.raises(JobGraphError, match=r"no operator has uid 'count'\."):
        env.execute()

    # ... with -n, count-v2 starts empty (every key counts from 1) and gen resumes where the savepoint was
    env2 = make_env("local", **{"execution.savepoint.path": path, "execution.savepoint.ignore-unclaimed-state": True})
    got = list(build(env2, "count-v2").execute_and_collect())
    first: dict = {}
    last: dict = {}
    for key, n in got:
        first[key] = min(first.get(key, n), n)
        last[key] = max(last.get(key, 0), n)
    assert set(first.values()) == {1}
    read_before = _records_read(path)
    assert 0 < read_before < COUNT
    assert sum(last.values()) == len(got) == COUNT - read_before


def test_unchanged_uids_match_and_the_restore_continues_every_count(make_env, job_file, tmp_path):
    path = _savepoint(make_env, job_file, tmp_path)
    r = CliRunner().invoke(main, ["inspect", path, "--against", str(job_file), "count"])
    verdicts = sorted(tuple(line.split()[:2]) for line in r.output.splitlines() if line.startswith("  "))
    assert r.exit_code == 0 and verdicts == [("MATCH", "count:"), ("MATCH", "gen:")]
    # restored, the counts go on from the savepoint's: each key ends at its total number of records
    build = runpy.run_path(str(job_file))["build"]
    key_of = runpy.run_path(str(job_file))["key_of"]
    env = make_env("local", **{"execution.savepoint.path": path})
    got = build(env, "count").execute_and_collect()
    last: dict = {}
    for key, n in got:
        last[key] = max(last.get(key, 0), n)
    oracle: dict = {}
    for i in range(COUNT):
        oracle[key_of(i)] = oracle.get(key_of(i), 0) + 1
    assert last == oracle
