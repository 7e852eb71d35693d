"""State whose key groups were computed by another key hash than the job's.

Keys have been assigned to key groups three ways: by the CRC of their protocol-4 pickle (before
``key_bytes``), by the CRC of their canonical bytes (key serializer 1), and now as PyFlink assigns them (the
Java hash of their pickle, or of their declared ``key_type``'s Java value; key serializer 2, recorded per
operator). A savepoint (canonical files carry every key) of another hash -- an older sparkpoint's, or the same
job's before its ``key_by`` declared a ``key_type`` -- is regrouped by key on restore and keeps every count; a raw
checkpoint snapshot cannot be, and is refused by both ``inspect --against`` and the restore, naming the operator
and both hashes.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import time
import zlib
from collections import Counter
from pathlib import Path

import cloudpickle
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkpoint.checkpoint.metadata import MetadataV1Serializer
from sparkpoint.common import WatermarkStrategy
from sparkpoint.common.typeinfo import Types
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.errors import JobGraphError
from sparkpoint.state.key_groups import _murmur_mix, assign_to_key_group, key_bytes
from sparkpoint.state.key_hash import key_hash
from sparkpoint.storage.checkpoint_storage import StreamStateHandle
from tests.checkpoint.test_checkpointing import Count, chk_dirs, counting_job, key_of, run_until_checkpoints

COUNT = 6_000


def tuple_key(i: int) -> tuple:
    return (f"user-{i % 23}", i % 3)


def _job(env, rate=None):
    env.set_parallelism(2)
    src = DataGeneratorSource(tuple_key, COUNT, num_splits=2, records_per_second=rate)
    return (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(Count())
        .uid("count")
    )


def _older_hash(key, max_parallelism: int, key_serializer: int | None = None) -> int:
    """The key group an older sparkpoint gave ``key``: by its pickle's CRC (``None``), by its canonical bytes' (1)."""
    data = pickle.dumps(key, protocol=4) if key_serializer is None else key_bytes(key)
    return _murmur_mix(zlib.crc32(data)) % max_parallelism


def _as_written_by_the_older_hash(metadata_path: Path, key_serializer: int | None = None) -> int:
    """Rewrite a savepoint's canonical files with an older hash's key groups; returns how many keys moved."""
    meta = MetadataV1Serializer.deserialize(metadata_path.read_bytes(), str(metadata_path))
    moved = set()
    for op in meta.operators.values():
        for f in op.keyed_state:
            path = metadata_path.parent / f.handle.path
            table = pq.read_table(path)
            keys = [cloudpickle.loads(k) for k in table.column("key").to_pylist()]
            old = [_older_hash(k, meta.max_parallelism, key_serializer) for k in keys]
            moved |= {k for k, g in zip(keys, old) if g != assign_to_key_group(k, meta.max_parallelism)}
            table = table.set_column(
                table.schema.get_field_index("key_group"),
                "key_group",
                pa.array(old, type=table.schema.field("key_group").type),
            )
            buf = io.BytesIO()
            pq.write_table(table, buf)
            path.write_bytes(buf.getvalue())
            f.handle = StreamStateHandle(f.handle.path, len(buf.getvalue()), hashlib.sha256(buf.getvalue()).hexdigest())
    for op in meta.operators.values():
        op.key_hash = None
    meta.key_serializer = key_serializer
    metadata_path.write_bytes(MetadataV1Serializer.serialize(meta))
    return len(moved)


def _savepoint_of(make_env, tmp_path, job=_job) -> str:
    env = make_env("local", **{"execution.epoch.max-records": 100})
    job(env, rate=4_000).print()
    client = env.execute_async("before")
    time.sleep(0.6)
    path = client.stop_with_savepoint(False, (tmp_path / "sp").as_uri()).result(timeout=60)
    client.wait(60)
    return path


def _assert_every_count_continued(got) -> None:
    last: dict = {}
    for key, n in got:
        last[key] = max(last.get(key, 0), n)
    assert last == dict(Counter(tuple_key(i) for i in range(COUNT)))  # every count continued, by hand


@pytest.mark.parametrize("key_serializer", [None, 1])
def test_a_savepoint_of_an_older_key_hash_is_regrouped_by_key(make_env, tmp_path, key_serializer):
    path = _savepoint_of(make_env, tmp_path)
    assert _as_written_by_the_older_hash(Path(path.removeprefix("file://")) / "_metadata", key_serializer) > 5

    restored = make_env("local", **{"execution.savepoint.path": path})
    _assert_every_count_continued(_job(restored).execute_and_collect())


def _typed_job(env, rate=None):
    """``_job`` with the key's type declared: PyFlink (and so sparkpoint) groups its keys by their Java hash."""
    env.set_parallelism(2)
    src = DataGeneratorSource(tuple_key, COUNT, num_splits=2, records_per_second=rate)
    return (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k, Types.TUPLE([Types.STRING(), Types.INT()]))
        .process(Count())
        .uid("count")
    )


