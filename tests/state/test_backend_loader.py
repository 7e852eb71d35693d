"""Configured names and API objects map to runtime state backends."""

from __future__ import annotations

import pytest

from sparkpoint.datastream.state_backend import FsStateBackend, HashMapStateBackend, MemoryStateBackend
from sparkpoint.errors import ConfigurationError
from sparkpoint.state.backend import KeyedStateBackend, StateBackend
from sparkpoint.state.backend_loader import load_state_backend, load_state_backend_from_config
from sparkpoint.state.hashmap import HashMapKeyedStateBackend
from sparkpoint.state.key_groups import KeyGroupRange


@pytest.mark.parametrize(
    "spec",
    [
        None,
        "hashmap",
        " HashMap ",
        "filesystem",
        "jobmanager",
        HashMapStateBackend(),
        MemoryStateBackend(),
        FsStateBackend("file:///checkpoints"),
    ],
)
def test_hashmap_and_its_flink_names(spec):
    backend = load_state_backend(spec)
    assert isinstance(backend, StateBackend) and backend.name == "hashmap"
    keyed = backend.create_keyed_backend(KeyGroupRange(3, 9), 16)
    assert isinstance(keyed, KeyedStateBackend) and isinstance(keyed, HashMapKeyedStateBackend)
    assert (keyed.key_group_range, keyed.max_parallelism) == (KeyGroupRange(3, 9), 16)


def test_a_runtime_backend_is_used_as_it_is():
    backend = load_state_backend("hashmap")
    assert load_state_backend(backend) is backend


@pytest.mark.parametrize(
    "config", [{"state.backend.type": "hashmap"}, {"state.backend": "filesystem"}, {"state.backend": "jobmanager"}, {}]
)
def test_from_configuration(config):
    assert load_state_backend_from_config(config).name == "hashmap"


def test_new_key_wins_over_flink_1_key():
    with pytest.raises(ConfigurationError, match="unknown state backend 'nope'"):
        load_state_backend_from_config({"state.backend.type": "nope", "state.backend": "hashmap"})


@pytest.mark.parametrize("spec", ["rocks", 42])
def test_unknown_backends_are_refused(spec):
    with pytest.raises(ConfigurationError):
        load_state_backend(spec)
