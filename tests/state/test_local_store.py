"""The per-task working state file: what a task saves, the next epoch's task loads as it was, whatever the
values' classes (pickled where pickle can, by cloudpickle where it cannot)."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

from sparkpoint.common.pickling import dumps
from sparkpoint.datastream.window import TimeWindow
from sparkpoint.state.local_store import LocalStateStore


class Importable:
    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return type(other) is Importable and other.n == self.n


def test_a_task_state_of_any_classes_comes_back_as_it_was(tmp_path):
    class Local:  # not importable by its name: cloudpickle writes it by value
        def __init__(self, n: int) -> None:
            self.n = n

    state = {
        3: {"window-contents": {(7, TimeWindow(0, 10)): 5, ("k", TimeWindow(10, 20)): [1, 2]}},
        4: {"acc": {("x", None): Importable(2), ("y", None): Local(3), ("z", None): lambda v: v + 1}},
    }
    store = LocalStateStore(tmp_path.as_uri(), "f" * 32, 1, 0)
    store.save(5, state)
    got = LocalStateStore(tmp_path.as_uri(), "f" * 32, 1, 0).load(5, "a test's state")
    assert got[3] == state[3] and type(next(iter(got[3]["window-contents"]))[1]) is TimeWindow
    acc = got[4]["acc"]
    assert acc[("x", None)] == Importable(2) and acc[("y", None)].n == 3 and acc[("z", None)](1) == 2


def test_dumps_is_pickle_where_pickle_can_and_loads_elsewhere_where_it_cannot(tmp_path):
    """A class of the job's script reaches a Spark worker by value (cloudpickle); an accumulator of it that the
    worker writes with ``dumps`` must load in another process too, where no such class is importable."""
    plain = {(1, TimeWindow(0, 10)): [1.5, "a", None], "k": Importable(4)}
    assert dumps(plain) == pickle.dumps(plain, pickle.HIGHEST_PROTOCOL)
    job = tmp_path / "job.py"  # the driver: the class in its __main__, shipped by value
    job.write_text(
        textwrap.dedent(
            """
            import sys
            import cloudpickle

            class Acc:
                def __init__(self, n):
                    self.n = n

            sys.stdout.buffer.write(cloudpickle.dumps(Acc(9)))
            """
        )
    )
    shipped = subprocess.run([sys.executable, str(job)], capture_output=True, check=True).stdout
    worker = (  # a worker: another __main__; it loads the value and writes its state with dumps
        "import pickle, sys; from sparkpoint.common.pickling import dumps; "
        "acc = pickle.loads(sys.stdin.buffer.read()); sys.stdout.buffer.write(dumps({'acc': acc}))"
    )
    written = subprocess.run([sys.executable, "-c", worker], input=shipped, capture_output=True, check=True).stdout
    assert pickle.loads(written)["acc"].n == 9  # here, a third process


def test_a_class_of_the_scripts_main_goes_by_value_even_where_pickle_finds_it(tmp_path):
    """Where the job's script is ``__main__`` (the driver, the in-process executor) pickle would write its
    classes by name, which another process cannot find (a checkpoint restored on Spark, read by inspect):
    they go by value, and the state loads in another process."""
    job = tmp_path / "job.py"
    job.write_text(
        textwrap.dedent(
            """
            import sys
            from sparkpoint.common.pickling import dumps

            class Acc:
                def __init__(self, n):
                    self.n = n

            sys.stdout.buffer.write(dumps({("k", None): Acc(5)}, sticky="a test's"))
            """
        )
    )
    body = subprocess.run([sys.executable, str(job)], capture_output=True, check=True).stdout
    assert pickle.loads(body)[("k", None)].n == 5
