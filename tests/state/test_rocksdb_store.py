"""The rocksdb store's bounds: an epoch's cache spills to the database, expired values stay out of snapshots."""

from __future__ import annotations

import pickle
import random

import pytest
import rocksdict
from backend_suite import EVERY_KEY_GROUP
from test_backend_conformance import _contents, _fill

from sparkpoint.common import Time
from sparkpoint.datastream.state import StateTtlConfig, ValueStateDescriptor
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.rocksdb import EmbeddedRocksDBStateBackend
from sparkpoint.state.rocksdb.backend import snapshot_local_checkpoint
from sparkpoint.state.rocksdb.options import RocksDBOptions

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
    backend.set_current_processing_time(200)  # "old" expired at 100, "new" lives until 250
    kept = snapshot_local_checkpoint(path, RANGE, MAXP, ttl_cleanups=backend.ttl_cleanups)
    everything = snapshot_local_checkpoint(path, RANGE, MAXP)
    backend.dispose()

    def keys(snapshot):
        return sorted(k for states in snapshot.entries.values() for (k, _ns) in states.get("v", {}))

    assert keys(kept) == ["new"]
    assert keys(everything) == ["new", "old"]  # without the live backend's TTL settings nothing is dropped


SPILLING = EmbeddedRocksDBStateBackend(RocksDBOptions(max_cached_entries=16))


def _open(working_dir, resume=None):
    backend = SPILLING.create_keyed_backend(EVERY_KEY_GROUP, MAXP, working_dir=str(working_dir))
    if resume is not None:
        backend.resume(resume)
    return backend


def _epoch(working_dir, epoch, seed, commit=True):
    """One epoch of random writes (far more entries than the cache holds); returns the model after it."""
    backend = _open(working_dir, None if epoch == 1 else epoch - 1)
    _fill(backend, random.Random(seed))
    assert backend.store.in_progress, "the epoch did not spill"
    if commit:
        backend.commit(epoch)
    got = _contents(backend)
    backend.dispose()
    return got


def _state_at(working_dir, epoch):
    backend = _open(working_dir, epoch)
    try:
        return _contents(backend)
    finally:
        backend.dispose()


def test_an_epoch_larger_than_the_cache_spills_and_commits_exactly(tmp_path):
    after_1 = _epoch(tmp_path, 1, seed=1)
    assert after_1[0] and _state_at(tmp_path, 1) == after_1
    after_2 = _epoch(tmp_path, 2, seed=2)
    assert after_2 != after_1 and _state_at(tmp_path, 2) == after_2


def test_a_crash_after_spilling_leaves_the_previous_epoch(tmp_path):
    after_1 = _epoch(tmp_path, 1, seed=1)
    _epoch(tmp_path, 2, seed=2, commit=False)  # died mid-epoch: spilled changes are in the database
    assert _state_at(tmp_path, 1) == after_1


def test_a_committed_epoch_that_spilled_rolls_back_completely(tmp_path):
    after_1 = _epoch(tmp_path, 1, seed=1)
    _epoch(tmp_path, 2, seed=2)
    assert _state_at(tmp_path, 1) == after_1  # epoch 2 runs again: back to the end of epoch 1


