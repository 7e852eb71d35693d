"""The file systems checkpoint storage lives on: their options, and what kind of store each is.

Checkpoints go wherever an fsspec URL points (``state.checkpoints.dir``). An object store
(``s3://``, ``gs://``, ``abfs://`` ...) needs an endpoint and credentials; as Flink's S3 file
systems do, sparkpoint reads them from its configuration::

    state.checkpoints.dir: s3://bucket/checkpoints
    s3.endpoint: http://minio.internal:9000     # omit for AWS S3 itself
    s3.access-key: ...
    s3.secret-key: ...
    s3.path.style.access: true                  # MinIO, Ceph and most S3-compatible stores
    s3.endpoint.region: eu-central-1            # optional

:func:`storage_options_from_config` maps these keys to s3fs options (for ``s3://`` and
``s3a://``). :func:`configure_file_systems` makes them the defaults of every fsspec file
system the process opens, as Flink's ``FileSystem.initialize`` does on its JobManager and
TaskManagers: the JobMaster calls it with the job's configuration, ``sparkpoint inspect``
with its ``-D`` keys. What the driver sends a task to read or write a checkpoint carries
the options of that checkpoint's file system (:func:`storage_options_for`), so a task on
any executor reaches the store without configuration of its own. Without these keys, s3fs
finds endpoint and credentials as botocore does: ``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``~/.aws/``, instance roles.

Checkpoint files on a local file system are synced to the disk before a checkpoint completes
(:mod:`sparkpoint.storage.durable`); ``sparkpoint.checkpoints.fsync: false`` turns that off, and
travels the same way: as an option of the local file system (``sparkpoint_fsync``), which the
driver sends to tasks with the checkpoint's other storage options.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import fsspec

from sparkpoint.common.configuration import parse_boolean
from sparkpoint.errors import ConfigurationError

__all__ = [
    "FSYNC_KEY",
    "FSYNC_OPTION",
    "OBJECT_STORE_PROTOCOLS",
    "S3_CONFIG_KEYS",
    "configure_file_systems",
    "is_object_store",
    "open_file_system",
    "storage_options_for",
    "storage_options_from_config",
]

OBJECT_STORE_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl", "oss", "oci"})
"""Stores of objects, not files: no directories, no rename (a "move" is a copy and a delete),
and an object written by one PUT appears whole or not at all."""

_S3_PROTOCOLS = ("s3", "s3a")
_LOCAL_PROTOCOLS = ("file", "local")

FSYNC_KEY = "sparkpoint.checkpoints.fsync"
"""``false`` turns off the ``fsync`` of checkpoint files on local file systems (:mod:`sparkpoint.storage.durable`)."""
FSYNC_OPTION = "sparkpoint_fsync"
"""The storage option of a local file system that carries :data:`FSYNC_KEY` to whoever writes checkpoint files."""

S3_CONFIG_KEYS = ("s3.endpoint", "s3.access-key", "s3.secret-key", "s3.path.style.access", "s3.endpoint.region")

_lock = threading.Lock()
_installed: dict[str, dict[str, Any]] = {}  # what configure_file_systems put into fsspec's configuration


def storage_options_from_config(conf: Any) -> dict[str, dict[str, Any]]:
    """fsspec storage options per protocol for the ``s3.*`` keys of ``conf`` (a ``Configuration`` or mapping).

    Returns ``{}`` when no such key is set.
    """
    values: Mapping[str, Any] = conf.to_dict() if hasattr(conf, "to_dict") else dict(conf)
    options: dict[str, Any] = {}
    client: dict[str, Any] = {}
    endpoint = _text(values.get("s3.endpoint"))
    if endpoint:
        client["endpoint_url"] = endpoint if "://" in endpoint else f"https://{endpoint}"
    region = _text(values.get("s3.endpoint.region"))
    if region:
        client["region_name"] = region
    if client:
        options["client_kwargs"] = client
    key, secret = _text(values.get("s3.access-key")), _text(values.get("s3.secret-key"))
    if key:
        options["key"] = key
    if secret:
        options["secret"] = secret
    path_style = values.get("s3.path.style.access")
    if path_style is not None and str(path_style).strip() != "":
        path = str(path_style).strip().lower() in ("true", "1", "yes")
        options["config_kwargs"] = {"s3": {"addressing_style": "path" if path else "virtual"}}
    out = {protocol: dict(options) for protocol in _S3_PROTOCOLS} if options else {}
    if not _fsync(values.get(FSYNC_KEY)):
        out.update({protocol: {FSYNC_OPTION: False} for protocol in _LOCAL_PROTOCOLS})
    return out


def configure_file_systems(conf: Any) -> None:
    """Make the file-system options of ``conf`` the defaults of every fsspec file system this process opens.

    Options installed by an earlier call are replaced (a job's configuration is the truth
    for its process); options set in fsspec's configuration by other code are kept.
    """
    options = storage_options_from_config(conf)
    with _lock:
        for protocol in set(_installed) | set(options):
            current = dict(fsspec.config.conf.get(protocol, {}))
            for key in _installed.get(protocol, {}):
                current.pop(key, None)
            current.update(options.get(protocol, {}))
            if current:
                fsspec.config.conf[protocol] = current
            else:
                fsspec.config.conf.pop(protocol, None)
        _installed.clear()
        _installed.update(options)


def storage_options_for(uri: str, conf: Any = None) -> dict[str, Any]:
    """The options for the file system of ``uri``: from ``conf`` if given, else those
    :func:`configure_file_systems` installed (what the driver sends to tasks)."""
    protocol = _protocol(uri)
    if conf is not None:
        return storage_options_from_config(conf).get(protocol, {})
    with _lock:
        return dict(_installed.get(protocol, {}))


def open_file_system(
    uri: str, storage_options: Mapping[str, Any] | None = None
) -> tuple[fsspec.AbstractFileSystem, str]:
    """``(file system, path)`` of ``uri``, with ``storage_options`` over the process's defaults."""
    fs, path = fsspec.core.url_to_fs(uri, **dict(storage_options or {}))
    return fs, path.rstrip("/") or "/"


def is_object_store(fs: fsspec.AbstractFileSystem) -> bool:
    """Whether ``fs`` stores objects (one PUT per file, no rename) rather than files."""
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    return any(p in OBJECT_STORE_PROTOCOLS for p in protocols)


def _protocol(uri: str) -> str:
    protocol, _, rest = uri.partition("://")
    return protocol.lower() if rest else "file"


def _fsync(value: Any) -> bool:
    if value is None or str(value).strip() == "":
        return True
    try:
        return parse_boolean(value)
    except ValueError:
        raise ConfigurationError(f"{FSYNC_KEY}: {value!r} is not a boolean (true or false)") from None


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()
