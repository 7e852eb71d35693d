"""A per-person total reported by event-time timers two seconds after each payment.

``(timestamp ms, name, amount)`` payments, out of order by up to two seconds, carry
their first field as event time behind a two-second bounded-out-of-orderness
watermark. A keyed process function adds each amount to the person's total (a FLOAT
value state with a time-to-live) and registers an event-time timer at
``timestamp + 2000``; a timer emits ``(name, total at firing)``. Timers of one key at
the same time are one timer, so each person gets one line per distinct timestamp.

The whole bounded input is read before the watermark passes any timer, so every timer
fires at the end of input and prints the final total. Runs at the environment's
default parallelism.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from job_parts import running_total_state

from sparkpoint.common import Duration, Types, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import StreamExecutionEnvironment
from sparkpoint.datastream.functions import KeyedProcessFunction, RuntimeContext
from sparkpoint.datastream.state import ValueState

PAYMENTS = [
    (1000, "Alice", 110.1),
    (4000, "Bob", 30.2),
    (3000, "Alice", 20.0),
    (2000, "Bob", 53.1),
    (5000, "Alice", 13.1),
    (3000, "Bob", 3.1),
    (7000, "Bob", 16.1),
    (10000, "Alice", 20.1),
]
REPORT_DELAY_MS = 2000


class FirstFieldTimestamp(TimestampAssigner):
    """Reads a payment's event time (milliseconds) from its first field."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[0])


class DelayedTotal(KeyedProcessFunction):
    """Keeps each person's total and reports it ``REPORT_DELAY_MS`` after each payment's time."""

    total: ValueState

    def open(self, runtime_context: RuntimeContext) -> None:
        self.total = runtime_context.get_state(running_total_state())

    def process_element(self, value: tuple[int, str, float], ctx: Any) -> None:
        total = self.total.value()
        self.total.update(value[2] if total is None else total + value[2])
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + REPORT_DELAY_MS)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[tuple[str, float]]:
        yield ctx.get_current_key(), self.total.value()


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    late_by_two_seconds = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_seconds(2)
    ).with_timestamp_assigner(FirstFieldTimestamp())
    payments = env.from_collection(
        PAYMENTS, type_info=Types.TUPLE([Types.LONG(), Types.STRING(), Types.FLOAT()])
    ).assign_timestamps_and_watermarks(late_by_two_seconds)
    payments.key_by(lambda payment: payment[1]).process(DelayedTotal()).print()
    env.execute()


if __name__ == "__main__":
    main()
