"""Checkpoint metadata: what ``_metadata`` says, and its versioned serializer.

``_metadata`` is JSON, readable by people and tools: format name and version, job id,
checkpoint id, kind, timestamps, the barrier epoch, and per operator **uid** its name,
parallelism, the keyed-state files of each subtask (key-group range, relative path,
size, SHA-256) and, for keyed operators, the schema of their state (each state's kind
and declared type, the keys' kinds: Flink's serializer snapshots). State that only Python
can read (operator state, source splits with their watermark generators, pending sink
transactions) sits in one ``driver-state`` file referenced the same way. A SHA-256 over
the JSON body guards ``_metadata`` itself. The job's configuration is recorded with secrets (keys naming a
secret, password or token, as Flink's ``GlobalConfiguration.isSensitive`` decides) masked.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.state.key_groups import KEY_SERIALIZER_VERSION
from sparkpoint.state.key_hash import PICKLED, older_key_hash
from sparkpoint.state.schema import OperatorSchema
from sparkpoint.storage.checkpoint_storage import StreamStateHandle
from sparkpoint.storage.exceptions import CorruptCheckpointError

__all__ = [
    "KeyedStateFile",
    "OperatorMetadata",
    "CheckpointMetadata",
    "MetadataV1Serializer",
    "FORMAT_NAME",
    "public_config",
]

FORMAT_NAME = "sparkpoint-checkpoint-metadata"

_SENSITIVE = (
    "password",
    "secret",
    "token",
    "apikey",
    "api-key",
    "account.key",
    "auth-params",
    "service-key",
    "basic-auth",
    "jaas.config",
    "http-headers",
)
HIDDEN_VALUE = "******"


@dataclass
class KeyedStateFile:
    """A file of keyed state covering a key-group range.

    ``state`` is ``None`` for a raw snapshot of all of the operator's keyed state (the
    working backend's own format, in checkpoints), or the state name (``"_timers"`` for
    timers) of a canonical Parquet file (in savepoints).
    """

    subtask: int
    key_group_start: int
    key_group_end: int
    handle: StreamStateHandle
    state: str | None = None
    format: str | None = None  # "rocksdb": the manifest of an incremental checkpoint
    shared: tuple[StreamStateHandle, ...] = ()  # the files it references, relative to chk-N


@dataclass
class OperatorMetadata:
    uid: str
    name: str
    parallelism: int
    keyed_state: list[KeyedStateFile] = field(default_factory=list)
    state_kinds: dict[str, str] = field(default_factory=dict)  # canonical format: state name -> kind
    watermark: int | None = None
    schema: OperatorSchema | None = None  # keyed operators: each state's kind and type, the keys' kinds
    key_hash: str | None = None  # keyed operators: how keys were assigned to key groups (KeyHash.scheme)


@dataclass
class CheckpointMetadata:
    job_id: str
    job_name: str
    checkpoint_id: int
    kind: str  # "checkpoint" | "savepoint"
    trigger_timestamp: int
    completion_timestamp: int
    barrier_epoch: int
    max_parallelism: int
    operators: dict[str, OperatorMetadata]
    driver_state: StreamStateHandle
    config: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    key_serializer: int | None = KEY_SERIALIZER_VERSION  # None: taken before keys had canonical bytes

    def key_hash_of(self, uid: str) -> str:
        """How the keys of operator ``uid``'s state were assigned to key groups: its recorded scheme
        (:attr:`KeyHash.scheme <sparkpoint.state.key_hash.KeyHash.scheme>`), or, in checkpoints of an older key
        serializer, that serializer's."""
        if self.key_serializer != KEY_SERIALIZER_VERSION:
            return older_key_hash(self.key_serializer)
        op = self.operators.get(uid)
        return op.key_hash if op is not None and op.key_hash is not None else PICKLED

    def state_files(self) -> list[StreamStateHandle]:
        files = [self.driver_state]
        for op in self.operators.values():
            for f in op.keyed_state:
                if f.handle not in files:
                    files.append(f.handle)
        return files

    def total_size(self) -> int:
        """The size of all the state the checkpoint references, shared files included (Flink's state size)."""
        return sum(h.size for h in self.state_files()) + sum(h.size for h in self.shared_files())

    def shared_files(self) -> list[StreamStateHandle]:
        """The shared files (incremental state) the checkpoint references, each once."""
        files: dict[str, StreamStateHandle] = {}
        for op in self.operators.values():
            for f in op.keyed_state:
                for h in f.shared:
                    files.setdefault(h.path, h)
        return list(files.values())


