"""PyFlink API pieces: partition_custom, project, mutable rows, module paths and PyFlink's print prefix."""

from __future__ import annotations

import importlib

import pytest

from sparkpoint.common import Row, Types
from sparkpoint.datastream import MapFunction, Partitioner
from sparkpoint.errors import JobExecutionError, UserFunctionError
from sparkpoint.runtime.job_output import print_prefix


class Modulo(Partitioner):
    def partition(self, key, num_partitions):
        return key % num_partitions


class OfHowMany(MapFunction):
    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.parallelism = runtime_context.get_number_of_parallel_subtasks()

    def map(self, value):
        return value, self.subtask, self.parallelism


class WhereAmI(MapFunction):
    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        return value, self.subtask


def test_partition_custom_sends_each_record_where_the_partitioner_says(make_env):
    env = make_env("local", **{"execution.epoch.max-records": 4})
    env.set_parallelism(3)
    out = (
        env.from_collection(list(range(30)))
        .partition_custom(Modulo(), lambda v: v)
        .map(WhereAmI())
        .execute_and_collect()
    )
    assert sorted(out) == [(v, v % 3) for v in range(30)]
    lambdas = (
        env.from_collection(list(range(12)))
        .partition_custom(lambda k, n: n - 1 - k % n, lambda v: v)
        .map(WhereAmI())
        .execute_and_collect()
    )
    assert sorted(lambdas) == [(v, 2 - v % 3) for v in range(12)]


def test_a_repartitioning_routes_to_the_next_operators_own_subtasks(make_env):
    """A repartitioning is the edge into the operator after it, as in Flink: ``partition_custom`` asks the partitioner
    with that operator's parallelism, ``broadcast`` copies a record to each of its subtasks, ``global_`` sends every
    record to one subtask. (As its own step at the default parallelism, the records went on round-robin.)"""
    env = make_env("local", **{"execution.epoch.max-records": 4})
    env.set_parallelism(4)
    custom = env.from_collection(list(range(12))).partition_custom(Modulo(), lambda v: v).map(WhereAmI())
    assert sorted(custom.set_parallelism(3).execute_and_collect()) == [(v, v % 3) for v in range(12)]
    copies = env.from_collection(list(range(6))).broadcast().map(WhereAmI()).set_parallelism(2)
    assert sorted(copies.execute_and_collect()) == [(v, i) for v in range(6) for i in range(2)]
    everything = env.from_collection(list(range(12))).global_().map(OfHowMany())
    assert {(i, n) for _, i, n in everything.execute_and_collect()} == {(0, 4)}  # the map keeps its parallelism
    rehashed = env.from_collection(list(range(12))).rebalance().key_by(lambda v: v % 2).map(WhereAmI())
    by_key: dict = {}
    for v, i in rehashed.execute_and_collect():
        by_key.setdefault(v % 2, set()).add(i)
    assert all(len(subtasks) == 1 for subtasks in by_key.values())  # a key_by after it hashes


def test_a_partition_out_of_range_is_named(make_env):
    env = make_env("local")
    env.set_parallelism(2)
    env.from_collection([1, 2, 3]).partition_custom(lambda k, n: 7, lambda v: v).print()
    with pytest.raises((JobExecutionError, UserFunctionError, ValueError), match="returned 7 for record 1"):
        env.execute("bad partitioner")


def test_project_keeps_the_chosen_fields_in_order_with_their_types(make_env):
    env = make_env("local")
    rows = env.from_collection(
        [("a", 1, 2.5), ("b", 2, 3.5)], type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.DOUBLE()])
    )
    projected = rows.project(2, 0)
    assert projected.get_type() == Types.TUPLE([Types.DOUBLE(), Types.STRING()])
    assert sorted(projected.execute_and_collect()) == [(2.5, "a"), (3.5, "b")]
    with pytest.raises(TypeError, match="Only Tuple DataStreams"):
        env.from_collection([1, 2]).project(0)
    with pytest.raises(ValueError, match="between 0 and 2"):
        rows.project(3)


def test_rows_are_mutable_by_index_and_name_not_by_attribute():
    row = Row(name="ada", age=36)
    row[1] += 1
    row["name"] = "Ada"
    assert (row.name, row.age, row[0], list(row), tuple(row)) == ("Ada", 37, "Ada", ["Ada", 37], ("Ada", 37))
    assert row == Row(name="Ada", age=37) and hash(row) == hash(Row(name="Ada", age=37)) and {row: 1}[("Ada", 37)]
    with pytest.raises(AttributeError):
        row.age = 3
    with pytest.raises(ValueError):
        row[0:2] = [1]
    import pickle

    assert pickle.loads(pickle.dumps(row)) == row and pickle.loads(pickle.dumps(row)).as_dict() == {
        "name": "Ada",
        "age": 37,
    }