def test_a_savepoint_taken_before_key_by_declared_a_key_type_is_regrouped(make_env, tmp_path):
    """The same keys, declared: they move to other key groups (checked by hand), and the savepoint follows."""
    path = _savepoint_of(make_env, tmp_path)
    keys = {tuple_key(i) for i in range(COUNT)}
    typed = key_hash(Types.TUPLE([Types.STRING(), Types.INT()]))
    assert sum(assign_to_key_group(k, 128) != assign_to_key_group(k, 128, typed) for k in keys) > 5

    restored = make_env("local", **{"execution.savepoint.path": path})
    _assert_every_count_continued(_typed_job(restored).execute_and_collect())


@pytest.mark.parametrize(
    "key_serializer, named",
    [(None, "an older sparkpoint, before keys had canonical bytes"), (1, "canonical key bytes")],
)
def test_a_raw_checkpoint_of_an_older_key_hash_is_refused(make_env, tmp_path, key_serializer, named):
    env = make_env("local", **{"execution.epoch.max-records": 50})
    run_until_checkpoints(env, counting_job(env, 20_000, tmp_path / "ck", rate=5_000), tmp_path / "ck", 2)
    chk = Path(chk_dirs(tmp_path / "ck")[-1])
    meta = MetadataV1Serializer.deserialize((chk / "_metadata").read_bytes(), str(chk))
    meta.key_serializer = key_serializer
    (chk / "_metadata").write_bytes(MetadataV1Serializer.serialize(meta))

    restored = make_env("local", **{"execution.savepoint.path": str(chk)})
    counting_job(restored, 20_000, tmp_path / "ck2").print()
    refusal = rf"'count'.*{named}.*the job assigns them by the hash of each key's pickle"
    with pytest.raises(JobGraphError, match=refusal):
        restored.execute()


def test_a_raw_checkpoint_is_refused_when_key_by_declares_another_key_type(make_env, tmp_path):
    """A retained checkpoint of the job keyed without a type, restored into the job keyed with one: refused, naming
    the operator and both hashes, before any task runs; the savepoint route is the one that works (above)."""
    env = make_env("local", **{"execution.epoch.max-records": 50})
    run_until_checkpoints(env, counting_job(env, 20_000, tmp_path / "ck", rate=5_000), tmp_path / "ck", 2)
    chk = chk_dirs(tmp_path / "ck")[-1]

    restored = make_env("local", **{"execution.savepoint.path": str(chk)})
    restored.set_parallelism(2)
    src = DataGeneratorSource(key_of, 20_000, num_splits=2)
    restored.from_source(src, WatermarkStrategy.no_watermarks(), "gen").uid("gen").key_by(
        lambda k: k, Types.STRING()
    ).process(Count()).uid("count").print()
    with pytest.raises(
        JobGraphError, match=r"uid 'count'.*each key's pickle.*Java hash of keys declared as STRING.*savepoint"
    ):
        restored.execute()
