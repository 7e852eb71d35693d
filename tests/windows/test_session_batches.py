"""Sessions of a batch merged before they meet the merging window set (windows/session_batches.py): the runs a
batch makes by hand, and the same output as element by element (Flink's algorithm, which the session tests of
test_event_time_windows.py check against an oracle): contents in arrival order, late records, merges across
epochs."""

from __future__ import annotations

import random

import pytest

from sparkpoint.common import Duration, Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import OutputTag, ProcessWindowFunction
from sparkpoint.datastream.window import EventTimeSessionWindows, TimeWindow
from sparkpoint.windows import operator, session_batches
from sparkpoint.windows.session_batches import batch_runs, session_runs


def test_runs_by_hand():
    # windows of gap 200: [500, 700) [100, 300) [1000, 1200) [310, 510) [5000, 5200); [310, 510) and [500, 700)
    # overlap, [100, 300) ends before 310
    assert session_runs([500, 100, 1_000, 310, 5_000], 200) == [
        (TimeWindow(100, 300), [1]),
        (TimeWindow(310, 700), [0, 3]),
        (TimeWindow(1_000, 1_200), [2]),
        (TimeWindow(5_000, 5_200), [4]),
    ]
    assert session_runs([0, 200], 200) == [(TimeWindow(0, 400), [0, 1])]  # touching windows merge, as Flink's
    assert session_runs([0, 201], 200) == [(TimeWindow(0, 200), [0]), (TimeWindow(201, 401), [1])]


def reference_runs(keys: list, timestamps: list, gap: int) -> list:
    """The oracle, element by element in plain Python: per key (in order of first appearance) its windows
    ``[t, t + gap)`` merged while they overlap or touch, each run's members in arrival order."""
    by_key: dict = {}
    for i, k in enumerate(keys):
        by_key.setdefault(k, []).append(i)
    runs = []
    for k, idx in by_key.items():
        current: list = []  # [start, end, members]
        for i in sorted(idx, key=lambda i: (timestamps[i], i)):
            t = timestamps[i]
            if current and t <= current[1]:
                current[1] = max(current[1], t + gap)
                current[2].append(i)
            else:
                if current:
                    runs.append((k, TimeWindow(current[0], current[1]), sorted(current[2])))
                current = [t, t + gap, [i]]
        runs.append((k, TimeWindow(current[0], current[1]), sorted(current[2])))
    return runs


@pytest.mark.parametrize("seed", range(40))
def test_a_batch_runs_as_merging_its_keys_windows_one_by_one(seed):
    rnd = random.Random(seed)
    n = rnd.choice([1, 2, 5, 50, 400])
    gap = rnd.choice([1, 10, 250])
    pool = ["a", "b", 7, (1, "x"), None, 1, True, 2.5][: rnd.randrange(1, 9)]  # 1 and True: one key, as in a dict
    base = rnd.choice([0, -(2**61), 2**61])
    keys = [rnd.choice(pool) for _ in range(n)]
    timestamps = [base + rnd.randrange(0, 20 * gap) for _ in range(n)]
    got = batch_runs(keys, timestamps, gap)
    assert got == reference_runs(keys, timestamps, gap)
    assert [type(k) for k, _, _ in got] == [type(k) for k, _, _ in reference_runs(keys, timestamps, gap)]


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class InOrder(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield key, context.window().start, context.window().end, tuple(e[2] for e in elements)


LATE = OutputTag("late")


def _run(make_env, events, monkeypatch, batched: bool, parallelism: int = 2):
    if not batched:
        monkeypatch.setattr(operator, "process_sessions", lambda *a: False)
    env = make_env("local", **{"execution.epoch.max-records": 37})
    env.set_parallelism(parallelism)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(300)).with_timestamp_assigner(Ts())
    windows = (
        env.from_collection(events)
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda e: e[0])
        .window(EventTimeSessionWindows.with_gap(Time.milliseconds(250)))
        .side_output_late_data(LATE)
        .process(InOrder())
    )
    late = windows.get_side_output(LATE)
    out = sorted(windows.union(late.map(lambda e: ("late", *e))).execute_and_collect(), key=repr)
    monkeypatch.undo()
    return out


def test_the_same_as_element_by_element(make_env, monkeypatch):
    rnd = random.Random(5)
    events, t = [], 0
    for seq in range(1_500):
        t += rnd.choice([20, 60, 120, 400])
        delay = rnd.randrange(3_000, 8_000) if rnd.random() < 0.05 else rnd.randrange(0, 300)  # 5 %: late
        events.append((rnd.choice("abcd"), max(0, t - delay), seq))
    used = _count_batched_paths(monkeypatch)
    batched = _run(make_env, events, monkeypatch, batched=True)
    assert any(used) and not all(used)  # batches merged first, and batches with late records element by element
    one_by_one = _run(make_env, events, monkeypatch, batched=False)
    # the same sessions and late records; within a session merged from several windows, element by element
    # leaves the order of its merges (the surviving window's contents, then the merged ones'), a run its
    # elements' arrival order (Flink promises neither)
    assert [_unordered(r) for r in batched] == [_unordered(r) for r in one_by_one]
    assert any(r[0] == "late" for r in batched) and any(len(r[3]) > 3 for r in batched if r[0] != "late")


def _count_batched_paths(monkeypatch) -> list[bool]:
    """Whether each batch went through the batched sessions (True) or element by element, as it ran."""
    used: list[bool] = []
    real = session_batches.process_sessions

    def counting(*args):
        done = real(*args)
        used.append(done)
        return done

    monkeypatch.setattr(operator, "process_sessions", counting)
    return used


def _unordered(row: tuple) -> tuple:
    return row if row[0] == "late" else (*row[:3], tuple(sorted(row[3])))


@pytest.mark.parametrize("seed", [1, 2])
def test_contents_keep_arrival_order(make_env, monkeypatch, seed):
    rnd = random.Random(seed)
    events = [("k", 1_000 + rnd.randrange(0, 200), seq) for seq in range(30)]  # one session, shuffled times
    out = _run(make_env, events, monkeypatch, batched=True, parallelism=1)  # one source subtask: one order
    assert out == [("k", min(e[1] for e in events), max(e[1] for e in events) + 250, tuple(range(30)))]


def test_a_batch_beyond_what_int64_differences_hold_goes_element_by_element(make_env, monkeypatch):
    """Timestamps past 2^62 (their differences could overflow int64 in the runs' arithmetic) take the element
    by element path, with the same sessions as element by element everywhere."""
    rnd = random.Random(3)
    base = (1 << 62) + 1_000
    events = [(rnd.choice("ab"), base + rnd.randrange(0, 2_000), seq) for seq in range(200)]
    used = _count_batched_paths(monkeypatch)
    batched = _run(make_env, events, monkeypatch, batched=True)
    assert used and not any(used)
    assert [_unordered(r) for r in batched] == [_unordered(r) for r in _run(make_env, events, monkeypatch, False)]
