"""Changelog checkpoints: between materializations a checkpoint references the state changelog.

In-process executor (the task code Spark runs), real RocksDB with incremental checkpoints and the
changelog on. Oracles are hand counts (``oracle_totals``). The checks follow what a Flink engineer
expects of the changelog state backend: the first checkpoint materializes, later ones write only a
manifest per subtask and upload nothing, a retained one restores (in place, into hashmap, rescaled),
and the changelog a retained checkpoint references outlives the job while the rest is deleted.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.checkpoint.loader import load_checkpoint
from sparkpoint.storage.exceptions import CorruptCheckpointError
from tests.checkpoint.kinds import checkpoint_kinds
from tests.checkpoint.test_checkpointing import counting_job, key_of, oracle_totals
from tests.checkpoint.test_rocksdb_checkpoints import (
    ROCKSDB,
    _referenced_shared,
    _restored_counts,
    _run_until_checkpoint_id,
)

CHANGELOG = {**ROCKSDB, "state.changelog.enabled": "true"}


def _manifests(chk: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(Path(chk).glob("changelog-*.json"))]


def test_checkpoints_reference_the_changelog_and_the_oldest_retained_restores(make_env, tmp_path):
    count = 40_000
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 20, **CHANGELOG})
    stream = counting_job(env, count, ck, retained=3, rate=1_500)
    dirs = _run_until_checkpoint_id(env, stream, ck, 9)
    assert len(dirs) == 3 and int(dirs[0].rsplit("-", 1)[1]) >= 7
    for d in dirs:  # the first checkpoint materialized; these only reference it and the changelog
        assert checkpoint_kinds(d) == {"changelog"}, d
        assert not list(Path(d).glob("keyed-*")), "a changelog checkpoint uploads no keyed state"
    manifests = _manifests(dirs[-1])
    assert len(manifests) == 2 and {m["uid"] for m in manifests} == {"count"}
    for m in manifests:  # the base, then every epoch since it, in order
        epochs = [s["epoch"] for s in m["segments"]]
        assert epochs == list(range(m["base_epoch"] + 1, m["epoch"] + 1)) and epochs
        assert m["base"]["format"] == "sparkpoint-rocksdb-incremental"
    # what the retained checkpoints reference is on disk (load verifies sizes and SHA-256) ...
    referenced = set().union(*(_referenced_shared(d) for d in dirs))
    for d in dirs:
        load_checkpoint(d)
    job_dir = Path(dirs[0]).parent
    segments = {os.path.normpath(str(p)) for p in (job_dir / "changelog").rglob("*.log")}
    assert segments and {p for p in referenced if "/changelog/" in p} <= segments
    # ... and after the job's end no epoch directory is left that no retained checkpoint references
    kept_dirs = {os.path.dirname(p) for p in referenced}
    assert {os.path.dirname(p) for p in segments} <= kept_dirs
    sst = {os.path.normpath(str(p)) for p in (job_dir / "shared").glob("*.sst")}
    assert sst == {p for p in referenced if "/shared/" in p}, "unreferenced SST files left"
    # the oldest retained checkpoint restores exactly: in place, into hashmap, at another parallelism
    expected = dict(oracle_totals(count))
    assert _restored_counts(make_env, tmp_path, dirs[0], count, **ROCKSDB) == expected
    assert _restored_counts(make_env, tmp_path, dirs[0], count) == expected  # hashmap
    assert _restored_counts(make_env, tmp_path, dirs[-1], count, parallelism=3, **ROCKSDB) == expected
    assert _restored_counts(make_env, tmp_path, dirs[-1], count, parallelism=1, **CHANGELOG) == expected


def _retained_24(make_env, tmp_path, count: int, **conf) -> tuple[list[str], list[set]]:
    """Run the count with the changelog and ``conf`` until checkpoint 24, all retained: their dirs and kinds."""
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 20, **CHANGELOG, **conf})
    stream = counting_job(env, count, ck, retained=30, rate=1_500)
    dirs = _run_until_checkpoint_id(env, stream, ck, 24)
    return dirs, [checkpoint_kinds(d) for d in dirs]


def test_materialization_comes_back_after_its_interval(make_env, tmp_path):
    count = 40_000
    dirs, kinds = _retained_24(make_env, tmp_path, count, **{"state.changelog.periodic-materialize.interval": "60 ms"})
    assert kinds[0] == {"rocksdb"}, "the first checkpoint materializes"
    assert {"changelog"} in kinds and kinds.count({"rocksdb"}) >= 2, kinds
    bases = {m["base_epoch"] for d in dirs for m in _manifests(d)}
    assert len(bases) >= 2, "later changelog checkpoints build on a later materialization"
    latest_changelog = [d for d, k in zip(dirs, kinds) if k == {"changelog"}][-1]
    assert _restored_counts(make_env, tmp_path, latest_changelog, count, **CHANGELOG) == dict(oracle_totals(count))


def test_a_damaged_changelog_segment_is_named_when_the_checkpoint_loads(make_env, tmp_path):
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 20, **CHANGELOG})
    stream = counting_job(env, 10**9, ck, rate=1_500)
    latest = _run_until_checkpoint_id(env, stream, ck, 3)[-1]
    victim = sorted(p for p in _referenced_shared(latest) if p.endswith(".log"))[0]
    data = bytearray(Path(victim).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(victim).write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError) as err:
        load_checkpoint(latest)
    message = str(err.value)
    assert os.path.basename(victim) in message and "SHA-256" in message and "operator 'count'" in message


def test_a_changelog_larger_than_its_base_materializes_early(make_env, tmp_path, monkeypatch):
    """No interval is over (10 min), but the changelog since the base outgrows the base: the next checkpoint
    materializes, so a restore never replays more than about the state's size."""
    from sparkpoint.runtime import changelog_checkpoints

    monkeypatch.setattr(changelog_checkpoints, "MIN_CHANGELOG_BYTES", 0)  # the state here is a few kB
    count = 40_000
    dirs, kinds = _retained_24(make_env, tmp_path, count, **{"sparkpoint.changelog.max-size-ratio": "0.5"})
    assert kinds.count({"rocksdb"}) >= 3 and {"changelog"} in kinds, kinds
    for d in dirs:  # no changelog checkpoint references more changelog than half its base (all subtasks)
        manifests = _manifests(d)
        base = sum({f["path"]: f["size"] for m in manifests for f in m["base"]["files"] if "size" in f}.values())
        assert sum(s["size"] for m in manifests for s in m["segments"]) <= 0.5 * base, d
    latest_changelog = [d for d, k in zip(dirs, kinds) if k == {"changelog"}][-1]
    assert _restored_counts(make_env, tmp_path, latest_changelog, count, **CHANGELOG) == dict(oracle_totals(count))


