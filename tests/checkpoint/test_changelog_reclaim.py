"""A killed run's state changelog is reclaimed by the next job that starts, down to what its retained checkpoints
reference; a live job's changelog is never touched.

The rules first, on changelogs laid out by hand with real processes as their owners (a dead one, a live one, a
live pid of another process than the owner's, another host's), then the story for real: ``sparkpoint run`` with
the changelog on, SIGKILLed after a few checkpoints while a second job runs, and started again with ``-s`` on the
killed job's directory. Oracles: the segments each retained ``_metadata`` names (read here as plain JSON), and
the counts per key, counted by hand.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sparkpoint.common import Configuration
from sparkpoint.common.processes import ProcessIdentity
from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.changelog_reclaim import reclaim_after_ms, reclaim_changelogs
from tests.checkpoint.test_changelog_checkpoints import CHANGELOG
from tests.checkpoint.test_checkpointing import oracle_totals
from tests.checkpoint.test_rocksdb_checkpoints import _restored_counts

ROOT = Path(__file__).resolve().parents[2]
JOB_A, JOB_B = "a" * 32, "b" * 32


def _changelog(base: Path, job_id: str, epochs: int = 3) -> Path:
    """A changelog as a job lays it out: two attempts, ``epochs`` epoch directories each, two segments each."""
    root = base / job_id / "changelog"
    for attempt in (0, 1):
        for epoch in range(epochs):
            d = root / f"{job_id}-{attempt}" / f"{epoch:010d}"
            d.mkdir(parents=True)
            for subtask in (0, 1):
                (d / f"s1-t{subtask}-0000abcd.log").write_bytes(b"SPCL2....")
    return root


def _own(root: Path, process: ProcessIdentity, heartbeat_ms: int | None = None, **extra) -> None:
    body = {
        "format": "sparkpoint-changelog-owner",
        "version": 1,
        "job_id": root.parent.name,
        "process": process.to_json(),
        "checkpoints": None,
        "heartbeat_ms": int(time.time() * 1000) if heartbeat_ms is None else heartbeat_ms,
        "ended": False,
        **extra,
    }
    (root / ".owner").write_text(json.dumps(body))


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def test_only_changelogs_whose_owner_is_provably_gone_are_reclaimed(tmp_path):
    base = tmp_path / "ck"
    dead, live = _sleeper(), _sleeper()
    try:
        dead_identity, live_identity = ProcessIdentity.of(dead.pid), ProcessIdentity.of(live.pid)
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait(30)
        roots = {name: _changelog(base, name * 32) for name in "cdefghij"}
        _own(roots["c"], dead_identity)  # this host, its driver killed
        _own(roots["d"], live_identity)  # this host, running
        _own(roots["e"], ProcessIdentity(live.pid, "1", live_identity.host))  # its pid now another process's
        other = ProcessIdentity(12345, "678", "elsewhere/boot/pid:[1]")
        _own(roots["f"], other, int(time.time() * 1000) - 2 * 3600_000)  # another host, silent for 2 h
        _own(roots["g"], other)  # another host, heartbeat just now
        _own(roots["h"], live_identity, ended=True)  # ended: its process may live on
        # roots["i"]: no owner file (an older version's changelog): never judged
        _own(roots["j"], dead_identity)  # the starting job's own
        before = {name: _files(root) for name, root in roots.items()}
        conf = Configuration()
        reclaimed = reclaim_changelogs(conf, base.as_uri(), "j" * 32)
        assert sorted(Path(r.removeprefix("file://")).parent.name[0] for r in reclaimed) == ["c", "e", "f", "h"]
        for name in "cefh":
            assert not roots[name].exists(), name  # no checkpoint: all of it goes
        for name in "dgij":
            assert _files(roots[name]) == before[name], name  # untouched
        conf.set("sparkpoint.changelog.reclaim-after", "-1")  # other hosts' changelogs: never
        _own(_changelog(base, "k" * 32), other, 0)
        assert reclaim_changelogs(conf, base.as_uri(), "j" * 32) == []
    finally:
        for proc in (dead, live):
            if proc.poll() is None:
                proc.kill()
            proc.wait(30)


def test_a_checkpoint_that_cannot_be_read_leaves_the_changelog_as_it_is(tmp_path):
    base = tmp_path / "ck"
    root = _changelog(base, JOB_A)
    _own(root, ProcessIdentity(12345, "678", "elsewhere/boot/pid:[1]"), 0, checkpoints=(base / JOB_A).as_uri())
    (base / JOB_A / "chk-3").mkdir()
    (base / JOB_A / "chk-3" / "_metadata").write_text('{"format": "sparkpoint-checkpoint", "body": {')  # torn
    (base / JOB_A / "chk-4").mkdir()  # not completed (no _metadata): ignored
    before = _files(root)
    assert reclaim_changelogs(Configuration(), base.as_uri(), JOB_B) == []
    assert _files(root) == before


def test_reclaim_after_is_at_least_ten_minutes_or_never():
    conf = Configuration()
    assert reclaim_after_ms(conf) == 3600_000
    conf.set("sparkpoint.changelog.reclaim-after", "2 h")
    assert reclaim_after_ms(conf) == 7200_000
    conf.set("sparkpoint.changelog.reclaim-after", "-1")
    assert reclaim_after_ms(conf) == -1
    conf.set("sparkpoint.changelog.reclaim-after", "30 s")
    with pytest.raises(ConfigurationError, match="sparkpoint.changelog.reclaim-after must be at least 10 min"):
        reclaim_after_ms(conf)


# -- the story, for real ------------------------------------------------------------------------------------

COUNTING_JOB = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from sparkpoint.common import WatermarkStrategy
    from sparkpoint.datastream import StreamExecutionEnvironment
    from sparkpoint.datastream.connectors.generator import DataGeneratorSource
    from tests.checkpoint.test_checkpointing import Count, key_of

    count, rate = int(sys.argv[1]), float(sys.argv[2])
    env = StreamExecutionEnvironment.get_execution_environment()
    src = DataGeneratorSource(key_of, count, num_splits=2, records_per_second=rate or None)
    env.from_source(src, WatermarkStrategy.no_watermarks(), "gen").uid("gen") \\
        .key_by(lambda k: k).process(Count()).uid("count").print()
    env.execute("counting")
""")


