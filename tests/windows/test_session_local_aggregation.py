"""Local aggregation of event-time sessions: upstream tasks send a partial per run of records that cannot be late.

Expected results come from the session oracle (``sessions``, interval union from the definitions) where no record
is late, and from hand counts of Flink's order-dependent rule where one is; every job also runs with
``sparkpoint.window.local-aggregation: false`` (element by element): outputs and late-record counts must be
equal, while the window operator takes partials only when local aggregation is on.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from window_jobs import collect_windows, first_field, stamped
from window_oracles import out_of_order_events, sessions, with_stragglers

from sparkpoint.common import Time
from sparkpoint.common.watermark_strategy import MIN_WATERMARK
from sparkpoint.datastream import AggregateFunction, MapFunction, ProcessWindowFunction, ReduceFunction
from sparkpoint.datastream.transformations import CollectTransformation, TransformationInput
from sparkpoint.datastream.window import EventTimeSessionWindows
from sparkpoint.errors import SparkpointError, UserFunctionError
from sparkpoint.runtime.continuous.combine_bounds import CombineBounds
from sparkpoint.runtime.graph import StagePlan, StreamEdge
from sparkpoint.runtime.job_progress import JobProgress
from sparkpoint.runtime.task_messages import TaskReport

GAP = 3_000
OFF = {"sparkpoint.window.local-aggregation": "false"}


class CountAndSeqs(AggregateFunction):
    """The records' count and their seqs (a tuple, merged in order: associative, not commutative)."""

    def create_accumulator(self):
        return 0, ()

    def add(self, value, acc):
        return acc[0] + 1, acc[1] + (value[2],)

    def get_result(self, acc):
        return acc[0], tuple(sorted(acc[1]))

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


class SumSeq(ReduceFunction):
    def reduce(self, a, b):
        return a[0], max(a[1], b[1]), a[2] + b[2]


class WithWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        [value] = elements
        w = context.window()
        yield key, w.start, w.end, value


def same(e):
    return e


def _run(make_env, events, function, gap=GAP, upstream=2, target="local", max_records=60, **config):
    env = make_env(target, **{"execution.epoch.max-records": max_records} | config)
    stream = stamped(env, events, bound=0)
    if upstream > 1:
        stream = stream.rebalance().map(same).set_parallelism(upstream)  # two upstream tasks
    return collect_windows(
        env, stream, EventTimeSessionWindows.with_gap(Time.milliseconds(gap)), function, WithWindow()
    )


@pytest.mark.parametrize("kind", ["aggregate", "reduce"])
def test_on_time_sessions_are_the_oracles_with_partials_over_the_exchange(make_env, kind):
    """Events in order but for stragglers up to 12 s behind, under a 0 ms watermark bound: some are late for
    their own window, so their keys go as records in that epoch; the rest go as runs."""
    events = out_of_order_events(800, seed=5, keys="abcdef", step_ms=(20, 400), max_delay_ms=0, pause_every=40)
    events = with_stragglers(events, seed=5, every=9, max_behind_ms=12_000)
    function = CountAndSeqs() if kind == "aggregate" else SumSeq()
    on, on_metrics = _run(make_env, events, function)
    off, off_metrics = _run(make_env, events, function, **OFF)
    assert on == off
    assert on_metrics["numLateRecordsDropped"] == off_metrics["numLateRecordsDropped"] > 5  # lateness exercised
    assert on_metrics["numRecordsIn"] == off_metrics["numRecordsIn"] == len(events)
    assert 0 < on_metrics["numLocalAggregatesIn"] < len(events) // 3, on_metrics
    assert "numLocalAggregatesIn" not in off_metrics


def test_without_late_records_the_sessions_are_the_interval_unions(make_env):
    events = out_of_order_events(600, seed=8, keys="abc", step_ms=(50, 900), max_delay_ms=0, pause_every=30)
    on, metrics = _run(make_env, events, CountAndSeqs())
    expected = [(k, s, e, (len(seqs), seqs)) for k, s, e, seqs in sessions(events, lambda e: GAP)]
    assert on == expected and len(expected) > 20
    assert metrics.get("numLateRecordsDropped", 0) == 0 and 0 < metrics["numLocalAggregatesIn"] < len(events) // 2


GAP_10S = 10_000
# epoch 1: k and j at 20 s (the watermark after it: 19,999); epoch 3: two on-time records of j, one run
FIRST, LAST = [("k", 20_000, 0), ("j", 20_000, 10)], [("j", 21_000, 11), ("j", 22_000, 12)]