def test_per_key_values_found_by_their_key_agree_with_the_database_through_prefetches_and_spills(tmp_path):
    """A ValueState's cells are also found by the key itself (filled by the prefetch). Reads, read-modify-writes,
    blind writes and clears, on keys prefetched (in slices larger than the cache of 16, so prefetches are cut
    short and spill) and on keys not prefetched, over three epochs: every read and the committed state equal
    a plain dict's."""
    rng = random.Random(5)
    model: dict[int, int] = {}
    other: dict[int, int] = {}
    for epoch in (1, 2, 3):
        backend = _open(tmp_path, None if epoch == 1 else epoch - 1)
        state = backend.get_partitioned_state(None, ValueStateDescriptor("n"))
        second = backend.get_partitioned_state(None, ValueStateDescriptor("m"))
        for _ in range(8):
            keys = [rng.randrange(60) for _ in range(rng.randrange(1, 30))]
            backend.prefetch(keys)
            for key in keys + [rng.randrange(60, 80) for _ in range(3)]:  # and some never prefetched
                backend.set_current_key(key)
                op = rng.random()
                if op < 0.3:  # between the read and the write, another state on another key (which may spill)
                    n = (state.value() or 0) + 1
                    elsewhere = rng.randrange(80)
                    backend.set_current_key(elsewhere)
                    other[elsewhere] = (second.value() or 0) + 1
                    second.update(other[elsewhere])
                    backend.set_current_key(key)
                    model[key] = n
                    state.update(n)
                elif op < 0.45:
                    model[key] = (state.value() or 0) + 1
                    state.update(model[key])
                elif op < 0.65:
                    model[key] = key * 100 + epoch  # maybe a blind write
                    state.update(model[key])
                elif op < 0.75:
                    model.pop(key, None)
                    state.clear()
                else:
                    assert state.value() == model.get(key), (epoch, key)
        assert backend.store.in_progress, "the epoch did not spill"
        backend.commit(epoch)
        backend.dispose()
        check = _open(tmp_path, epoch)
        stored = check.get_partitioned_state(None, ValueStateDescriptor("n"))
        stored_other = check.get_partitioned_state(None, ValueStateDescriptor("m"))
        for key in range(80):
            check.set_current_key(key)
            assert (stored.value(), stored_other.value()) == (model.get(key), other.get(key)), (epoch, key)
        check.dispose()


def test_expired_ttl_values_are_swept_from_the_database(tmp_path):
    """New keys every epoch, each living 100 ms: the database holds the live ones, not all ever written."""
    live_per_epoch = 100
    epochs = 8
    for epoch in range(1, epochs + 1):
        backend = EmbeddedRocksDBStateBackend(RocksDBOptions(ttl_sweep_entries=150)).create_keyed_backend(
            RANGE, MAXP, working_dir=str(tmp_path / "w")
        )
        if epoch > 1:
            backend.resume(epoch - 1)
        now = epoch * 1_000  # every epoch 1 s later: older values have expired
        backend.set_current_processing_time(now)
        state = backend.get_partitioned_state(None, _ttl_descriptor())
        for i in range(live_per_epoch):
            backend.set_current_key(f"e{epoch}-k{i}")
            state.update(i)
        backend.commit(epoch)
        stored = sum(1 for _ in backend.store.iterate_range(b"\x00\x00", b"\xff\xfd"))
        backend.dispose()
        # a sweep of 150 entries per epoch keeps up with 100 new values per epoch
        assert stored <= 2 * live_per_epoch + 50, (epoch, stored)
    assert epochs * live_per_epoch > 2 * live_per_epoch + 50  # without the sweep the bound would not hold


def test_the_backend_assigns_the_key_groups_every_other_part_assigns():
    """The backend serializes a key once for its key group and its database key: same groups as routing."""
    from sparkpoint.state.key_groups import assign_to_key_group

    backend = EmbeddedRocksDBStateBackend().create_keyed_backend(RANGE, MAXP)
    try:
        for key in ["a", "k17", 7, 1.0, ("t", 2), None, b"raw"]:
            backend.set_current_key(key)
            assert backend.get_current_key_group_index() == assign_to_key_group(key, MAXP), key
    finally:
        backend.dispose()


