"""How records cross task boundaries: one blob per (upstream task, downstream partition).

A blob carries, for each exchange edge, the records routed there (values and event
timestamps) and the upstream task's watermark on that edge. Every upstream task sends a
blob to every downstream partition, even with no records, so that each downstream task
sees every input's watermark (Flink's min-over-channels).

A batch of values is encoded whole, never per row, in the cheapest form that gives back
values of exactly the types that went in (measured in ``bench/README.md``):

* **exact builtins** (every value an exact ``str``, ``int``, ``bool``, ``bytes``, ``float`` or
  ``None``, or an exact tuple of such at any depth: ``marshal_exact``), checked at C speed, go
  as ``marshal`` of the list; when few distinct values repeat (a keyed
  count's ``(key, 1)``), as the distinct values plus an index per record (**dictionary**:
  coded first, the types checked after, on the distinct values and then position by position
  against them; the receiving task may keep the batch coded, :class:`Coded`);
* local aggregation's partials (``WindowPartial``) go as their **columns** (keys, window starts and ends,
  values, counts), marshalled where the keys and values may be, else pickled; a session combiner's
  partials followed by the records of keys it left alone go as the two, each in its own form;
* anything else is **pickled** as one list (cloudpickle where pickle cannot).

Timestamps go as an int64 array when every record has one, else as a marshalled list; one beyond
int64 (a Java long) is refused.
"""

from __future__ import annotations

import array
import marshal
import operator
import pickle
from collections.abc import Callable
from itertools import compress, takewhile
from typing import Any

import numpy as np

from sparkpoint.common.pickling import dumps
from sparkpoint.operators.base import first_out_of_range, out_of_range_error
from sparkpoint.operators.coded import Coded, coded, marshal_exact
from sparkpoint.state.key_groups import KeyGroupAssigner, str_key_groups
from sparkpoint.windows.local_aggregation import WindowPartial

__all__ = ["Encoded", "encode_batch", "decode_batch", "encode_blob", "decode_blob", "hash_partition", "open_blob"]

_MARSHAL_VERSION = 4