def _run(job: Path, out: Path, conf: dict, *args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "sparkpoint.cli", "run", "-p", "2"]
    for k, v in conf.items():
        cmd += ["-D", f"{k}={v}"]
    with open(out, "w") as f:
        return subprocess.Popen(cmd + [*args], stdout=f, stderr=subprocess.STDOUT, text=True, cwd=str(ROOT))


def _job_id(out: Path, proc: subprocess.Popen, timeout: float = 60) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = re.search(r"Job has been submitted with JobID ([0-9a-f]{32})", out.read_text())
        if found:
            return found.group(1)
        assert proc.poll() is None, out.read_text()
        time.sleep(0.05)
    raise AssertionError(f"the job never started: {out.read_text()}")


def _completed(job_dir: Path) -> list[Path]:
    return sorted(
        (p for p in job_dir.glob("chk-*") if (p / "_metadata").exists()), key=lambda p: int(p.name.split("-")[1])
    )


def _body(chk: Path) -> dict:
    return json.loads((chk / "_metadata").read_text())["body"]


def _referenced_segments(job_dir: Path) -> set[str]:
    """The changelog segments the retained checkpoints' _metadata name (plain JSON, as written)."""
    out = set()
    for chk in _completed(job_dir):
        for op in _body(chk)["operators"].values():
            for f in op["keyed_state"]:
                out.update(os.path.normpath(chk / h["path"]) for h in f.get("shared", ()))
    return {p for p in out if "/changelog/" in p}