def test_prefetch_loads_per_key_state_in_one_batch_and_reads_stay_exact(tmp_path):
    """A batch's per-key entries come from one multi-get; what the state then reads and writes is the same."""
    backend = EmbeddedRocksDBStateBackend().create_keyed_backend(RANGE, MAXP, working_dir=str(tmp_path / "w"))
    state = backend.get_partitioned_state(None, ValueStateDescriptor("count"))
    for i in range(50):
        backend.set_current_key(f"k{i}")
        state.update(i)
    backend.commit(1)
    backend.dispose()
    backend = EmbeddedRocksDBStateBackend().create_keyed_backend(RANGE, MAXP, working_dir=str(tmp_path / "w"))
    backend.resume(1)
    state = backend.get_partitioned_state(None, ValueStateDescriptor("count"))
    batch = [f"k{i}" for i in range(0, 60, 3)] * 2  # repeated keys, and ten that were never written
    backend.prefetch(batch)
    assert len(backend.store.cells) == 20  # each distinct key once, misses included
    for key in batch:
        backend.set_current_key(key)
        state.update((state.value() or 0) + 1000)
    backend.commit(2)
    expected = {f"k{i}": (i if i < 50 else 0) + 2000 for i in range(0, 60, 3)}
    for key, value in expected.items():
        backend.set_current_key(key)
        assert state.value() == value, key
    backend.dispose()


def test_a_value_written_after_a_spill_between_its_read_and_write_is_kept(tmp_path):
    """A ValueState's write goes to the cell its read found; another state's read in between may fill the
    epoch's cache, which spills and forgets every cell. The write must then reach the store, not a cell it
    forgot (oracle: a dict of the same updates)."""
    options = RocksDBOptions(max_cached_entries=3)
    backend = EmbeddedRocksDBStateBackend(options).create_keyed_backend(RANGE, MAXP, working_dir=str(tmp_path / "w"))
    count = backend.get_partitioned_state(None, ValueStateDescriptor("count"))
    other = backend.get_partitioned_state(None, ValueStateDescriptor("other"))
    oracle: dict[str, int] = {}
    rnd = random.Random(4)
    for _ in range(200):
        key = f"k{rnd.randrange(12)}"
        backend.set_current_key(key)
        n = (count.value() or 0) + 1
        other.update((other.value() or 0) + 1)  # a cell of its own: at 3 entries, a spill
        count.update(n)
        oracle[key] = n
    assert backend.store.spilled_changes > 0
    backend.commit(1)
    backend.dispose()
    backend = EmbeddedRocksDBStateBackend(options).create_keyed_backend(RANGE, MAXP, working_dir=str(tmp_path / "w"))
    backend.resume(1)
    count = backend.get_partitioned_state(None, ValueStateDescriptor("count"))
    got = {}
    for key in oracle:
        backend.set_current_key(key)
        got[key] = count.value()
    backend.dispose()
    assert got == oracle


def test_replayed_changes_find_their_states_by_name_in_a_database_that_numbered_them_otherwise(tmp_path):
    """A rebuilt database (restored from a snapshot) may number states and timer queues in another order than
    the one whose changelog it replays: the changes land in the states and queues of the same names."""
    a, b = ValueStateDescriptor("a"), ValueStateDescriptor("b")

    def open_backend(name, order):
        backend = EmbeddedRocksDBStateBackend().create_keyed_backend(RANGE, MAXP, working_dir=str(tmp_path / name))
        states = {d.name: backend.get_partitioned_state(None, d) for d in order}
        return backend, states

    source, states = open_backend("source", [a, b])
    source.track_changes()
    source.get_timer_queue("event")  # a timer queue numbered after both states here
    for key in range(50):
        source.set_current_key(key)
        states["a"].update(f"a{key}")
        states["b"].update(key)
    source.commit(1)
    changes = source.epoch_changes()
    source.dispose()

    target, _ = open_backend("target", [b])  # "b" first: ids differ from the source's
    target.commit(0)
    target.apply_changes(changes, 1)
    target.resume(1)
    got_a, got_b = target.get_partitioned_state(None, a), target.get_partitioned_state(None, b)
    for key in range(50):
        target.set_current_key(key)
        assert (got_a.value(), got_b.value()) == (f"a{key}", key)
    target.dispose()


class _CountingDb:
    """The database, counting reads of one key (a multi-get is one list)."""

    def __init__(self, db):
        self.db = db
        self.single_gets = 0

    def get(self, key, *args, **kwargs):
        if not isinstance(key, list):
            self.single_gets += 1
        return self.db.get(key, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.db, name)


