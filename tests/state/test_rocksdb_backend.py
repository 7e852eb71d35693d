"""What is special about the ``rocksdb`` backend: working state kept in ``working_dir/db`` between epochs.

The conformance suite covers the rest; here each "epoch" opens a backend on the same working
directory, resumes the previous epoch, commits and disposes, as successive tasks do (oracle: dicts).
"""

from __future__ import annotations

import copy
import os
import pickle
import random

import pytest
from backend_suite import EVERY_KEY_GROUP, KEYS, MAXP, NAMESPACES, descriptors
from test_backend_conformance import _apply, _contents, _fill

from sparkpoint.common import Time
from sparkpoint.datastream.state import ListStateDescriptor, MapStateDescriptor, StateTtlConfig, ValueStateDescriptor
from sparkpoint.datastream.window import TimeWindow
from sparkpoint.errors import StateMissingError
from sparkpoint.state.hashmap import HashMapStateBackend
from sparkpoint.state.key_groups import assign_to_key_group, compute_key_group_range_for_operator_index
from sparkpoint.state.rocksdb import EmbeddedRocksDBStateBackend
from sparkpoint.state.rocksdb.backend import snapshot_local_checkpoint
from sparkpoint.time.timers import EVENT_TIME, PROCESSING_TIME

KINDS = ["value", "list", "map", "reducing", "aggregating"]
ROCKSDB = EmbeddedRocksDBStateBackend()


def _open(working_dir, resume=None, key_groups=EVERY_KEY_GROUP):
    """The backend of one epoch's task: the database in ``working_dir``, resumed at ``resume``."""
    backend = ROCKSDB.create_keyed_backend(key_groups, MAXP, working_dir=str(working_dir))
    if resume is not None:
        backend.resume(resume)
    return backend


def _entries(snapshot, name):
    """``{(key, ns): value}`` of state ``name`` over every key group of ``snapshot``."""
    out: dict = {}
    for states in snapshot.entries.values():
        for slot, value in states.get(name, {}).items():
            assert slot not in out, f"{slot} in two key groups"
            out[slot] = value
    return out


def _random_epoch(backend, models, rnd, ops=250):
    """``ops`` random operations over every state kind and namespace, checked against ``models``."""
    d = descriptors()
    for _ in range(ops):
        kind, key, ns = rnd.choice(KINDS), rnd.choice(KEYS), rnd.choice(NAMESPACES)
        backend.set_current_key(key)
        result = _apply(kind, backend.get_partitioned_state(ns, d[kind]), models[kind], (key, ns), rnd)
        if result is not None:
            assert result[0] == result[1], (kind, key, ns)


def _check(backend, models):
    snapshot = backend.snapshot()
    for kind in KINDS:
        assert _entries(snapshot, kind) == models[kind], kind
    assert backend.entry_count() == sum(len(m) for m in models.values())


# -- state kinds across epochs ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_every_state_kind_matches_a_model_across_reopened_epochs(tmp_path, kind):
    rnd = random.Random(kind)
    model: dict = {}
    reads = 0
    for epoch in range(1, 7):
        backend = _open(tmp_path, epoch - 1 if epoch > 1 else None)
        if epoch > 1:
            assert backend.registered_states() == {kind: kind}
        states = {ns: backend.get_partitioned_state(ns, descriptors()[kind]) for ns in NAMESPACES}
        for _ in range(500):
            key, ns = rnd.choice(KEYS), rnd.choice(NAMESPACES)
            backend.set_current_key(key)
            result = _apply(kind, states[ns], model, (key, ns), rnd)
            if result is not None:
                assert result[0] == result[1], (epoch, key, ns)
                reads += 1
        backend.commit(epoch)
        backend.dispose()
    assert reads > 300
    backend = _open(tmp_path, 6)
    assert _entries(backend.snapshot(), kind) == model
    for ns in NAMESPACES:
        assert sorted(map(repr, backend.get_keys(kind, ns))) == sorted(repr(k) for k, n in model if n == ns)
    backend.dispose()


