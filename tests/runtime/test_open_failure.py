"""A user function whose ``open()`` raises: the error names the operator, its uid and ``open()``, and keeps
the function's traceback, in this process and across a Spark task's boundary."""

from __future__ import annotations

import os

import pytest

from sparkpoint.datastream import KeyedProcessFunction, MapFunction
from sparkpoint.errors import UserFunctionError, UserFunctionOpenError

TARGETS = ["local", pytest.param("spark", marks=pytest.mark.spark)]


class LoadsAModel(MapFunction):
    def open(self, runtime_context) -> None:
        self.model = load_model("models/churn.bin")

    def map(self, value):
        return value


def load_model(path: str) -> object:
    raise FileNotFoundError(f"no model at {path}")


class CountsWithState(KeyedProcessFunction):
    def open(self, runtime_context) -> None:
        raise RuntimeError("the rules service refused the connection")

    def process_element(self, value, ctx):
        yield value


@pytest.mark.parametrize("target", TARGETS)
def test_open_failing_names_the_operator_and_keeps_the_traceback(make_env, target, request):
    if target == "spark":
        request.getfixturevalue("spark")
    env = make_env(target)
    env.from_collection([1, 2, 3]).map(LoadsAModel()).name("score").uid("score-v1").print()
    with pytest.raises(UserFunctionError) as info:
        env.execute()
    err = info.value
    assert isinstance(err, UserFunctionOpenError)
    assert (err.uid, err.operator_name) == ("score-v1", "score")
    assert str(err).startswith("open() of the user function of operator 'score' (uid 'score-v1') failed in epoch")
    assert str(err).endswith("FileNotFoundError: no model at models/churn.bin"), str(err)
    trace = err.traceback_text()
    assert "in load_model" in trace and 'self.model = load_model("models/churn.bin")' in trace, trace


@pytest.mark.parametrize("target", TARGETS)
def test_open_failing_in_a_keyed_function(make_env, target, request):
    if target == "spark":
        request.getfixturevalue("spark")
    env = make_env(target)
    (env.from_collection([("a", 1), ("b", 2)]).key_by(lambda r: r[0]).process(CountsWithState()).uid("rules").print())
    with pytest.raises(
        UserFunctionOpenError,
        match=r"open\(\) of the user function of operator .* \(uid 'rules'\) "
        r"failed in epoch \d+: RuntimeError: the rules service refused",
    ):
        env.execute()


class OpensUntilTheModelIsGone(MapFunction):
    """open() fails once the map has seen record 25 (it removed the model)."""

    def __init__(self, marker: str):
        self.marker = marker

    def open(self, runtime_context) -> None:
        if os.path.exists(self.marker):
            load_model("models/churn.bin")

    def map(self, value):
        if value == 25:
            open(self.marker, "w").close()
        return value


def test_open_failing_after_every_restore_fails_the_job_naming_open(make_env, tmp_path):
    env = make_env(
        "local",
        **{
            "execution.checkpointing.interval": "1 ms",
            "execution.epoch.max-records": 10,
            "state.checkpoints.dir": (tmp_path / "ckpt").as_uri(),
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.delay": "0 ms",
        },
    )
    env.from_collection(list(range(100))).map(OpensUntilTheModelIsGone(str(tmp_path / "gone"))).uid("score-v1").print()
    with pytest.raises(
        Exception,
        match=r"FileNotFoundError: no model at models/churn.bin\. It failed 2 times in a "
        r"row, after restoring each time",
    ) as info:
        env.execute()
    assert isinstance(info.value.__cause__, UserFunctionOpenError)