class EventOrder:
    """A job listener noting epochs and checkpoints (with their barrier epoch) in the order they happen."""

    events: list = []

    def __init__(self, job):
        EventOrder.events = []

    def on_epoch_completed(self, stats):
        EventOrder.events.append(("epoch", stats.epoch))

    def on_checkpoint_completed(self, checkpoint):
        EventOrder.events.append(("checkpoint", checkpoint.metadata.barrier_epoch, checkpoint.location))

    def __getattr__(self, name):
        if name.startswith("on_"):
            return lambda *args: None
        raise AttributeError(name)


def test_a_changelog_checkpoint_completes_at_its_barrier_and_the_job_ends_without_an_extra_epoch(make_env, tmp_path):
    """Nothing is left to upload at the barrier: the checkpoint completes (and commits) before the next epoch,
    where an uploading one completes after it; so the final checkpoint of a bounded job needs no epoch of its own."""
    count = 4_000
    epochs = {}
    for name, conf in (("changelog", CHANGELOG), ("uploading", ROCKSDB)):
        env = make_env(
            "local", **{"execution.epoch.max-records": 100, **conf, "execution.job-listeners": f"{__name__}:EventOrder"}
        )
        stream = counting_job(env, count, tmp_path / name, retained=100)
        last: dict = {}
        for key, n in stream.execute_and_collect():
            last[key] = max(last.get(key, 0), n)
        assert last == dict(oracle_totals(count))
        done_at = {e[1]: i for i, e in enumerate(EventOrder.events) if e[0] == "epoch"}
        checkpoints = [(e[1], i) for i, e in enumerate(EventOrder.events) if e[0] == "checkpoint"]
        assert len(checkpoints) >= 3
        # the first checkpoint materializes (uploads) in both; after it, only the changelog's are done at once
        at_barrier = [i < done_at[barrier] for barrier, i in checkpoints[1:]]
        assert all(at_barrier) if name == "changelog" else not any(at_barrier), (name, EventOrder.events)
        epochs[name] = max(done_at)
    assert epochs["changelog"] == epochs["uploading"] - 1