def _segments(job_dir: Path) -> set[str]:
    return {os.path.normpath(p) for p in (job_dir / "changelog").rglob("*.log")}


def _epochs_after_last_checkpoint(job_dir: Path) -> int:
    done = _completed(job_dir)
    if not done or int(done[-1].name[4:]) < 4:
        return 0
    barrier = _body(done[-1])["barrier_epoch"]
    return len({p.parent.name for p in (job_dir / "changelog").rglob("*.log") if int(p.parent.name) > barrier})


def _last_counts(out: Path) -> dict:
    last: dict = {}
    for key, n in re.findall(r"\('(k\d+)', (\d+)\)", out.read_text()):
        last[key] = max(last.get(key, 0), int(n))
    return last


@pytest.mark.slow
def test_a_killed_runs_changelog_is_reclaimed_when_it_is_started_again_and_a_live_jobs_is_untouched(make_env, tmp_path):
    count = 12_000
    ck = tmp_path / "ck"
    job = tmp_path / "counting.py"
    job.write_text(COUNTING_JOB.format(root=str(ROOT)))
    conf = {
        **CHANGELOG,
        "execution.target": "local",
        "execution.epoch.max-records": 20,
        "execution.epoch.idle-pause": "0 ms",
        "execution.checkpointing.interval": "400 ms",
        "state.checkpoints.dir": ck.as_uri(),
        "state.checkpoints.num-retained": 3,
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "sparkpoint.local-state-dir": str(tmp_path / "local-state"),
        "rest.enabled": "false",
    }
    killed = _run(job, tmp_path / "killed.out", conf, str(job), str(count), "1000")
    # a job running beside it, its changelog in the same base and never truncated (no checkpoints)
    live_conf = {k: v for k, v in conf.items() if not k.startswith(("execution.checkpointing", "state.checkpoints"))}
    live = _run(
        job,
        tmp_path / "live.out",
        {**live_conf, "state.changelog.dstl.dfs.base-path": ck.as_uri()},
        str(job),
        "1000000",
        "200",
    )
    try:
        killed_id, live_id = _job_id(tmp_path / "killed.out", killed), _job_id(tmp_path / "live.out", live)
        killed_dir, live_dir = ck / killed_id, ck / live_id
        deadline = time.time() + 40
        while _epochs_after_last_checkpoint(killed_dir) < 2 and time.time() < deadline:
            assert killed.poll() is None, (tmp_path / "killed.out").read_text()
            time.sleep(0.02)
        os.kill(killed.pid, signal.SIGKILL)  # after 4+ checkpoints, with epochs past the last one
        assert killed.wait(30) == -signal.SIGKILL
        referenced, left = _referenced_segments(killed_dir), _segments(killed_dir)
        assert referenced and referenced <= left  # the retained checkpoints' segments
        assert left - referenced, "the kill left segments no checkpoint references"
        live_before = _files(live_dir / "changelog")
        assert live_before and live.poll() is None

        # the operator starts the job again from the killed one's directory: its newest checkpoint
        after = _run(job, tmp_path / "after.out", conf, "-s", killed_dir.as_uri(), str(job), str(count), "0")
        assert after.wait(120) == 0, (tmp_path / "after.out").read_text()
        assert f"from Checkpoint {int(_completed(killed_dir)[-1].name[4:])}" in (tmp_path / "after.out").read_text()
        assert _last_counts(tmp_path / "after.out") == dict(oracle_totals(count))

        assert _segments(killed_dir) == referenced  # the rest is gone, what is referenced stays
        assert live_before <= _files(live_dir / "changelog")  # the live job's: untouched
        assert live.poll() is None
        # and the oldest retained checkpoint of the killed run, which references the most, restores exactly
        oldest = str(_completed(killed_dir)[0])
        assert _restored_counts(make_env, tmp_path, oldest, count, **CHANGELOG) == dict(oracle_totals(count))
    finally:
        for proc in (killed, live):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