@pytest.mark.parametrize(
    "module,names",
    [
        ("sparkpoint.datastream.connectors.number_seq", ["NumberSequenceSource"]),
        ("sparkpoint.common.serializer", ["TypeSerializer", "VoidNamespaceSerializer"]),
        (
            "sparkpoint.datastream.window",
            [
                "TimeWindowSerializer",
                "CountWindowSerializer",
                "GlobalWindowSerializer",
                "ContinuousEventTimeTrigger",
                "ContinuousProcessingTimeTrigger",
                "DynamicProcessingTimeSessionWindows",
            ],
        ),
        ("sparkpoint.datastream.checkpointing_mode", ["CheckpointingMode"]),
        (
            "sparkpoint.datastream",
            [
                "Partitioner",
                "Window",
                "GlobalWindow",
                "MergingWindowAssigner",
                "FileSystemCheckpointStorage",
                "JobManagerCheckpointStorage",
                "ConnectedStreams",
                "BroadcastStream",
                "CoProcessFunction",
                "KeyedBroadcastProcessFunction",
            ],
        ),
        ("sparkpoint.datastream.data_stream", ["CloseableIterator", "BroadcastConnectedStream"]),
        ("sparkpoint.common", ["TypeSerializer", "SerializationSchema", "DeserializationSchema"]),
    ],
)
def test_pyflink_module_paths(module, names):
    mod = importlib.import_module(module)
    assert [n for n in names if not hasattr(mod, n)] == []


def test_generic_window_classes_are_subscriptable():
    from sparkpoint.datastream.window import CountWindow, TimeWindow, Trigger, WindowAssigner

    class Mine(WindowAssigner[tuple, TimeWindow]):
        pass

    assert Trigger[tuple, CountWindow] is not None and issubclass(Mine, WindowAssigner)


@pytest.mark.parametrize(
    "identifier,subtask,parallelism,prefix",
    [("name", 0, 1, "name> "), (None, 0, 1, ""), ("name", 1, 2, "name:2> "), (None, 1, 3, "2> ")],
)
def test_print_prefix_is_flinks(identifier, subtask, parallelism, prefix):
    assert print_prefix(identifier, subtask, parallelism) == prefix


def test_a_missing_row_field_is_named_and_caught_as_pyflink_and_dict_code_expect():
    row = Row(name="Ada", age=37)
    for attempt in (lambda: row["height"], lambda: row.__setitem__("height", 1)):
        with pytest.raises(ValueError, match="no field 'height'; its fields are \\['name', 'age'\\]"):
            attempt()  # PyFlink raises ValueError
        with pytest.raises(KeyError):
            attempt()
    with pytest.raises(KeyError, match="have no names"):
        Row(1, 2)["name"]


def test_collect_at_parallelism_one_keeps_the_input_order_across_epochs_and_a_key_by(make_env):
    env = make_env("local", **{"execution.epoch.max-records": 7})
    env.set_parallelism(1)
    out = (
        env.from_collection(list(range(50)))
        .map(lambda x: x * 2)
        .key_by(lambda x: x % 3)
        .map(lambda x: x)
        .execute_and_collect()
    )
    assert list(out) == [x * 2 for x in range(50)]


class Parameter(MapFunction):
    def open(self, runtime_context):
        self.threshold = runtime_context.get_job_parameter("threshold", "0")

    def map(self, value):
        return value, self.threshold


@pytest.mark.parametrize("configured,expected", [("threshold:5, name:x", "5"), ({"threshold": 7}, "7"), (None, "0")])
def test_global_job_parameters_come_from_the_configuration_too(make_env, configured, expected):
    """``pipeline.global-job-parameters`` (Flink's ``k1:v1,k2:v2``, or a map in the configuration file) is what
    ``get_job_parameter`` reads, as ``set_global_job_parameters`` is."""
    env = make_env("local", **({"pipeline.global-job-parameters": configured} if configured is not None else {}))
    env.set_parallelism(1)
    assert list(env.from_collection([1]).map(Parameter()).execute_and_collect()) == [(1, expected)]


def test_a_keyed_connected_stream_maps_and_flat_maps_with_co_functions(make_env):
    """``a.connect(b).key_by(k1, k2).map(CoMapFunction)`` (and ``flat_map``), as PyFlink runs them: it failed on the
    keyed co-process operator asking the adapter for ``on_timer``."""
    from sparkpoint.datastream import CoFlatMapFunction, CoMapFunction

    class Label(CoMapFunction):
        def map1(self, value):
            return "a", value

        def map2(self, value):
            return "b", value

    class Twice(CoFlatMapFunction):
        def flat_map1(self, value):
            yield from (value, value)

        def flat_map2(self, value):
            yield -value

    env = make_env("local")
    env.set_parallelism(2)
    keyed = (
        env.from_collection([1, 2, 3]).connect(env.from_collection([10, 20])).key_by(lambda v: v % 2, lambda v: v % 2)
    )
    assert sorted(keyed.map(Label()).execute_and_collect()) == [("a", 1), ("a", 2), ("a", 3), ("b", 10), ("b", 20)]
    assert sorted(keyed.flat_map(Twice()).execute_and_collect()) == [-20, -10, 1, 1, 2, 2, 3, 3]


def test_python_files_set_in_the_configuration_at_any_time_join_those_added_each_once():
    """``python.files`` (Flink's ``-pyfs``) is read when the job is submitted, as PyFlink does, and
    ``add_python_file`` adds to it: configured later or given twice, each file is shipped once."""
    from sparkpoint.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_configuration().set_string("python.files", "deps.zip, helpers/")
    env.add_python_file("job_lib.py")
    env.add_python_file("deps.zip")
    env.from_collection([1]).print()
    assert env._pipeline("j").python_files == ("deps.zip", "helpers/", "job_lib.py")
