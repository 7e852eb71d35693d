"""Jobs with their checkpoints in an S3 bucket (moto's server over HTTP, s3fs through fsspec).

In-process executor (the task code Spark runs); endpoint and credentials come only from
the ``s3.*`` keys of the job's configuration. Oracles: the pandas window oracle of the seed
job and hand counts of the counting job.
"""

from __future__ import annotations

import posixpath
import time
from collections import Counter

import pytest

from sparkpoint.checkpoint.loader import load_checkpoint
from sparkpoint.checkpoint.metadata import MetadataV1Serializer
from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.storage.checkpoint_storage import FsCheckpointStorage
from sparkpoint.storage.exceptions import CorruptCheckpointError
from sparkpoint.storage.file_systems import configure_file_systems, storage_options_for
from sparkpoint.testing.kill_loop import read_committed_lines
from tests.checkpoint.test_checkpointing import FailOnce, counting_job, key_of, oracle_totals
from tests.checkpoint.test_savepoints import seed_job
from tests.e2e.test_exactly_once import oracle as window_oracle
from tests.servers.s3_server import SECRET_KEY

pytestmark = pytest.mark.s3

ROCKSDB = {"state.backend.type": "rocksdb", "execution.checkpointing.incremental": "true"}


def _completed_ids(result) -> list[int]:
    return sorted(h["id"] for h in result.checkpoints["history"] if h["status"] == "COMPLETED")


def test_exactly_once_into_a_bucket_equals_the_oracle_and_each_metadata_is_one_put(
    make_env, tmp_path, s3_server, bucket, s3_conf, s3
):
    n = 60_000
    out = tmp_path / "out"
    env = make_env("local", **{"execution.epoch.max-records": 2_000, **s3_conf})
    seed_job(env, n, out)
    env.enable_checkpointing(50)
    env.get_checkpoint_config().set_checkpoint_storage_dir(f"s3://{bucket}/checkpoints")
    s3_server.start_recording()
    result = env.execute("seed")
    s3_server.stop_recording()
    assert Counter(read_committed_lines(out)) == window_oracle(n)
    completed = _completed_ids(result)
    assert len(completed) >= 3, result.checkpoints["counts"]
    requests = [r for r in s3_server.requests() if r.path.startswith(f"/{bucket}/")]
    job_dir = f"/{bucket}/checkpoints/{result.job_id}"
    for cid in completed:
        # every write (or read) of the object; HEADs ask whether it exists, a DELETE is the finished job's cleanup
        touching = [
            r for r in requests if r.path == f"{job_dir}/chk-{cid}/_metadata" and r.method not in ("HEAD", "DELETE")
        ]
        assert [r.method for r in touching] == ["PUT"], f"checkpoint {cid}: {[r.method for r in touching]}"
        meta = MetadataV1Serializer.deserialize(touching[0].body, "the one PUT")  # the whole, valid _metadata
        assert meta.checkpoint_id == cid and SECRET_KEY.encode() not in touching[0].body
    metadata_puts = [r for r in requests if r.method == "PUT" and r.path.endswith("/_metadata")]
    assert len(metadata_puts) == len(completed), "a _metadata was written more than once, or for an aborted one"
    assert not [r.path for r in requests if r.is_copy], "an object was copied (a rename, on S3)"
    assert not [r.path for r in requests if r.method == "PUT" and ".tmp" in r.path], "a temporary object was written"
    assert not s3.find(f"{bucket}/checkpoints/{result.job_id}"), "a finished job deletes its checkpoints"


def _retained(uri: str, job_id: str, conf: dict) -> list[str]:
    storage = FsCheckpointStorage(uri, job_id, storage_options_for(uri, conf))
    return [storage.fs.unstrip_protocol(storage.checkpoint_path(c)) for c in storage.list_completed()]


def _run_until_checkpoint_id(
    env, stream, uri: str, conf: dict, checkpoint_id: int, timeout: float = 60
) -> tuple[str, list[str]]:
    """Run until checkpoint ``checkpoint_id`` completed, cancel; the job id and its retained checkpoints."""
    stream.print()
    client = env.execute_async("counting")
    deadline = time.time() + timeout
    while time.time() < deadline:
        done = _retained(uri, client.get_job_id(), conf)
        if done and int(done[-1].rsplit("-", 1)[1]) >= checkpoint_id:
            break
        time.sleep(0.1)
    client.cancel()
    client.wait(30)
    return client.get_job_id(), _retained(uri, client.get_job_id(), conf)


