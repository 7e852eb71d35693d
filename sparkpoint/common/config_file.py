"""A configuration file (Flink's ``flink-conf.yaml`` or ``config.yaml``) read into flat keys.

Flink 1.x's ``flink-conf.yaml`` holds flat ``key: value`` lines; Flink 2's ``config.yaml`` is
standard YAML whose nested mappings spell the same keys (``execution: {checkpointing:
{interval: 10 s}}`` is ``execution.checkpointing.interval``). Both read the same here. The
file may be a local path or any fsspec URL (``s3://``, ``hdfs://``, ...).
"""

from __future__ import annotations

from typing import Any

import yaml

from sparkpoint.errors import ConfigurationError

__all__ = ["load_config_file", "flatten"]


def load_config_file(path: str) -> dict[str, Any]:
    """The file's keys, nested mappings flattened into dotted keys.

    Raises:
        ConfigurationError: the file cannot be read, is not YAML, or is not a mapping.
    """
    import fsspec

    try:
        with fsspec.open(path, "r") as f:
            data = yaml.safe_load(f.read()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ConfigurationError(f"cannot read the configuration file {path}: {e}") from e
    if not isinstance(data, dict):
        raise ConfigurationError(
            f"the configuration file {path} must hold a mapping of configuration keys, not a {type(data).__name__}"
        )
    return flatten(data)


def flatten(mapping: dict, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` as ``{"a.b": 1}``."""
    out: dict[str, Any] = {}
    for k, v in mapping.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out
