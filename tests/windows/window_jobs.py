"""Job pieces shared by the window tests (module level, so Spark pickles them like a user's job)."""

from __future__ import annotations

from sparkpoint.common import Duration, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import ReduceFunction
from sparkpoint.datastream.transformations import CollectTransformation, TransformationInput

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


def first_field(e):
    return e[0]


def collect_windows(env, stream, window, function, window_function):
    """``stream`` keyed by its first field into ``window``, reduced or aggregated by ``function`` then
    ``window_function`` (uid ``w``, parallelism 2), and run: the outputs sorted, and the window operator's
    metrics (a collect sink run by execute() keeps its records in the job's result beside them)."""
    windowed = stream.key_by(first_field).window(window)
    if isinstance(function, ReduceFunction):
        out = windowed.reduce(function, window_function=window_function)
    else:
        out = windowed.aggregate(function, window_function=window_function)
    out.uid("w").set_parallelism(2)
    env._add_transformation(CollectTransformation, "Collect", [TransformationInput(out._id)])
    result = env.execute()
    return sorted(result.collected), result.metrics["w"]
