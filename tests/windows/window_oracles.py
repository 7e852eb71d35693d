"""Independent oracles and data generators for the window tests.

Nothing here imports sparkpoint: expected results are computed with pandas or plain
Python from the definitions (Flink's window semantics, sparkpoint's epoch rules), so a
window test compares sparkpoint against a second, independent implementation.

Events are plain tuples ``(key, ts, seq)``: ``seq`` is the event's position in the
input, unique, so window contents can be compared exactly.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterable

import pandas as pd

MIN_TS = -(2**63)
MAX_TS = 2**63 - 1

Event = tuple  # (key, ts, seq)


# -- data --------------------------------------------------------------------------------


def out_of_order_events(
    n: int,
    *,
    seed: int,
    keys: str = "abcd",
    start_ms: int = 1_499_112_000_000,
    step_ms: tuple[int, int] = (50, 150),
    max_delay_ms: int = 2_000,
    pause_every: int = 0,
    pause_ms: int = 0,
) -> list[Event]:
    """``n`` events whose timestamps are at most ``max_delay_ms`` out of order.

    Event ``i`` has ``ts = b_i - delay_i`` with ``0 <= delay_i <= max_delay_ms`` and a
    strictly increasing base ``b_i`` (steps drawn from ``step_ms``, plus ``pause_ms``
    at random about every ``pause_every`` events). An event is then less than
    ``max_delay_ms`` behind any event before it, so under a bounded-out-of-orderness
    watermark of ``max_delay_ms`` no event is ever late, however the input is cut into
    epochs (the watermark after events ``< i`` is ``<= b_(i-1) - max_delay - 1 < ts_i``),
    and no event can touch a session window that has already fired.
    """
    assert step_ms[0] >= 1
    rnd = random.Random(seed)
    out, base = [], start_ms
    for i in range(n):
        base += rnd.randint(*step_ms) + (pause_ms if pause_every and rnd.randrange(pause_every) == 0 else 0)
        out.append((rnd.choice(keys), base - rnd.randint(0, max_delay_ms), i))
    return out


def with_stragglers(events: list[Event], *, seed: int, every: int, max_behind_ms: int) -> list[Event]:
    """Moves about one event in ``every`` back by up to ``max_behind_ms``: some become late."""
    rnd = random.Random(seed)
    return [
        (k, ts - rnd.randint(1, max_behind_ms), seq) if rnd.randrange(every) == 0 else (k, ts, seq)
        for k, ts, seq in events
    ]


def frame(events: Iterable[Event]) -> pd.DataFrame:
    return pd.DataFrame(list(events), columns=["key", "ts", "seq"])


def epochs(records: list, max_records: int) -> list[list]:
    """How a one-split collection source cuts ``records`` into epochs."""
    return [records[i : i + max_records] for i in range(0, len(records), max_records)]


# -- time windows ----------------------------------------------------------------------


def tumbling_start(ts: int, size: int, offset: int = 0) -> int:
    """The start of the tumbling window holding ``ts``: the greatest ``offset + k * size <= ts``."""
    return (ts - offset) // size * size + offset


def sliding_starts(ts: int, size: int, slide: int, offset: int = 0) -> list[int]:
    """Starts ``s = offset + k * slide`` of every window ``[s, s + size)`` holding ``ts``."""
    k_min = (ts - size - offset) // slide + 1  # s > ts - size
    k_max = (ts - offset) // slide  # s <= ts
    return [offset + k * slide for k in range(k_min, k_max + 1)]


def tumbling_contents(events: Iterable[Event], size: int, offset: int = 0) -> pd.DataFrame:
    """One row per (key, window) with count, sum of ts and the sorted seqs."""
    df = frame(events)
    df["start"] = (df.ts - offset) // size * size + offset
    return _per_window(df, size)


def sliding_contents(events: Iterable[Event], size: int, slide: int, offset: int = 0) -> pd.DataFrame:
    df = frame(events)
    df["start"] = [sliding_starts(t, size, slide, offset) for t in df.ts]
    return _per_window(df.explode("start").astype({"start": "int64"}), size)


def _per_window(df: pd.DataFrame, size: int) -> pd.DataFrame:
    g = df.groupby(["key", "start"])
    out = g.agg(count=("seq", "size"), ts_sum=("ts", "sum"), max_ts=("ts", "max")).reset_index()
    out["seqs"] = [tuple(sorted(s)) for s in g.seq.apply(list)]
    out["end"] = out.start + size
    return out


def rows(df: pd.DataFrame, columns: list[str]) -> list[tuple]:
    """The rows of ``df`` as sorted plain-Python tuples (numpy ints become ints)."""
    return sorted(tuple(_py(v) for v in r) for r in df[columns].itertuples(index=False, name=None))


def _py(v):
    return v.item() if hasattr(v, "item") else v


# -- session windows ---------------------------------------------------------------------


def sessions(events: Iterable[Event], gap_of: Callable[[Event], int]) -> list[tuple]:
    """Flink's session windows by interval union: ``(key, start, end, seqs)`` per session.

    Each event opens ``[ts, ts + gap)``; windows that overlap *or touch* merge, so
    sorted by start, an event joins the current session iff its ts <= the session's end.
    This is what a stream computes as long as no event arrives after the watermark has
    passed (and fired) a session it would touch: see :func:`out_of_order_events`.
    """
    by_key: dict = defaultdict(list)
    for e in events:
        by_key[e[0]].append(e)
    out = []
    for key, evs in by_key.items():
        evs.sort(key=lambda e: e[1])
        cur: list | None = None  # [start, end, seqs]
        for e in evs:
            end = e[1] + gap_of(e)
            if cur is not None and e[1] <= cur[1]:
                cur[1] = max(cur[1], end)
                cur[2].append(e[2])
            else:
                if cur is not None:
                    out.append((key, cur[0], cur[1], tuple(sorted(cur[2]))))
                cur = [e[1], end, [e[2]]]
        out.append((key, cur[0], cur[1], tuple(sorted(cur[2]))))
    return sorted(out)


# -- count windows -----------------------------------------------------------------------


def count_tumbling(events: Iterable[Event], size: int) -> list[tuple]:
    """``(key, seqs)`` for every complete run of ``size`` events of a key, in arrival order."""
    by_key: dict = defaultdict(list)
    for e in events:
        by_key[e[0]].append(e[2])
    return sorted((k, tuple(s[i : i + size])) for k, s in by_key.items() for i in range(0, len(s) - size + 1, size))


def count_sliding(events: Iterable[Event], size: int, slide: int) -> list[tuple]:
    """``(key, seqs)`` of PyFlink's sliding count windows: a window starts at every ``slide``-th event of a key
    (counting from 0) and fires once it holds ``size`` events; a window that never fills never fires."""
    by_key: dict = defaultdict(list)
    for e in events:
        by_key[e[0]].append(e[2])
    return sorted(
        (k, tuple(s[start : start + size])) for k, s in by_key.items() for start in range(0, len(s) - size + 1, slide)
    )


# -- event time on epochs -----------------------------------------------------------------


def bounded_watermarks(records: list[Event], max_records: int, bound: int) -> list[int]:
    """The watermark after each epoch: ``max ts so far - bound - 1``, +inf after the last."""
    wms, max_ts = [], None
    chunks = epochs(records, max_records)
    for i, chunk in enumerate(chunks):
        top = max(e[1] for e in chunk)
        max_ts = top if max_ts is None else max(max_ts, top)
        wms.append(MAX_TS if i == len(chunks) - 1 else max_ts - bound - 1)
    return wms


def windows_with_lateness(
    records: list[Event],
    *,
    max_records: int,
    bound: int,
    size: int,
    lateness: int,
    starts_of: Callable[[int], list[int]],
    arrival_order: bool = False,
) -> tuple[list[tuple], list[Event]]:
    """Event-time windows (default trigger) with allowed lateness, on epochs, from the definitions.

    ``starts_of(ts)`` gives the starts of the windows ``[start, start + size)`` holding
    ``ts``. In every epoch, all its records are judged against the watermark in force
    at the epoch's start ``wm``: a window is late for a record if ``end - 1 + lateness
    <= wm`` (its state is gone); the record joins every window that is not, and a
    window that has already ended (``end - 1 <= wm``) fires at once with its contents.
    A record joining no window is late if ``ts + lateness <= wm``. Then the watermark
    advances, firing every window whose end it passes and dropping every window whose
    lateness has run out.

    Returns ``(firings, late)``: ``firings`` as sorted ``(key, start, end, seqs)``
    tuples (one per firing; seqs sorted, or as the window holds them, in arrival order,
    with ``arrival_order``), ``late`` the late records in arrival order.
    """
    order = tuple if arrival_order else (lambda seqs: tuple(sorted(seqs)))
    wm = MIN_TS
    alive: dict[tuple, list] = {}
    firings: list[tuple] = []
    late: list[Event] = []
    for chunk, new_wm in zip(epochs(records, max_records), bounded_watermarks(records, max_records, bound)):
        for e in chunk:
            key, ts, seq = e
            joined = False
            for start in starts_of(ts):
                end = start + size
                if end - 1 + lateness <= wm:
                    continue
                joined = True
                contents = alive.setdefault((key, start), [])
                contents.append(seq)
                if end - 1 <= wm:
                    firings.append((key, start, end, order(contents)))
            if not joined and ts + lateness <= wm:
                late.append(e)
        for (key, start), contents in list(alive.items()):
            end = start + size
            if wm < end - 1 <= new_wm:
                firings.append((key, start, end, order(contents)))
            if end - 1 + lateness <= new_wm:
                del alive[(key, start)]
        wm = new_wm
    return sorted(firings), late
