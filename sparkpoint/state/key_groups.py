"""Key groups: the unit in which keyed state is partitioned, snapshotted and rescaled.

A key's group is Flink's: ``murmurHash(code) % max_parallelism``, where ``code`` is the hash code Flink sees
for the key as PyFlink hands it over (:mod:`sparkpoint.state.key_hash`: the pickle's, or the declared Java
type's), so keys land on the subtasks PyFlink puts them on. Operator subtask ``i`` of ``p`` owns the
contiguous range of key groups Flink assigns it (``KeyGroupRangeAssignment``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparkpoint.common.configuration import DEFAULT_MAX_PARALLELISM
from sparkpoint.state.canonical_keys import (
    KeyTypeError,
    key_bytes,
    key_kind,
    keys_bytes,
    keys_stored_bytes,
    stored_key_bytes,
)
from sparkpoint.state.key_hash import PICKLED, KeyHash

__all__ = [
    "DEFAULT_MAX_PARALLELISM",
    "key_kind",
    "KeyGroupRange",
    "KeyGroupAssigner",
    "GENERATION",
    "shared_assigner",
    "assign_to_key_group",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "key_bytes",
    "keys_bytes",
    "keys_stored_bytes",
    "stored_key_bytes",
    "str_key_groups",
    "KeyTypeError",
    "KEY_SERIALIZER_VERSION",
    "PICKLED",
]

KEY_SERIALIZER_VERSION = 2
"""How keys were assigned to key groups, recorded in ``_metadata``: 1, by the hash of their canonical bytes;
2, as PyFlink assigns them, by the scheme each keyed operator records (:class:`~sparkpoint.state.key_hash.KeyHash`)."""

_PICKLED_HASH = KeyHash()


def _murmur_mix(code: int) -> int:
    # Flink's MathUtils.murmurHash over one 32-bit int, result non-negative.
    code &= 0xFFFFFFFF
    code = (code * 0xCC9E2D51) & 0xFFFFFFFF
    code = ((code << 15) | (code >> 17)) & 0xFFFFFFFF
    code = (code * 0x1B873593) & 0xFFFFFFFF
    code = ((code << 13) | (code >> 19)) & 0xFFFFFFFF
    code = (code * 5 + 0xE6546B64) & 0xFFFFFFFF
    code ^= 4
    code ^= code >> 16
    code = (code * 0x85EBCA6B) & 0xFFFFFFFF
    code ^= code >> 13
    code = (code * 0xC2B2AE35) & 0xFFFFFFFF
    code ^= code >> 16
    if code >= 0x80000000:  # as a signed Java int, then made non-negative
        code -= 0x100000000
    return code if code >= 0 else (-code if code != -0x80000000 else 0)


def assign_to_key_group(key: Any, max_parallelism: int, key_hash: KeyHash | None = None) -> int:
    """The key group of ``key`` (``key_hash``: of the stream's declared key type; default, pickled keys)."""
    return _murmur_mix((key_hash or _PICKLED_HASH)(key)) % max_parallelism


def str_key_groups(keys: Sequence[Any], max_parallelism: int, key_hash: KeyHash | None = None) -> np.ndarray | None:
    """The key group of every key as an array when every key is a ``str``: each key hashed where it stands,
    repeated or not, at C speed; None if one is not a ``str``."""
    if not set(map(type, keys)) <= {str}:
        return None
    return _murmur_mix_array((key_hash or _PICKLED_HASH).str_codes(keys)) % max_parallelism


def _murmur_mix_array(code: np.ndarray) -> np.ndarray:
    """:func:`_murmur_mix` of every element of a ``uint32`` array (arithmetic wraps at 32 bits)."""
    c = code * np.uint32(0xCC9E2D51)
    c = (c << np.uint32(15)) | (c >> np.uint32(17))
    c = c * np.uint32(0x1B873593)
    c = (c << np.uint32(13)) | (c >> np.uint32(19))
    c = c * np.uint32(5) + np.uint32(0xE6546B64)
    c ^= np.uint32(4)
    c ^= c >> np.uint32(16)
    c = c * np.uint32(0x85EBCA6B)
    c ^= c >> np.uint32(13)
    c = c * np.uint32(0xC2B2AE35)
    c ^= c >> np.uint32(16)
    signed = np.abs(c.view(np.int32).astype(np.int64))  # as a Java int, made non-negative ...
    signed[signed == 0x80000000] = 0  # ... and Integer.MIN_VALUE is 0
    return signed


def compute_operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    return key_group * parallelism // max_parallelism


def compute_key_group_range_for_operator_index(
    max_parallelism: int, parallelism: int, operator_index: int
) -> KeyGroupRange:
    if not 0 < parallelism <= max_parallelism:
        raise ValueError(f"parallelism {parallelism} must be in 1..max parallelism {max_parallelism}")
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism + parallelism - 1) // parallelism - 1
    return KeyGroupRange(start, end)


