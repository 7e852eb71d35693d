"""The API describes: DataStream calls add frozen transformations and import no runtime code."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from sparkpoint.common import Time
from sparkpoint.datastream import OutputTag, StreamExecutionEnvironment
from sparkpoint.datastream.transformations import (
    KeyedTransformation,
    OneInputTransformation,
    Partitioning,
    SinkTransformation,
    SourceTransformation,
    WindowTransformation,
)
from sparkpoint.datastream.window import TumblingEventTimeWindows
from sparkpoint.errors import JobGraphError

DATASTREAM = Path(__file__).resolve().parents[2] / "sparkpoint" / "datastream"
FORBIDDEN = (
    "sparkpoint.runtime",
    "sparkpoint.operators",
    "sparkpoint.windows",
    "sparkpoint.state",
    "sparkpoint.checkpoint",
    "pyspark",
)


def _imported_modules(path: Path) -> set[str]:
    """Every module an import statement of the file names, at any depth (inside functions too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_datastream_imports_nothing_of_the_runtime():
    offending = {
        f"{path.relative_to(DATASTREAM)}: {name}"
        for path in sorted(DATASTREAM.rglob("*.py"))
        for name in _imported_modules(path)
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
    }
    assert offending == set()


def test_describing_a_job_loads_no_runtime_module():
    code = (
        "import sys\n"
        "from sparkpoint.common import Time\n"
        "from sparkpoint.datastream import StreamExecutionEnvironment\n"
        "from sparkpoint.datastream.window import TumblingEventTimeWindows\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "(env.from_collection([(1, 2)]).map(lambda v: v).key_by(lambda v: v[0])\n"
        " .window(TumblingEventTimeWindows.of(Time.seconds(1))).reduce(lambda a, b: a).uid('w').print())\n"
        "print(sorted(m for m in sys.modules if m.split('.')[:2] in (['sparkpoint', 'runtime'],\n"
        "      ['sparkpoint', 'operators'], ['sparkpoint', 'windows'], ['sparkpoint', 'checkpoint'])\n"
        "      or m.startswith('pyspark')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=DATASTREAM.parents[1]
    )
    assert out.stdout.strip() == "[]"


def _transformations(env):
    return [env._transformations[i] for i in sorted(env._transformations)]


def test_calls_add_frozen_transformations():
    env = StreamExecutionEnvironment.get_execution_environment()
    late = OutputTag("late")
    keyed = env.from_collection([("a", 1)]).map(lambda v: v).key_by(lambda v: v[0])
    windowed = (
        keyed.window(TumblingEventTimeWindows.of(Time.seconds(5)))
        .allowed_lateness(1000)
        .side_output_late_data(late)
        .reduce(lambda a, b: a)
    )
    windowed.sink_to(object())
    source, mapped, window, sink = _transformations(env)
    assert isinstance(source, SourceTransformation) and source.parallelism == 1 and source.inputs == ()
    assert isinstance(mapped, OneInputTransformation) and mapped.kind == "map"
    assert mapped.inputs[0].id == source.id and mapped.inputs[0].partitioning is Partitioning.FORWARD
    assert isinstance(window, WindowTransformation) and window.kind == "window" and window.keyed
    assert window.inputs[0].partitioning is Partitioning.HASH and window.inputs[0].key_selector is not None
    assert (window.function_kind, window.allowed_lateness, window.late_tag) == ("reduce", 1000, late)
    assert window.trigger is None and window.reduce_function is not None
    assert isinstance(sink, SinkTransformation) and sink.inputs[0].id == window.id
    with pytest.raises(dataclasses.FrozenInstanceError):
        mapped.name = "changed"  # type: ignore[misc]


def test_uid_name_and_parallelism_replace_the_transformation():
    env = StreamExecutionEnvironment.get_execution_environment()
    stream = env.from_collection([1, 2]).map(lambda v: v)
    before = env._transformations[stream._id]
    stream.uid("m").name("Renamed").set_parallelism(3).set_max_parallelism(64)
    after = env._transformations[stream._id]
    assert before is not after
    assert (before.uid, before.name, before.parallelism) == (None, "Map", None)
    assert (after.uid, after.name, after.parallelism, after.max_parallelism) == ("m", "Renamed", 3, 64)
    assert stream.get_name() == "Renamed" and stream.get_parallelism() == 3
    assert after.function is before.function


def test_keyed_operations_and_window_all():
    env = StreamExecutionEnvironment.get_execution_environment()
    keyed = env.from_collection([(1, 2)]).key_by(0)
    summed = keyed.sum(1)
    t = env._transformations[summed._id]
    assert isinstance(t, KeyedTransformation) and (t.kind, t.name, t.keyed) == ("reduce", "Keyed Sum", True)
    assert t.key_selector.get_key((7, 8)) == 7
    everything = (
        env.from_collection([1]).window_all(TumblingEventTimeWindows.of(Time.seconds(1))).apply(lambda w, vs: vs)
    )
    w = env._transformations[everything._id]
    assert (w.keyed_stream, w.parallelism, w.inputs[0].partitioning) == (False, 1, Partitioning.GLOBAL)
    with pytest.raises(JobGraphError):
        everything.set_parallelism(2)
    with pytest.raises(TypeError):
        keyed.window(TumblingEventTimeWindows.of(Time.seconds(1))).process(42)