def test_the_database_lives_in_the_working_dir_and_a_temporary_one_is_removed(tmp_path):
    backend = _open(tmp_path)
    backend.commit(1)
    backend.dispose()
    assert os.path.isdir(tmp_path / "db")
    where = (temporary := ROCKSDB.create_keyed_backend(EVERY_KEY_GROUP, MAXP)).working_dir
    assert os.path.isdir(os.path.join(where, "db"))
    temporary.dispose()
    assert not os.path.exists(where)


def test_a_backend_keeps_working_after_commit(tmp_path):
    """Commit makes the epoch durable; the same state objects and timer queue go on into the next epoch."""
    backend = _open(tmp_path)
    lst = backend.get_partitioned_state(None, ListStateDescriptor("l"))
    queue = backend.get_timer_queue(EVENT_TIME)
    backend.set_current_key("k")
    lst.add(1)
    queue.add(10, "k", None, backend.current_key_group)
    queue.add(20, "k", None, backend.current_key_group)
    backend.commit(1)
    assert len(queue) == len(backend.get_timer_queue(EVENT_TIME)) == 2
    lst.add(2)
    assert [t[0] for t in queue.pop_due(10)] == [10]
    queue.add(30, "k", None, backend.current_key_group)
    assert len(queue) == 2
    backend.commit(2)
    assert len(queue) == 2
    backend.dispose()
    backend = _open(tmp_path, 2)
    backend.set_current_key("k")
    assert list(backend.get_partitioned_state(None, ListStateDescriptor("l")).get()) == [1, 2]
    assert [t[0] for t in backend.get_timer_queue(EVENT_TIME).pop_due(100)] == [20, 30]
    backend.dispose()


# -- resume and roll back ---------------------------------------------------------------------------


def _run(tmp_path, epoch, models, seed, resume=True):
    backend = _open(tmp_path, epoch - 1 if resume and epoch > 1 else None)
    _random_epoch(backend, models, random.Random(seed))
    changed = backend.commit(epoch)
    backend.dispose()
    return changed


def test_a_retried_epoch_rolls_back_to_the_end_of_the_previous_one(tmp_path):
    models: dict = {kind: {} for kind in KINDS}
    _run(tmp_path, 1, models, "one")
    _run(tmp_path, 2, models, "two")
    at_two = copy.deepcopy(models)
    first_try = copy.deepcopy(models)
    backend = _open(tmp_path, 2)
    _random_epoch(backend, first_try, random.Random("three, first try"))
    backend.set_current_key("k0")
    backend.get_partitioned_state(None, ValueStateDescriptor("only-in-the-first-try")).update(1)
    backend.commit(3)
    backend.dispose()
    assert first_try != at_two
    for attempt in ("second", "third"):
        backend = _open(tmp_path, 2)  # the database is at 3: epoch 3 runs again
        _check(backend, at_two)
        assert backend.registered_states() == {kind: kind for kind in KINDS}
        models = copy.deepcopy(at_two)
        _random_epoch(backend, models, random.Random(attempt))
        backend.commit(3)
        backend.dispose()
    backend = _open(tmp_path, 3)
    _check(backend, models)
    backend.dispose()
    _run(tmp_path, 4, models, "four")
    backend = _open(tmp_path, 4)
    _check(backend, models)
    backend.dispose()


@pytest.mark.parametrize("resume", [1, 4, 5, -1, "1 after rolling back to 2"])
def test_resuming_an_epoch_the_database_does_not_hold_fails(tmp_path, resume):
    models: dict = {kind: {} for kind in KINDS}
    at = {}
    for epoch in (1, 2, 3):
        _run(tmp_path, epoch, models, epoch)
        at[epoch] = copy.deepcopy(models)
    held = 3
    if resume == "1 after rolling back to 2":  # one epoch back works once: the undo log is used up
        _open(tmp_path, 2).dispose()
        held, resume = 2, 1
    with pytest.raises(StateMissingError, match=f"holds epoch {held}, expected {resume}"):
        _open(tmp_path, resume)
    backend = _open(tmp_path, held)  # the failed resume changed nothing
    _check(backend, at[held])
    backend.dispose()


