"""The hash code Flink sees for a key: where PyFlink puts a key, sparkpoint puts it too.

PyFlink's ``key_by`` hands each key to the JVM inside a one-field ``Row`` and Flink assigns the key group
from that row's ``hashCode()``. Without a declared key type the field is the key's pickle (a Java
``byte[]``: ``pickle.dumps(key)``, protocol 5); with ``key_type=Types.STRING()``, ``Types.INT()``,
``Types.TUPLE([...])``, ``Types.ROW([...])`` ... it is the Java value of that type. :class:`KeyHash` computes
the same 32-bit code in Python, so that key groups, subtask indices and ``N>`` print prefixes are PyFlink's.

One rule comes first: keys equal in Python (``1 == 1.0 == True``, a ``Row`` and the equal tuple, a ``str``
subclass and its text) are one key in sparkpoint and so get one code. The pickle is therefore taken of the
key's plain form: a whole number as an ``int`` (where PyFlink pickles ``True`` or ``2.0`` as such), tuples and
rows as plain tuples, text as ``str``, a ``Decimal`` as the equal ``int`` or ``float``. Keys of a declared
type sparkpoint does not model in its Java form are hashed as undeclared keys (pickled). Keys whose pickle is
not a function of their value (frozensets, datetimes, other ``Decimal`` s, enums, dataclasses) fall back to the
hash of their canonical bytes (:func:`~sparkpoint.state.canonical_keys.key_bytes`).
"""

from __future__ import annotations

import functools
import math
import operator
import pickle
import struct
import zlib
from collections.abc import Callable, Sequence
from decimal import Decimal
from functools import partial
from typing import Any

import numpy as np

from sparkpoint.state.canonical_keys import NUMPY_NUMBERS as _NUMPY_NUMBERS
from sparkpoint.state.canonical_keys import key_bytes

__all__ = ["KeyHash", "key_hash", "PICKLED", "describe_key_hash", "older_key_hash"]

PICKLED = "pickle"
"""The scheme of keys without a declared type (and of ``Types.PICKLED_BYTE_ARRAY()``)."""

_PROTOCOL = 5  # the protocol PyFlink's Python workers pickle keys with (recorded), fixed so that every Python agrees
_ROW_OF = 62  # Row.of(x).hashCode() == 62 + x.hashCode() for a non-null x (RowUtils.deepHashCodeRow)
_NULL_ROW = 31  # Row.of(null).hashCode()
_MASK = 0xFFFFFFFF


class _Fallback(Exception):
    """A key without a value-determined Java form: hashed by its canonical bytes."""


def _i32(code: int) -> int:
    code &= _MASK
    return code - 0x100000000 if code >= 0x80000000 else code


# -- Java hashCode()s --------------------------------------------------------------------------------------


def _string_hash(text: str) -> int:
    """``java.lang.String.hashCode()``: over UTF-16 code units."""
    units = text.encode("utf-16-be")
    code = 0
    for (unit,) in struct.iter_unpack(">H", units):
        code = (31 * code + unit) & _MASK
    return code


def _bytes_hash(data: bytes) -> int:
    """``java.util.Arrays.hashCode(byte[])``: over signed bytes, from 1."""
    code = 1
    for b in data:
        code = (31 * code + (b - 256 if b > 127 else b)) & _MASK
    return code


def _long_hash(n: int) -> int:
    bits = n & 0xFFFFFFFFFFFFFFFF
    return (bits ^ (bits >> 32)) & _MASK


def _double_hash(x: float) -> int:
    (bits,) = struct.unpack(">Q", struct.pack(">d", x))
    return (bits ^ (bits >> 32)) & _MASK


def _float_hash(x: float) -> int:
    try:
        (bits,) = struct.unpack(">I", struct.pack(">f", x))
    except OverflowError:  # beyond single precision: no Java Float of it; hashed as an undeclared key
        raise _Fallback from None
    return bits


def _finite(x: Any) -> bool:
    return x.is_finite() if isinstance(x, Decimal) else math.isfinite(x)


def _integral(key: Any) -> int:
    """``key`` as an ``int`` if it is a whole number (``bool``, ``2.0``, ``Decimal(3)``); else :class:`_Fallback`."""
    if isinstance(key, _NUMPY_NUMBERS):
        key = key.item()
    if isinstance(key, int):
        return int(key)
    if isinstance(key, (float, Decimal)) and _finite(key) and key == int(key):
        return int(key)
    raise _Fallback


