import pytest

from sparkpoint.common import Duration, Time, WatermarkStrategy
from sparkpoint.datastream import ProcessWindowFunction, TumblingEventTimeWindows


class CountWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield (key, w.start, w.end, sum(1 for _ in elements))


def _job(env):
    data = [("a", 1000), ("b", 2000), ("a", 3000), ("a", 12000), ("b", 11000), ("a", 25000)]
    wm = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5)).with_timestamp_assigner(
        lambda v, ts: v[1]
    )
    return (
        env.from_collection(data)
        .assign_timestamps_and_watermarks(wm)
        .key_by(lambda v: v[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .process(CountWindow())
    )


EXPECTED = {
    ("a", 0, 10000, 2),
    ("a", 10000, 20000, 1),
    ("a", 20000, 30000, 1),
    ("b", 0, 10000, 1),
    ("b", 10000, 20000, 1),
}


def test_local_window_count(local_env):
    assert set(_job(local_env).execute_and_collect()) == EXPECTED


@pytest.mark.spark
def test_spark_window_count(spark_env):
    spark_env.set_parallelism(2)
    assert set(_job(spark_env).execute_and_collect()) == EXPECTED
