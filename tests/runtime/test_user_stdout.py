"""``print()`` in a user function on Spark reaches the driver's stdout, as PyFlink's reaches the client's.

PySpark hands a Python worker's stdout to the executor's log (in ``local[2]`` the driver's stderr); PyFlink 2.3.0
prints a function's ``print()`` on the stdout of ``python job.py`` (recorded: ``seen 0`` ... ``seen 5`` on stdout,
nothing on stderr). Both execution modes, epochs and long-running slots.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark


def show(x: int) -> int:
    print(f"seen {x}")
    return x


@pytest.mark.parametrize("mode", ["epoch", "continuous"])
def test_a_print_in_a_function_goes_to_the_driver_stdout(spark, make_env, capsys, mode):
    env = make_env("spark", **{"sparkpoint.execution.mode": mode})
    env.set_parallelism(2)
    with env.from_collection(list(range(6))).map(show).execute_and_collect() as records:
        assert sorted(records) == list(range(6))
    out = capsys.readouterr().out
    assert sorted(line for line in out.splitlines() if line.startswith("seen")) == [f"seen {i}" for i in range(6)]