def _records_before(chk: str, count: int) -> Counter:
    """The keys a checkpoint's source positions say were read (split k reads k, k + 2, ... ; independent of the
    job's state)."""
    from sparkpoint.connectors.generator import split_length

    restored = load_checkpoint(chk, verify_files=False)
    splits = {s.split_id: s for ss in restored.driver_state["sources"]["gen"]["splits"].values() for s in ss}
    seen: Counter = Counter()
    for k in range(2):
        split = splits.get(f"seq-{k}")
        read = split_length(count, 2, k) if split is None else split.position  # gone: read to its end
        seen.update(key_of(k + 2 * i) for i in range(read))
    return seen


def test_the_state_processor_reads_a_changelog_checkpoint(spark, make_env, tmp_path):
    """A changelog checkpoint taken mid-way, read as a DataFrame (base and segments replayed by the reader):
    each key's count is what the checkpoint's source positions say was read by then."""
    from sparkpoint.state_processor import SavepointReader

    count = 40_000
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 20, **CHANGELOG})
    stream = counting_job(env, count, ck, rate=1_500)
    retained = _run_until_checkpoint_id(env, stream, ck, 6)
    latest = retained[-1]
    assert checkpoint_kinds(latest) == {"changelog"}
    reader = SavepointReader.read(spark, latest)
    got = reader.keyed_state_pandas("count", "n")
    expected = _records_before(latest, count)
    assert 0 < sum(expected.values()) < count
    assert dict(zip(got.key, got.value)) == dict(expected)
    on_spark = reader.read_keyed_state("count", "n")  # read by executors, typed: the counts are ints
    assert dict(on_spark.dtypes)["value"] == "bigint"
    assert {r.key: r.value for r in on_spark.collect()} == dict(expected)
    # the diff of two retained checkpoints: each key's count grew by the records read between them
    earlier = _records_before(retained[-2], count)
    before = SavepointReader.read(spark, retained[-2])
    diff = {r.key: (r.change, r.before, r.after) for r in before.diff(latest, "count", "n").collect()}
    assert diff and diff == {
        k: ("added" if k not in earlier else "changed", earlier.get(k), n)
        for k, n in expected.items()
        if earlier.get(k) != n
    }


def test_checkpoints_on_request_come_back_also_when_they_reference_the_changelog(make_env, tmp_path):
    """A checkpoint asked for (REST, client) that turns out to be a changelog checkpoint completes at its barrier,
    before the request is in flight: the request still gets its id; a FULL one uploads everything and the next
    one materializes first."""
    import time

    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 20, **CHANGELOG})
    stream = counting_job(env, 10**9, ck, interval_ms=3_600_000, retained=10, rate=1_500)  # none periodic
    stream.print()
    client = env.execute_async("counting")
    time.sleep(0.5)
    ids = [
        client.trigger_checkpoint(kind).result(timeout=60)
        for kind in ("CONFIGURED", "CONFIGURED", "FULL", "CONFIGURED", "CONFIGURED")
    ]
    client.cancel()
    client.wait(30)
    assert ids == list(range(ids[0], ids[0] + 5))
    kinds = [checkpoint_kinds(str(next(ck.glob(f"*/chk-{i}")))) for i in ids]
    first = {"rocksdb"} if ids[0] == 1 else {"changelog"}  # the job's first (periodic) checkpoint materialized
    assert kinds == [first, {"changelog"}, {None}, {"rocksdb"}, {"changelog"}]


def test_a_checkpoint_directory_named_with_a_double_slash_keeps_what_its_checkpoints_reference(make_env, tmp_path):
    """Retained checkpoints name their files by normalized paths; the changelog compares its own by the same
    form, or it would delete the segments they reference (a path with ``//`` or ``/./`` in it)."""
    env = make_env("local", **{"execution.epoch.max-records": 20, **CHANGELOG})
    stream = counting_job(env, 10**9, f"{(tmp_path / 'x').as_uri()}/..//ck/./", retained=2, rate=1_500)
    dirs = _run_until_checkpoint_id(env, stream, tmp_path / "ck", 8)
    assert len(dirs) == 2 and all(checkpoint_kinds(d) == {"changelog"} for d in dirs)
    for d in dirs:  # every file they reference is there, after the job's end
        load_checkpoint(d)