def _meeting_keys_epoch(backend, timers_too=True):
    """Write ``"1"`` and ``1`` (keys, and namespaces of one key) the way each epoch of the format test does."""
    d = descriptors()
    for key, v in (("1", "text"), (1, "number")):
        backend.set_current_key(key)
        backend.get_partitioned_state(None, d["value"]).update(v)
        if timers_too:
            backend.get_timer_queue(EVENT_TIME).add(5, key, None, assign_to_key_group(key, MAXP))
    backend.set_current_key("k")
    for ns, v in (("1", "text"), (1, "number")):
        backend.get_partitioned_state(ns, d["list"]).add(v)


@pytest.mark.parametrize("fmt", [2, 1])
def test_a_new_database_is_marked_with_its_key_format_and_one_written_before_the_mark_keeps_its_own(tmp_path, fmt):
    """A new database stores ``"1"`` and ``1`` apart (key format 2: keys, namespaces, timers) and says so in its
    metadata, so it reopens as format 2. A database written before the mark (format 1: a retained checkpoint of
    an older version) reopens as format 1 and finds its entries where they were written, ``"1"`` and ``1`` one
    namespace and one timer -- through a prefetch too; their values are apart in both formats, since their key
    groups differ (PyFlink's placement hashes their pickles)."""
    d = descriptors()
    backend = _open(tmp_path)
    assert backend.store.key_format == 2
    backend.store.key_format = fmt  # as an older version wrote it
    _meeting_keys_epoch(backend)
    backend.commit(1)
    backend.dispose()
    backend = _open(tmp_path, 1)
    assert backend.store.key_format == fmt
    states = {"value": backend.get_partitioned_state(None, d["value"]), "list": d["list"]}
    backend.prefetch(["1", 1, "k"])
    got = {}
    for key in ("1", 1):
        backend.set_current_key(key)
        got[key] = states["value"].value()
    backend.set_current_key("k")
    lists = {ns: sorted(backend.get_partitioned_state(ns, d["list"]).get() or []) for ns in ("1", 1)}
    fired = [(key, ns) for _, key, ns, _ in backend.get_timer_queue(EVENT_TIME).pop_due(5)]
    if fmt == 2:
        assert got == {"1": "text", 1: "number"} and lists == {"1": ["text"], 1: ["number"]}
        assert sorted(map(repr, fired)) == sorted(map(repr, [("1", None), (1, None)]))
    else:
        assert got == {"1": "text", 1: "number"} and lists == {"1": ["number", "text"], 1: ["number", "text"]}
        assert len(fired) == 1  # timers are stored by key bytes alone
    backend.commit(2)  # a later commit keeps the format
    backend.dispose()
    backend = _open(tmp_path, 2)
    assert backend.store.key_format == fmt
    backend.dispose()


def test_changes_of_a_database_of_another_key_format_are_not_replayed(tmp_path):
    """A database rebuilt from the changelog replays another database's keys as they are, so both must share
    the key format: a format-1 database's changes (an older version's checkpoint restored) into a new, format-2
    one fail with StateMissingError, which makes the job restore; changes of the same format replay."""
    for fmt, directory in ((1, tmp_path / "old"), (2, tmp_path / "new")):
        source = _open(directory)
        source.store.key_format = fmt
        source.track_changes()
        _meeting_keys_epoch(source, timers_too=False)
        source.commit(1)
        changes = source.epoch_changes()
        source.dispose()
        rebuilt = _open(tmp_path / f"rebuilt-{fmt}")
        if fmt == 1:
            with pytest.raises(StateMissingError, match="key format 1.*format 2"):
                rebuilt.apply_changes(changes, 1)
        else:
            rebuilt.apply_changes(changes, 1)
            rebuilt.set_current_key(1)
            assert rebuilt.get_partitioned_state(None, descriptors()["value"]).value() == "number"
        rebuilt.dispose()


def test_a_fresh_directory_holds_no_epoch(tmp_path):
    with pytest.raises(StateMissingError):
        _open(tmp_path, 0)
    with pytest.raises(StateMissingError):
        _open(tmp_path / "other", 7)


# -- timers -----------------------------------------------------------------------------------------