@pytest.mark.parametrize(
    "middle, k_session, late",
    [
        # 5,000's own window [5,000, 15,000) is late and touches no session when it comes: dropped; 14,000 then
        # joins k's session at 20,000. One run of 5,000 and 14,000 would have kept both.
        ([("k", 5_000, 1), ("k", 14_000, 2)], ("k", 14_000, 30_000, (2, (0, 2))), 1),
        # the other way round, 14,000 first extends k's session back to 14,000, and 5,000 then touches it: kept
        ([("k", 14_000, 2), ("k", 5_000, 1)], ("k", 5_000, 30_000, (3, (0, 1, 2))), 0),
    ],
    ids=["late-first", "late-second"],
)
def test_a_key_with_a_record_that_may_be_late_goes_record_by_record(make_env, middle, k_session, late):
    events = FIRST + middle + LAST
    expected = sorted([k_session, ("j", 20_000, 32_000, (3, (10, 11, 12)))])
    for config in ({}, OFF):
        out, metrics = _run(make_env, events, CountAndSeqs(), gap=GAP_10S, upstream=1, max_records=2, **config)
        assert out == expected, config
        assert metrics.get("numLateRecordsDropped", 0) == late and metrics["numRecordsIn"] == len(events)
    # epoch 1 gives one run per record (sent as records), epoch 2's k may be late: only epoch 3's j is a partial
    assert (
        _run(make_env, events, CountAndSeqs(), gap=GAP_10S, upstream=1, max_records=2)[1]["numLocalAggregatesIn"] == 1
    )


def test_keys_the_state_takes_as_one_are_one_key_to_the_combiner(make_env):
    """1 and 1.0 are one key to the keyed state: a record of 1.0 that may be late sends every record of 1 as they
    are, so 5,000 is dropped as element by element (a partial of 1's on-time records first would keep it)."""
    first = [(1, 20_000, 0), (7, 20_000, 10), (7, 20_500, 13)]  # the watermark after it: 20,499
    middle = [(1.0, 5_000, 1), (1, 14_000, 2), (1, 15_000, 3)]
    last = [(7, 21_000, 11), (7, 22_000, 12)]
    expected = [(1, 14_000, 30_000, (3, (0, 2, 3))), (7, 20_000, 32_000, (4, (10, 11, 12, 13)))]
    runs = [
        _run(make_env, first + middle + last, CountAndSeqs(), gap=GAP_10S, upstream=1, max_records=3, **config)
        for config in ({}, OFF)
    ]
    (on, on_metrics), (off, off_metrics) = runs
    assert on == off == expected
    assert on_metrics["numLateRecordsDropped"] == off_metrics["numLateRecordsDropped"] == 1
    assert on_metrics["numLocalAggregatesIn"] == 3  # epoch 1's two runs and epoch 3's one; epoch 2 as records


class WithKeyRepr(ProcessWindowFunction):
    def process(self, key, context, elements):
        [value] = elements
        yield repr(key), context.window().start, value


def test_keys_the_state_takes_apart_are_two_keys_to_the_combiner(make_env):
    """1 and "1" are two keys to the keyed state (their canonical bytes are alike, their stored bytes are not):
    their sessions are not merged into one under whichever came first."""
    events = [(1, 5_000, 0), ("1", 5_100, 1), (1, 5_200, 2), ("1", 5_300, 3), (2, 9_000, 4)]
    expected = [("'1'", 5_100, (2, (1, 3))), ("1", 5_000, (2, (0, 2))), ("2", 9_000, (1, (4,)))]
    for config in ({}, OFF):
        env = make_env("local", **{"execution.epoch.max-records": 60} | config)
        window = EventTimeSessionWindows.with_gap(Time.milliseconds(GAP))  # one upstream task holds both keys
        out, metrics = collect_windows(env, stamped(env, events, bound=0), window, CountAndSeqs(), WithKeyRepr())
        assert out == expected, config
        assert metrics.get("numLocalAggregatesIn") == (3 if not config else None)


def test_a_partial_that_comes_late_fails_the_job_not_the_users_function(make_env, monkeypatch):
    """The combiner's bound is what makes partials safe; were it below the window's watermark, a partial could
    come late, and the window operator refuses it rather than drop its records (or hand it to a dead letter)."""
    monkeypatch.setattr(JobProgress, "watermark_bound", lambda self, target: -(2**63))
    events = [*FIRST, ("m", 20_000, 20), ("k", 5_000, 1), *LAST]
    with pytest.raises(SparkpointError, match="a session partial came late") as info:
        _run(make_env, events, CountAndSeqs(), gap=GAP_10S, upstream=1, max_records=3)
    assert not isinstance(info.value, UserFunctionError)


