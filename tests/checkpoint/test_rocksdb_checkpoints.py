"""The rocksdb backend in running jobs: incremental checkpoints, shared files, restore, rescale, savepoints.

In-process executor (the task code Spark runs), real RocksDB. Oracles are hand counts
(``oracle_totals``) and the pandas window oracle of the seed job.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.checkpoint.loader import load_checkpoint
from sparkpoint.storage.exceptions import CorruptCheckpointError
from sparkpoint.testing.kill_loop import read_committed_lines
from tests.checkpoint.test_checkpointing import chk_dirs, counting_job, oracle_totals, run_until_checkpoints
from tests.checkpoint.test_savepoints import _wait_for_progress, seed_job
from tests.e2e.test_exactly_once import oracle as window_oracle

ROCKSDB = {"state.backend.type": "rocksdb", "execution.checkpointing.incremental": "true"}


def _run_until_checkpoint_id(env, stream, ck: Path, checkpoint_id: int, timeout: float = 60) -> list[str]:
    """Run until checkpoint ``checkpoint_id`` completed, cancel; the retained checkpoints."""
    stream.print()
    client = env.execute_async("counting")
    deadline = time.time() + timeout
    done = []
    while time.time() < deadline:
        done = [d for d in chk_dirs(ck) if os.path.exists(d + "/_metadata")]
        if done and int(done[-1].rsplit("-", 1)[1]) >= checkpoint_id:
            break
        time.sleep(0.05)
    client.cancel()
    client.wait(30)
    return [d for d in chk_dirs(ck) if os.path.exists(d + "/_metadata")]


def _referenced_shared(chk: str) -> set[str]:
    """The shared files a checkpoint's _metadata references (normalized paths)."""
    meta = load_checkpoint(chk, verify_files=False).metadata
    return {os.path.normpath(os.path.join(chk, h.path)) for h in meta.shared_files()}


def _restored_counts(make_env, tmp_path: Path, chk: str, count: int, parallelism: int = 2, **conf) -> dict:
    env = make_env("local", **{"execution.epoch.max-records": 1_000, "execution.savepoint.path": chk, **conf})
    stream = counting_job(
        env, count, tmp_path / "ck-restored", retention="RETAIN_ON_CANCELLATION", parallelism=parallelism
    )
    last: dict = {}
    for key, n in stream.execute_and_collect():
        last[key] = max(last.get(key, 0), n)
    return last


def test_incremental_checkpoints_share_files_and_the_oldest_retained_still_restores(make_env, tmp_path):
    count = 40_000
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 20, **ROCKSDB})
    stream = counting_job(env, count, ck, retained=3, rate=1_500)
    dirs = _run_until_checkpoint_id(env, stream, ck, 9)
    assert len(dirs) == 3 and int(dirs[0].rsplit("-", 1)[1]) >= 7  # several subsumptions happened
    manifests = sorted(Path(dirs[-1]).glob("keyed-*.rocksdb"))
    assert len(manifests) == 2  # one database per subtask
    body = json.loads(manifests[0].read_text())
    assert body["uid"] == "count" and any(f["name"].endswith(".sst") for f in body["files"])
    shared_dir = Path(dirs[0]).parent / "shared"
    on_disk = {os.path.normpath(str(p)) for p in shared_dir.glob("*.sst")}
    referenced = set().union(*(_referenced_shared(d) for d in dirs))
    # files are shared between retained checkpoints, all are there, and nothing unreferenced is left
    assert referenced and referenced <= on_disk
    assert on_disk == referenced, f"unreferenced shared files left: {sorted(on_disk - referenced)}"
    assert any(_referenced_shared(a) & _referenced_shared(b) for a, b in zip(dirs, dirs[1:])), (
        "no two consecutive checkpoints share a file"
    )
    # the oldest retained checkpoint restores exactly, in the same and in the other backend
    assert _restored_counts(make_env, tmp_path, dirs[0], count, **ROCKSDB) == dict(oracle_totals(count))
    assert _restored_counts(make_env, tmp_path, dirs[0], count) == dict(oracle_totals(count))  # hashmap


@pytest.mark.parametrize("before,after", [(2, 1), (1, 3), (2, 3)])
def test_incremental_checkpoint_restores_at_another_parallelism(make_env, tmp_path, before, after):
    count = 20_000
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 20, **ROCKSDB})
    stream = counting_job(env, count, ck, rate=1_500, parallelism=before)
    latest = _run_until_checkpoint_id(env, stream, ck, 4)[-1]
    assert len(list(Path(latest).glob("keyed-*.rocksdb"))) == before
    got = _restored_counts(make_env, tmp_path, latest, count, parallelism=after, **ROCKSDB)
    assert got == dict(oracle_totals(count))