def hash_partition(
    values: list, timestamps: list, get_key: Callable[[Any], Any], n: int, assign: KeyGroupAssigner
) -> list[tuple[Any, Any]]:
    """Split records over ``n`` partitions by their key's group (Flink's ``KeyGroupRangeAssignment``). Values
    that repeat are coded first (:func:`coded`): the key selector then runs once per distinct value, each
    distinct key is hashed once, and each partition gets a :class:`Coded` batch, split by its codes at C speed
    (with its timestamps as an int64 array when every record has one that fits). Other values are split by
    their keys' groups: ``str`` keys hashed record by record in one pass at C speed (cheaper than finding
    the distinct ones first when most keys are new), keys of other types once per distinct key."""
    maxp = assign.max_parallelism
    batch = coded(values)
    if batch is not None:
        keys = [get_key(v) for v in batch.distinct]
        groups = assign.assign_all(keys)
        return _split_coded(batch, timestamps, [groups[k] * n // maxp for k in keys], n)
    keys = [get_key(v) for v in values]
    hashed = str_key_groups(keys, maxp, assign.key_hash)  # str keys (the common case): every record's hashed at C speed
    if hashed is not None:
        where = (hashed * n // maxp).tolist()
    else:  # each distinct key hashed once, all new keys of the batch together
        target = {k: kg * n // maxp for k, kg in assign.assign_all(keys).items()}
        where = list(map(target.__getitem__, keys))
    parts: list[tuple[Any, Any]] = [([], []) for _ in range(n)]
    for p in set(where):
        mask = list(map(p.__eq__, where))
        parts[p] = (list(compress(values, mask)), list(compress(timestamps, mask)))
    return parts


def _split_coded(batch: Coded, timestamps: list, part_of: list[int], n: int) -> list[tuple[Any, Any]]:
    """``batch`` over ``n`` partitions, its distinct value ``i`` to partition ``part_of[i]``: each partition's
    codes as a numpy array, its timestamps too where they all fit int64 (else a list)."""
    codes = np.frombuffer(array.array("I", batch.codes), dtype=np.uint32)
    where = np.asarray(part_of, dtype=np.intp)[codes]
    order = np.argsort(where, kind="stable")
    bounds = np.searchsorted(where[order], np.arange(n + 1)).tolist()
    try:
        stamps: Any = np.frombuffer(array.array("q", timestamps), dtype=np.int64)[order]
    except (TypeError, OverflowError):  # a record without a timestamp (one beyond int64: refused when encoded)
        stamps = list(map(timestamps.__getitem__, order.tolist()))
    codes = codes[order]
    return [(Coded(batch.distinct, codes[a:b]), stamps[a:b]) for a, b in zip(bounds, bounds[1:])]


def _encode_values(values: Any) -> tuple[bytes, bytes]:
    """``(encoding, body)`` of a non-empty list of values, or of a :class:`Coded` batch (see the module's
    docstring)."""
    if type(values) is not Coded and type(values[0]) is WindowPartial:
        columns = WindowPartial.columns(values)
        if columns is not None:
            return _encode_partials(columns)
        partials = sum(1 for _ in takewhile(lambda v: type(v) is WindowPartial, values))
        if partials < len(values):  # a session combiner's partials, then the records of keys it left as they are
            both = _encode_values(values[:partials]), _encode_values(values[partials:])
            return b"mixed", marshal.dumps(both, _MARSHAL_VERSION)
    if type(values) is not Coded:
        batch = coded(values)
        if batch is None:
            if not marshal_exact(values):
                return b"pickle", dumps(values, portable=False)
            return b"marshal", marshal.dumps(values, _MARSHAL_VERSION)
        values = batch
    codes = values.codes
    raw = (codes.astype(np.uint32, copy=False) if isinstance(codes, np.ndarray) else array.array("I", codes)).tobytes()
    return b"dict", marshal.dumps((values.distinct, raw), _MARSHAL_VERSION)


def _encode_partials(columns: tuple) -> tuple[bytes, bytes]:
    """Local aggregation's partials as their columns: marshalled when every column may be (a window's bounds
    from numpy timestamps may not), else pickled (whole columns, still cheaper than the objects)."""
    if all(map(marshal_exact, columns)):
        return b"partials", marshal.dumps(columns, _MARSHAL_VERSION)
    return b"partials-pickle", dumps(columns, portable=False)


def _decode_values(encoding: bytes, body: bytes, keep_coded: bool) -> Any:
    if encoding == b"marshal":
        return marshal.loads(body)
    if encoding == b"partials":
        return WindowPartial.from_columns(marshal.loads(body))
    if encoding == b"partials-pickle":
        return WindowPartial.from_columns(pickle.loads(body))
    if encoding == b"mixed":
        (head, head_body), (tail, tail_body) = marshal.loads(body)
        return _decode_values(head, head_body, False) + _decode_values(tail, tail_body, False)
    if encoding == b"dict":
        distinct, raw = marshal.loads(body)
        codes = array.array("I")
        codes.frombytes(raw)
        return Coded(distinct, codes) if keep_coded else list(map(distinct.__getitem__, codes))
    return pickle.loads(body)


def encode_batch(values: list, timestamps: list) -> bytes:
    """One batch of records as bytes: ``(value encoding, values, timestamps)``."""
    ts = _encode_timestamps(timestamps)
    encoding, body = _encode_values(values) if values else (b"empty", b"")
    return marshal.dumps((encoding, body, ts), _MARSHAL_VERSION)


def _encode_timestamps(timestamps: Any) -> Any:
    """An int64 array, or where a record has none a list of exact ints and Nones (a numpy integer becomes an
    int: marshal would write its memory as bytes). A timestamp beyond int64 is refused: no watermark passes
    Long.MAX_VALUE, so its record would wait for ever (sources, timestamp assigners and timers refuse one
    first, naming the record)."""
    if isinstance(timestamps, np.ndarray):
        return timestamps.astype(np.int64, copy=False).tobytes()
    try:
        return array.array("q", timestamps).tobytes()
    except (TypeError, OverflowError):
        pass
    kinds = set(map(type, timestamps))
    if kinds == {type(None)}:  # records without timestamps: the list as it is
        return list(timestamps)
    stamps: list = []
    for t in timestamps:
        try:
            stamps.append(t if t is None or type(t) is int else operator.index(t))
        except TypeError:
            raise TypeError(
                f"a record's timestamp must be an int (milliseconds since the epoch) or None, "
                f"not {type(t).__name__} {t!r}"
            ) from None
    beyond = first_out_of_range(stamps)
    if beyond is not None:
        raise out_of_range_error(stamps[beyond], "a record's timestamp is")
    return stamps


def decode_batch(data: bytes, keep_coded: bool = False) -> tuple[Any, Any]:
    """The values and timestamps of :func:`encode_batch`; ``keep_coded``: a dictionary-coded batch of values
    as a :class:`Coded` batch (for :func:`sparkpoint.runtime.chain.read_inputs`), not as a list, and its
    timestamps, when every record has one, as an int64 array (:func:`timestamp_list` makes it a list)."""
    encoding, body, ts = marshal.loads(data)
    if type(ts) is bytes and keep_coded and encoding == b"dict":
        timestamps: Any = np.frombuffer(ts, dtype=np.int64)
    elif type(ts) is bytes:
        stamps = array.array("q")
        stamps.frombytes(ts)
        timestamps = stamps.tolist()
    else:
        timestamps = ts
    return ([] if encoding == b"empty" else _decode_values(encoding, body, keep_coded)), timestamps


class Encoded:
    """Batches of one edge and partition already encoded (:func:`encode_batch`), one after the other: a task that
    routed its records a slice at a time (``task_output.ExchangeWriter``)."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: list[bytes]):
        self.chunks = chunks


def encode_blob(header: dict, batches: dict[int, Any]) -> bytes:
    """One upstream task's output for one downstream partition: per edge, its batches encoded, in order (one for
    ``(values, timestamps)``, an :class:`Encoded`'s as they are)."""
    encoded = {}
    for edge, batch in batches.items():
        chunks = batch.chunks if type(batch) is Encoded else [encode_batch(*batch)] if batch[0] else []
        if chunks:
            encoded[edge] = chunks
    return dumps({"h": header, "b": encoded}, portable=False)


def open_blob(blob: bytes) -> tuple[dict, dict[int, list[bytes]]]:
    """The header and, per edge, the batches of :func:`encode_blob` in order, each still encoded
    (:func:`decode_batch`)."""
    d = pickle.loads(blob)
    return d["h"], d["b"]


def decode_blob(blob: bytes, keep_coded: bool = False) -> tuple[dict, dict[int, list[tuple[Any, Any]]]]:
    """The header and, per edge, the batches of :func:`encode_blob`, in order."""
    header, batches = open_blob(blob)
    return header, {edge: [decode_batch(data, keep_coded) for data in chunks] for edge, chunks in batches.items()}