def test_session_partials_on_spark(spark, make_env):
    events = out_of_order_events(600, seed=9, keys="abcd", step_ms=(50, 700), max_delay_ms=0, pause_every=25)
    out, metrics = _run(make_env, events, CountAndSeqs(), target="spark")
    expected = [(k, s, e, (len(seqs), seqs)) for k, s, e, seqs in sessions(events, lambda e: GAP)]
    assert out == expected and 0 < metrics["numLocalAggregatesIn"] < len(events) // 2


def _report(subtask: int, event_times: dict[int, int], watermarks: dict[int, int | None]) -> TaskReport:
    return TaskReport(stage_id=0, subtask=subtask, epoch=0, event_times=event_times, watermarks=watermarks)


def test_the_watermark_bound_is_the_windows_own_or_the_least_its_inputs_sent_on():
    """A window (node 3) fed by nodes 1 and 2, two tasks each. A new job's operators start at the least
    watermark; then the bound is the higher of the window's reported watermark and the least its inputs sent on
    last (idle ones left out); after a restore it is unknown until every task concerned reported."""
    edges = [StreamEdge(7, 1, 3), StreamEdge(8, 2, 3)]
    stages = [
        StagePlan(
            id=0, parallelism=2, nodes=[1, 2], input_edges=[], output_edges=edges, internal_edges=[], upstream_stages=[]
        ),
        StagePlan(
            id=1, parallelism=1, nodes=[3], input_edges=edges, output_edges=[], internal_edges=[], upstream_stages=[0]
        ),
    ]
    plan = SimpleNamespace(
        nodes={1: None, 2: None, 3: None}, stages=stages, stage_of={1: 0, 2: 0, 3: 1}, stage=stages.__getitem__
    )
    plan.source_nodes = list
    progress = JobProgress(plan)  # type: ignore[arg-type]
    assert progress.watermark_bound(3) == -(2**63)
    sources = [_report(0, {1: 500, 2: 900}, {1: 500, 2: 900}), _report(1, {1: 300, 2: 950}, {1: 300, 2: 950})]
    progress.take_positions(sources)
    assert progress.watermark_bound(3) == 300  # the window has not taken those yet: the least of its inputs
    progress.take_positions([_report(0, {3: 400}, {3: 400})])
    assert progress.watermark_bound(3) == 400
    progress.take_positions([_report(1, {1: 300, 2: 960}, {1: None, 2: 960})])  # task 1's node 1 went idle
    assert progress.watermark_bound(3) == 500
    progress.reset()  # a restore: operators may start from their checkpoint's watermarks
    progress.take_positions([_report(0, {3: 100}, {3: 100})])
    assert progress.watermark_bound(3) is None
    progress.take_positions(sources)
    assert progress.watermark_bound(3) == 300


CONTINUOUS = {"sparkpoint.execution.mode": "continuous"}


def test_continuous_sessions_without_late_records_are_the_interval_unions_with_partials(make_env):
    """In continuous mode an upstream subtask bounds its consumers' watermark by what it sent before a run's
    records (no epoch bound exists there), and combines the runs above it."""
    events = out_of_order_events(600, seed=8, keys="abc", step_ms=(50, 900), max_delay_ms=0, pause_every=30)
    out, metrics = _run(make_env, events, CountAndSeqs(), **CONTINUOUS)
    expected = [(k, s, e, (len(seqs), seqs)) for k, s, e, seqs in sessions(events, lambda e: GAP)]
    assert out == expected and len(expected) > 20
    assert metrics.get("numLateRecordsDropped", 0) == 0 and 0 < metrics["numLocalAggregatesIn"] < len(events) // 2


def test_continuous_session_partials_never_come_late_and_lose_nothing(make_env):
    """Stragglers up to 12 s behind under a 0 ms watermark bound: in continuous mode which records are late
    depends on how frames meet watermarks, so the check is that no partial came late (the window operator
    fails the job if one does: its bound was too low), that records were combined and records dropped, and that
    every record is in exactly one session or counted as dropped."""
    events = out_of_order_events(800, seed=5, keys="abcdef", step_ms=(20, 400), max_delay_ms=0, pause_every=40)
    events = with_stragglers(events, seed=5, every=9, max_behind_ms=12_000)
    out, metrics = _run(make_env, events, CountAndSeqs(), **CONTINUOUS)
    seqs = [seq for _, _, _, (_, session_seqs) in out for seq in session_seqs]
    assert len(seqs) == len(set(seqs)) == sum(count for _, _, _, (count, _) in out)
    assert len(seqs) + metrics["numLateRecordsDropped"] == len(events)
    assert metrics["numLateRecordsDropped"] > 5 and 0 < metrics["numLocalAggregatesIn"] < len(events) // 3, metrics


