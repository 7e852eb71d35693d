"""Key groups: the unit in which keyed state is partitioned, snapshotted and rescaled.

A key's group is ``murmur(crc32(key_bytes(key))) % max_parallelism``: ``key_bytes`` is a
deterministic serializer that agrees with ``==`` (``1``, ``1.0`` and ``True`` are one key)
and is the same in every process and machine (Python's own ``hash`` of ``str`` is salted
per process, and a frozenset's iteration order follows it, so neither can be used).
Operator subtask ``i`` of ``p`` owns the contiguous range of key groups Flink assigns it
(``KeyGroupRangeAssignment``).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Any

import numpy as np

from sparkpoint.common.configuration import DEFAULT_MAX_PARALLELISM
from sparkpoint.errors import StateError

__all__ = [
    "DEFAULT_MAX_PARALLELISM",
    "key_kind",
    "KeyGroupRange",
    "assign_to_key_group",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "stable_key_hash",
    "key_bytes",
    "keys_bytes",
    "keys_stored_bytes",
    "stored_key_bytes",
    "key_group_of_bytes",
    "key_groups_of_bytes",
    "str_key_groups",
    "KeyTypeError",
    "KEY_SERIALIZER_VERSION",
]

KEY_SERIALIZER_VERSION = 1
"""The version of :func:`key_bytes` that assigned keys to key groups; recorded in ``_metadata``."""


class KeyTypeError(StateError, TypeError):
    """A key has no deterministic form, so it cannot be assigned to a key group."""


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
    """A 32-bit hash of ``key`` that is the same in every process and agrees with ``==``."""
    return zlib.crc32(key_bytes(key))


def key_bytes(key: Any) -> bytes:
    """The canonical bytes of a key: equal keys (``1 == 1.0 == True``) give equal bytes.

    Keyed state needs a deterministic key serializer, as in Flink: the same key must land in
    the same key group in every process, whatever ``PYTHONHASHSEED`` is. Supported keys are
    ``None``, ``bool``/``int``/``float``/``Decimal`` (equal numbers are one key), ``str``,
    ``bytes``, ``datetime``/``date``/``time``/``timedelta``, ``Enum`` members, frozen
    dataclasses of supported fields, and tuples (``Row`` included) and frozensets of
    supported keys. Anything else raises :class:`KeyTypeError`.
    """
    t = type(key)
    try:
        if t is str:
            return key.encode("utf-8")  # the common cases first, with the bytes they always had
        if t is int:
            return str(key).encode()
        return _encode(key, key)
    except UnicodeEncodeError as e:  # a lone surrogate (text decoded with errors="surrogateescape", say)
        raise KeyTypeError(
            f"key {key!r} holds text with no UTF-8 form ({e.reason} at position {e.start} of {e.object!r}), so it "
            f"has no deterministic bytes to hash; decode its source with errors='replace', or key by bytes"
        ) from None


def key_kind(key: Any) -> str:
    """The family of a key as :func:`key_bytes` sees it: keys of one family can equal each other, keys of two
    never do (``1``, ``1.0`` and ``True`` are all ``number``; ``"1"`` is ``str``). Tuples (rows) name their
    elements' families."""
    if isinstance(key, str):
        return "str"
    if isinstance(key, (int, float, Decimal)):
        return "number"
    if isinstance(key, tuple):
        return "tuple<" + ", ".join(key_kind(k) for k in key) + ">"
    if isinstance(key, Enum):
        return f"{type(key).__qualname__} (Enum)"
    return "None" if key is None else type(key).__qualname__


def keys_bytes(keys: Sequence[Any]) -> list[bytes]:
    """:func:`key_bytes` of every key; ``str`` keys (the common case) in one C call."""
    raw = _str_keys_bytes(keys)
    return [key_bytes(k) for k in keys] if raw is None else raw


def _str_keys_bytes(keys: Sequence[Any]) -> list[bytes] | None:
    """The UTF-8 of ``keys`` if every one is a ``str`` (a subclass too: its bytes are its UTF-8 as well), in one
    C call; None if one is not."""
    try:
        return list(map(str.encode, keys))
    except (TypeError, UnicodeEncodeError):  # not all str; or one without UTF-8 form: key_bytes names it
        return None


