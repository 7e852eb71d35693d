"""``Configuration``: flink-conf keys and values, as in ``pyflink.common.Configuration``.

Values are kept as given (strings from YAML or ``-D`` are parsed on read by the typed
getters), so a key set from code, from a config file or ``-D key=value`` reads the same.
Flink 2.x and 1.x spellings of one setting are one key (:mod:`sparkpoint.common.config_keys`).
"""

from __future__ import annotations

import builtins
import logging
import re
from collections.abc import Iterator, Mapping
from typing import Any

from sparkpoint.common.config_keys import ALIASES, FLINK2_NAME, PREFERRED

__all__ = [
    "Configuration",
    "DEFAULT_MAX_PARALLELISM",
    "parse_boolean",
    "parse_comma_list",
    "parse_duration_ms",
    "parse_memory_bytes",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_PARALLELISM = 128
"""Flink's default max parallelism (``pipeline.max-parallelism``): the number of key groups."""

_DURATION_UNITS = {
    "ms": 1,
    "milli": 1,
    "millis": 1,
    "millisecond": 1,
    "milliseconds": 1,
    "s": 1000,
    "sec": 1000,
    "secs": 1000,
    "second": 1000,
    "seconds": 1000,
    "min": 60_000,
    "m": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
}
_MEMORY_UNITS = {"b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3, "gb": 1024**3}


def parse_duration_ms(value: Any) -> int:
    """Parse Flink duration text (``"10 s"``, ``"1min"``, ``"500"`` = ms) into milliseconds."""
    if isinstance(value, (int, float)):
        return int(value)
    if hasattr(value, "to_milliseconds"):
        return int(value.to_milliseconds())
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(value))
    if not m or (m.group(2) and m.group(2).lower() not in _DURATION_UNITS):
        raise ValueError(f"not a duration: {value!r} (examples: '500 ms', '10 s', '1 min')")
    return int(m.group(1)) * _DURATION_UNITS[m.group(2).lower() or "ms"]


def parse_memory_bytes(value: Any) -> int:
    """Parses Flink memory-size text (``"128 mb"``, ``"1g"``, ``"512"`` = bytes) into bytes.

    Args:
        value: An int (bytes) or the text.

    Raises:
        ValueError: If the text is not a memory size.
    """
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(value))
    if not m or (m.group(2) and m.group(2).lower() not in _MEMORY_UNITS):
        raise ValueError(f"not a memory size: {value!r} (examples: '128 mb', '1 gb')")
    return int(m.group(1)) * _MEMORY_UNITS[m.group(2).lower() or "b"]


def parse_boolean(value: Any) -> bool:
    """Parse a Flink boolean (``true`` / ``false``, any case; a Python or YAML bool as it is)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"not a boolean: {value!r} (true or false)")
    return text == "true"


def parse_comma_list(value: Any) -> list[str]:
    """A comma-separated setting's entries (``python.files``), each once, in order; None: none."""
    return list(dict.fromkeys(f.strip() for f in str(value or "").split(",") if f.strip()))


