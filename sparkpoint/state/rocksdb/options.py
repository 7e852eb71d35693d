"""How the rocksdb backend's databases are tuned: memory, write buffers, compaction, per-epoch limits.

:class:`RocksDBOptions` holds them; :func:`options_from_config` reads Flink's
``state.backend.rocksdb.*`` keys (and a few of our own) into it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import rocksdict

from sparkpoint.common.configuration import parse_boolean, parse_memory_bytes

__all__ = ["RocksDBOptions", "OPTION_KEYS", "COMPACTION_STYLES", "options_from_config"]

#: Flink's RocksDB options that map onto ours: the memory of a worker's databases, buffers, limits.
OPTION_KEYS = {
    "state.backend.rocksdb.memory.fixed-per-slot": "memory_bytes",
    "state.backend.rocksdb.memory.fixed-per-tm": "memory_bytes",
    "state.backend.rocksdb.block.cache-size": "memory_bytes",
    "state.backend.rocksdb.memory.write-buffer-ratio": "write_buffer_ratio",
    "state.backend.rocksdb.writebuffer.size": "write_buffer_bytes",
    "state.backend.rocksdb.writebuffer.count": "max_write_buffers",
    "state.backend.rocksdb.files.open": "max_open_files",
    "state.backend.rocksdb.compaction.style": "compaction_style",
    "state.backend.rocksdb.compaction.level0-file-num-compaction-trigger": "level0_compaction_trigger",
    "state.backend.rocksdb.memory.partitioned-index-filters": "partitioned_index_filters",
    "sparkpoint.rocksdb.epoch-cache.entries": "max_cached_entries",  # ours: decoded entries per epoch
    "sparkpoint.rocksdb.ttl-sweep.entries": "ttl_sweep_entries",  # ours: entries checked for expiry
    "sparkpoint.rocksdb.close.compaction-wait-ms": "close_compaction_wait_ms",  # ours: see StateStore.close
}
_COUNTS = (
    "max_write_buffers",
    "max_open_files",
    "max_cached_entries",
    "ttl_sweep_entries",
    "level0_compaction_trigger",
    "close_compaction_wait_ms",
)
#: Flink's ``state.backend.rocksdb.compaction.style`` values; FIFO drops old files, i.e. state, so it is refused.
COMPACTION_STYLES = ("LEVEL", "UNIVERSAL")


@dataclass(frozen=True)
class RocksDBOptions:
    """Memory of the databases of one worker process, their compaction, and per-epoch limits.

    As Flink's fixed managed memory per slot: ``memory_bytes`` bounds the block cache *and*
    the write buffers of every database the worker opens (one LRU cache and one write-buffer
    manager per process, ``write_buffer_ratio`` of it for write buffers, charged to the cache);
    the files' indexes and filters are outside it unless partitioned into it (below).
    256 MB by default: an epoch's point lookups of keys spread over a large state miss a small
    cache, and a miss reads and decompresses a block (a task's multi-get of 25,000 keys in 2.5M
    took 230-290 ms through 64 MB and 140-185 ms through 256 MB, measured alternately).

    The index and the bloom filter of every SST file are held by its open reader, outside the cache and
    outside ``memory_bytes`` (about 2 bytes a stored key: 4.8 MB for a 2.5M-key database; every file
    stays open unless ``state.backend.rocksdb.files.open`` limits them), as in Flink without managed
    memory. An epoch's multi-get checks a key against the filter of every sorted run, and a probe of a
    filter in the cache is a cache lookup of its own: with partitioned index and filters in the cache,
    the multi-get of 25,000 keys in 2.5M over five sorted runs took 124-189 ms, with them held by the
    readers 93-134 ms (measured alternately). Flink's
    ``state.backend.rocksdb.memory.partitioned-index-filters: true`` puts them, partitioned, in the cache
    instead, so the cache bounds them too (for a state whose filters would not fit beside it).

    Compaction is **universal** by default (Flink's default is level). A task opens its
    database for an epoch and closes it at the end, and every checkpoint flushes the memtable:
    each one adds a small L0 file. Level compaction merges L0 into L1 in the background, which
    the close at the end of a short epoch cancels, so L0 files pile up and every point lookup
    (an epoch's multi-get) reads all of them; when it does run, it rewrites the whole L1 (keys
    are random), which the next incremental checkpoint uploads again. Universal compaction
    merges the small recent files among themselves as soon as there are
    ``level0_compaction_trigger`` of them and leaves the large old run alone until the newer
    runs reach its size, so lookups stay flat and checkpoints stay small.
    """

    memory_bytes: int = 256 * 1024 * 1024  # Flink's default managed memory of a slot is ~512 MB
    write_buffer_ratio: float = 0.5
    write_buffer_bytes: int = 8 * 1024 * 1024  # one memtable
    max_write_buffers: int = 2
    compaction_style: str = "UNIVERSAL"
    level0_compaction_trigger: int | None = None  # sorted runs (L0 files) that start a compaction: 4 / 10
    max_open_files: int = -1
    # entries an epoch keeps decoded before it spills changes to the DB (~350 bytes each). A spill writes the changes
    # so far and reads again what is touched after it: W3's tasks touch ~350k keys in their largest epochs, and at
    # 250k spent ~2 s more CPU in a 3M-event run (RocksDB's threads 2.0 -> 1.35 s) for a worker peak 64 MB lower
    max_cached_entries: int = 500_000
    ttl_sweep_entries: int = 10_000  # stored entries an epoch checks for expiry
    close_compaction_wait_ms: int = 1_000  # how long a closing database lets a running compaction finish
    partitioned_index_filters: bool = False  # index and filters partitioned, in the cache (else by the readers)

    def __post_init__(self) -> None:
        style = self.compaction_style.strip().upper()
        if style not in COMPACTION_STYLES:
            raise ValueError(
                f"state.backend.rocksdb.compaction.style: {self.compaction_style!r} is not one of "
                f"{', '.join(COMPACTION_STYLES)} (FIFO compaction would delete state)"
            )
        object.__setattr__(self, "compaction_style", style)

    @property
    def compaction_trigger(self) -> int:
        if self.level0_compaction_trigger is not None:
            return self.level0_compaction_trigger
        # level: with random keys each L0 -> L1 compaction rewrites the whole level, which an incremental
        # checkpoint then uploads again, so compact less often
        return 4 if self.compaction_style == "UNIVERSAL" else 10

    def to_rocksdb(self) -> rocksdict.Options:
        opts = rocksdict.Options(raw_mode=True)
        opts.create_if_missing(True)
        table = rocksdict.BlockBasedOptions()
        cache, write_buffers = _shared_memory(self.memory_bytes, self.write_buffer_ratio)
        table.set_block_cache(cache)
        table.set_bloom_filter(10, False)
        if self.partitioned_index_filters:
            # index and filters in the bounded cache, partitioned so that a lookup loads small pieces (a whole
            # filter of a large SST file would not fit a cache shard and be read again for every lookup);
            # the top level stays pinned. Otherwise each file's reader holds its whole index and filter.
            table.set_index_type(rocksdict.BlockBasedIndexType.two_level_index_search())
            table.set_partition_filters(True)
            table.set_metadata_block_size(4096)
            table.set_cache_index_and_filter_blocks(True)
            table.set_pin_top_level_index_and_filter(True)
            table.set_pin_l0_filter_and_index_blocks_in_cache(True)
        opts.set_block_based_table_factory(table)
        opts.set_write_buffer_size(
            min(self.write_buffer_bytes, max(1 << 20, int(self.memory_bytes * self.write_buffer_ratio / 2)))
        )
        opts.set_max_write_buffer_number(self.max_write_buffers)
        if self.compaction_style == "UNIVERSAL":
            opts.set_compaction_style(rocksdict.DBCompactionStyle.universal())
        trigger = self.compaction_trigger
        opts.set_level_zero_file_num_compaction_trigger(trigger)
        opts.set_level_zero_slowdown_writes_trigger(max(20, 2 * trigger))
        opts.set_level_zero_stop_writes_trigger(max(36, 4 * trigger))
        opts.set_write_buffer_manager(write_buffers)
        opts.set_max_open_files(self.max_open_files)
        opts.set_keep_log_file_num(2)
        opts.set_max_background_jobs(2)
        return opts


def options_from_config(options: RocksDBOptions, config: Mapping[str, Any]) -> RocksDBOptions:
    """``options`` with the values ``config`` sets under :data:`OPTION_KEYS` (Flink's names and units)."""
    fields: dict[str, Any] = {}
    for key, field_name in OPTION_KEYS.items():
        value = config.get(key)
        if value in (None, ""):
            continue
        try:
            fields[field_name] = (
                int(value)
                if field_name in _COUNTS
                else float(value)
                if field_name == "write_buffer_ratio"
                else str(value)
                if field_name == "compaction_style"
                else parse_boolean(value)
                if field_name == "partitioned_index_filters"
                else parse_memory_bytes(value)
            )
        except ValueError as e:
            raise ValueError(f"{key}: {value!r} is not valid ({e})") from None
    return replace(options, **fields)


_MEMORY: dict[tuple[int, float], tuple[rocksdict.Cache, rocksdict.WriteBufferManager]] = {}


def _shared_memory(capacity: int, write_buffer_ratio: float) -> tuple[rocksdict.Cache, rocksdict.WriteBufferManager]:
    """One LRU block cache and one write-buffer manager (charging the cache) per process, shared by every
    database a worker opens: their memory together stays within ``capacity`` (the files' indexes and filters
    too when they are partitioned into the cache)."""
    shared = _MEMORY.get((capacity, write_buffer_ratio))
    if shared is None:
        cache = rocksdict.Cache(capacity)
        manager = rocksdict.WriteBufferManager.new_write_buffer_manager_with_cache(
            int(capacity * write_buffer_ratio), False, cache
        )
        shared = _MEMORY[(capacity, write_buffer_ratio)] = (cache, manager)
    return shared