def _counts_after_epoch_1(working_dir, n):
    """A spilling backend resumed after an epoch that stored ``k<i>`` -> ``i`` for ``i < n``, and its state."""
    backend = _open(working_dir)
    state = backend.get_partitioned_state(None, ValueStateDescriptor("count"))
    for i in range(n):
        backend.set_current_key(f"k{i}")
        state.update(i)
    backend.commit(1)
    backend.dispose()
    backend = _open(working_dir, resume=1)
    return backend, backend.get_partitioned_state(None, ValueStateDescriptor("count"))


def test_a_prefetch_beyond_the_cache_room_spills_first_and_then_reads_no_key_alone(tmp_path):
    backend, state = _counts_after_epoch_1(tmp_path, 40)
    backend.prefetch([f"k{i}" for i in range(12)])
    for i in range(12):  # 12 of the cache's 16 entries taken, 4 changed
        backend.set_current_key(f"k{i}")
        if i < 4:
            state.update(state.value() + 100)
    counting = backend.store.db = _CountingDb(backend.store.db)
    wanted = [f"k{i}" for i in range(20, 34)]  # 14 keys: more than the 4 entries of room left
    assert len(wanted) <= backend.prefetch_limit()
    backend.prefetch(wanted)
    assert [(backend.set_current_key(k), state.value())[1] for k in wanted] == list(range(20, 34))
    assert counting.single_gets == 0
    backend.store.db = counting.db
    backend.commit(2)
    backend.dispose()
    backend = _open(tmp_path, resume=2)
    state = backend.get_partitioned_state(None, ValueStateDescriptor("count"))
    got = [(backend.set_current_key(f"k{i}"), state.value())[1] for i in range(40)]
    backend.dispose()
    assert got == [i + 100 if i < 4 else i for i in range(40)]  # the spilled changes were committed


def test_keys_prefetched_before_a_spill_are_read_together_again(tmp_path):
    backend, state = _counts_after_epoch_1(tmp_path, 30)
    first = [f"k{i}" for i in range(4)]
    backend.prefetch(first)
    for i in range(4, 14):  # read one by one: the cache fills, the prefetched keys stay few
        backend.set_current_key(f"k{i}")
        state.value()
    backend.prefetch([f"k{i}" for i in range(20, 24)])  # no room left: the cache spills
    counting = backend.store.db = _CountingDb(backend.store.db)
    backend.prefetch(first)
    assert [(backend.set_current_key(k), state.value())[1] for k in first] == [0, 1, 2, 3]
    assert counting.single_gets == 0
    backend.store.db = counting.db
    backend.dispose()


def test_sorted_runs_do_not_pile_up_when_every_epoch_reopens_the_database(tmp_path):
    """Each task opens its database for one epoch; a checkpoint flushes a new sorted run. Closing lets a running
    compaction finish, so the runs stay few (cut short at every close, they grew to 15 in 20 epochs)."""
    import pickle

    import rocksdict

    from sparkpoint.state.rocksdb.store import StateStore

    path = str(tmp_path / "db")
    store = StateStore(path, RocksDBOptions())
    for lo in range(0, 300_000, 100_000):
        batch = rocksdict.WriteBatch(raw_mode=True)
        for i in range(lo, lo + 100_000):
            batch.put(b"\x00\x01\x00\x01%012d" % i, pickle.dumps((f"k{i}", None, 1)))
        store.db.write(batch)
    store.db.flush(True)
    store.close()
    rnd = random.Random(1)
    runs = []
    for epoch in range(20):
        store = StateStore(path, RocksDBOptions())
        batch = rocksdict.WriteBatch(raw_mode=True)
        for _ in range(20_000):
            batch.put(b"\x00\x01\x00\x01%012d" % rnd.randrange(300_000), b"v%d" % epoch)
        store.db.write(batch)
        store.db.flush(True)
        runs.append(int(store.db.property_value("rocksdb.num-files-at-level0")))
        store.close()
    assert max(runs[-8:]) <= RocksDBOptions().compaction_trigger + 1, runs