class Configuration:
    """A mutable map of configuration keys to values."""

    def __init__(self, other: Configuration | Mapping[str, Any] | None = None, j_configuration: Any = None):
        self._data: dict[str, Any] = {}
        self._preferred: set[str] = set()  # keys whose value came from the Flink 2.x spelling
        if other is not None:
            self.add_all(other)

    def set_string(self, key: str, value: str) -> Configuration:
        """Sets a key to a string.

        Args:
            key: The key, in its Flink 2.x or 1.x spelling.
            value: The value.
        """
        return self.set(key, value)

    def set(self, key: str, value: Any) -> Configuration:
        """Sets a key to a value, kept as given (typed getters parse it on read).

        If the Flink 2.x spelling of the setting was given, a later Flink 1.x spelling is ignored with a warning.

        Args:
            key: The key, in its Flink 2.x or 1.x spelling.
            value: The value.
        """
        read = ALIASES.get(key, key)
        if key in PREFERRED:
            self._preferred.add(read)
        elif read in self._preferred and self._data.get(read) != value:
            logger.warning(
                "configuration: %r = %r is ignored: the Flink 2.x spelling of the setting was given too, and wins (%r)",
                key,
                value,
                self._data.get(read),
            )
            return self
        self._data[read] = value
        return self

    def set_integer(self, key: str, value: int) -> Configuration:
        """Sets a key to an integer.

        Args:
            key: The key, in its Flink 2.x or 1.x spelling.
            value: The value.
        """
        return self.set(key, int(value))

    set_long = set_integer

    def set_boolean(self, key: str, value: bool) -> Configuration:
        """Sets a key to a boolean.

        Args:
            key: The key, in its Flink 2.x or 1.x spelling.
            value: The value.
        """
        return self.set(key, bool(value))

    def set_float(self, key: str, value: float) -> Configuration:
        """Sets a key to a float.

        Args:
            key: The key, in its Flink 2.x or 1.x spelling.
            value: The value.
        """
        return self.set(key, float(value))

    def get_string(self, key: str, default_value: str | None = None) -> str | None:
        """Returns a key's value as a string.

        Args:
            key: The key, in its Flink 2.x or 1.x spelling.
            default_value: What to return if the key is not set.
        """
        v = self._data.get(ALIASES.get(key, key), default_value)
        return None if v is None else str(v)

    def get(self, key: str, default: Any = None) -> Any:
        """Returns a key's value as it was given.

        Args:
            key: The key, in its Flink 2.x or 1.x spelling.
            default: What to return if the key is not set.
        """
        return self._data.get(ALIASES.get(key, key), default)

    def get_integer(self, key: str, default_value: int = 0) -> int:
        """Returns a key's value as an integer.

        Args:
            key: The key, in its Flink 2.x or 1.x spelling.
            default_value: What to return if the key is not set.
        """
        v = self.get(key)
        return default_value if v is None else int(v)

    get_long = get_integer

    def get_float(self, key: str, default_value: float = 0.0) -> float:
        """Returns a key's value as a float.

        Args:
            key: The key, in its Flink 2.x or 1.x spelling.
            default_value: What to return if the key is not set.
        """
        v = self.get(key)
        return default_value if v is None else float(v)

    def get_boolean(self, key: str, default_value: bool = False) -> bool:
        """Returns a key's value as a boolean (text ``true``, ``1``, ``yes`` and ``on`` are true).

        Args:
            key: The key, in its Flink 2.x or 1.x spelling.
            default_value: What to return if the key is not set.
        """
        v = self.get(key)
        if v is None:
            return default_value
        if isinstance(v, str):
            return v.strip().lower() in ("true", "1", "yes", "on")
        return bool(v)

    def get_duration_ms(self, key: str, default_ms: int | None = None) -> int | None:
        """Returns a key's duration in milliseconds (``"10 s"``, ``"1 min"``, a bare number is ms).

        Args:
            key: The key, in its Flink 2.x or 1.x spelling.
            default_ms: What to return if the key is not set.

        Raises:
            ValueError: If the value is not a duration.
        """
        v = self.get(key)
        return default_ms if v is None else parse_duration_ms(v)

    def contains_key(self, key: str) -> bool:
        """Returns whether a key is set (under either spelling).

        Args:
            key: The key, in its Flink 2.x or 1.x spelling.
        """
        return ALIASES.get(key, key) in self._data

    def remove_config(self, key: str) -> bool:
        """Removes a key; returns whether it was set.

        Args:
            key: The key, in its Flink 2.x or 1.x spelling.
        """
        return self._data.pop(ALIASES.get(key, key), None) is not None

    def add_all(self, other: Configuration | Mapping[str, Any], prefix: str | None = None) -> Configuration:
        """Sets every key of another configuration or mapping.

        Args:
            other: A ``Configuration`` or a mapping of keys to values.
            prefix: Put before every key, or ``None``.
        """
        items = other._as_given() if isinstance(other, Configuration) else dict(other)
        for k, v in items.items():
            self.set((prefix or "") + k, v)
        return self

    def _as_given(self) -> dict[str, Any]:
        """The settings under the spelling they were given in where that was Flink 2.x's (so it keeps winning)."""
        return {FLINK2_NAME[k] if k in self._preferred else k: v for k, v in self._data.items()}

    def key_set(self) -> builtins.set[str]:
        """Returns the keys that are set."""
        return builtins.set(self._data)

    def to_dict(self) -> dict:
        """Returns the settings as a dict."""
        return dict(self._data)

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __contains__(self, key: str) -> bool:
        return ALIASES.get(key, key) in self._data

    def __repr__(self) -> str:
        return f"Configuration({self._data!r})"