@dataclass(frozen=True)
class KeyGroupRange:
    """An inclusive range of key groups ``[start, end]``."""

    start: int
    end: int

    def __contains__(self, key_group: int) -> bool:
        return self.start <= key_group <= self.end

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end + 1))

    def __len__(self) -> int:
        return max(0, self.end - self.start + 1)

    def __str__(self) -> str:
        return f"[{self.start}, {self.end}]"


#: Keys a generation of an assigner's cache holds: it keeps at most two generations (the keys of the last two
#: hundred thousand or so looked up), so a worker's cache follows the keys in use and does not grow with every
#: key a long-running job ever saw.
GENERATION = 100_000


class KeyGroupAssigner:
    """Caches the key group of keys seen lately (keys repeat: hashing is per new key). ``cache`` is
    ``{key: key group}`` of the keys looked up lately, for callers that look keys up themselves (and call the
    assigner on a miss); when it holds :data:`GENERATION` keys it becomes ``old``, whose keys move back to
    ``cache`` when looked up, and the generation before is dropped. ``key_hash``: the stream's
    (:class:`~sparkpoint.state.key_hash.KeyHash` of its declared key type; default, pickled keys). Equal keys
    (``1``, ``1.0``) share a cache entry, so their hash must agree: :class:`KeyHash` sees to it."""

    __slots__ = ("max_parallelism", "cache", "old", "key_hash")

    def __init__(self, max_parallelism: int, key_hash: KeyHash | None = None):
        self.max_parallelism = max_parallelism
        self.cache: dict = {}
        self.old: dict = {}
        self.key_hash = key_hash or _PICKLED_HASH

    def __call__(self, key: Any) -> int:
        try:
            return self.cache[key]
        except KeyError:
            kg = self.old.get(key)
            if kg is None:
                kg = assign_to_key_group(key, self.max_parallelism, self.key_hash)
            self._keep({key: kg})
            return kg
        except TypeError:  # unhashable: key_bytes says why and what to use instead
            key_bytes(key)
            raise

    def learn(self, keys: Sequence[Any]) -> None:
        """Cache the groups of the distinct ``keys`` not cached yet, hashed together."""
        self.assign_all(keys)

    def assign_all(self, keys: Sequence[Any]) -> dict[Any, int]:
        """``{key: key group}`` of the distinct ``keys``, the new ones hashed together."""
        cache, old = self.cache, self.old
        found: dict = {}
        new: list = []
        back: dict = {}  # keys of the old generation, cached again
        try:
            for k in dict.fromkeys(keys):
                kg = cache.get(k)
                if kg is None:
                    kg = old.get(k)
                    if kg is None:
                        new.append(k)
                        continue
                    back[k] = kg
                found[k] = kg
        except TypeError:  # unhashable: key_bytes says why and what to use instead
            for k in keys:
                key_bytes(k)
            raise
        if new:
            groups = self.groups(new)
            found.update(zip(new, groups))
            back.update(zip(new, groups))
        if back:
            self._keep(back)
        return found

    def groups(self, keys: Sequence[Any]) -> list[int]:
        """The group of every key, hashed together (at C speed but for a few keys), without the cache."""
        if len(keys) < 32:
            return [_murmur_mix(code) % self.max_parallelism for code in map(self.key_hash, keys)]
        hashed = str_key_groups(keys, self.max_parallelism, self.key_hash)
        if hashed is None:
            hashed = _murmur_mix_array(self.key_hash.codes(keys)) % self.max_parallelism
        return hashed.tolist()

    def _keep(self, groups: dict) -> None:
        """Cache ``{key: key group}``, the current generation made the old one first if they do not fit."""
        if len(self.cache) + len(groups) > GENERATION:
            self.old, self.cache = self.cache, {}
            if len(groups) > GENERATION:
                groups = dict(itertools.islice(groups.items(), GENERATION))
        self.cache.update(groups)


_SHARED: dict[tuple[int, str], KeyGroupAssigner] = {}


def shared_assigner(max_parallelism: int, key_hash: KeyHash | None = None) -> KeyGroupAssigner:
    """The process's :class:`KeyGroupAssigner` of ``max_parallelism`` and ``key_hash``: every route and keyed
    backend of a worker shares its cache, so a key is hashed once per process, not once per epoch (or per
    buffer of records) and again by the backend that keeps its state."""
    kh = key_hash or _PICKLED_HASH
    try:
        return _SHARED[(max_parallelism, kh.scheme)]
    except KeyError:
        return _SHARED.setdefault((max_parallelism, kh.scheme), KeyGroupAssigner(max_parallelism, kh))