def continuous_task(floors: dict[int, int], sent: dict) -> SimpleNamespace:
    """A subtask's bounds of one combining edge (7, from node 3) and of another edge, with the writer they read."""
    combining = StreamEdge(7, 3, 9, combiner=SimpleNamespace(needs_watermark_bound=True))
    plain = StreamEdge(8, 3, 10)
    writer = SimpleNamespace(watermarks={}, sent=sent)
    return SimpleNamespace(bounds=CombineBounds([combining, plain], floors), writer=writer)


def bounds_of(task: SimpleNamespace) -> dict[int, int]:
    return task.bounds.bounds(task.writer.watermarks, task.writer.sent)


def test_a_continuous_subtasks_bound_keeps_the_highest_it_sent_and_ends_once_it_was_idle():
    """A subtask's output watermark may go down (a source's new split, an input no longer idle) while its
    consumer keeps the highest it had: the bound keeps the highest sent. Idle, the others may move the consumer
    past what it sends later: no bound from then on. A frame sent before the first run said idle too."""
    task = continuous_task({7: MIN_WATERMARK}, {})
    assert bounds_of(task) == {7: MIN_WATERMARK}
    for sent, bound in [(10_000, 10_000), (2_000, 10_000), (12_000, 12_000)]:
        task.writer.watermarks[3] = sent
        assert bounds_of(task) == {7: bound}, sent
    task.writer.watermarks[3] = None
    assert bounds_of(task) == {}
    task.writer.watermarks[3] = 20_000
    assert bounds_of(task) == {}

    early = continuous_task({7: MIN_WATERMARK}, {(1, 0): {7: None}})
    assert bounds_of(early) == {}


def test_a_continuous_edge_without_a_floor_waits_for_one_and_keeps_what_was_sent_before():
    """A restored attempt's edge has no floor until the driver sends one (its consumers reported): not combined
    till then; the floor then counts with the highest watermark sent before it came."""
    task = continuous_task({}, {})
    for sent in (15_000, 4_000):
        task.writer.watermarks[3] = sent
        assert bounds_of(task) == {}
    task.bounds.add_floors({7: 9_000, 8: 1_000})  # WatermarkFloors
    assert bounds_of(task) == {7: 15_000}


class FailOnceAt(MapFunction):
    """Raises at the record of seq ``at`` unless ``marker`` exists (which it then makes)."""

    def __init__(self, marker: str, at: int):
        self.marker, self.at = marker, at

    def map(self, value):
        if value[2] == self.at and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            raise RuntimeError(f"fails once at {value}")
        return value


def _restoring_run(make_env, tmp_path, events, fail_at: int | None):
    marker = tmp_path / f"failed-{fail_at}"
    env = make_env(
        "local",
        **CONTINUOUS,
        **{
            "execution.epoch.max-records": 100,
            "execution.checkpointing.interval": "200 ms",
            "state.checkpoints.dir": (tmp_path / f"ckpt-{fail_at}").as_uri(),
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 1,
            "restart-strategy.fixed-delay.delay": "100 ms",
        },
    )
    stream = stamped(env, events, bound=0).rebalance()
    stream = stream.map(FailOnceAt(str(marker), -1 if fail_at is None else fail_at)).set_parallelism(2)
    windowed = stream.key_by(first_field).window(EventTimeSessionWindows.with_gap(Time.milliseconds(GAP)))
    out = windowed.aggregate(CountAndSeqs(), window_function=WithWindow()).uid("w").set_parallelism(2)
    env._add_transformation(CollectTransformation, "Collect", [TransformationInput(out._id)])
    result = env.execute()
    return sorted(result.collected), result.metrics["w"], result.restarts, result.checkpoints["counts"]["restored"]


def test_a_restored_continuous_attempt_combines_once_its_consumers_reported(make_env, tmp_path):
    """The attempt after a failure starts without a bound of the windows' watermark (the driver learns it from
    their first reports, then sends it): it combines from then on, and the sessions are the oracle's, each once."""
    events = out_of_order_events(3_000, seed=8, keys="abc", step_ms=(50, 900), max_delay_ms=0, pause_every=30)
    expected = [(k, s, e, (len(seqs), seqs)) for k, s, e, seqs in sessions(events, lambda e: GAP)]
    out, metrics, restarts, restored = _restoring_run(make_env, tmp_path, events, fail_at=events[1_000][2])
    assert restarts == 1 and restored == 1 and out == expected  # restored a checkpoint, not started over
    _, whole, _, _ = _restoring_run(make_env, tmp_path, events, fail_at=None)
    assert metrics["numLocalAggregatesIn"] > whole["numLocalAggregatesIn"] // 2, (metrics, whole)
