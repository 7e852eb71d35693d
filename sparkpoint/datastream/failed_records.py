"""Failing records as a side output, instead of a failed job (a sparkpoint extension).

A user function that raises fails the task, and the job restores from its latest checkpoint;
a record that fails every time would fail every attempt, so after
``sparkpoint.failure.same-record-attempts`` attempts (2) the job fails, naming the record and
where it came from. A job that would rather go on asks an operator for its failing records::

    parsed = lines.map(parse).uid("parse")
    parsed.get_side_output(FAILED_RECORDS).sink_to(dead_letter_sink)

Then each record the operator's function raises on goes to that side output as a
:class:`FailedRecord`, and the operator goes on with the next record. Output the function
emitted for the failing record before it raised is dropped; keyed state it changed stays changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkpoint.datastream.output_tag import OutputTag

__all__ = ["FAILED_RECORDS", "FailedRecord"]

FAILED_RECORDS = OutputTag("sparkpoint-failed-records")


@dataclass(frozen=True)
class FailedRecord:
    """A record a user function raised on: the record, the operator, the error and the epoch."""

    record: Any
    operator_uid: str
    operator_name: str
    error: str  # "ValueError: ..."
    epoch: int

    def __str__(self) -> str:
        return f"{self.operator_uid}: {self.error}: {self.record!r}"
