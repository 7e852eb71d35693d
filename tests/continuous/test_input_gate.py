"""The input gate of a continuous-mode subtask: what a barrier on one channel holds back, by kind of barrier."""

from __future__ import annotations

import pickle

from sparkpoint.runtime.continuous.channels import BARRIER, DATA, PASSING_BARRIER, InputGate
from sparkpoint.runtime.continuous.messages import BarrierOptions

A, B = (0, 0), (0, 1)  # two upstream subtasks of one stage


def _barrier(kind: bytes, epoch: int) -> bytes:
    return kind + pickle.dumps((epoch, BarrierOptions(snapshot=kind == BARRIER, aligned=kind == BARRIER)))


def _frames_after_barrier_on_a(kind: bytes) -> list[bytes]:
    gate = InputGate([A, B], capacity=8)
    gate.put(A, DATA + b"before")
    gate.put(A, _barrier(kind, 3))
    gate.put(A, DATA + b"after")
    taken = gate.poll(0.0) + gate.poll(0.0)
    return [frame for _, frame in taken]


def test_an_aligned_barrier_holds_its_channel_back_until_every_channel_delivered_it():
    taken = _frames_after_barrier_on_a(BARRIER)
    assert taken == [DATA + b"before", _barrier(BARRIER, 3)]  # "after" waits for channel B's barrier


def test_a_passing_barrier_holds_no_channel_back():
    taken = _frames_after_barrier_on_a(PASSING_BARRIER)
    assert taken == [DATA + b"before", _barrier(PASSING_BARRIER, 3), DATA + b"after"]


def test_unblocking_after_alignment_lets_the_held_channel_go_on():
    gate = InputGate([A, B], capacity=8)
    gate.put(A, _barrier(BARRIER, 1))
    gate.put(A, DATA + b"next")
    assert [f for _, f in gate.poll(0.0)] == [_barrier(BARRIER, 1)]
    gate.put(B, _barrier(BARRIER, 1))
    assert [f for _, f in gate.poll(0.0)] == [_barrier(BARRIER, 1)]
    gate.unblock_all()  # the subtask saw barrier 1 on every channel
    assert [f for _, f in gate.poll(0.0)] == [DATA + b"next"]
