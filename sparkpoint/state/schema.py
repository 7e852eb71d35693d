"""State schemas: what a checkpoint records of each state's type, and whether a job may restore it.

Flink writes a serializer snapshot per registered state into every checkpoint and, on restore,
asks the new serializer whether it is compatible with the snapshot: *as is*, *after migration*
(the state is read with the old serializer and written with the new one) or *incompatible*
(the restore is refused). sparkpoint's values are Python objects, so what it records is the
declared type information, as a plain description:

* :class:`StateSchema`: a state's kind (``value``, ``list``, ...) and declared type (``None``:
  untyped, pickled);
* :class:`OperatorSchema`: a keyed operator's states by name and the kinds its keys were seen
  to have (``str``, ``number``, ``tuple<str, number>``: keys of one kind can be equal), sampled
  from each task's first keyed batch (the key selector's type is not declared to the operator);
* :func:`compare_types`: the verdict for an old and a new type, with the migration of a stored
  value where one is needed (:func:`migration`); :func:`value_fits` checks sampled values of
  untyped state against a newly declared type.

The migrations allowed are Flink's where they mean something for Python values: any type to
untyped (pickled), a row with fields added (``None`` in them) or removed (dropped), a widened
number (``INT`` to ``LONG``, ``FLOAT`` to ``DOUBLE``), and those inside lists, maps and tuples.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "Compatibility",
    "StateSchema",
    "OperatorSchema",
    "type_json",
    "type_text",
    "compare_types",
    "migration",
    "value_fits",
    "state_type_json",
    "judge",
    "refusal",
    "declared_key_kind",
    "key_refusal",
    "UNTYPED",
    "WHAT_TO_DO",
]

#: What an untyped (pickled) state or key records as its type.
UNTYPED = None

_INTS = ("BYTE", "SHORT", "INT", "LONG", "BIG_INT")
_FLOATS = ("FLOAT", "DOUBLE")
_SEQUENCES = ("LIST", "BASIC_ARRAY", "PRIMITIVE_ARRAY", "OBJECT_ARRAY")
_PICKLED = ("PICKLED_BYTE_ARRAY",)


WHAT_TO_DO = (
    "Declare it as the checkpoint has it; or start the operator's state empty under a new uid() "
    "(with --allowNonRestoredState); or rewrite the state with the State Processor API "
    "(SavepointReader, then SavepointWriter) into the new type."
)


class Compatibility(enum.Enum):
    """Flink's ``TypeSerializerSchemaCompatibility``, for a declared type against a recorded one."""

    COMPATIBLE_AS_IS = "compatible as is"
    COMPATIBLE_AFTER_MIGRATION = "compatible after migration"
    INCOMPATIBLE = "incompatible"


def type_json(type_info: Any) -> dict | None:
    """A type information as plain JSON (``None`` for untyped); unknown objects by their text."""
    if type_info is None:
        return None
    name = getattr(type_info, "name", None)
    if not isinstance(name, str):
        return {"name": f"GENERIC<{type_info!r}>"}
    if name in _PICKLED:
        return None
    out: dict[str, Any] = {"name": name}
    children = getattr(type_info, "children", ())
    if children:
        out["children"] = [type_json(c) for c in children]
    if name == "ROW":
        names = getattr(type_info, "field_names", None)
        out["fields"] = list(names) if names else [f"f{i}" for i in range(len(children))]
    return out


def state_type_json(kind: str, type_info: Any) -> dict | None:
    """The declared type of a state of ``kind`` (a map state's is ``MAP<key type, value type>``)."""
    if kind == "map":
        key, value = type_info if isinstance(type_info, tuple) else (None, None)
        if key is None and value is None:
            return None
        return {"name": "MAP", "children": [type_json(key), type_json(value)]}
    return type_json(type_info)


_KEY_KINDS = {**{n: "number" for n in (*_INTS, *_FLOATS, "BIG_DEC", "BOOLEAN")}, "STRING": "str", "CHAR": "str"}


def declared_key_kind(type_info: Any) -> str | None:
    """The kind (:func:`~sparkpoint.state.key_groups.key_kind`) of the keys of a declared key type, if it tells."""
    return _kind_of(type_json(type_info))


def _kind_of(t: dict | None) -> str | None:
    if t is None:
        return None
    if t["name"] in ("ROW", "TUPLE"):
        kinds = [_kind_of(k) for k in t.get("children") or []]
        return None if None in kinds else "tuple<" + ", ".join(k for k in kinds if k) + ">"
    return _KEY_KINDS.get(t["name"])


def type_text(t: dict | None) -> str:
    """How messages show a recorded type: ``INT``, ``ROW<name STRING, visits INT>``, ``PICKLED``."""
    if t is None:
        return "PICKLED (untyped)"
    kids = t.get("children") or []
    if t["name"] == "ROW":
        return "ROW<" + ", ".join(f"{n} {type_text(k)}" for n, k in zip(t.get("fields", []), kids)) + ">"
    return t["name"] + ("<" + ", ".join(type_text(k) for k in kids) + ">" if kids else "")