def _number(key: Any) -> float:
    """``key`` as a ``float`` (a number that fits one); else :class:`_Fallback`."""
    if isinstance(key, _NUMPY_NUMBERS):
        key = key.item()
    if isinstance(key, (int, float, Decimal)) and not (isinstance(key, float) and key != key):
        try:
            return float(key)
        except (OverflowError, ValueError):
            pass
    raise _Fallback


def _boolean_hash(k: Any) -> int:
    return (1231 if k else 1237) if isinstance(k, (int, float, Decimal)) and k in (0, 1) else _fail()


def _typed(type_info: Any) -> Callable[[Any], int]:
    """The Java ``hashCode()`` of a key converted to ``type_info`` (an unsigned 32-bit value); raises
    :class:`_Fallback` for a key that does not fit the type, :class:`LookupError` for a type not modelled."""
    name = getattr(type_info, "name", None)
    if name == "STRING":
        return lambda k: _string_hash(_text(str.__str__(k))) if isinstance(k, str) else _fail()
    if name in ("INT", "SHORT", "BYTE"):
        return lambda k: _integral(k) & _MASK
    if name == "LONG":
        return lambda k: _long_hash(_integral(k))
    if name == "BOOLEAN":
        return lambda k: _boolean_hash(k.item() if isinstance(k, _NUMPY_NUMBERS) else k)
    if name == "DOUBLE":
        return lambda k: _double_hash(_number(k) + 0.0)  # -0.0 is 0.0: they are equal keys
    if name == "FLOAT":
        return lambda k: _float_hash(_number(k) + 0.0)
    if name == "TUPLE":
        fields = [_typed(t) for t in type_info.children]
        return partial(_fields_hash, fields, 0, 0)
    if name == "ROW":
        fields = [_typed(t) for t in type_info.children]
        return partial(_fields_hash, fields, 1, 31)
    raise LookupError(name)


def _fail() -> int:
    raise _Fallback


def _fields_hash(fields: list, start: int, offset: int, key: Any) -> int:
    """``h = 31 * h + hash(field)`` over a tuple's or row's fields from ``start`` (a null field adds 0, another
    ``offset + hash``): ``TupleN.hashCode()`` is ``(0, 0)``, an insert ``Row``'s ``deepHashCodeArray`` ``(1, 31)``."""
    if not isinstance(key, tuple) or len(key) != len(fields):
        raise _Fallback
    code = start
    for f, v in zip(fields, key):
        code = (31 * code + (0 if v is None else offset + f(v))) & _MASK
    return code


# -- pickled keys --------------------------------------------------------------------------------------------


def _plain(key: Any, seen: dict) -> Any:
    """The plain form of ``key`` whose pickle PyFlink would hash (see the module's docstring); equal text and
    byte strings inside one key become one object, so the pickle's memo references do not depend on which
    equal objects the key happened to hold."""
    t = type(key)
    if t is str:
        return seen.setdefault((t, key), _text(key))
    if t is bytes:
        return seen.setdefault((t, key), key)
    if t is int or key is None:
        return key
    if isinstance(key, tuple):
        return seen.setdefault((tuple, key), tuple(_plain(k, seen) for k in key))
    if isinstance(key, str):
        return _plain(str.__str__(key), seen)
    if isinstance(key, bytes):
        return _plain(bytes(key), seen)
    if isinstance(key, _NUMPY_NUMBERS):  # numpy's scalars: the Python number they hold (and equal)
        return _plain(key.item(), seen)
    if isinstance(key, (int, float, Decimal)):
        if not _finite(key):
            if key != key:
                raise _Fallback  # NaN is no key: key_bytes says so
            return float(key)  # inf and -inf (a Decimal's too): floats that are no whole number
        if key == int(key):
            return int(key)
        if isinstance(key, float):
            return float(key)  # a subclass (numpy's float64) pickles as itself
        as_float = float(key)
        if Decimal(as_float) == key:
            return as_float  # a Decimal equal to a float is that float's key
    raise _Fallback