def test_corrupt_shared_file_is_detected_by_its_checksum_and_named(make_env, tmp_path):
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 20, **ROCKSDB})
    stream = counting_job(env, 10**9, ck, rate=1_500)
    run_until_checkpoints(env, stream, ck, 2)
    latest = [d for d in chk_dirs(ck) if os.path.exists(d + "/_metadata")][-1]
    victim = sorted(_referenced_shared(latest))[0]
    data = bytearray(Path(victim).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(victim).write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError) as err:
        load_checkpoint(latest)
    message = str(err.value)
    assert "shared file" in message and os.path.basename(victim) in message and "SHA-256" in message
    assert "operator 'count'" in message


@pytest.mark.parametrize("first,second", [("hashmap", "rocksdb"), ("rocksdb", "hashmap")])
def test_a_savepoint_switches_the_state_backend(make_env, tmp_path, first, second):
    n = 40_000
    out, sp_dir = tmp_path / "out", tmp_path / "savepoints"
    env = make_env("local", **{"execution.epoch.max-records": 2_000, "state.backend.type": first})
    seed_job(env, n, out, rate=20_000)
    client = env.execute_async("seed")
    _wait_for_progress(client, 1.0)
    path = client.stop_with_savepoint(False, sp_dir.as_uri()).result(timeout=60)
    client.wait(60)
    assert list(Path(path.replace("file://", "")).rglob("*.parquet")), "savepoints stay canonical"
    env2 = make_env(
        "local",
        **{"execution.epoch.max-records": 2_000, "execution.savepoint.path": path, "state.backend.type": second},
    )
    seed_job(env2, n, out, parallelism=3)
    env2.execute("resumed")
    assert Counter(read_committed_lines(out)) == window_oracle(n)


def test_a_full_checkpoint_on_request_writes_all_state_and_restores(make_env, tmp_path):
    count = 20_000
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 20, **ROCKSDB})
    stream = counting_job(env, count, ck, interval_ms=3_600_000, rate=1_500)  # no periodic checkpoint
    stream.print()
    client = env.execute_async("counting")
    time.sleep(0.5)
    incremental_id = client.trigger_checkpoint("CONFIGURED").result(timeout=60)
    full_id = client.trigger_checkpoint("FULL").result(timeout=60)
    client.cancel()
    client.wait(30)
    assert full_id == incremental_id + 1
    incremental, full = (str(next(ck.glob(f"*/chk-{i}"))) for i in (incremental_id, full_id))
    assert list(Path(incremental).glob("keyed-*.rocksdb")) and _referenced_shared(incremental)
    assert not list(Path(full).glob("keyed-*.rocksdb")) and not _referenced_shared(full)
    assert sorted(p.name for p in Path(full).glob("keyed-*")) == ["keyed-s1-t0", "keyed-s1-t1"]
    assert _restored_counts(make_env, tmp_path, full, count, **ROCKSDB) == dict(oracle_totals(count))
    with pytest.raises(ValueError):
        client.trigger_checkpoint("SOMETIMES")


def test_a_restored_job_does_not_depend_on_the_shared_files_of_the_job_it_came_from(make_env, tmp_path):
    """NO_CLAIM, as Flink: once the restored job checkpoints, its checkpoints reference only its own
    shared files, so the first job may delete its checkpoints (or the user its directory)."""
    ck_a, ck_b = tmp_path / "ck-a", tmp_path / "ck-b"
    env = make_env("local", **{"execution.epoch.max-records": 20, **ROCKSDB})
    first = _run_until_checkpoint_id(env, counting_job(env, 40_000, ck_a, rate=1_500), ck_a, 3)[-1]
    env2 = make_env("local", **{"execution.epoch.max-records": 20, "execution.savepoint.path": first, **ROCKSDB})
    restored = _run_until_checkpoint_id(env2, counting_job(env2, 40_000, ck_b, rate=1_500), ck_b, 6)
    assert restored
    own_shared = str(Path(restored[-1]).parent / "shared")
    for chk in restored:
        files = _referenced_shared(chk)
        assert files and all(f.startswith(own_shared + os.sep) for f in files), (chk, sorted(files))


def test_shared_files_of_checkpoints_that_never_completed_are_deleted_at_the_end(make_env, tmp_path, monkeypatch):
    """Uploads slower than the checkpoint timeout: every checkpoint expires after its SST files were
    uploaded. Nothing references them, so the job's end deletes them (and the empty job directory)."""
    monkeypatch.setenv("SPARKPOINT_SLOW_UPLOAD_MS", "150")
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 20, **ROCKSDB})
    stream = counting_job(env, 10**9, ck, rate=1_500)
    cc = env.get_checkpoint_config()
    cc.set_checkpoint_timeout(100)
    cc.set_tolerable_checkpoint_failure_number(10**6)
    stream.print()
    client = env.execute_async("expiring")
    deadline = time.time() + 30
    while time.time() < deadline and not list(ck.glob("*/shared/*.sst")):
        time.sleep(0.05)
    assert list(ck.glob("*/shared/*.sst")), "no upload happened"
    client.cancel()
    client.wait(30)
    assert chk_dirs(ck) == [] or not any(os.path.exists(d + "/_metadata") for d in chk_dirs(ck))
    assert list(ck.rglob("*.sst")) == []
