"""How records cross task boundaries: Arrow record batches, one per edge, in one blob.

A blob goes from one upstream task to one downstream partition and carries, for each
exchange edge, the records routed there (an Arrow IPC stream with an int64 ``ts``
column and a value column) and the upstream task's watermark on that edge. Every
upstream task sends a blob to every downstream partition, even with no records, so
that each downstream task sees every input's watermark (Flink's min-over-channels).

Values are encoded column-wise when they are uniform: strings, ints, floats, and
tuples of those become Arrow columns; anything else is pickled as one cell per batch
(never per row).
"""

from __future__ import annotations

import pickle
from typing import Any, Callable, Optional

import cloudpickle
import pyarrow as pa

from sparkpoint.state.key_groups import KeyGroupAssigner

__all__ = ["encode_batch", "decode_batch", "encode_blob", "decode_blob", "hash_partition"]

_PRIMITIVE = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_(), bytes: pa.binary()}


def hash_partition(values: list, timestamps: list, get_key: Callable[[Any], Any], n: int,
                   assign: KeyGroupAssigner) -> list[tuple[list, list]]:
    """Split records over ``n`` partitions by their key's group (Flink's ``KeyGroupRangeAssignment``):
    each distinct key is hashed once, all new keys of the batch together."""
    keys = [get_key(v) for v in values]
    maxp = assign.max_parallelism
    target = {k: kg * n // maxp for k, kg in assign.assign_all(keys).items()}
    parts: list[tuple[list, list]] = [([], []) for _ in range(n)]
    for v, t, k in zip(values, timestamps, keys):
        part = parts[target[k]]
        part[0].append(v)
        part[1].append(t)
    return parts


def _column(values: list) -> Optional[pa.Array]:
    t = type(values[0])
    arrow_type = _PRIMITIVE.get(t)
    if arrow_type is None:
        return None
    try:
        arr = pa.array(values, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        return None
    if arr.null_count:
        return None
    # pa.array silently accepts e.g. bools or floats among ints; insist on one exact type
    if t in (int, float) and set(map(type, values)) != {t}:
        return None
    return arr


def _flatten(values: list, prefix: str, cols: list, names: list) -> Optional[str]:
    """Append Arrow columns for ``values``; returns a structure spec, or None if not encodable.

    Specs: ``"p"`` a primitive column, ``"(s1,s2,...)"`` a tuple of sub-specs.
    """
    first = values[0]
    t = type(first)
    if t in _PRIMITIVE:
        col = _column(values)
        if col is None:
            return None
        cols.append(col)
        names.append(prefix)
        return "p"
    if t is tuple and first and _uniform_tuples(values, len(first)):
        specs = []
        for i in range(len(first)):
            spec = _flatten([v[i] for v in values], f"{prefix}.{i}", cols, names)
            if spec is None:
                return None
            specs.append(spec)
        return "(" + ",".join(specs) + ")"
    return None


def _split_spec(spec: str) -> list[str]:
    inner, parts, depth, cur = spec[1:-1], [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    parts.append(cur)
    return parts


def _rebuild(spec: str, columns: list, pos: list) -> list:
    if spec == "p":
        col = columns[pos[0]]
        pos[0] += 1
        return col
    return list(zip(*[_rebuild(sub, columns, pos) for sub in _split_spec(spec)]))


def encode_batch(values: list, timestamps: list) -> bytes:
    """An Arrow IPC stream holding the records."""
    cols: list[pa.Array] = [pa.array(timestamps, type=pa.int64())]
    names = ["ts"]
    meta = {b"enc": b"empty"}
    if values:
        spec = _flatten(values, "v", cols, names)
        if spec is not None:
            meta = {b"enc": b"columns", b"spec": spec.encode()}
        else:
            del cols[1:], names[1:]
            meta = {b"enc": b"pickle"}
            cols.append(pa.array([cloudpickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL)] +
                                 [None] * (len(values) - 1), type=pa.binary()))
            names.append("p")
    batch = pa.RecordBatch.from_arrays(cols, names=names).replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _uniform_tuples(values: list, arity: int) -> bool:
    return set(map(type, values)) == {tuple} and set(map(len, values)) == {arity}


def decode_batch(data: bytes) -> tuple[list, list]:
    reader = pa.ipc.open_stream(data)
    table = reader.read_all()
    meta = table.schema.metadata or {}
    enc = meta.get(b"enc", b"empty")
    timestamps = table.column(0).to_pylist()
    if enc == b"empty" or table.num_rows == 0:
        return [], timestamps
    if enc == b"columns":
        columns = [table.column(i).to_pylist() for i in range(1, table.num_columns)]
        return _rebuild(meta[b"spec"].decode(), columns, [0]), timestamps
    return pickle.loads(table.column("p")[0].as_py()), timestamps


def encode_blob(header: dict, batches: dict[int, tuple[list, list]]) -> bytes:
    """One upstream task's output for one downstream partition."""
    blob = {"h": header, "b": {edge: encode_batch(v, t) for edge, (v, t) in batches.items() if v}}
    try:
        return pickle.dumps(blob, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError):
        return cloudpickle.dumps(blob, protocol=pickle.HIGHEST_PROTOCOL)  # user classes in reports


def decode_blob(blob: bytes) -> tuple[dict, dict[int, tuple[list, list]]]:
    d = pickle.loads(blob)
    return d["h"], {edge: decode_batch(data) for edge, data in d["b"].items()}