def test_a_reopened_database_reads_through_the_configured_shared_block_cache(tmp_path):
    """Every epoch's task reopens its database. Opened without its column families, rocksdict gave an existing
    database the options of its OPTIONS file and a private 8 MB block cache: the configured memory applied only
    to the first epoch, and random reads of a large state missed the cache almost always."""
    from sparkpoint.state.rocksdb.store import StateStore

    path = str(tmp_path / "db")
    first = StateStore(path, RocksDBOptions(memory_bytes=24 << 20))
    first.db[b"\x00\x01k"] = b"v"
    first.close()
    for memory in (40 << 20, 56 << 20):
        options = RocksDBOptions(memory_bytes=memory)
        store = StateStore(path, options)
        assert store.db.get(b"\x00\x01k") == b"v"
        assert store.db.property_int_value("rocksdb.block-cache-capacity") == memory
        store.close()
        reader = StateStore(path, options, read_only=True)
        assert reader.db.property_int_value("rocksdb.block-cache-capacity") == memory
        reader.close()


class _Gone:
    """A value class that a later version of the job no longer has."""


def test_a_value_state_update_without_a_read_replaces_the_stored_value_without_decoding_it(tmp_path, monkeypatch):
    import sys

    def open_backend():
        backend = EmbeddedRocksDBStateBackend().create_keyed_backend(RANGE, MAXP, working_dir=str(tmp_path / "w"))
        return backend, backend.get_partitioned_state(None, ValueStateDescriptor("v"))

    backend, state = open_backend()
    backend.set_current_key("k")
    state.update(_Gone())
    backend.commit(1)
    backend.dispose()
    monkeypatch.delattr(sys.modules[__name__], "_Gone")  # unpickling the stored value would now fail
    backend, state = open_backend()
    backend.resume(1)
    backend.set_current_key("k")
    state.update(5)
    backend.commit(2)
    backend.set_current_key("k")
    assert state.value() == 5
    backend.dispose()


@pytest.mark.parametrize("key_format", [1, 2])
def test_a_batch_of_keys_encodes_as_its_keys_one_by_one(key_format):
    """The prefetch's batch encoding gives every key the database bytes and the group of the per-key encoding,
    in both key formats, for str keys (the one-call path), a str starting with NUL, and mixed types."""
    from sparkpoint.state.key_groups import KeyGroupAssigner
    from sparkpoint.state.rocksdb.layout import encode_key_and_group, encode_keys_and_groups

    many = [f"k{i}" for i in range(99)]  # the batch path of the key groups
    for keys in (["a", "b", "é", ""], ["a", "\x00N", "1"], ["1", 1, 2.5, None, ("t", 1), b"x"], many):
        batch = encode_keys_and_groups(keys, KeyGroupAssigner(128), key_format)
        assert batch == [encode_key_and_group(k, KeyGroupAssigner(128), key_format) for k in keys]


def test_epoch_changes_of_spilling_epochs_rebuild_the_same_state(tmp_path):
    """An epoch's changes are what its commit and its spills wrote (entries of every kind, deletions, timers):
    replayed in order into an empty database they give what the database that wrote them holds."""
    d = ValueStateDescriptor("value")
    source = _open(tmp_path / "source")
    replica = EmbeddedRocksDBStateBackend().create_keyed_backend(EVERY_KEY_GROUP, MAXP, working_dir=str(tmp_path / "r"))
    replica.commit(0)
    rnd = random.Random(5)
    for epoch in (1, 2, 3):
        if epoch > 1:
            source = _open(tmp_path / "source", epoch - 1)
        source.track_changes()
        _fill(source, rnd)
        assert source.store.in_progress, "the epoch did not spill"
        for key in rnd.sample(range(200), 60):  # deletions, some of keys never written
            source.set_current_key(key)
            source.get_partitioned_state(None, d).clear()
        source.commit(epoch)
        replica.apply_changes(source.epoch_changes(), epoch)
        replica.resume(epoch)
        expected = _contents(source)
        source.dispose()
        assert _contents(replica) == expected and expected[0], f"epoch {epoch}"
    replica.dispose()


