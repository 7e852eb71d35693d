"""Which ``StateBackend`` a job uses: configured names and API objects mapped to runtime backends.

Flink's ``StateBackendLoader``. ``state.backend.type`` names the backend (``hashmap``);
Flink 1.x's ``state.backend`` key and its names ``filesystem`` and ``jobmanager`` (heap
state with checkpoints elsewhere) mean ``hashmap`` too. The API's classes
(``sparkpoint.datastream.state_backend``) only carry a name: the state layer maps it to a
runtime backend here, never the reverse. A new backend registers itself with
:func:`register_state_backend`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from sparkpoint.datastream.state_backend import HASHMAP_NAMES, ROCKSDB_NAMES
from sparkpoint.errors import ConfigurationError
from sparkpoint.state.backend import StateBackend

__all__ = ["STATE_BACKEND_KEYS", "load_state_backend", "load_state_backend_from_config", "register_state_backend"]

#: Configuration keys naming the state backend, newest first.
STATE_BACKEND_KEYS = ("state.backend.type", "state.backend")

Factory = Callable[[], StateBackend] | str
_FACTORIES: dict[str, Factory] = {}
_ALIASES: dict[str, str] = {}


def register_state_backend(name: str, factory: Factory, aliases: tuple[str, ...] = ()) -> None:
    """Make ``name`` (and ``aliases``) configurable; ``factory()`` builds the backend.

    ``factory`` may be a ``"module:attribute"`` path, imported on first use: a backend's
    module (and what it needs, such as RocksDB) is loaded only by jobs that use it.
    """
    _FACTORIES[name] = factory
    for alias in (name, *aliases):
        _ALIASES[alias] = name


def _build(name: str) -> StateBackend:
    factory = _FACTORIES[name]
    if isinstance(factory, str):
        module, _, attribute = factory.partition(":")
        factory = _FACTORIES[name] = getattr(importlib.import_module(module), attribute)
    return factory()


register_state_backend("hashmap", "sparkpoint.state.hashmap:HashMapStateBackend", aliases=HASHMAP_NAMES)
register_state_backend("rocksdb", "sparkpoint.state.rocksdb:EmbeddedRocksDBStateBackend", aliases=ROCKSDB_NAMES)


def load_state_backend(spec: Any = None) -> StateBackend:
    """The runtime backend for ``spec``: ``None`` (hashmap), a name, an API state backend object
    (anything with a ``name``) or a runtime :class:`StateBackend` (returned as it is)."""
    if spec is None:
        return _build("hashmap")
    if isinstance(spec, StateBackend):
        return spec
    name = spec if isinstance(spec, str) else getattr(spec, "name", None)
    if not isinstance(name, str):
        raise ConfigurationError(f"cannot use {spec!r} as a state backend: give a name such as 'hashmap'")
    canonical = _ALIASES.get(name.strip().lower())
    if canonical is None:
        raise ConfigurationError(
            f"unknown state backend {name!r} (state.backend.type); known: {', '.join(sorted(_FACTORIES))}"
        )
    return _build(canonical)


def load_state_backend_from_config(config: Mapping[str, Any], default: str | None = "hashmap") -> StateBackend:
    """The backend named by ``state.backend.type`` (or Flink 1.x's ``state.backend``) in ``config``."""
    for key in STATE_BACKEND_KEYS:
        value = config.get(key)
        if value:
            return load_state_backend(str(value))
    return load_state_backend(default)
