"""What ``DataStream.execute_and_collect()`` returns (PyFlink's ``CloseableIterator``, re-exported from
:mod:`sparkpoint.datastream.data_stream`): the records of a running job as its collect sink takes them.

The job runs in the background from the call on. Its driver hands each barrier's collected records (the collect
sink runs at parallelism 1, so they come in their upstream order) to a :class:`CollectedRecords` buffer; iterating
takes them, waiting for the next barrier's when it has none, and ends when the job has finished and every record
was taken. A job that failed raises its error from the iteration, after the records that came before it.
``close()`` (or leaving a ``with`` block) cancels the job if it still runs, so an unbounded job can be read
partly, as with ``limit``.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections import deque
from typing import Any

from sparkpoint.common.types import Row
from sparkpoint.datastream.transformations import CollectTransformation, TransformationInput
from sparkpoint.errors import JobExecutionError

__all__ = ["CloseableIterator", "CollectedRecords", "collect", "python_value"]

_CANCEL_WAIT_S = 120.0


class CollectedRecords:
    """The records a job collected and its end, between the driver (which adds them) and the iterator."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.records: deque = deque()
        self.ended = False
        self.error: BaseException | None = None

    def add(self, records: list) -> None:
        """Records the job collected at a barrier, in order."""
        with self.cond:
            self.records.extend(records)
            self.cond.notify_all()

    def end(self, error: BaseException | None) -> None:
        """The job ended (``error``: how it failed, if it did)."""
        with self.cond:
            self.ended, self.error = True, error
            self.cond.notify_all()

    def take(self) -> tuple[bool, Any]:
        """``(True, record)``, or ``(False, None)`` once the job ended and every record was taken (its error
        raised here, if it failed)."""
        with self.cond:
            while not self.records and not self.ended:
                self.cond.wait(0.5)
            if self.records:
                return True, self.records.popleft()
            if isinstance(self.error, StopIteration):  # raised from __next__, it would end the iteration silently
                raise JobExecutionError(f"the job failed: {self.error!r}") from self.error
            if self.error is not None:
                raise self.error
            return False, None


class CloseableIterator:
    """An iterator over a running job's collected records (see the module); ``close()`` cancels the job."""

    def __init__(self, client: Any, records: CollectedRecords, type_info: Any = None):
        self._client, self._records, self._type_info = client, records, type_info
        self._closed = False

    def __iter__(self) -> CloseableIterator:
        return self

    def __next__(self) -> Any:
        return self.next()

    def next(self) -> Any:
        """The next record; waits for it while the job runs. ``StopIteration`` once the job finished and every
        record was taken."""
        if self._closed:
            raise StopIteration("the iterator was closed")
        more, record = self._records.take()
        if not more:
            raise StopIteration("No more data.")
        return python_value(record, self._type_info)

    def close(self) -> None:
        """Cancel the job if it still runs, and wait until it has stopped."""
        if self._closed:
            return
        self._closed = True
        result = self._client.get_job_execution_result()
        if not result.done():
            self._client.cancel()
        with contextlib.suppress(Exception):  # its failure was (or is no longer) the reader's business
            result.result(timeout=_CANCEL_WAIT_S)

    def __enter__(self) -> CloseableIterator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def python_value(value: Any, type_info: Any) -> Any:
    """``value`` as PyFlink hands a collected record of ``type_info`` back: a ``Row`` has its type's field names
    (``f0``, ``f1``, ... unless named), nested rows too."""
    if type_info is None or getattr(type_info, "name", None) != "ROW" or not isinstance(value, (Row, tuple, list)):
        return value
    types, names = tuple(type_info.get_field_types()), tuple(type_info.get_field_names())
    if len(names) != len(value):  # not a row of its declared type: handed back as it is
        return value
    values = tuple(python_value(v, t) for v, t in zip(value, types))
    row = Row(**dict(zip(names, values)))
    if isinstance(value, Row):
        row.set_row_kind(value.get_row_kind())
    return row


def collect(env: Any, stream_id: int, type_info: Any, job_name: str | None, limit: int | None) -> Any:
    """``DataStream.execute_and_collect``: a collect sink at parallelism 1 behind stream ``stream_id`` of ``env``,
    the job started with its records fed to a :class:`CloseableIterator`; with ``limit``, the first ``limit``
    records as a list, the job cancelled once they came."""
    tid = env._add_transformation(CollectTransformation, "Collect", [TransformationInput(stream_id)], parallelism=1)
    records = CollectedRecords()
    try:
        job = env._create_job(job_name or "collect", on_collected=records.add)
    finally:
        env._remove_transformation(tid)
    client = env._start(job)
    client.get_job_execution_result().add_done_callback(lambda f: records.end(_job_error(f)))
    iterator = CloseableIterator(client, records, type_info)
    if limit is None:
        return iterator
    with iterator:
        return list(itertools.islice(iterator, limit))


def _job_error(result: Any) -> BaseException | None:
    """A finished job's error for the reader of its records; a cancelled job (the reader closed it) has none."""
    error = result.exception()
    if error is None and getattr(result.result(), "cancelled", False):
        return None
    return error
