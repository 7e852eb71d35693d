"""execute(): executors found by name, generated uids that survive renaming, legacy state backends."""

from __future__ import annotations

from collections import Counter
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import sparkpoint.datastream.pipeline_executor as pipeline_executor
from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import FsStateBackend, MemoryStateBackend
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.pipeline_executor import BUILTIN_EXECUTORS, PipelineExecutorServiceLoader, load_object
from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.local_executor import LocalPipelineExecutor
from tests.checkpoint.test_checkpointing import Count, chk_dirs, key_of, oracle_totals, run_until_checkpoints


def unnamed_counting_job(env, count: int, ckpt_dir: Path, source_name: str, count_name: str, rate=None):
    """The counting job of the checkpoint tests, but without any uid()."""
    env.enable_checkpointing(1)
    cc = env.get_checkpoint_config()
    cc.set_checkpoint_storage_dir(ckpt_dir.as_uri())
    cc.set_externalized_checkpoint_retention("RETAIN_ON_CANCELLATION")
    env.get_configuration().set("state.checkpoints.num-retained", 3)
    env.set_parallelism(2)
    src = DataGeneratorSource(key_of, count, num_splits=2, records_per_second=rate)
    return (
        env.from_source(src, WatermarkStrategy.no_watermarks(), source_name)
        .key_by(lambda k: k)
        .process(Count())
        .name(count_name)
    )


def test_renamed_operators_without_uid_restore_from_a_checkpoint(make_env, tmp_path):
    count = 3_000
    ck = tmp_path / "ck"
    env = make_env("local", **{"execution.epoch.max-records": 20})
    stream = unnamed_counting_job(env, count, ck, "gen", "Count", rate=2_000)
    run_until_checkpoints(env, stream, ck, 3)
    restore_from = chk_dirs(ck)[-1]

    # the same job with both stateful operators renamed: their state (source positions,
    # keyed counts) must still be found, or the restore fails on state without an operator
    env2 = make_env(
        "local", **{"execution.epoch.max-records": 20, "execution.savepoint.path": restore_from + "/_metadata"}
    )
    stream2 = unnamed_counting_job(env2, count, tmp_path / "ck2", "renamed source", "Renamed count")
    got = list(stream2.execute_and_collect())
    last: dict[str, int] = {}
    for key, n in got:
        last[key] = max(last.get(key, 0), n)
    assert last == dict(oracle_totals(count))
    assert min(n for _, n in got) > 1  # the counts continued from the checkpoint


def test_fs_state_backend_sets_the_checkpoint_directory(make_env, tmp_path):
    ck = tmp_path / "fs-backend"
    env = make_env("local", **{"execution.epoch.max-records": 50})
    env.set_state_backend(FsStateBackend(ck.as_uri()))
    assert env.get_checkpoint_config().get_checkpoint_storage_dir() == ck.as_uri()
    assert isinstance(env.get_state_backend(), FsStateBackend)
    env.enable_checkpointing(1)
    env.get_checkpoint_config().set_externalized_checkpoint_retention("RETAIN_ON_CANCELLATION")
    src = DataGeneratorSource(key_of, 10**9, records_per_second=20_000)
    stream = (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(Count())
        .uid("count")
    )
    run_until_checkpoints(env, stream, ck, 1)
    assert [Path(d, "_metadata").exists() for d in chk_dirs(ck)][-1:] == [True]


def test_legacy_backends_take_their_directories_by_keyword(make_env, tmp_path):
    env = make_env("local")
    env.set_state_backend(
        FsStateBackend(checkpoint_directory_uri="file:///ck", default_savepoint_directory_uri="file:///sp")
    )
    assert env.get_configuration().get_string("state.checkpoints.dir") == "file:///ck"
    assert env.get_configuration().get_string("state.savepoints.dir") == "file:///sp"
    env.set_state_backend(MemoryStateBackend(checkpoint_path="file:///mem-ck"))
    assert env.get_checkpoint_config().get_checkpoint_storage_dir() == "file:///mem-ck"


def test_every_builtin_target_names_an_executor():
    for name, path in BUILTIN_EXECUTORS.items():
        assert callable(load_object(path).execute), name
    assert {"local", "spark", "remote", "yarn", "kubernetes", "local-spark"} <= set(BUILTIN_EXECUTORS)


def test_unknown_target_fails_naming_the_known_ones(make_env):
    env = make_env("nowhere")
    env.from_collection([1]).print()
    with pytest.raises(ConfigurationError, match="'nowhere'.*local.*spark"):
        env.execute()


class RecordingExecutor(LocalPipelineExecutor):
    """A third-party executor: runs locally and remembers what it was given."""

    seen: list = []

    def execute(self, pipeline, configuration, context):
        RecordingExecutor.seen.append(pipeline)
        return super().execute(pipeline, configuration, context)


def test_third_party_executor_found_through_its_entry_point(make_env, monkeypatch):
    ep = EntryPoint(name="recording", value=f"{__name__}:RecordingExecutor", group="sparkpoint.executors")
    monkeypatch.setattr(
        pipeline_executor, "entry_points", lambda group: [ep] if group == "sparkpoint.executors" else []
    )
    assert "recording" in PipelineExecutorServiceLoader().names()
    RecordingExecutor.seen.clear()
    env = make_env("recording")
    out = env.from_collection([1, 2, 3]).map(lambda v: v * 10).execute_and_collect("by entry point")
    assert sorted(out) == [10, 20, 30]
    assert [p.job_name for p in RecordingExecutor.seen] == ["by entry point"]
    assert Counter(t.kind for t in RecordingExecutor.seen[0].transformations) == Counter(
        {"source": 1, "map": 1, "collect": 1}
    )