def _register(queue, timers, rnd, n):
    for _ in range(n):
        timer = (rnd.randrange(60), rnd.choice(KEYS), rnd.choice(NAMESPACES))
        queue.add(*timer, assign_to_key_group(timer[1], MAXP))
        timers.add(timer)


def _assert_fired_in_order(fired, expected):
    assert [t[0] for t in fired] == sorted(t[0] for t in expected)
    assert sorted(map(repr, fired)) == sorted(map(repr, expected))


def test_timers_persist_fire_in_order_and_roll_back(tmp_path):
    rnd = random.Random(3)
    timers: set = set()
    backend = _open(tmp_path)
    _register(backend.get_timer_queue(EVENT_TIME), timers, rnd, 150)
    backend.get_timer_queue(PROCESSING_TIME).add(5, "p", TimeWindow(0, 10), assign_to_key_group("p", MAXP))
    backend.commit(1)
    assert len(backend.get_timer_queue(EVENT_TIME)) == len(timers)
    backend.dispose()

    backend = _open(tmp_path, 1)
    queue = backend.get_timer_queue(EVENT_TIME)
    assert len(queue) == len(timers) and queue.peek() == min(t[0] for t in timers)
    for timer in rnd.sample(sorted(timers, key=repr), 30) + [(1, "never", None)]:
        queue.delete(*timer)
        timers.discard(timer)
    _register(queue, timers, rnd, 40)
    assert len(queue) == len(timers)
    fired, late = [], (25, "late", TimeWindow(10, 20))

    for ts, key, ns, kg in queue.pop_due(25):
        assert kg == assign_to_key_group(key, MAXP)
        fired.append((ts, key, ns))
        if len(fired) == 1:  # registered while firing and due: fires now
            queue.add(*late, assign_to_key_group("late", MAXP))
    _assert_fired_in_order(fired, [t for t in timers if t[0] <= 25] + [late])
    timers = {t for t in timers if t[0] > 25}
    assert len(queue) == len(timers)
    assert backend.commit(2) > 0
    assert len(backend.get_timer_queue(EVENT_TIME)) == len(timers)
    backend.dispose()

    for attempt in range(2):  # epoch 3, run twice: the retry sees epoch 2's timers
        backend = _open(tmp_path, 2)
        queue = backend.get_timer_queue(EVENT_TIME)
        assert len(queue) == len(timers) and queue.peek() == min(t[0] for t in timers)
        _assert_fired_in_order(list(t[:3] for t in queue.pop_due(40)), [t for t in timers if t[0] <= 40])
        queue.add(100 + attempt, "again", None, assign_to_key_group("again", MAXP))
        backend.commit(3)
        backend.dispose()
    backend = _open(tmp_path, 3)
    assert list(backend.get_timer_queue(PROCESSING_TIME).pop_due(100)) == [
        (5, "p", TimeWindow(0, 10), assign_to_key_group("p", MAXP))
    ]
    rest = [t for t in timers if t[0] > 40] + [(101, "again", None)]
    _assert_fired_in_order(list(t[:3] for t in backend.get_timer_queue(EVENT_TIME).pop_due(10**6)), rest)
    assert len(backend.get_timer_queue(EVENT_TIME)) == 0
    backend.dispose()


def test_a_fired_timer_registered_again_in_the_same_epoch_stays(tmp_path):
    backend = _open(tmp_path)
    kg = assign_to_key_group("k", MAXP)
    backend.get_timer_queue(EVENT_TIME).add(10, "k", None, kg)
    backend.get_timer_queue(EVENT_TIME).add(20, "k", None, kg)
    backend.commit(1)
    backend.dispose()
    for attempt in ("failed", "retried"):  # the failed attempt fires, never commits, disposes
        backend = _open(tmp_path, 1)
        queue = backend.get_timer_queue(EVENT_TIME)
        assert [t[0] for t in queue.pop_due(10)] == [10]
        if attempt == "failed":
            backend.dispose()
    queue.add(10, "k", None, kg)
    queue.add(10, "k", None, kg)
    assert len(queue) == 2 and queue.peek() == 10
    backend.commit(2)
    backend.dispose()
    backend = _open(tmp_path, 2)
    queue = backend.get_timer_queue(EVENT_TIME)
    assert len(queue) == 2
    assert list(queue.pop_due(10)) == [(10, "k", None, kg)] and list(queue.pop_due(10)) == []
    backend.dispose()


