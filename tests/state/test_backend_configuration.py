"""The configured state backend reaches the tasks, and a wrong one fails at submission."""

from __future__ import annotations

import pytest

from sparkpoint.errors import ConfigurationError


def _job(env):
    env.set_parallelism(2)
    return env.from_collection([("a", 1), ("b", 2), ("a", 3)]).key_by(lambda r: r[0]).sum(1)


@pytest.mark.parametrize("key", ["state.backend.type", "state.backend"])
def test_an_unknown_backend_fails_before_anything_runs(make_env, key):
    env = make_env("local", **{key: "nosuch"})
    stream = _job(env)
    with pytest.raises(ConfigurationError, match="unknown state backend 'nosuch'"):
        list(stream.execute_and_collect())


@pytest.mark.parametrize(
    "key,name", [("state.backend.type", "hashmap"), ("state.backend", "filesystem"), ("state.backend", "jobmanager")]
)
def test_flink_names_of_the_heap_backend_run_the_job(make_env, key, name):
    got = _job(make_env("local", **{key: name})).execute_and_collect()
    assert sorted(got) == [("a", 1), ("a", 4), ("b", 2)]  # running sums, by hand


def test_the_plan_carries_the_runtime_backend(make_env):
    from sparkpoint.runtime.translation import StreamGraphGenerator
    from sparkpoint.state.backend import StateBackend

    env = make_env("local", **{"state.backend": "filesystem"})
    _job(env).print()
    plan = StreamGraphGenerator(env._pipeline("j")).translate()
    assert isinstance(plan.state_backend, StateBackend) and plan.state_backend.name == "hashmap"
