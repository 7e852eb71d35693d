"""Full snapshots read from a local RocksDB checkpoint (full checkpoints, savepoints) drop expired TTL values."""

from __future__ import annotations

from sparkpoint.common import Time
from sparkpoint.datastream.state import StateTtlConfig, ValueStateDescriptor
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.rocksdb.backend import EmbeddedRocksDBStateBackend, snapshot_local_checkpoint

MAXP = 128
RANGE = KeyGroupRange(0, MAXP - 1)


def _ttl_descriptor() -> ValueStateDescriptor:
    descriptor = ValueStateDescriptor("v")
    descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.milliseconds(100)).build())
    return descriptor


def test_snapshot_of_a_local_checkpoint_leaves_out_expired_values(tmp_path):
    backend = EmbeddedRocksDBStateBackend().create_keyed_backend(RANGE, MAXP, working_dir=str(tmp_path / "w"))
    backend.set_current_processing_time(0)
    state = backend.get_partitioned_state(None, _ttl_descriptor())
    for key, written_at in (("old", 0), ("new", 150)):
        backend.set_current_processing_time(written_at)
        backend.set_current_key(key)
        state.update(key.upper())
    backend.commit(1)
    path = backend.checkpoint_locally(1)
    backend.set_current_processing_time(200)   # "old" expired at 100, "new" lives until 250
    kept = snapshot_local_checkpoint(path, RANGE, MAXP, ttl_cleanups=backend.ttl_cleanups)
    everything = snapshot_local_checkpoint(path, RANGE, MAXP)
    backend.dispose()

    def keys(snapshot):
        return sorted(k for states in snapshot.entries.values() for (k, _ns) in states.get("v", {}))

    assert keys(kept) == ["new"]
    assert keys(everything) == ["new", "old"]   # without the live backend's TTL settings nothing is dropped