# -- only what an epoch touches is written -----------------------------------------------------------


def test_commit_writes_only_the_entries_that_changed(tmp_path):
    n = 20_000
    value, lst = ValueStateDescriptor("v"), ListStateDescriptor("l")
    backend = _open(tmp_path)
    v = backend.get_partitioned_state(None, value)
    for i in range(n):
        backend.set_current_key(i)
        v.update(i)
    backend.set_current_key(0)
    backend.get_partitioned_state(None, lst).add_all([1, 2])
    assert backend.commit(1) == n + 1
    backend.dispose()

    backend = _open(tmp_path, 1)
    v, l_state = backend.get_partitioned_state(None, value), backend.get_partitioned_state(None, lst)
    for i in range(5):  # 5 changed
        backend.set_current_key(i)
        v.update(-i - 1)
    for i in (5, 6):  # rewritten with the same value: unchanged
        backend.set_current_key(i)
        v.update(i)
    for i in (7, 8):  # 2 removed
        backend.set_current_key(i)
        v.clear()
    backend.set_current_key(9)
    assert v.value() == 9  # read only
    backend.set_current_key("new")  # created, then removed: nothing to write
    v.update(1)
    v.clear()
    backend.set_current_key(0)
    l_state.add(3)  # changed in place
    assert backend.commit(2) == 5 + 2 + 1
    backend.dispose()

    backend = _open(tmp_path, 2)
    v, _ = backend.get_partitioned_state(None, value), backend.get_timer_queue(EVENT_TIME)
    for i in range(0, n, 97):
        backend.set_current_key(i)
        v.value()
    assert backend.entry_count() == n - 2 + 1  # a full scan reads, and writes nothing
    assert backend.commit(3) == 0
    backend.set_current_key(0)
    assert (v.value(), list(backend.get_partitioned_state(None, lst).get())) == (-1, [1, 2, 3])
    backend.dispose()


# -- local checkpoints --------------------------------------------------------------------------------


def _model_of(contents_and_timers):
    got, timers = contents_and_timers
    return got, sorted(map(repr, timers))


def test_a_local_checkpoint_keeps_its_epoch_and_restores_into_either_backend(tmp_path):
    backend = _open(tmp_path)
    model, timers = _fill(backend, random.Random(11))
    backend.commit(1)
    path = backend.checkpoint_locally(1)
    assert path == os.path.join(str(tmp_path), "checkpoints", "chk-1") and os.path.isdir(path)
    backend.dispose()

    backend = _open(tmp_path, 1)
    _fill(backend, random.Random(12))  # epoch 2 changes (nearly) every entry and timer
    backend.set_current_key("k0")
    backend.clear_namespace(None)
    backend.commit(2)
    backend.checkpoint_locally(2)  # flushes epoch 2 next to the first checkpoint
    later = _model_of(_contents(backend))
    backend.dispose()

    snap = snapshot_local_checkpoint(path, EVERY_KEY_GROUP, MAXP, watermark=5)
    assert snap.watermark == 5 and snap.backend == "rocksdb"
    assert {k: _entries(snap, k) for k in KINDS} == {
        kind: {(key, ns): v for (k, key, ns), v in model.items() if k == kind} for kind in KINDS
    }
    expected = (model, sorted(map(repr, timers)))
    assert expected != later
    snap = pickle.loads(pickle.dumps(snap))
    heap = HashMapStateBackend().create_keyed_backend(EVERY_KEY_GROUP, MAXP)
    heap.restore([snap])
    rocks = _open(tmp_path / "restored")
    rocks.restore([snap])
    assert _model_of(_contents(rocks)) == expected  # (pops the timers of the uncommitted epoch)
    rocks.dispose()
    assert _model_of(_contents(heap)) == expected
    heap.restore([snap])  # the timers again, popped by _contents
    back = _open(tmp_path / "from-heap")  # hashmap -> rocksdb, then committed and reopened
    back.restore([heap.snapshot()])
    back.commit(7)
    back.dispose()
    back = _open(tmp_path / "from-heap", 7)
    assert _model_of(_contents(back)) == expected
    back.dispose()
    readonly = type(back).open_checkpoint(os.path.join(str(tmp_path), "checkpoints", "chk-2"), EVERY_KEY_GROUP, MAXP)
    assert _model_of(_contents(readonly)) == later
    readonly.dispose()