@pytest.mark.parametrize("partitioned", [False, True])
def test_index_and_filters_are_held_by_the_file_readers_unless_partitioned_into_the_cache(tmp_path, partitioned):
    """By default every SST file's index and bloom filter stay with its open reader (a multi-get probes a
    filter per sorted run without a cache lookup); Flink's partitioned-index-filters key puts them in the cache."""
    from sparkpoint.state.rocksdb.options import options_from_config
    from sparkpoint.state.rocksdb.store import StateStore

    options = options_from_config(
        RocksDBOptions(), {"state.backend.rocksdb.memory.partitioned-index-filters": str(partitioned).lower()}
    )
    assert options.partitioned_index_filters is partitioned
    path = str(tmp_path / "db")
    store = StateStore(path, options)
    batch = rocksdict.WriteBatch(raw_mode=True)
    for i in range(50_000):
        batch.put(b"\x00\x01\x00\x01%012d" % i, b"v")
    store.db.write(batch)
    store.db.flush(True)
    store.close()
    store = StateStore(path, options)
    assert store.db.get(b"\x00\x01\x00\x01%012d" % 7) == b"v"
    held_by_readers = store.db.property_int_value("rocksdb.estimate-table-readers-mem")
    store.close()
    if partitioned:
        assert held_by_readers < 10_000, held_by_readers
    else:
        assert held_by_readers > 50_000, held_by_readers  # ~10 bits a key of filter, and the index


def test_a_partitioned_index_filters_value_that_is_not_a_boolean_is_refused_naming_the_key():
    from sparkpoint.state.rocksdb.options import options_from_config

    with pytest.raises(ValueError, match="partitioned-index-filters: 'sometimes'"):
        options_from_config(RocksDBOptions(), {"state.backend.rocksdb.memory.partitioned-index-filters": "sometimes"})


def test_a_new_databases_first_epoch_reads_nothing_and_every_write_ends_that(tmp_path):
    """A new database holds nothing: its first prefetch reads nothing from it. Anything written since (a spill,
    a commit, a restore into it) is read again: a prefetch over a bound of 3 entries, through the records of a
    dict oracle, finds what the spills before it wrote."""
    from sparkpoint.state.rocksdb.store import StateStore

    store = StateStore(str(tmp_path / "db"), RocksDBOptions(max_cached_entries=3))
    gets: list = []
    real = store.db

    class Counting:
        def get(self, keys):
            gets.append(keys)
            return real.get(keys)

        def __getattr__(self, name):
            return getattr(real, name)

    store.db = Counting()
    store.prefetch([b"a", b"b"])
    assert gets == [] and store.get(b"a") is None
    oracle: dict[bytes, int] = {}
    for n, key in enumerate([b"a", b"b", b"c", b"d", b"a", b"e", b"b", b"a"], start=1):
        store.prefetch([key])
        assert store.get(key) == oracle.get(key), (n, key)  # what the spills before it wrote, or absent
        oracle[key] = oracle.get(key, 0) + n
        store.put(key, (key.decode(), None), oracle[key])
    assert store.spilled_changes > 0 and gets  # spilled, then read again
    store.commit(1)
    store.prefetch(list(oracle))
    assert {k: store.get(k) for k in oracle} == oracle

    restored = StateStore(str(tmp_path / "db2"))
    assert restored.empty
    restored.write_committed(iter([(b"x", pickle.dumps(("x", None, 5)))]))
    restored.prefetch([b"x"])
    assert restored.get(b"x") == 5
    store.close()
    restored.close()