def compare_types(old: dict | None, new: dict | None) -> tuple[Compatibility, str]:
    """Whether state stored as ``old`` can be read as ``new``, and why not."""
    if old == new:
        return Compatibility.COMPATIBLE_AS_IS, ""
    if new is None:
        return Compatibility.COMPATIBLE_AFTER_MIGRATION, "a typed state becomes untyped (pickled)"
    if old is None:
        return Compatibility.COMPATIBLE_AS_IS, "untyped state gets a type: its stored values are sampled"
    o, n = old["name"], new["name"]
    if o in _INTS and n in _INTS and _INTS.index(o) < _INTS.index(n) or (o, n) == ("FLOAT", "DOUBLE"):
        return Compatibility.COMPATIBLE_AFTER_MIGRATION, f"{o} widened to {n}"
    if o != n:
        return Compatibility.INCOMPATIBLE, f"{type_text(old)} cannot be read as {type_text(new)}"
    if o == "ROW":
        return _compare_rows(old, new)
    okids, nkids = old.get("children") or [], new.get("children") or []
    if len(okids) != len(nkids):
        return Compatibility.INCOMPATIBLE, f"{type_text(old)} cannot be read as {type_text(new)}"
    verdicts = [compare_types(a, b) for a, b in zip(okids, nkids)]
    return _worst(verdicts, old, new)


def _compare_rows(old: dict, new: dict) -> tuple[Compatibility, str]:
    ofields = dict(zip(old.get("fields", []), old.get("children") or []))
    nfields = dict(zip(new.get("fields", []), new.get("children") or []))
    verdicts = [compare_types(ofields[f], nfields[f]) for f in ofields if f in nfields]
    worst = _worst(verdicts, old, new)
    if worst[0] is Compatibility.INCOMPATIBLE:
        return worst
    added, removed = [f for f in nfields if f not in ofields], [f for f in ofields if f not in nfields]
    if not added and not removed and list(ofields) == list(nfields):
        return worst
    what = (
        "; ".join(
            w
            for w in (
                f"fields added: {', '.join(added)} (None in restored rows)" if added else "",
                f"fields removed: {', '.join(removed)}" if removed else "",
                worst[1],
            )
            if w
        )
        or "fields reordered"
    )
    return Compatibility.COMPATIBLE_AFTER_MIGRATION, what


def _worst(verdicts: list[tuple[Compatibility, str]], old: dict, new: dict) -> tuple[Compatibility, str]:
    for c, why in verdicts:
        if c is Compatibility.INCOMPATIBLE:
            return c, f"{type_text(old)} cannot be read as {type_text(new)} ({why})"
    reasons = [why for c, why in verdicts if c is Compatibility.COMPATIBLE_AFTER_MIGRATION]
    if reasons:
        return Compatibility.COMPATIBLE_AFTER_MIGRATION, "; ".join(reasons)
    return Compatibility.COMPATIBLE_AS_IS, ""


def migration(old: dict | None, new: dict | None) -> Callable[[Any], Any] | None:
    """How a stored value of type ``old`` becomes one of type ``new`` (``None``: it stays as it is).
    Only for types :func:`compare_types` finds compatible. Idempotent: a value in the new form already
    (a row with the added fields) comes out as it went in."""
    if old is None or new is None or old == new or old["name"] != new["name"]:
        return None  # untyped on either side, or a widened number: the Python value is the same
    if old["name"] == "ROW":
        return _row_migration(old, new)
    kids = [migration(a, b) for a, b in zip(old.get("children") or [], new.get("children") or [])]
    if not any(kids):
        return None
    if old["name"] == "MAP":
        mk, mv = (k or _same for k in kids)
        return lambda m: None if m is None else {mk(k): mv(v) for k, v in m.items()}
    if old["name"] == "TUPLE":
        fns = [k or _same for k in kids]
        return lambda t: None if t is None else tuple(f(v) for f, v in zip(fns, t))
    elem = kids[0] or _same
    return lambda seq: None if seq is None else [elem(v) for v in seq]


def _same(value: Any) -> Any:
    return value


def _row_migration(old: dict, new: dict) -> Callable[[Any], Any]:
    from sparkpoint.common.types import Row, _make_named_row

    ofields = list(old.get("fields", []))
    otypes = dict(zip(ofields, old.get("children") or []))
    names = list(new.get("fields", []))
    fns = [migration(otypes[f], t) if f in otypes else None for f, t in zip(names, new.get("children") or [])]

    def migrate(row: Any) -> Any:
        if row is None:
            return None
        named = isinstance(row, Row) and row._fields is not None
        present = set(row._fields) if named else set()
        values: list[Any] = []
        for i, f in enumerate(names):
            if f not in otypes:  # an added field: None, or its value where the row has it (migrated before)
                values.append(row[f] if f in present else None)
                continue
            v = row[f] if named else row[ofields.index(f)]
            fn = fns[i]
            values.append(fn(v) if fn is not None else v)
        out = _make_named_row(tuple(names), tuple(values))
        if isinstance(row, Row):
            out.set_row_kind(row.get_row_kind())
        return out

    return migrate