def stored_key_bytes(key: Any, canonical: bytes) -> bytes:
    """The bytes a key is stored under in a database (the rocksdb backend's key format 2), from its
    :func:`key_bytes` ``canonical``: those bytes, tagged where keys of different types would meet. A
    whole number's canonical bytes are its digits, the bytes of the ``str`` of those digits too, so they
    get the tag ``\\x00I``; a ``str`` that starts with NUL, as every other type's bytes do, gets ``\\x00S``.
    Equal keys (``1 == 1.0 == True``) still share their bytes; unequal ones (``"1"``, ``1``) never do."""
    if isinstance(key, str):
        return canonical if canonical[:1] != b"\x00" else b"\x00S" + canonical
    return canonical if canonical[:1] == b"\x00" else b"\x00I" + canonical


def keys_stored_bytes(keys: Sequence[Any]) -> tuple[list[bytes], list[bytes]]:
    """``(canonical bytes, stored bytes)`` of ``keys`` (:func:`key_bytes`, :func:`stored_key_bytes`): for
    ``str`` keys that do not start with NUL (the common case), one list, made in one C call."""
    canonical = _str_keys_bytes(keys)
    if canonical is None:  # not all of them str
        canonical = [key_bytes(k) for k in keys]
        return canonical, list(map(stored_key_bytes, keys, canonical))
    if canonical and min(canonical) < b"\x01":  # some start with NUL (or are empty): the least bytes do
        return canonical, [c if c[:1] != b"\x00" else b"\x00S" + c for c in canonical]
    return canonical, canonical