def test_a_sweep_that_spills_keeps_the_values_the_epoch_wrote(tmp_path):
    """Every stored value has expired; the epoch writes fresh values to a quarter of the keys, filling its cache, so
    the sweep's deletions spill it while the sweep walks the database: the fresh values stay, the rest go."""
    options = RocksDBOptions(max_cached_entries=16, ttl_sweep_entries=1_000)

    def epoch(number, now, writes):
        backend = EmbeddedRocksDBStateBackend(options).create_keyed_backend(RANGE, MAXP, working_dir=str(tmp_path))
        if number > 1:
            backend.resume(number - 1)
        backend.set_current_processing_time(now)
        state = backend.get_partitioned_state(None, _ttl_descriptor())
        for key, value in writes.items():
            backend.set_current_key(key)
            state.update(value)
        backend.commit(number)
        return backend, state

    backend, _ = epoch(1, 0, {f"k{i}": ("old", i) for i in range(60)})
    backend.dispose()
    fresh = {f"k{i}": ("fresh", i) for i in range(0, 60, 4)}  # 15 cells of 16: the sweep's deletions spill
    backend, state = epoch(2, 1_000, fresh)  # every "old" value expired at 100
    stored = sorted(key for _, key, _, _ in backend._scan("v"))  # what the database holds after the commit
    read = {}
    for i in range(60):
        backend.set_current_key(f"k{i}")
        read[f"k{i}"] = state.value()
    backend.dispose()
    assert stored == sorted(fresh)
    assert read == {f"k{i}": fresh.get(f"k{i}") for i in range(60)}


def test_an_epoch_committed_with_an_undo_entry_per_key_is_rolled_back(tmp_path):
    """A database whose last epoch was committed before the undo log came in chunks (one entry per changed key,
    ``0xFFFD | db key`` -> ``0x01 | previous bytes`` or ``0x00``): running that epoch again rolls it back."""
    from sparkpoint.state.rocksdb.layout import (
        LEGACY_UNDO_PREFIX,
        META_EPOCH,
        META_UNDO_EPOCH,
        drop_undo_log,
        group_prefix,
    )

    def open_backend():
        backend = EmbeddedRocksDBStateBackend().create_keyed_backend(RANGE, MAXP, working_dir=str(tmp_path))
        return backend, backend.get_partitioned_state(None, ValueStateDescriptor("v"))

    backend, state = open_backend()
    for key in ("a", "b"):
        backend.set_current_key(key)
        state.update(f"{key}@1")
    backend.commit(1)

    def dbkey(key):
        backend.set_current_key(key)
        return group_prefix(backend.get_current_key_group_index(), backend.state_id("v")) + backend.current_key_bytes()

    a_key, c_key = dbkey("a"), dbkey("c")
    a_raw = backend.store.db.get(a_key)
    assert pickle.loads(a_raw) == ("a", None, "a@1")
    # epoch 2 as the older layout committed it: "a" changed, "c" added, each with its undo entry
    batch = rocksdict.WriteBatch(raw_mode=True)
    drop_undo_log(batch)
    batch.put(a_key, pickle.dumps(("a", None, "a@2")))
    batch.put(c_key, pickle.dumps(("c", None, "c@2")))
    batch.put(LEGACY_UNDO_PREFIX + a_key, b"\x01" + a_raw)
    batch.put(LEGACY_UNDO_PREFIX + c_key, b"\x00")
    batch.put(META_UNDO_EPOCH, b"2")
    batch.put(META_EPOCH, b"2")
    backend.store.db.write(batch)
    backend.dispose()

    backend, state = open_backend()
    backend.resume(1)  # epoch 2 runs again
    read = {}
    for key in ("a", "b", "c"):
        backend.set_current_key(key)
        read[key] = state.value()
    legacy_left = list(backend.store.iterate(LEGACY_UNDO_PREFIX))
    backend.dispose()
    assert read == {"a": "a@1", "b": "b@1", "c": None}
    assert legacy_left == []
