"""Checkpoints on a local disk are durable: every file ``_metadata`` names is synced before ``_metadata`` is renamed.

Real jobs write real checkpoints; the ``fsync``, rename and ``mkdir`` calls are recorded as they happen
(wrapping ``os`` in this process for the in-process executor, ``strace -f`` of ``sparkpoint run`` on Spark,
whose tasks write from Python workers) and each retained checkpoint is checked against its own
``_metadata`` (:func:`tests.storage.durability.assert_durable`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sparkpoint.checkpoint.loader import load_checkpoint
from sparkpoint.errors import ConfigurationError
from sparkpoint.storage.checkpoint_storage import write_file
from sparkpoint.storage.file_systems import configure_file_systems, open_file_system, storage_options_from_config
from tests.checkpoint.test_checkpointing import counting_job
from tests.checkpoint.test_rocksdb_checkpoints import ROCKSDB, _run_until_checkpoint_id
from tests.storage.durability import assert_durable, parse_strace, record_os_calls

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("durable_job.py")


def test_a_written_file_is_synced_then_renamed_then_its_directories_synced(tmp_path, monkeypatch, default_file_systems):
    events = record_os_calls(monkeypatch)
    fs, base = open_file_system(tmp_path.as_uri())
    target = f"{base}/job/chk-1/keyed-s1-t0"
    write_file(fs, target, b"state")
    log = events.log
    ((rename_at, tmp),) = [(i, p) for i, (op, p, t) in enumerate(log) if op == "rename" and t == target]
    assert ("fsync", tmp, None) in log[:rename_at]
    assert ("fsync", f"{base}/job/chk-1", None) in log[rename_at:]
    # the two new directories: each one's name is synced in its parent before the file is written
    created = [p for op, p, _ in log if op == "mkdir"]
    assert created == [f"{base}/job", f"{base}/job/chk-1"]
    synced_dirs = [p for op, p, _ in log[:rename_at] if op == "fsync" and p != tmp]
    assert set(synced_dirs) >= {base, f"{base}/job"}
    assert Path(target).read_bytes() == b"state"


@pytest.mark.parametrize(
    "conf",
    [{}, ROCKSDB, {**ROCKSDB, "state.changelog.enabled": "true"}],
    ids=["hashmap", "rocksdb-incremental", "rocksdb-changelog"],
)
def test_every_file_of_a_checkpoint_is_durable_before_its_metadata(make_env, tmp_path, monkeypatch, conf):
    events = record_os_calls(monkeypatch)
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 20, **conf})
    stream = counting_job(env, 40_000, ck, retained=3, rate=1_500)
    dirs = _run_until_checkpoint_id(env, stream, ck, 4)
    assert len(dirs) == 3
    checked = [assert_durable(events, d, str(ck)) for d in dirs]
    assert min(checked) >= 2  # the driver's state and at least one keyed-state file each
    if conf:  # shared SST files (and segments) were among them
        assert any("/shared/" in p for op, p, t in events.log if op == "rename" and t and t.endswith(".sst"))


@pytest.fixture
def default_file_systems():
    """The process's file systems configured as no job configured them, after the test too."""
    configure_file_systems({})
    yield
    configure_file_systems({})


def test_fsync_off_syncs_nothing_and_checkpoints_still_complete_whole(
    make_env, tmp_path, monkeypatch, default_file_systems
):
    events = record_os_calls(monkeypatch)
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 20, "sparkpoint.checkpoints.fsync": "false", **ROCKSDB})
    stream = counting_job(env, 40_000, ck, retained=3, rate=1_500)
    dirs = _run_until_checkpoint_id(env, stream, ck, 4)
    assert len(dirs) == 3
    for d in dirs:
        load_checkpoint(d)  # every file there, whole (sizes and SHA-256 verified)
    assert [p for op, p, _ in events.log if op == "fsync" and p.startswith(str(ck))] == []
    assert any(t.endswith("/_metadata") for op, _, t in events.log if op == "rename" and t)  # still renamed


def test_a_bad_fsync_value_is_refused_naming_the_key():
    with pytest.raises(ConfigurationError, match=r"sparkpoint\.checkpoints\.fsync: 'sometimes' is not a boolean"):
        storage_options_from_config({"sparkpoint.checkpoints.fsync": "sometimes"})


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_on_spark_python_workers_sync_what_they_upload(tmp_path):
    """``sparkpoint run`` on a local Spark under ``strace -f``: the SST files and manifests the executors' Python
    workers upload are synced before the driver renames ``_metadata`` into place."""
    ck, log = tmp_path / "ck", tmp_path / "strace.log"
    conf = {
        "execution.target": "spark",
        "spark.master": "local[2]",
        "spark.ui.enabled": "false",
        "state.checkpoints.dir": ck.as_uri(),
        "execution.checkpointing.interval": "200 ms",
        "state.checkpoints.num-retained": "2",
        "restart-strategy.type": "none",
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "execution.epoch.max-records": "200",
        **ROCKSDB,
    }
    cmd = [
        "strace",
        "-f",
        "-y",
        "-qq",
        "-s",
        "4096",
        "-e",
        "signal=none",
        "-o",
        str(log),
        "-e",
        "trace=fsync,fdatasync,rename,renameat,renameat2,mkdir,mkdirat",
        sys.executable,
        "-m",
        "sparkpoint.cli",
        "run",
        *(f"-D{k}={v}" for k, v in conf.items()),
        str(JOB),
    ]
    run = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "PYSPARK_PYTHON": sys.executable}
    )
    assert "fails on purpose" in run.stderr + run.stdout, run.stderr[-3000:]
    events = parse_strace(log.read_text())
    dirs = sorted((str(p.parent) for p in ck.glob("*/chk-*/_metadata")), key=lambda d: int(d.rsplit("-", 1)[1]))
    assert dirs, f"no checkpoint was retained: {run.stderr[-2000:]}"
    for d in dirs:
        assert assert_durable(events, d, str(ck)) >= 3
    assert any("/shared/" in t for op, p, t in events.log if op == "rename" and t and t.endswith(".sst"))


def test_the_directories_known_durable_are_bounded_and_a_forgotten_one_is_synced_again(tmp_path, monkeypatch):
    from sparkpoint.storage import durable

    synced: list[str] = []
    real = durable.sync_directory
    monkeypatch.setattr(durable, "sync_directory", lambda d: (synced.append(d), real(d)))
    monkeypatch.setattr(durable, "MAX_REMEMBERED", 50)
    for i in range(200):  # a directory per checkpoint, as a long-running job makes them
        write_file(open_file_system(str(tmp_path))[0], str(tmp_path / f"chk-{i}" / "_metadata"), b"x")
    assert len(durable._durable_entries) <= 50
    synced.clear()
    write_file(open_file_system(str(tmp_path))[0], str(tmp_path / "chk-0" / "again"), b"x")
    assert str(tmp_path) in synced  # chk-0 was forgotten: its entry in the parent is synced once more
