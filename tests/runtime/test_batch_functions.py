"""Operators run the user's map function and timestamp assigner over a whole batch with ``map()``; a
function that raises ``StopIteration`` must fail on its record, not end the batch early and drop the rest."""

from __future__ import annotations

import pytest

from sparkpoint.common import WatermarkStrategy
from sparkpoint.errors import UserFunctionError


def first_of(items: list) -> int:
    return next(iter(items))  # StopIteration on an empty list


def test_a_map_function_raising_stop_iteration_fails_on_its_record(make_env):
    env = make_env("local", **{"restart-strategy.type": "none"})
    records = [[1], [2], [], [4]]
    with pytest.raises(UserFunctionError, match=r"StopIteration") as info:
        list(env.from_collection(records).map(first_of).execute_and_collect())
    assert "[]" in str(info.value)


def test_a_timestamp_assigner_raising_stop_iteration_fails_on_its_record(make_env):
    env = make_env("local", **{"restart-strategy.type": "none"})
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda items, _: first_of(items))
    with pytest.raises(UserFunctionError, match=r"StopIteration") as info:
        list(env.from_collection([[10], [], [30]]).assign_timestamps_and_watermarks(strategy).execute_and_collect())
    assert "[]" in str(info.value)


def test_every_record_comes_through_map_and_the_assigner(make_env):
    env = make_env("local", **{"execution.epoch.max-records": 7})
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, _: v)
    got = (
        env.from_collection(list(range(50)))
        .assign_timestamps_and_watermarks(strategy)
        .map(lambda v: v * 2)
        .execute_and_collect()
    )
    assert sorted(got) == [2 * i for i in range(50)]


def test_a_filter_function_raising_stop_iteration_fails_on_its_record(make_env):
    env = make_env("local", **{"restart-strategy.type": "none"})
    with pytest.raises(UserFunctionError, match=r"StopIteration") as info:
        list(env.from_collection([[1], [2], [], [4]]).filter(lambda items: first_of(items) > 0).execute_and_collect())
    assert "[]" in str(info.value)


class Ambiguous:
    """A filter's result whose truth cannot be taken."""

    def __bool__(self) -> bool:
        raise ValueError("the truth value is ambiguous")


def test_a_filter_result_without_a_truth_value_fails_on_its_record(make_env):
    env = make_env("local", **{"restart-strategy.type": "none"})
    with pytest.raises(UserFunctionError, match=r"ambiguous") as info:
        list(env.from_collection([1, 2, 3, 4]).filter(lambda v: Ambiguous() if v == 3 else v).execute_and_collect())
    assert "3" in str(info.value)


def test_a_filter_keeps_exactly_the_records_whose_results_are_true(make_env):
    env = make_env("local", **{"execution.epoch.max-records": 7})
    results = {0: 0, 1: "", 2: [], 3: None, 4: "x", 5: [0], 6: 2.5, 7: True, 8: False}  # truthiness, not == True
    got = env.from_collection(list(range(90))).filter(lambda v: results[v % 9]).execute_and_collect()
    assert sorted(got) == [v for v in range(90) if bool(results[v % 9])]
