"""State whose key groups were computed by the older key hash (before ``key_bytes``).

Tuple keys used to be hashed through ``pickle``; they now have canonical bytes, so their key
groups moved. A savepoint of the older hash (canonical files carry every key) is regrouped
by key on restore and keeps every count; a raw checkpoint snapshot cannot be, and is
refused by both ``inspect --against`` and the restore, naming the operator.
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
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.errors import JobGraphError
from sparkpoint.state.key_groups import _murmur_mix, assign_to_key_group
from sparkpoint.storage.checkpoint_storage import StreamStateHandle
from tests.checkpoint.test_checkpointing import Count, chk_dirs, counting_job, run_until_checkpoints

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


def _older_hash(key, max_parallelism: int) -> int:
    return _murmur_mix(zlib.crc32(pickle.dumps(key, protocol=4))) % max_parallelism


def _as_written_by_the_older_hash(metadata_path: Path) -> int:
    """Rewrite a savepoint's canonical files with the older hash's key groups; returns how many keys moved."""
    meta = MetadataV1Serializer.deserialize(metadata_path.read_bytes(), str(metadata_path))
    moved = set()
    for op in meta.operators.values():
        for f in op.keyed_state:
            path = metadata_path.parent / f.handle.path
            table = pq.read_table(path)
            keys = [cloudpickle.loads(k) for k in table.column("key").to_pylist()]
            old = [_older_hash(k, meta.max_parallelism) for k in keys]
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
    meta.key_serializer = None
    metadata_path.write_bytes(MetadataV1Serializer.serialize(meta))
    return len(moved)


def test_a_savepoint_of_the_older_key_hash_is_regrouped_by_key(make_env, tmp_path):
    env = make_env("local", **{"execution.epoch.max-records": 100})
    _job(env, rate=4_000).print()
    client = env.execute_async("before")
    time.sleep(0.6)
    path = client.stop_with_savepoint(False, (tmp_path / "sp").as_uri()).result(timeout=60)
    client.wait(60)
    assert _as_written_by_the_older_hash(Path(path.removeprefix("file://")) / "_metadata") > 5

    restored = make_env("local", **{"execution.savepoint.path": path})
    got = _job(restored).execute_and_collect()
    last: dict = {}
    for key, n in got:
        last[key] = max(last.get(key, 0), n)
    assert last == dict(Counter(tuple_key(i) for i in range(COUNT)))  # every count continued, by hand


def test_a_raw_checkpoint_of_the_older_key_hash_is_refused(make_env, tmp_path):
    env = make_env("local", **{"execution.epoch.max-records": 50})
    run_until_checkpoints(env, counting_job(env, 20_000, tmp_path / "ck", rate=5_000), tmp_path / "ck", 2)
    chk = Path(chk_dirs(tmp_path / "ck")[-1])
    meta = MetadataV1Serializer.deserialize((chk / "_metadata").read_bytes(), str(chk))
    meta.key_serializer = None
    (chk / "_metadata").write_bytes(MetadataV1Serializer.serialize(meta))

    restored = make_env("local", **{"execution.savepoint.path": str(chk)})
    counting_job(restored, 20_000, tmp_path / "ck2").print()
    with pytest.raises(JobGraphError, match=r"'count'.*before sparkpoint gave keys a deterministic serializer"):
        restored.execute()