def _text(text: str) -> str:
    """``text``, if it has a UTF-8 form: keyed state is stored under its canonical bytes, so a key with a lone
    surrogate is refused where it is first met (:func:`key_bytes` names it)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        key_bytes(text)
        raise
    return text


def _pickle_of(key: Any) -> bytes:
    """The pickle PyFlink hashes for ``key``; :class:`_Fallback` for ``None`` (a null field, not a pickle) and
    keys without a pickle of their value."""
    if type(key) is str:
        return pickle.dumps(_text(key), _PROTOCOL)
    if key is None:
        raise _Fallback
    return pickle.dumps(_plain(key, {}), _PROTOCOL)


def _powers(n: int) -> np.ndarray:
    """``31 ** i mod 2**32`` for ``i < n``, as ``uint64``."""
    global _POWERS
    p = _POWERS
    if len(p) < n:
        p = np.ones(max(n, 2 * len(p)), dtype=np.uint64)
        for i in range(1, len(p)):  # grows rarely: to the longest key seen
            p[i] = (int(p[i - 1]) * 31) & _MASK
        _POWERS = p  # another thread may swap in its own: each uses the array it made or read
    return p


_POWERS = np.ones(1, dtype=np.uint64)


def _polys(chunks: Sequence[bytes], dtype: str, sizes: np.ndarray | None = None) -> np.ndarray:
    """``sum(unit[i] * 31 ** (n - 1 - i))`` over each chunk's ``n`` units (``i1``: signed bytes, ``>u2``: UTF-16
    code units) for every chunk at once, modulo ``2**64`` (callers keep 32 bits): chunks of one length are one
    matrix, so the work is a few array operations per distinct length. ``sizes``: the chunks' byte lengths,
    if known."""
    width = np.dtype(dtype).itemsize
    if not chunks:
        return np.zeros(0, dtype=np.uint64)
    if sizes is None:
        sizes = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
    lengths = sizes // width if width > 1 else sizes
    order = np.argsort(lengths, kind="stable")
    ordered = [chunks[int(order[0])]] if len(chunks) == 1 else operator.itemgetter(*order.tolist())(chunks)
    units = np.frombuffer(b"".join(ordered), dtype=dtype).astype(np.int64).view(np.uint64)
    distinct, firsts, counts = np.unique(lengths[order], return_index=True, return_counts=True)
    pw = _powers(int(distinct[-1]) + 1 if len(distinct) else 1)
    out = np.zeros(len(chunks), dtype=np.uint64)
    offset = 0
    for size, first, count in zip(distinct.tolist(), firsts.tolist(), counts.tolist()):
        if size:
            block = units[offset : offset + size * count].reshape(count, size)
            out[order[first : first + count]] = (block * pw[size - 1 :: -1]).sum(axis=1, dtype=np.uint64)
            offset += size * count
    return out


def _short_str_heads() -> np.ndarray:
    """For a ``str`` of ``n < 256`` UTF-8 bytes, whose pickle is ``head(n) + utf8 + b"\\x94."``: the hash of
    ``head(n)`` (from 1), times ``31 ** (n + 2)``, plus the hash of the tail and Row.of's 62 (mod ``2**32``)."""
    pw = _powers(260)
    tail = _poly_int(b"\x94.")
    heads = [_bytes_hash(pickle.dumps("x" * n, _PROTOCOL)[: -(n + 2)]) for n in range(256)]
    return np.array([(h * int(pw[n + 2]) + tail + _ROW_OF) & _MASK for n, h in enumerate(heads)], dtype=np.uint64)


def _poly_int(data: bytes) -> int:
    return (_bytes_hash(data) - int(_powers(len(data) + 1)[len(data)])) & _MASK  # the hash from 0, not 1


_STR_HEADS: np.ndarray | None = None


def _pickled_str_codes(keys: Sequence[str]) -> np.ndarray:
    """The codes of pickled ``str`` keys at C speed: their pickles' hashes from their UTF-8 bytes' (a pickle is a
    fixed head and tail around them for keys under 256 bytes; longer ones are pickled and hashed one by one)."""
    global _STR_HEADS
    if _STR_HEADS is None:
        _STR_HEADS = _short_str_heads()
    try:
        utf8 = list(map(str.encode, keys))
    except UnicodeEncodeError:  # a lone surrogate: refused, naming the key
        for k in keys:
            _text(k)
        raise
    sizes = np.fromiter(map(len, utf8), dtype=np.int64, count=len(utf8))
    long = sizes >= 256
    codes = _STR_HEADS[np.minimum(sizes, 255)] + _polys(utf8, "i1", sizes) * np.uint64(961)
    for i in np.flatnonzero(long).tolist():
        codes[i] = _ROW_OF + _bytes_hash(pickle.dumps(keys[i], _PROTOCOL))
    return (codes & np.uint64(_MASK)).astype(np.uint32)