# -- time-to-live ----------------------------------------------------------------------------------


def test_ttl_timestamps_survive_commit_and_resume(tmp_path):
    def states(backend):
        out = {}
        for d in (ValueStateDescriptor("v"), ListStateDescriptor("l"), MapStateDescriptor("m")):
            d.enable_time_to_live(StateTtlConfig.new_builder(Time.milliseconds(100)).build())
            out[d.name] = backend.get_partitioned_state(None, d)
        return out

    def write(backend, key, now):
        backend.set_current_key(key)
        backend.set_current_processing_time(now)
        s = states(backend)
        s["v"].update(now)
        s["l"].add(now)
        s["m"].put("at", now)

    def read(backend, key, now):
        backend.set_current_key(key)
        backend.set_current_processing_time(now)
        s = states(backend)
        return s["v"].value(), list(s["l"].get()), dict(s["m"].items())

    backend = _open(tmp_path)
    write(backend, "old", 1_000)
    backend.commit(1)
    backend.dispose()
    backend = _open(tmp_path, 1)
    assert read(backend, "old", 1_099) == (1_000, [1_000], {"at": 1_000})
    write(backend, "new", 1_050)
    backend.set_current_key("old")
    states(backend)["l"].add(1_050)
    backend.commit(2)
    backend.dispose()
    backend = _open(tmp_path, 2)
    assert read(backend, "new", 1_100) == (1_050, [1_050], {"at": 1_050})
    assert read(backend, "old", 1_100) == (None, [1_050], {})
    backend.set_current_processing_time(1_150)
    snap = backend.snapshot()  # background cleanup drops what expired
    assert {k: sorted(key for key, _ in _entries(snap, k)) for k in "vlm"} == {"v": [], "l": [], "m": []}
    backend.dispose()


# -- rescaling -------------------------------------------------------------------------------------


@pytest.mark.parametrize("parallelism", [1, 3])
def test_snapshots_of_two_subtasks_rescale_every_entry_exactly_once(tmp_path, parallelism):
    whole = _open(tmp_path / "whole")
    model, timers = _fill(whole, random.Random(parallelism))
    whole.commit(1)
    whole_path = whole.checkpoint_locally(1)
    whole.dispose()
    snapshots = []
    for i in range(2):  # scale out to two subtasks, then in or out again
        rng = compute_key_group_range_for_operator_index(MAXP, 2, i)
        half = snapshot_local_checkpoint(whole_path, rng, MAXP)
        assert set(half.entries) | set(half.timers) <= set(rng), "a snapshot holds only its key groups"
        sub = _open(tmp_path / f"sub-{i}", key_groups=rng)
        sub.restore([half])
        sub.commit(1)
        path = sub.checkpoint_locally(1)
        sub.dispose()
        snapshots.append(pickle.loads(pickle.dumps(snapshot_local_checkpoint(path, rng, MAXP))))
    seen: dict = {}
    seen_timers: list = []
    for i in range(parallelism):
        rng = compute_key_group_range_for_operator_index(MAXP, parallelism, i)
        target = _open(tmp_path / f"p{parallelism}-{i}", key_groups=rng)
        target.restore(snapshots)
        target.commit(1)
        target.dispose()
        target = _open(tmp_path / f"p{parallelism}-{i}", 1, key_groups=rng)
        got, got_timers = _contents(target)
        target.dispose()
        assert all(assign_to_key_group(key, MAXP) in rng for _, key, _ in got)
        assert not set(got) & set(seen), "an entry landed in two subtasks"
        seen.update(got)
        seen_timers.extend(got_timers)
    assert seen == model and len(model) > 50
    assert sorted(map(repr, seen_timers)) == sorted(map(repr, timers))


