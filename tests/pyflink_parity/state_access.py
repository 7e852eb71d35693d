"""A running total per person in keyed value state, printed after every payment.

``(name, amount)`` payments are keyed by name; a keyed process function adds each amount
to the person's total (a FLOAT value state with a time-to-live) and emits
``(name, total so far)``. The source declares amounts as FLOAT, so each enters as the
single-precision value of its literal (110.1 becomes 110.0999984741211); the totals are
sums of those in double precision. Runs at the environment's default parallelism.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from job_parts import running_total_state

from sparkpoint.common import Types
from sparkpoint.datastream import StreamExecutionEnvironment
from sparkpoint.datastream.functions import KeyedProcessFunction, RuntimeContext
from sparkpoint.datastream.state import ValueState

PAYMENTS = [
    ("Alice", 110.1),
    ("Bob", 30.2),
    ("Alice", 20.0),
    ("Bob", 53.1),
    ("Alice", 13.1),
    ("Bob", 3.1),
    ("Bob", 16.1),
    ("Alice", 20.1),
]


class RunningTotal(KeyedProcessFunction):
    """Adds each payment to its person's total and emits ``(name, total)``."""

    total: ValueState

    def open(self, runtime_context: RuntimeContext) -> None:
        self.total = runtime_context.get_state(running_total_state())

    def process_element(self, value: tuple[str, float], ctx: Any) -> Iterable[tuple[str, float]]:
        name, amount = value
        total = self.total.value()
        total = amount if total is None else total + amount
        self.total.update(total)
        yield name, total


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    payments = env.from_collection(PAYMENTS, type_info=Types.TUPLE([Types.STRING(), Types.FLOAT()]))
    payments.key_by(lambda payment: payment[0]).process(RunningTotal()).print()
    env.execute()


if __name__ == "__main__":
    main()