def _referenced_shared(chk: str) -> set[str]:
    meta = load_checkpoint(chk, verify_files=False).metadata
    path = chk.removeprefix("s3://")
    return {posixpath.normpath(posixpath.join(path, h.path)) for h in meta.shared_files()}


def _restored_counts(make_env, chk: str, count: int, conf: dict) -> dict:
    env = make_env("local", **{"execution.epoch.max-records": 5_000, "execution.savepoint.path": chk, **conf})
    stream = counting_job(env, count, "memory://restored-counting", retention="DELETE_ON_CANCELLATION")
    last: dict = {}
    for key, n in stream.execute_and_collect():
        last[key] = max(last.get(key, 0), n)
    return last


def test_incremental_rocksdb_checkpoints_share_objects_and_subsumption_deletes_only_unreferenced_ones(
    make_env, bucket, s3_conf, s3
):
    count = 20_000
    uri = f"s3://{bucket}/checkpoints"
    env = make_env("local", **{"execution.epoch.max-records": 20, **ROCKSDB, **s3_conf})
    stream = counting_job(env, count, uri, retained=3, rate=1_500)
    job_id, retained = _run_until_checkpoint_id(env, stream, uri, s3_conf, 6)
    assert len(retained) == 3 and int(retained[0].rsplit("-", 1)[1]) >= 4  # older ones were subsumed
    configure_file_systems(s3_conf)
    in_bucket = set(s3.ls(f"{bucket}/checkpoints/{job_id}/shared", detail=False))
    referenced = set().union(*(_referenced_shared(c) for c in retained))
    assert referenced and all(p.endswith(".sst") for p in referenced)
    assert in_bucket == referenced, (
        f"unreferenced objects left: {sorted(in_bucket - referenced)}; missing: {sorted(referenced - in_bucket)}"
    )
    assert any(_referenced_shared(a) & _referenced_shared(b) for a, b in zip(retained, retained[1:])), (
        "no two consecutive checkpoints share an object"
    )
    # the oldest retained checkpoint restores exactly from the bucket
    assert _restored_counts(make_env, retained[0], count, {**ROCKSDB, **s3_conf}) == dict(oracle_totals(count))


def test_a_damaged_object_in_the_bucket_is_detected_and_named(make_env, bucket, s3_conf, s3):
    uri = f"s3://{bucket}/checkpoints"
    env = make_env("local", **{"execution.epoch.max-records": 20, **ROCKSDB, **s3_conf})
    stream = counting_job(env, 10**9, uri, rate=1_500)
    _, retained = _run_until_checkpoint_id(env, stream, uri, s3_conf, 2)
    latest = retained[-1]
    configure_file_systems(s3_conf)
    meta = load_checkpoint(latest).metadata
    chk = latest.removeprefix("s3://")
    manifest = next(f.handle.path for op in meta.operators.values() for f in op.keyed_state)
    victims = {
        "shared file": posixpath.normpath(posixpath.join(chk, sorted(h.path for h in meta.shared_files())[0])),
        "keyed state of operator 'count'": posixpath.join(chk, manifest),
        "driver-state": posixpath.join(chk, "driver-state"),
        "_metadata": posixpath.join(chk, "_metadata"),
    }
    for what, victim in victims.items():
        original = s3.cat_file(victim)
        damaged = bytearray(original)
        damaged[len(damaged) // 2] ^= 0xFF
        s3.pipe_file(victim, bytes(damaged))
        try:
            with pytest.raises(CorruptCheckpointError) as err:
                load_checkpoint(latest)
        finally:
            s3.pipe_file(victim, original)
        message = str(err.value)
        if what != "_metadata":
            assert f"s3://{victim}" in message and what in message and "SHA-256" in message, message
        else:  # the damage breaks its JSON or its own checksum
            assert latest in message and "_metadata" in message, message
    load_checkpoint(latest)  # whole again


def test_a_failed_task_restores_the_latest_checkpoint_from_the_bucket_in_the_same_run(
    make_env, tmp_path, bucket, s3_conf
):
    count = 2_000
    flag = tmp_path / "failed-once"
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 50,
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "0 ms",
            **ROCKSDB,
            **s3_conf,
        },
    )
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_checkpoint_storage_dir(f"s3://{bucket}/checkpoints")
    env.set_parallelism(2)
    src = DataGeneratorSource(key_of, count, num_splits=2)
    got = (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(FailOnce(flag))
        .uid("count")
        .execute_and_collect()
    )
    last: dict = {}
    for key, n in got:
        last[key] = max(last.get(key, 0), n)
    assert flag.exists(), "the task never failed"
    assert last == dict(oracle_totals(count))