class KeyHash:
    """The hash code Flink gives a key of a stream keyed with ``key_type`` (``None``: pickled keys), as an
    unsigned 32-bit value, and the name of that scheme (recorded with keyed state: state grouped by one
    scheme is regrouped, or refused, under another)."""

    __slots__ = ("type_info", "scheme", "_typed")

    def __init__(self, type_info: Any = None):
        self.type_info = type_info
        typed: Callable[[Any], int] | None = None
        if type_info is not None and getattr(type_info, "name", None) != "PICKLED_BYTE_ARRAY":
            try:
                typed = _typed(type_info)
            except LookupError:
                typed = None  # a type not modelled in its Java form: its keys are hashed pickled
        self._typed = typed
        self.scheme = PICKLED if typed is None else f"java:{type_info!r}"

    def __reduce__(self) -> tuple:
        return (key_hash, (self.type_info,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyHash) and other.scheme == self.scheme

    def __hash__(self) -> int:
        return hash(self.scheme)

    def __repr__(self) -> str:
        return f"KeyHash({self.scheme})"

    def __call__(self, key: Any) -> int:
        """The code of one key (the one-field row PyFlink keys by, hashed)."""
        if key is None:
            return _NULL_ROW
        try:
            if self._typed is not None:
                try:
                    return (_ROW_OF + self._typed(key)) & _MASK
                except _Fallback:
                    pass  # a key that does not fit the declared type: hashed as an undeclared one
            return (_ROW_OF + _bytes_hash(_pickle_of(key))) & _MASK
        except _Fallback:
            return zlib.crc32(key_bytes(key))

    def str_codes(self, keys: Sequence[str]) -> np.ndarray:
        """The codes of ``keys``, all exactly ``str``, at C speed (of their pickles, or of their UTF-16 for
        ``Types.STRING()``), as a ``uint32`` array."""
        if self._typed is None:
            return _pickled_str_codes(keys)
        if self.type_info.name == "STRING":
            try:
                units = _polys([k.encode("utf-16-be") for k in keys], ">u2")
            except UnicodeEncodeError:  # a lone surrogate: refused, naming the key
                for k in keys:
                    _text(k)
                raise
            return ((units + np.uint64(_ROW_OF)) & np.uint64(_MASK)).astype(np.uint32)
        return self.codes(keys)  # a str key of another declared type: hashed as an undeclared one

    def codes(self, keys: Sequence[Any]) -> np.ndarray:
        """The codes of ``keys`` as a ``uint32`` array: undeclared keys of any type pickled one by one and hashed
        together; declared ones one by one."""
        if self._typed is not None:
            return np.fromiter(map(self, keys), dtype=np.uint32, count=len(keys))
        chunks: list[bytes] = []
        alone: list[int] = []  # None and keys without a pickle of their value: hashed one by one
        for i, key in enumerate(keys):
            try:
                chunks.append(_pickle_of(key))
            except _Fallback:
                chunks.append(b"")
                alone.append(i)
        lengths = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
        pw = _powers(int(lengths.max()) + 1 if len(chunks) else 1)
        # Arrays.hashCode starts from 1: 31 ** n more than the polynomial
        out = ((pw[lengths] + _polys(chunks, "i1") + np.uint64(_ROW_OF)) & np.uint64(_MASK)).astype(np.uint32)
        for i in alone:
            out[i] = self(keys[i])
        return out


def key_hash(type_info: Any = None) -> KeyHash:
    """The :class:`KeyHash` of keys declared with ``type_info`` (one per type, kept)."""
    try:
        return _kept_key_hash(type_info)
    except TypeError:  # a type information that is not hashable
        return KeyHash(type_info)


@functools.lru_cache(maxsize=64)
def _kept_key_hash(type_info: Any) -> KeyHash:
    return KeyHash(type_info)


def older_key_hash(key_serializer: int | None) -> str:
    """The scheme of state written by an older key serializer (1: the hash of canonical key bytes; ``None``:
    before those)."""
    return f"key-serializer-{key_serializer or 0}"


def describe_key_hash(scheme: str) -> str:
    """A scheme as an error message names it."""
    if scheme == PICKLED:
        return "the hash of each key's pickle, as PyFlink's keys without a declared key_type"
    if scheme.startswith("java:"):
        return f"the Java hash of keys declared as {scheme.removeprefix('java:')}"
    if scheme == older_key_hash(1):
        return "the hash of sparkpoint's canonical key bytes (sparkpoint's key serializer 1)"
    return "the hash of an older sparkpoint, before keys had canonical bytes"
