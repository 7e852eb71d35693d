"""Key groups: the unit in which keyed state is partitioned, snapshotted and rescaled.

A key's group is ``murmur(hash(key)) % max_parallelism`` with a hash that is stable
across processes and machines (Python's own ``hash`` of ``str`` is salted per process,
so it cannot be used). Operator subtask ``i`` of ``p`` owns the contiguous range of
key groups Flink assigns it (``KeyGroupRangeAssignment``).
"""

from __future__ import annotations

import pickle
import zlib
from dataclasses import dataclass
from typing import Any, Iterator

from sparkpoint.datastream.transformations import DEFAULT_MAX_PARALLELISM

__all__ = [
    "DEFAULT_MAX_PARALLELISM",
    "KeyGroupRange",
    "assign_to_key_group",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "stable_key_hash",
]



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


def stable_key_hash(key: Any) -> int:
    """A 32-bit hash of ``key`` that is the same in every process."""
    t = type(key)
    if t is str:
        data = key.encode("utf-8")
    elif t is int:
        data = str(key).encode()
    else:
        data = pickle.dumps(key, protocol=4)
    return zlib.crc32(data)


def assign_to_key_group(key: Any, max_parallelism: int) -> int:
    """The key group of ``key``."""
    return _murmur_mix(stable_key_hash(key)) % max_parallelism


def compute_operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    return key_group * parallelism // max_parallelism


def compute_key_group_range_for_operator_index(
    max_parallelism: int, parallelism: int, operator_index: int
) -> "KeyGroupRange":
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


class KeyGroupAssigner:
    """Caches the key group of keys seen before (keys repeat: hashing is per new key)."""

    __slots__ = ("max_parallelism", "_cache")

    def __init__(self, max_parallelism: int):
        self.max_parallelism = max_parallelism
        self._cache: dict = {}

    def __call__(self, key: Any) -> int:
        try:
            return self._cache[key]
        except KeyError:
            kg = assign_to_key_group(key, self.max_parallelism)
            if len(self._cache) < 1_000_000:
                self._cache[key] = kg
            return kg
        except TypeError as e:  # unhashable key
            raise TypeError(f"keys must be hashable, got {type(key).__name__}: {key!r}") from e
