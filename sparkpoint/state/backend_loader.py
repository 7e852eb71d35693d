"""Which ``StateBackend`` a job uses: configured names and API objects mapped to runtime backends.

Flink's ``StateBackendLoader``. ``state.backend.type`` names the backend (``hashmap``);
Flink 1.x's ``state.backend`` key and its names ``filesystem`` and ``jobmanager`` (heap
state with checkpoints elsewhere) mean ``hashmap`` too. The API's classes
(``sparkpoint.datastream.state_backend``) only carry a name: the state layer maps it to a
runtime backend here, never the reverse. A new backend registers itself with
:func:`register_state_backend`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sparkpoint.errors import ConfigurationError
from sparkpoint.state.backend import StateBackend
from sparkpoint.state.hashmap import HashMapStateBackend

__all__ = [
    "STATE_BACKEND_KEYS",
    "load_state_backend",
    "load_state_backend_from_config",
    "register_state_backend",
]

#: Configuration keys naming the state backend, newest first.
STATE_BACKEND_KEYS = ("state.backend.type", "state.backend")

_FACTORIES: dict[str, Callable[[], StateBackend]] = {}
_ALIASES: dict[str, str] = {}


def register_state_backend(name: str, factory: Callable[[], StateBackend], aliases: tuple[str, ...] = ()) -> None:
    """Make ``name`` (and ``aliases``) configurable; ``factory()`` builds the backend."""
    _FACTORIES[name] = factory
    for alias in (name, *aliases):
        _ALIASES[alias] = name


register_state_backend("hashmap", HashMapStateBackend, aliases=("heap", "memory", "filesystem", "jobmanager"))


def load_state_backend(spec: Any = None) -> StateBackend:
    """The runtime backend for ``spec``: ``None`` (hashmap), a name, an API state backend object
    (anything with a ``name``) or a runtime :class:`StateBackend` (returned as it is)."""
    if spec is None:
        return _FACTORIES["hashmap"]()
    if isinstance(spec, StateBackend):
        return spec
    name = spec if isinstance(spec, str) else getattr(spec, "name", None)
    if not isinstance(name, str):
        raise ConfigurationError(f"cannot use {spec!r} as a state backend: give a name such as 'hashmap'")
    canonical = _ALIASES.get(name.strip().lower())
    if canonical is None:
        raise ConfigurationError(
            f"unknown state backend {name!r} (state.backend.type); known: {', '.join(sorted(_FACTORIES))}")
    return _FACTORIES[canonical]()


def load_state_backend_from_config(config: Mapping[str, Any], default: str | None = "hashmap") -> StateBackend:
    """The backend named by ``state.backend.type`` (or Flink 1.x's ``state.backend``) in ``config``."""
    for key in STATE_BACKEND_KEYS:
        value = config.get(key)
        if value:
            return load_state_backend(str(value))
    return load_state_backend(default)