def _encode(key: Any, whole: Any) -> bytes:
    if key is None:
        return b"\x00N"
    if isinstance(key, str):
        return key.encode("utf-8") if key is whole else b"\x00s" + _sized(key.encode("utf-8"))
    if isinstance(key, (int, float, Decimal)):  # bool and IntEnum too: they equal ints
        return _number(key, key is whole)
    if isinstance(key, bytes):
        return b"\x00b" + _sized(key)
    if isinstance(key, tuple):
        return b"\x00t" + _sized(b"".join(_sized(_encode(k, whole)) for k in key))
    if isinstance(key, frozenset):
        return b"\x00f" + _sized(b"".join(sorted(_sized(_encode(k, whole)) for k in key)))
    if isinstance(key, Enum):
        return b"\x00e" + _sized(f"{type(key).__module__}.{type(key).__qualname__}.{key.name}".encode())
    if isinstance(key, datetime.datetime):
        if key.tzinfo is not None and key.utcoffset() is not None:  # equal instants are equal keys
            key = key.astimezone(datetime.UTC).replace(tzinfo=None)
            return b"\x00Z" + key.isoformat().encode()
        return b"\x00D" + key.isoformat().encode()
    if isinstance(key, (datetime.date, datetime.time)):
        return b"\x00d" + type(key).__name__.encode() + key.isoformat().encode()
    if isinstance(key, datetime.timedelta):
        return b"\x00T" + _number(key // datetime.timedelta(microseconds=1), False)
    params = getattr(key, "__dataclass_params__", None)
    if params is not None and not isinstance(key, type) and params.frozen and params.eq:
        name = f"{type(key).__module__}.{type(key).__qualname__}".encode()
        fields = tuple(getattr(key, f.name) for f in dataclasses.fields(key) if f.compare)
        return b"\x00c" + _sized(name) + _encode(fields, whole)
    raise KeyTypeError(
        f"key {whole!r} cannot be used as a key"
        + (f" (it holds {key!r} of type {type(key).__name__})" if key is not whole else f" (type {type(key).__name__})")
        + ": keys must have a deterministic form, so that equal keys land in the same key group in every "
        "process. Use str, int, float, Decimal, bool, bytes, None, date/time values, Enum members, frozen "
        "dataclasses, or tuples/Rows/frozensets of these (e.g. return str(key) or a tuple of fields from the key "
        "selector)."
    )


def _number(n: Any, whole: bool) -> bytes:
    """Equal numbers give equal bytes: an integral value is its int, others their exact ratio."""
    if isinstance(n, float) and not math.isfinite(n):
        if math.isnan(n):
            raise KeyTypeError("NaN cannot be a key: it is not equal to itself")
        return b"\x00i" + (b"+" if n > 0 else b"-")
    if isinstance(n, Decimal) and not n.is_finite():
        if n.is_nan():
            raise KeyTypeError("NaN cannot be a key: it is not equal to itself")
        return b"\x00i" + (b"+" if n > 0 else b"-")
    num, den = (int(n), 1) if isinstance(n, int) else n.as_integer_ratio()
    text = str(num) if den == 1 else f"{num}/{den}"
    return text.encode() if whole and den == 1 else b"\x00n" + _sized(text.encode())


def _sized(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def assign_to_key_group(key: Any, max_parallelism: int) -> int:
    """The key group of ``key``."""
    return _murmur_mix(stable_key_hash(key)) % max_parallelism


def key_group_of_bytes(canonical: bytes, max_parallelism: int) -> int:
    """The key group of a key whose :func:`key_bytes` are ``canonical`` (saves serializing it twice)."""
    return _murmur_mix(zlib.crc32(canonical)) % max_parallelism


def key_groups_of_bytes(canonicals: Sequence[bytes], max_parallelism: int) -> list[int]:
    """:func:`key_group_of_bytes` of many keys: one C call per key (CRC32), the murmur mix over them all."""
    if len(canonicals) < 32:
        return [_murmur_mix(zlib.crc32(c)) % max_parallelism for c in canonicals]
    return _groups_array(canonicals, max_parallelism).tolist()


def str_key_groups(keys: Sequence[Any], max_parallelism: int) -> np.ndarray | None:
    """The key group of every key as an array when every key is a ``str`` (its canonical bytes are its UTF-8):
    each key hashed where it stands, repeated or not, at C speed; None if one is not a ``str``."""
    canonical = _str_keys_bytes(keys)
    return None if canonical is None else _groups_array(canonical, max_parallelism)


def _groups_array(canonicals: Sequence[bytes], max_parallelism: int) -> np.ndarray:
    codes = np.fromiter(map(zlib.crc32, canonicals), dtype=np.uint32, count=len(canonicals))
    return _murmur_mix_array(codes) % max_parallelism


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


_MAX_CACHED = 1_000_000  # keys whose group an assigner keeps


class KeyGroupAssigner:
    """Caches the key group of keys seen before (keys repeat: hashing is per new key). ``cache`` is
    ``{key: key group}`` of at most a million keys, for callers that look keys up themselves."""

    __slots__ = ("max_parallelism", "cache")

    def __init__(self, max_parallelism: int):
        self.max_parallelism = max_parallelism
        self.cache: dict = {}

    def __call__(self, key: Any) -> int:
        try:
            return self.cache[key]
        except KeyError:
            kg = assign_to_key_group(key, self.max_parallelism)
            if len(self.cache) < _MAX_CACHED:
                self.cache[key] = kg
            return kg
        except TypeError:  # unhashable: key_bytes says why and what to use instead
            key_bytes(key)
            raise

    def learn(self, keys: Sequence[Any]) -> None:
        """Cache the groups of the distinct ``keys`` not cached yet, hashed together (as far as there is room)."""
        cache = self.cache
        try:
            new = [k for k in dict.fromkeys(keys) if k not in cache]
        except TypeError:  # unhashable: key_bytes says why and what to use instead
            for k in keys:
                key_bytes(k)
            raise
        if new:
            self._hash_new(new)

    def assign_all(self, keys: Sequence[Any]) -> dict[Any, int]:
        """``{key: key group}`` of the distinct ``keys``, the new ones hashed together."""
        cache = self.cache
        found: dict = {}
        new: list = []
        try:
            for k in dict.fromkeys(keys):
                kg = cache.get(k)
                if kg is None:
                    new.append(k)
                else:
                    found[k] = kg
        except TypeError:  # unhashable: key_bytes says why and what to use instead
            for k in keys:
                key_bytes(k)
            raise
        if new:
            found.update(zip(new, self._hash_new(new)))
        return found

    def _hash_new(self, new: list) -> list[int]:
        """The groups of keys not cached, hashed together; cached as far as there is room."""
        groups = key_groups_of_bytes(keys_bytes(new), self.max_parallelism)
        room = _MAX_CACHED - len(self.cache)
        if room > 0:
            self.cache.update(zip(new[:room], groups[:room]))
        return groups