class MetadataV1Serializer:
    VERSION = 1

    @staticmethod
    def serialize(meta: CheckpointMetadata) -> bytes:
        body = {
            "job_id": meta.job_id,
            "job_name": meta.job_name,
            "checkpoint_id": meta.checkpoint_id,
            "kind": meta.kind,
            "trigger_timestamp": meta.trigger_timestamp,
            "completion_timestamp": meta.completion_timestamp,
            "barrier_epoch": meta.barrier_epoch,
            "max_parallelism": meta.max_parallelism,
            "operators": {
                uid: {
                    "name": op.name,
                    "parallelism": op.parallelism,
                    "keyed_state": [_keyed_file_json(f) for f in op.keyed_state],
                    "state_kinds": op.state_kinds,
                    "watermark": op.watermark,
                    **({"schema": op.schema.to_json()} if op.schema is not None else {}),
                    **({"key_hash": op.key_hash} if op.key_hash is not None else {}),
                }
                for uid, op in sorted(meta.operators.items())
            },
            "driver_state": meta.driver_state.to_json(),
            "config": public_config(meta.config),
            "stats": meta.stats,
            "key_serializer": meta.key_serializer,
        }
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
        doc = {
            "format": FORMAT_NAME,
            "version": MetadataV1Serializer.VERSION,
            "body": body,
            "sha256": hashlib.sha256(canonical.encode()).hexdigest(),
        }
        return json.dumps(doc, indent=1, sort_keys=False).encode()

    @staticmethod
    def deserialize(data: bytes, where: str) -> CheckpointMetadata:
        try:
            doc = json.loads(data.decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CorruptCheckpointError(f"{where}: _metadata is not valid JSON ({e}); the file is damaged") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
            raise CorruptCheckpointError(f"{where}: _metadata is not a sparkpoint checkpoint")
        if doc.get("version") != MetadataV1Serializer.VERSION:
            raise CorruptCheckpointError(f"{where}: unsupported _metadata version {doc.get('version')!r}")
        body = doc.get("body")
        if not isinstance(body, dict):
            raise CorruptCheckpointError(f"{where}: _metadata has no body")
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
        if hashlib.sha256(canonical.encode()).hexdigest() != doc.get("sha256"):
            raise CorruptCheckpointError(f"{where}: _metadata fails its SHA-256 checksum")
        try:
            return MetadataV1Serializer._from_body(body)
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise CorruptCheckpointError(f"{where}: _metadata lacks or mangles a field ({e!r})") from None

    @staticmethod
    def _from_body(body: dict) -> CheckpointMetadata:
        ops = {}
        for uid, op in body["operators"].items():
            files = [
                KeyedStateFile(
                    f["subtask"],
                    f["key_groups"][0],
                    f["key_groups"][1],
                    StreamStateHandle(f["path"], f["size"], f["sha256"]),
                    f.get("state"),
                    f.get("format"),
                    tuple(StreamStateHandle.from_json(h) for h in f.get("shared", ())),
                )
                for f in op["keyed_state"]
            ]
            schema = OperatorSchema.from_json(op["schema"]) if op.get("schema") is not None else None
            ops[uid] = OperatorMetadata(
                uid,
                op["name"],
                op["parallelism"],
                files,
                op.get("state_kinds", {}),
                op.get("watermark"),
                schema,
                op.get("key_hash"),
            )
        return CheckpointMetadata(
            job_id=body["job_id"],
            job_name=body["job_name"],
            checkpoint_id=body["checkpoint_id"],
            kind=body["kind"],
            trigger_timestamp=body["trigger_timestamp"],
            completion_timestamp=body["completion_timestamp"],
            barrier_epoch=body["barrier_epoch"],
            max_parallelism=body["max_parallelism"],
            operators=ops,
            driver_state=StreamStateHandle.from_json(body["driver_state"]),
            config=body.get("config", {}),
            stats=body.get("stats", {}),
            key_serializer=body.get("key_serializer"),
        )


def public_config(config: dict) -> dict:
    """The configuration as ``_metadata`` records it: plain values, secrets masked."""
    out: dict[str, Any] = {}
    for k, v in sorted(config.items()):
        if any(word in k.lower() for word in _SENSITIVE):
            out[k] = HIDDEN_VALUE
        else:
            out[k] = v if isinstance(v, (str, int, float, bool)) or v is None else str(v)
    return out


def _keyed_file_json(f: KeyedStateFile) -> dict:
    out = {
        "subtask": f.subtask,
        "key_groups": [f.key_group_start, f.key_group_end],
        "state": f.state,
        **f.handle.to_json(),
    }
    if f.format is not None:
        out["format"] = f.format
        out["shared"] = [h.to_json() for h in f.shared]
    return out
