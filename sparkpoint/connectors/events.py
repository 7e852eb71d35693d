"""Deterministic generation of the seed job's behaviour events.

An event is a tab-separated line ``ts\\tchannel\\tid\\tbehavior`` as produced by the
seed's ``StringLineEventSource``. Event ``i`` of a stream is a pure function of
``(seed, i)`` (a SplitMix64 hash of the sequence number), so any range of the
sequence can be generated independently, in any order and on any executor, and a
replay after a restore produces exactly the same events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CHANNELS", "BEHAVIORS", "EventSpec", "generate_events", "events_at"]

CHANNELS: tuple[str, ...] = ("a", "b", "c", "d")
BEHAVIORS: tuple[str, ...] = ("INSTALL", "OPEN", "BROWSE", "CLICK", "PURCHASE", "CLOSE", "UNINSTALL")

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@dataclass(frozen=True)
class EventSpec:
    """How a behaviour-event stream is generated.

    Attributes:
        seed: selects the stream; the same seed gives the same events.
        start_ts: event time (epoch ms) of event 0 before lateness is applied.
        interval_ms: event-time distance between consecutive sequence numbers.
        max_out_of_orderness_ms: each event's timestamp is moved back by a
            pseudo-random amount in ``[0, max_out_of_orderness_ms]``, so events
            arrive out of order by at most that much.
        lateness_ms: a fixed delay subtracted from every timestamp (the seed's
            ``source-lateness-millis``: events older than "now").
    """

    seed: int = 42
    start_ts: int = 1_499_112_000_000  # 2017-07-03T20:00:00Z
    interval_ms: int = 5
    max_out_of_orderness_ms: int = 10_000
    lateness_ms: int = 0


def _splitmix64(seq: np.ndarray, seed: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = np.uint64(seed & 0xFFFFFFFFFFFFFFFF) + (seq.astype(np.uint64) + np.uint64(1)) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        return z ^ (z >> np.uint64(31))


def generate_events(start: int, stop: int, spec: EventSpec = EventSpec()) -> tuple[list[str], np.ndarray]:
    """Generate events ``start`` (inclusive) to ``stop`` (exclusive) of a stream.

    Returns:
        The event lines and their event timestamps (int64 epoch ms), in sequence order.
    """
    if stop <= start:
        return [], np.empty(0, dtype=np.int64)
    return events_at(np.arange(start, stop, dtype=np.int64), spec)


def events_at(seq: np.ndarray, spec: EventSpec = EventSpec()) -> tuple[list[str], np.ndarray]:
    """The events with the given sequence numbers (any order, any stride)."""
    if len(seq) == 0:
        return [], np.empty(0, dtype=np.int64)
    seq = seq.astype(np.int64)
    h = _splitmix64(seq, spec.seed)
    jitter = (h >> np.uint64(20)) % np.uint64(spec.max_out_of_orderness_ms + 1)
    ts = spec.start_ts + seq * spec.interval_ms - jitter.astype(np.int64) - spec.lateness_ms
    channel = (h % np.uint64(len(CHANNELS))).astype(np.int64)
    behavior = ((h >> np.uint64(8)) % np.uint64(len(BEHAVIORS))).astype(np.int64)
    ids = (h >> np.uint64(16)).tolist()
    lines = [
        f"{t}\t{CHANNELS[c]}\t{i:012x}\t{BEHAVIORS[b]}"
        for t, c, i, b in zip(ts.tolist(), channel.tolist(), ids, behavior.tolist())
    ]
    return lines, ts
