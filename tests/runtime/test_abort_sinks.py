"""A failed task aborts every sink's writer, even when an interrupt lands while one of them aborts."""

from __future__ import annotations

import pytest

from sparkpoint.connectors.base import SinkWriter
from sparkpoint.operators.sinks import SinkOperator
from sparkpoint.runtime.task import abort_sinks
from sparkpoint.runtime.task_interrupt import EpochInterrupted


class _Writer(SinkWriter):
    def __init__(self, fails_with: BaseException | None = None):
        self.fails_with, self.aborted = fails_with, False

    def write(self, values, timestamps):
        pass

    def prepare_commit(self):
        return []

    def abort(self):
        self.aborted = True
        if self.fails_with is not None:
            raise self.fails_with


def _sinks(*writers):
    ops = {}
    for nid, writer in enumerate(writers):
        op = SinkOperator(f"sink-{nid}", f"sink {nid}", sink=None)
        op.writer = writer
        ops[nid] = op
    return ops


def test_an_interrupt_during_one_sinks_abort_is_raised_after_every_other_sink_aborted():
    writers = [_Writer(EpochInterrupted("the job was cancelled")), _Writer(RuntimeError("broken")), _Writer()]
    with pytest.raises(EpochInterrupted, match="cancelled"):
        abort_sinks(_sinks(*writers))
    assert [w.aborted for w in writers] == [True, True, True]


def test_a_sink_whose_abort_fails_does_not_stop_the_others_and_nothing_is_raised(caplog):
    writers = [_Writer(RuntimeError("broken")), _Writer()]
    abort_sinks(_sinks(*writers))
    assert [w.aborted for w in writers] == [True, True]
    assert any("could not abort sink 'sink-0'" in r.getMessage() for r in caplog.records)


def test_an_aborted_sink_takes_no_more_records():
    """A subtask's thread still in user code when its slot ended may go on to the sink after the abort: it is
    refused, so nothing is written outside what was aborted (a Kafka writer would open a producer outside any
    transaction)."""
    writer = _Writer()
    (op,) = _sinks(writer).values()
    abort_sinks({0: op})
    with pytest.raises(RuntimeError, match="'sink-0' was aborted"):
        op.process_batch(["late"], [None], None)
    with pytest.raises(RuntimeError, match="was aborted"):
        op.prepare_commit()
