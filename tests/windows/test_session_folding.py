"""Session local aggregation a chunk at a time (``FoldingSessions``): a task's record-wise run hands the session
combiner its records as they come. What the window operator makes of them must be what it makes of one combine of
the whole batch, and of the records one by one (``local-aggregation: false``, the oracle here)."""

from __future__ import annotations

import random

import pytest
from test_session_local_aggregation import OFF, CountAndSeqs, _run
from window_oracles import out_of_order_events, with_stragglers

from sparkpoint.datastream import AggregateFunction, KeySelector
from sparkpoint.errors import UserFunctionError
from sparkpoint.runtime import chain
from sparkpoint.windows import session_folding
from sparkpoint.windows.combiners import SessionCombiner
from sparkpoint.windows.local_aggregation import WindowPartial
from sparkpoint.windows.session_folding import FoldingSessions

T0 = 1_499_112_000_000


class First(KeySelector):
    def get_key(self, value):
        return value[0]


class Count(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, acc):
        if value[1] == "boom":
            raise ValueError("boom")
        return acc + 1

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return a + b


def _records(n, seed=2):
    rnd = random.Random(seed)
    return [(rnd.choice("abcdefgh"), i) for i in range(n)], sorted(T0 + rnd.randrange(6_000_000) for _ in range(n))


def _fold(values, timestamps, bound, slice_=700):
    fold = FoldingSessions(SessionCombiner(First(), 1_000, aggregate_function=Count()), bound, "s", "Session")
    for lo in range(0, len(values), slice_):
        fold.add(values[lo : lo + slice_], timestamps[lo : lo + slice_])
    return fold, fold.result()


def _as_set(values, timestamps):
    return sorted(
        (p.key, p.window.start, p.window.end, p.value, p.last_of, t) if type(p) is WindowPartial else (p, t)
        for p, t in zip(values, timestamps)
    )


def test_each_keys_partials_of_the_chunks_merged_are_the_partials_of_one_combine(monkeypatch):
    monkeypatch.setattr(session_folding, "CHUNK", 1_000)  # a session often spans two chunks: merged at the end
    values, timestamps = _records(20_000)
    whole = SessionCombiner(First(), 1_000, aggregate_function=Count()).combine(values, timestamps, T0 - 10**6)
    fold, got = _fold(values, timestamps, T0 - 10**6)
    assert 0 < len(whole[0]) < len(values) and all(type(p) is WindowPartial for p in whole[0])
    assert len(fold.partials) > len(got[0])  # chunks' partials were merged
    assert _as_set(*got) == _as_set(*whole)


def test_a_record_without_a_timestamp_sends_the_records_as_they_are_while_they_are_held(monkeypatch):
    monkeypatch.setattr(session_folding, "CHUNK", 1_000)
    values, timestamps = _records(5_000)
    timestamps[3_500] = None
    assert _fold(values, timestamps, T0 - 10**6)[1] == (values, timestamps)


def test_a_failing_function_after_the_records_were_let_go_fails_the_task_naming_the_window(monkeypatch):
    monkeypatch.setattr(session_folding, "CHUNK", 1_000)
    values, timestamps = _records(5_000)
    timestamps = [T0 + i for i in range(len(values))]  # dense: the partials pay from the first chunk
    values[3_500] = ("a", "boom")
    with pytest.raises(UserFunctionError, match="boom") as failed:
        _fold(values, timestamps, T0 - 10**6)
    assert failed.value.uid == "s"
    values[3_500], values[10] = values[10], ("a", "boom")  # in the first chunk, records held: all as records
    assert _fold(values, timestamps, T0 - 10**6)[1] == (values, timestamps)


@pytest.mark.parametrize("kind", ["aggregate", "reduce"])
def test_sessions_of_epochs_of_many_chunks_are_those_of_the_records_one_by_one(make_env, monkeypatch, kind):
    """Stragglers up to 12 s behind under a 0 ms watermark bound: keys that may be late go record by record from
    their first such record on, after the partials of their records before it; every window and late count equals
    the job's without local aggregation."""
    from test_session_local_aggregation import SumSeq

    monkeypatch.setattr(chain, "SLICE", 50)
    monkeypatch.setattr(session_folding, "CHUNK", 100)  # epochs of 300 records: 3 chunks, 6 slices
    folds: list[FoldingSessions] = []
    original = FoldingSessions.result
    monkeypatch.setattr(FoldingSessions, "result", lambda self: folds.append(self) or original(self))
    events = out_of_order_events(6_000, seed=5, keys="abcdef", step_ms=(20, 400), max_delay_ms=0, pause_every=40)
    events = with_stragglers(events, seed=5, every=9, max_behind_ms=12_000)
    function = CountAndSeqs() if kind == "aggregate" else SumSeq()
    on, on_metrics = _run(make_env, events, function, upstream=1, max_records=300)
    off, off_metrics = _run(make_env, events, function, upstream=1, max_records=300, **OFF)
    assert on == off and len(on) > 50
    assert on_metrics["numLateRecordsDropped"] == off_metrics["numLateRecordsDropped"] > 5  # lateness exercised
    assert on_metrics["numRecordsIn"] == off_metrics["numRecordsIn"] == len(events)
    assert 0 < on_metrics["numLocalAggregatesIn"] < len(events) // 3, on_metrics
    assert len(folds) >= 2 and any(f.raw[0] and f.partials for f in folds)  # keys went both ways in one epoch


def test_a_key_that_may_be_late_in_one_chunk_goes_as_records_in_the_next_ones_too(make_env, monkeypatch):
    """Epoch 2 in chunks of two: k's 5,000 (late, touching no session: dropped when it comes) in the first, k's
    14,000 (on time) in the last. 14,000 must come after 5,000, as a record: as a partial sent first, it would
    extend k's session back to 14,000 and 5,000 would touch it and be kept. j's runs pay for the partials."""
    from test_session_local_aggregation import GAP_10S

    monkeypatch.setattr(chain, "SLICE", 1)
    monkeypatch.setattr(session_folding, "CHUNK", 2)
    first = [("k", 20_000, 0), ("j", 20_000, 10), *[("x", 20_000 + i, 20 + i) for i in range(4)]]
    middle = [("k", 5_000, 1), *[("j", 20_000 + 100 * i, 10 + i) for i in range(1, 5)], ("k", 14_000, 2)]
    last = [("j", 21_000, 15), ("j", 22_000, 16), *[("x", 40_000 + i, 30 + i) for i in range(4)]]
    events = first + middle + last
    results = [
        _run(make_env, events, CountAndSeqs(), gap=GAP_10S, upstream=1, max_records=6, **config) for config in ({}, OFF)
    ]
    (on, on_metrics), (off, off_metrics) = results
    assert on == off and ("k", 14_000, 30_000, (2, (0, 2))) in on
    assert on_metrics["numLateRecordsDropped"] == off_metrics["numLateRecordsDropped"] == 1
    assert on_metrics["numLocalAggregatesIn"] >= 1
