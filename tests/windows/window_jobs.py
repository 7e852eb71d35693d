"""Job pieces shared by the window tests (module level, so Spark pickles them like a user's job)."""

from __future__ import annotations

from sparkpoint.common import Duration, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner

BOUND = 2_000  # max out-of-orderness of the generated data and of the watermark


class EventTimestamp(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


def stamped(env, events, bound=BOUND):
    """A collection source with event timestamps and a ``bound``-ms out-of-orderness watermark."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(bound)).with_timestamp_assigner(
        EventTimestamp()
    )
    # one watermark generator, chained to the (parallelism 1) collection source, so that the
    # watermark after each epoch is exactly max ts so far - bound - 1, and arrival order is kept
    return env.from_collection(events).assign_timestamps_and_watermarks(strategy).set_parallelism(1)
