"""Which windows combine their records before the exchange, and how sessions do.

:func:`local_combiner` picks the combiner of a window transformation's input, or none where combining could
change a result: :class:`~sparkpoint.windows.local_aggregation.WindowCombiner` for tumbling and sliding
event-time windows, :class:`SessionCombiner` for event-time sessions of a static gap.

**Sessions.** A record's own window is ``[t, t + gap)``; windows that overlap or touch merge. Per key, an
upstream task's records of an epoch fall into runs (:func:`~sparkpoint.windows.session_batches.batch_runs`), and
a run goes over the exchange as one :class:`~sparkpoint.windows.local_aggregation.WindowPartial`: its covering
window and its records folded in arrival order. The window operator adds the partial's window to the key's
merging window set and merges its value into the session it lands in, which leaves the set and the contents
as the run's records one by one would, **as long as none of them is late**: element by element, a record whose
own window the watermark passed is dropped or kept depending on whether, when it comes, it touches a session
that is not (Flink's order-dependent rule), which a run cannot reproduce.

So a session combiner combines only records it can prove are on time, against a bound of the window operator's
watermark while it takes them: in epoch mode that watermark does not move while the operator takes an epoch's
input, and the driver gives each epoch's upstream tasks a bound of it
(:meth:`~sparkpoint.runtime.job_progress.JobProgress.watermark_bound`); in continuous mode a long-running upstream
subtask bounds it by where it started and what the subtask itself sent on
(:mod:`sparkpoint.runtime.continuous.combine_bounds`). A record with
``t + gap - 1`` above the bound is on time, and so is every session it joins. Every record of a key with a record
at or below ``bound - gap + 1`` goes over as it is, in order, and the window operator takes those element by
element (per key, an upstream task sends partials or records, never both, so the order that matters is kept).
Keys are one key where the keyed state has them as one (``1``, ``1.0`` and ``True``: canonical bytes). Without a
bound (the first epoch after a restore, until the tasks concerned reported; in continuous mode likewise, until a
restored attempt's consumers and the tasks feeding them reported, and an edge its subtask was idle on) nothing is
combined.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress
from typing import Any

import numpy as np

from sparkpoint.common.ownership import own
from sparkpoint.datastream.functions import AggregateFunction, bound_call
from sparkpoint.datastream.session_windows import EventTimeSessionWindows
from sparkpoint.datastream.window import EventTimeTrigger, SlidingEventTimeWindows, TumblingEventTimeWindows
from sparkpoint.state.canonical_keys import keys_stored_bytes
from sparkpoint.windows.local_aggregation import WindowCombiner, WindowPartial, partial_or_record_key
from sparkpoint.windows.session_batches import SAFE_TIMESTAMP, batch_runs

__all__ = ["SessionCombiner", "local_combiner"]


def stamps_array(timestamps: list) -> np.ndarray | None:
    """The timestamps as int64, or None with a record without one or one beyond what the runs compute in int64."""
    try:
        ts = np.fromiter(timestamps, dtype=np.int64, count=len(timestamps))
    except (TypeError, OverflowError):
        return None
    if len(ts) and (ts.min() < -SAFE_TIMESTAMP or ts.max() > SAFE_TIMESTAMP):
        return None
    return ts


def local_combiner(
    transformation: Any, key_selector: Any, trigger: Any, enabled: bool
) -> WindowCombiner | SessionCombiner | None:
    """The combiner for the input of a window transformation, or None where it would change results."""
    t = transformation
    if not enabled or t.function_kind not in ("reduce", "aggregate") or t.evictor is not None:
        return None
    if t.allowed_lateness or t.late_tag is not None or type(trigger) is not EventTimeTrigger:
        return None
    if t.function_kind == "aggregate" and type(t.aggregate_function).merge is AggregateFunction.merge:
        return None  # no merge: accumulators of two tasks cannot be combined
    if type(t.assigner) in (TumblingEventTimeWindows, SlidingEventTimeWindows):
        return WindowCombiner(key_selector, t.assigner, t.reduce_function, t.aggregate_function)
    if type(t.assigner) is EventTimeSessionWindows and t.assigner.gap_extractor is None and t.assigner.gap > 0:
        return SessionCombiner(key_selector, t.assigner.gap, t.reduce_function, t.aggregate_function)
    return None


class _ReducedToNone(Exception):
    """A reduce function returned None in a run: the batch goes as records, for the window operator to fail on."""


class SessionCombiner:
    """Combines the on-time runs of a batch into session partials (in the upstream task; see the module)."""

    needs_watermark_bound = True  # the deployment carries its consumer's watermark bound
    routing_key = staticmethod(partial_or_record_key)

    def __init__(self, key_selector: Any, gap: int, reduce_function: Any = None, aggregate_function: Any = None):
        self.key_selector = key_selector
        self.gap = gap
        self.reduce_function = reduce_function
        self.aggregate_function = aggregate_function

    def combine(self, values: list, timestamps: list, watermark_bound: int | None = None) -> tuple[list, list]:
        """The partials of ``values``' on-time runs, then the records of every other key as they are, in order;
        ``values`` as they are without a bound, with a record without a timestamp, when a user function fails
        here (the window operator fails on the same record, naming it), or when runs would be as many as records."""
        if watermark_bound is None:
            return values, timestamps
        try:
            combined = self._combine(values, timestamps, watermark_bound)
        except Exception:  # noqa: BLE001 - the window operator fails on the same record, naming it
            return values, timestamps
        return combined if combined is not None else (values, timestamps)

    def _combine(self, values: list, timestamps: list, bound: int) -> tuple[list, list] | None:
        ts = stamps_array(timestamps)
        if ts is None:
            return None
        originals, keys, _ = self.keys_of(values)
        split = self.split(values, timestamps, ts, originals, keys, bound, set(), whole=True)
        if split is None:
            return None
        partials, stamps, raw = split
        return partials + raw[0], stamps + raw[1]

    def keys_of(self, values: list) -> tuple[list, list, Any]:
        """``(keys, keys as grouped, kind)``: grouped as the keyed state has them, by their stored bytes (1, 1.0 and
        True are one key, so is every NaN; 1 and "1" are two), or by the keys themselves where equality already
        agrees (all of them exact str, or exact int: ``kind`` is that type, else ``bytes``)."""
        originals = list(map(bound_call(self.key_selector, "get_key"), values))
        kinds = set(map(type, originals))
        if kinds == {str} or kinds == {int}:
            return originals, originals, kinds.pop()
        return originals, keys_stored_bytes(originals)[1], bytes

    def split(
        self,
        values: list,
        timestamps: list,
        ts: np.ndarray,
        originals: list,
        keys: list,
        bound: int,
        risky: set,
        whole: bool = False,
    ) -> tuple[list, list, tuple[list, list]] | None:
        """``(partials, their timestamps, (records, timestamps))``: the on-time runs of the records' keys as partials,
        and the records of every key that may be late as they are, in order. ``risky``: keys (as grouped) known to
        have such a record already; this batch's are added. With ``whole``, None where runs would be as many as the
        on-time records."""
        late = ts <= bound - self.gap + 1  # may be late: its own window ends by the bound
        if late.any():
            risky.update(map(keys.__getitem__, np.flatnonzero(late).tolist()))
        raw: tuple[list, list] = ([], [])
        if risky:
            on_time = [k not in risky for k in keys]
            if not all(on_time):
                not_on_time = [not s for s in on_time]
                raw = (list(compress(values, not_on_time)), list(compress(timestamps, not_on_time)))
                values, ts = list(compress(values, on_time)), ts[np.array(on_time)]
                keys, originals = list(compress(keys, on_time)), list(compress(originals, on_time))
        runs = batch_runs(keys, ts, self.gap)
        if whole and len(runs) >= len(values):
            return None
        fold = self._fold(values)
        partials = [WindowPartial(originals[m[0]], window, fold(m), len(m)) for _, window, m in runs]
        stamps = [window.end - self.gap for _, window, _ in runs]  # a run's latest record
        return partials, stamps, raw

    def _fold(self, values: list) -> Callable[[list[int]], Any]:
        """A run's records (their indexes in ``values``, in arrival order) folded into a reduced value or an
        accumulator."""
        if self.reduce_function is not None:
            reduce = bound_call(self.reduce_function, "reduce")

            def reduced(members: list[int]) -> Any:
                value = own(values[members[0]])  # the run's own value: the reduce may change it in place
                for i in members[1:]:
                    value = reduce(value, values[i])
                    if value is None:  # the window operator fails on it, naming the key
                        raise _ReducedToNone
                return value

            return reduced
        agg = self.aggregate_function
        add, create = agg.add, agg.create_accumulator

        def accumulated(members: list[int]) -> Any:
            acc = create()
            for i in members:
                acc = add(values[i], acc)
            return acc

        return accumulated