def value_fits(value: Any, t: dict | None) -> bool:
    """Whether a stored Python value can be of declared type ``t`` (sampling untyped state)."""
    if t is None or value is None:
        return True
    name = t["name"]
    kids = t.get("children") or []
    if name in _INTS:
        return isinstance(value, int) and not isinstance(value, bool)
    if name in _FLOATS:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    simple = {"STRING": str, "CHAR": str, "BOOLEAN": bool}
    if name in simple:
        return isinstance(value, simple[name])
    if name in ("ROW", "TUPLE"):
        return isinstance(value, (tuple, list)) and all(value_fits(v, k) for v, k in zip(value, kids))
    if name in _SEQUENCES:
        if isinstance(value, (bytes, bytearray)):  # PyFlink's bytes: PRIMITIVE_ARRAY(BYTE)
            return bool(kids) and kids[0] is not None and kids[0].get("name") == "BYTE"
        return isinstance(value, (list, tuple)) and all(value_fits(v, kids[0] if kids else None) for v in value)
    if name == "MAP":
        return isinstance(value, dict) and all(
            value_fits(k, kids[0]) and value_fits(v, kids[1]) for k, v in value.items()
        )
    return True  # dates, decimals, generic classes: not checked


@dataclass(frozen=True)
class StateSchema:
    """One registered state: its kind, declared type (``None``: untyped) and whether it has a time-to-live (its
    stored values then carry their last access; ``None``: not recorded, a checkpoint from before it was)."""

    kind: str
    type: dict | None = None
    ttl: bool | None = None

    def to_json(self) -> dict:
        return {"kind": self.kind, "type": self.type, "ttl": self.ttl}  # None (not recorded) stays unknown

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> StateSchema:
        return StateSchema(str(doc["kind"]), doc.get("type"), doc.get("ttl"))

    def text(self) -> str:
        return f"{self.kind} state of {type_text(self.type)}{' with a time-to-live' if self.ttl else ''}"


@dataclass(frozen=True)
class OperatorSchema:
    """A keyed operator's registered states and the sampled kinds of its keys (key_groups.key_kind)."""

    states: Mapping[str, StateSchema] = field(default_factory=dict)
    key_kinds: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"states": {n: s.to_json() for n, s in sorted(self.states.items())}, "key_kinds": list(self.key_kinds)}

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> OperatorSchema:
        return OperatorSchema(
            {n: StateSchema.from_json(s) for n, s in doc.get("states", {}).items()}, tuple(doc.get("key_kinds", ()))
        )

    def updated(self, newer: OperatorSchema) -> OperatorSchema:
        """This schema with ``newer``'s states (re)declared and key kinds added."""
        states = {**self.states, **newer.states}
        kinds = tuple(sorted(set(self.key_kinds) | set(newer.key_kinds)))
        return OperatorSchema(states, kinds)

    def key_text(self) -> str:
        return " | ".join(self.key_kinds) or "unknown"


def judge(old: StateSchema, new: StateSchema) -> tuple[Compatibility, str]:
    """Whether a state recorded as ``old`` can be restored into one declared as ``new``, and why not."""
    if old.ttl is not None and new.ttl is not None and old.ttl != new.ttl:  # Flink's TTL serializer, likewise
        return Compatibility.INCOMPATIBLE, (
            "its time-to-live was turned "
            + ("off" if old.ttl else "on")
            + ": stored values "
            + ("carry" if old.ttl else "do not carry")
            + " the time of their last access"
        )
    old, new = replace(old, ttl=None), replace(new, ttl=None)
    if old == new:
        return Compatibility.COMPATIBLE_AS_IS, ""
    if old.kind != new.kind:
        return Compatibility.INCOMPATIBLE, f"a {old.kind} state cannot be read as a {new.kind} state"
    return compare_types(old.type, new.type)


def refusal(owner: str, name: str, old: StateSchema, new: StateSchema, why: str) -> str:
    """The message of a refused restore of state ``name`` of ``owner`` ("operator 'n' (uid 'u')")."""
    return (
        f"cannot restore {owner}: state {name!r} was checkpointed as {old.text()}, the job declares "
        f"{new.text()}: {why}. {WHAT_TO_DO}"
    )


def key_refusal(owner: str, old_kinds: Iterable[str], new_kinds: Iterable[str], how: str) -> str:
    """The message of a restore refused because the job's keys (``how``: how that is known) are of other kinds
    than the checkpoint's."""
    return (
        f"cannot restore {owner}: its keyed state was checkpointed with keys of kind "
        f"{' | '.join(sorted(old_kinds))}, the job's keys are of kind {' | '.join(sorted(new_kinds))} ({how}); "
        f"no restored state would be found. Key the stream as before, or start the operator's state empty under "
        f"a new uid() (with --allowNonRestoredState)."
    )
