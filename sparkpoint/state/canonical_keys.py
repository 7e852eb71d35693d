"""Canonical key bytes: a deterministic serializer of keys that agrees with ``==``.

``key_bytes`` gives ``1``, ``1.0`` and ``True`` one form, and the same form in every process and machine
(Python's own ``hash`` of ``str`` is salted per process, and a frozenset's iteration order follows it, so
neither can be used). Keyed state is stored under these bytes (tagged by type where keys of different types
would meet: :func:`stored_key_bytes`); key groups come from :mod:`sparkpoint.state.key_hash`.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Sequence
from decimal import Decimal
from enum import Enum
from typing import Any

import numpy as np

from sparkpoint.errors import StateError

__all__ = ["KeyTypeError", "key_bytes", "key_kind", "keys_bytes", "stored_key_bytes", "keys_stored_bytes"]


class KeyTypeError(StateError, TypeError):
    """A key has no deterministic form, so it cannot be assigned to a key group."""


NUMPY_NUMBERS = (np.integer, np.floating, np.bool_)  # numpy's scalar numbers, keys as the numbers they hold


def key_bytes(key: Any) -> bytes:
    """The canonical bytes of a key: equal keys (``1 == 1.0 == True``) give equal bytes.

    Keyed state needs a deterministic key serializer, as in Flink: the same key must land in
    the same key group in every process, whatever ``PYTHONHASHSEED`` is. Supported keys are
    ``None``, ``bool``/``int``/``float``/``Decimal`` and numpy's scalars of them (equal numbers are one key), ``str``,
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
    if isinstance(key, (int, float, Decimal, *NUMPY_NUMBERS)):
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
    if isinstance(key, NUMPY_NUMBERS):  # numpy's scalars equal the Python numbers they hold
        return _number(key.item(), key is whole)
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
