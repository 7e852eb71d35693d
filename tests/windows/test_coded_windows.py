"""Tumbling windows over batches the exchange kept coded (distinct values plus a code per record).

A keyed count's records repeat (``(key, 1)``): the exchange sends them as distinct values and
codes, and the window operator counts them per (code, window) instead of grouping record by
record. Every result here comes from the window oracle (``windows_with_lateness``, from the
definitions), and each job checks which path its batches took: the counting path where each
key has one value and no record is late, the per-record path otherwise (a key with two values,
whose order in the window matters; late records; equal values of other types).
"""

from __future__ import annotations

from collections import Counter

import pytest
from window_jobs import BOUND, stamped
from window_oracles import out_of_order_events, tumbling_start, windows_with_lateness, with_stragglers

from sparkpoint.common import Time
from sparkpoint.datastream import ProcessWindowFunction
from sparkpoint.datastream.window import TumblingEventTimeWindows
from sparkpoint.windows.operator import WindowOperator

SIZE, M = 10_000, 250


class Elements(ProcessWindowFunction):
    """``(key, start, end, elements in the order the window holds them)``."""

    def process(self, key, context, elements):
        w = context.window()
        yield key, w.start, w.end, tuple(elements)


@pytest.fixture
def coded_paths(monkeypatch) -> list[bool]:
    """What every coded batch got: True for the counting path, False for the per-record one."""
    taken: list[bool] = []
    original = WindowOperator._process_coded

    def recording(self, batch, timestamps):
        taken.append(original(self, batch, timestamps))
        return taken[-1]

    monkeypatch.setattr(WindowOperator, "_process_coded", recording)
    return taken


def expected(events, value_of):
    firings, _late = windows_with_lateness(
        events,
        max_records=M,
        bound=BOUND,
        size=SIZE,
        lateness=0,
        starts_of=lambda ts: [tumbling_start(ts, SIZE)],
        arrival_order=True,
    )
    by_seq = {e[2]: e for e in events}
    return sorted((key, start, end, tuple(value_of(by_seq[s]) for s in seqs)) for key, start, end, seqs in firings)


def windows(stream):
    return sorted(
        stream.key_by(lambda v: v[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(SIZE)))
        .process(Elements())
        .execute_and_collect()
    )


def test_one_value_per_key_is_counted_per_window_even_with_late_records(make_env, coded_paths):
    events = with_stragglers(out_of_order_events(3_000, seed=5, keys="abcdefg"), seed=6, every=50, max_behind_ms=20_000)
    env = make_env("local", **{"execution.epoch.max-records": M})
    env.set_parallelism(2)  # two mapping tasks: each window task puts two coded batches together
    out = windows(stamped(env, events).map(lambda e: (e[0], 1)))
    assert out == expected(events, lambda e: (e[0], 1))
    assert coded_paths.count(True) > 10 and coded_paths.count(False) > 0  # late records: per record


def test_a_key_with_several_values_keeps_them_in_arrival_order(make_env, coded_paths):
    events = out_of_order_events(3_000, seed=7, keys="abcdefg")
    env = make_env("local", **{"execution.epoch.max-records": M})
    env.set_parallelism(2)
    out = windows(stamped(env, events).map(lambda e: (e[0], e[2] % 3)).set_parallelism(1))
    assert out == expected(events, lambda e: (e[0], e[2] % 3))
    assert coded_paths and not any(coded_paths)


def test_equal_values_of_other_types_from_two_tasks_stay_apart(make_env, coded_paths):
    """Task 0 maps even events to ``(key, 1)``, task 1 odd ones to ``(key, True)``: each sends a coded batch
    of one type, equal to the other's, and the window holds each record's own."""
    events = out_of_order_events(3_000, seed=9, keys="abcdefg")
    env = make_env("local", **{"execution.epoch.max-records": M})
    env.set_parallelism(2)
    stream = (
        stamped(env, events)
        .partition_custom(lambda parity, n: parity, lambda e: e[2] % 2)
        .map(lambda e: (e[0], 1 if e[2] % 2 == 0 else True))
    )
    out = windows(stream)
    typed = [(k, s, e, sorted(Counter(type(v[1]).__name__ for v in vs).items())) for k, s, e, vs in out]
    want = [
        (k, s, e, sorted(Counter(type(v[1]).__name__ for v in vs).items()))
        for k, s, e, vs in expected(events, lambda e: (e[0], 1 if e[2] % 2 == 0 else True))
    ]
    assert typed == want and any(len(t[3]) == 2 for t in typed)
    assert coded_paths and not any(coded_paths)