# -- configuration ---------------------------------------------------------------------------------


def test_configure_reads_flinks_keys_into_a_copy():
    configured = ROCKSDB.configure(
        {
            "state.backend.rocksdb.memory.fixed-per-slot": "128mb",
            "state.backend.rocksdb.memory.write-buffer-ratio": "0.25",
            "state.backend.rocksdb.writebuffer.size": "4 mb",
            "execution.checkpointing.incremental": "true",
            "state.backend.incremental": "false",
        }
    )
    options = configured.options
    assert (options.memory_bytes, options.write_buffer_ratio, options.write_buffer_bytes) == (128 << 20, 0.25, 4 << 20)
    assert configured.incremental is True and ROCKSDB.incremental is False
    assert ROCKSDB.options.memory_bytes == 256 << 20
    assert configured.configure({"state.backend.incremental": "false"}).incremental is False
    assert configured.configure({}).options == configured.options
    backend = configured.create_keyed_backend(EVERY_KEY_GROUP, MAXP)
    backend.set_current_key("k")
    backend.get_partitioned_state(None, ValueStateDescriptor("v")).update(1)
    assert backend.commit(1) == 1
    backend.dispose()


def test_a_retried_first_epoch_after_a_restore_sees_all_of_the_restore_or_none(tmp_path):
    heap = HashMapStateBackend().create_keyed_backend(EVERY_KEY_GROUP, MAXP)
    model, timers = _fill(heap, random.Random(21))
    backend = _open(tmp_path)
    backend.restore([heap.snapshot()])
    backend.commit(3)
    backend.dispose()
    try:
        backend = _open(tmp_path, 2)  # epoch 3, the first after the restore, runs again
    except StateMissingError:
        return  # refusing is fine: the job restores again
    assert _model_of(_contents(backend)) == (model, sorted(map(repr, timers)))


def _sorted_runs_after_checkpointed_epochs(tmp_path, backend_factory, epochs=24):
    """Epochs as tasks run them (open, write, commit, local checkpoint = flush, close); then the L0 files."""
    rnd = random.Random(5)
    for epoch in range(1, epochs + 1):
        backend = backend_factory.create_keyed_backend(EVERY_KEY_GROUP, MAXP, working_dir=str(tmp_path))
        if epoch > 1:
            backend.resume(epoch - 1)
        state = backend.get_partitioned_state(None, ValueStateDescriptor("v"))
        for _ in range(300):
            backend.set_current_key(rnd.randrange(100_000))
            state.update(epoch)
        backend.commit(epoch)
        backend.checkpoint_locally(epoch)
        backend.dispose()
    backend = backend_factory.create_keyed_backend(EVERY_KEY_GROUP, MAXP, working_dir=str(tmp_path))
    backend.resume(epochs)
    files = backend.store.db.property_int_value("rocksdb.num-files-at-level0")
    backend.dispose()
    return files


def test_checkpointed_short_epochs_do_not_pile_up_l0_files(tmp_path):
    """Every checkpoint flushes an L0 file and every epoch closes the database; point lookups read every L0
    file, so the default (universal) compaction must keep their number near its trigger (4)."""
    assert ROCKSDB.options.compaction_style == "UNIVERSAL"
    files = _sorted_runs_after_checkpointed_epochs(tmp_path, ROCKSDB)
    assert 1 <= files <= 6, files


def test_compaction_style_is_read_from_flinks_key_and_fifo_is_refused(tmp_path):
    assert ROCKSDB.configure({"state.backend.rocksdb.compaction.style": "Level"}).options.compaction_style == "LEVEL"
    with pytest.raises(ValueError, match="compaction.style: 'FIFO'.*would delete state"):
        ROCKSDB.configure({"state.backend.rocksdb.compaction.style": "FIFO"})
    # a database written with level compaction opens with universal (a job upgraded through a checkpoint)
    _sorted_runs_after_checkpointed_epochs(
        tmp_path, ROCKSDB.configure({"state.backend.rocksdb.compaction.style": "LEVEL"}), epochs=3
    )
    backend = _open(tmp_path, 3)
    assert backend.entry_count() > 0
    backend.dispose()
