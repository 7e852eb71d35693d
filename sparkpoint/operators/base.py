"""Runtime operators: what runs inside a task, one batch of records at a time.

A runtime operator is created afresh in every task of every epoch from its frozen
description (a node of the job graph), given the state it resumes from, and asked to
snapshot what must survive at the end of the task. Instances never outlive a task, so
nothing depends on a Python worker process surviving between epochs.

Records travel as two parallel lists, ``values`` and ``timestamps`` (``None`` where a
record has no event timestamp).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

from sparkpoint.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from sparkpoint.datastream.failed_records import FAILED_RECORDS, FailedRecord
from sparkpoint.datastream.functions import CheckpointedFunction, Function, RuntimeContext
from sparkpoint.datastream.output_tag import OutputTag
from sparkpoint.errors import StateError, UserFunctionError
from sparkpoint.operators.coded import all_of_type
from sparkpoint.state.operator_state import DefaultOperatorStateStore

__all__ = [
    "Output",
    "StreamOperator",
    "TaskContext",
    "OperatorRuntimeContext",
    "IDLE",
    "first_failing",
    "extract_timestamps",
    "first_out_of_range",
    "out_of_range_error",
]

IDLE = None  # an idle input's watermark: excluded from the minimum


def first_failing(fn: Any, *columns: list) -> Any:
    """The first row (first column's value) on which ``fn`` raises.

    Batch paths run a user function over a whole list at once; when that fails, this
    finds the record to name in the error (functions on these paths must not have
    side effects, as Flink's key selectors and timestamp assigners must not).
    """
    for row in zip(*columns):
        try:
            fn(*row)
        except Exception:  # noqa: BLE001 - looking for the one that fails
            return row[0]
    return None


def extract_timestamps(op: StreamOperator, assigner: Any, values: list, timestamps: list) -> list:
    """Event timestamps of ``values`` from a timestamp assigner; failures name the record."""
    extract = getattr(assigner, "_fn", None) or assigner.extract_timestamp  # a plain function: call it directly
    previous: Any = timestamps
    missing = timestamps.count(None)  # a source's records have none: the assigner sees Long.MIN_VALUE, as in Flink
    if missing:
        previous = (
            itertools.repeat(MIN_WATERMARK, missing)
            if missing == len(timestamps)
            else [t if t is not None else MIN_WATERMARK for t in timestamps]
        )
    extracted: list = []
    try:
        extracted.extend(map(extract, values, previous))  # on a failure, holds those of the records before it
        if len(extracted) < len(values):  # the assigner raised StopIteration: map() took it for the end
            raise RuntimeError("the timestamp assigner raised StopIteration")
        if not all_of_type(extracted, int):
            extracted = [int(t) for t in extracted]
    except Exception as e:  # the assigner failed on the next record, or int() on one of its results
        failed = (
            values[len(extracted)]
            if len(extracted) < len(values)
            else first_failing(lambda v, t: int(t), values, extracted)
        )
        raise op.fail(failed, e) from e
    beyond = first_out_of_range(extracted)
    if beyond is not None:
        error = out_of_range_error(extracted[beyond], "the timestamp assigner returned")
        raise op.fail(values[beyond], error) from error
    return extracted


def first_out_of_range(timestamps: list) -> int | None:
    """The index of the first of ``timestamps`` outside Flink's range of timestamps, a Java long
    (``Long.MIN_VALUE`` to ``Long.MAX_VALUE``); None if there is none (``None``, a record without one, is in)."""
    try:
        if not timestamps or (min(timestamps) >= MIN_WATERMARK and max(timestamps) <= MAX_WATERMARK):
            return None
    except TypeError:  # records without a timestamp among them
        pass
    return next(
        (
            i
            for i, t in enumerate(timestamps)
            if isinstance(t, (int, float)) and not MIN_WATERMARK <= t <= MAX_WATERMARK
        ),
        None,
    )


def out_of_range_error(timestamp: Any, what: str) -> ValueError:
    """The error for a timestamp beyond a Java long, which no watermark could ever pass."""
    return ValueError(
        f"{what} {timestamp}, outside the range of event timestamps: milliseconds since the epoch "
        f"as a Java long, from {MIN_WATERMARK} (Long.MIN_VALUE) to {MAX_WATERMARK} (Long.MAX_VALUE)"
    )


class Output:
    """What an operator emitted during one call: main records and side outputs."""

    __slots__ = ("values", "timestamps", "side", "passed", "taken")

    def __init__(self) -> None:
        self.values: list = []
        self.timestamps: list = []
        self.side: dict[str, tuple[list, list]] = {}
        self.passed = 0  # records emitted straight to the operator after it, a slice at a time, not kept here
        # what took the main records a slice at a time on their way to other stages (counted in ``passed``): the
        # exchange routes what it made of them (sparkpoint.runtime.task_output.slice_takers)
        self.taken: Any = None

    def emitted(self) -> int:
        """The main records emitted: those kept and those passed on."""
        return len(self.values) + self.passed

    def collect(self, value: Any, timestamp: int | None) -> None:
        self.values.append(value)
        self.timestamps.append(timestamp)

    def take(self, values: list, timestamps: list) -> None:
        """Emit a batch whose lists nothing changes any more (an operator's input, a reader's fresh output):
        the lists themselves while nothing was emitted yet (no copy of an epoch's references), else their
        contents appended."""
        if self.values or self.timestamps:
            self.values.extend(values)
            self.timestamps.extend(timestamps)
        else:
            self.values, self.timestamps = values, timestamps

    def collect_side(self, tag: OutputTag, value: Any, timestamp: int | None) -> None:
        vs, ts = self.side.setdefault(tag.tag_id, ([], []))
        vs.append(value)
        ts.append(timestamp)

    def emit_all(self, results: Iterable | None, timestamp: int | None) -> None:
        """Emit what a user function returned or yielded; ``(OutputTag, v)`` goes to the side."""
        if results is None:
            return
        for item in results:
            if type(item) is tuple and len(item) == 2 and isinstance(item[0], OutputTag):
                self.collect_side(item[0], item[1], timestamp)
            else:
                self.values.append(item)
                self.timestamps.append(timestamp)


class TaskContext:
    """What a task tells its operators: who it is, which epoch, the clocks, the metrics."""

    def __init__(
        self,
        *,
        job_id: str,
        job_name: str,
        stage_id: int,
        subtask_index: int,
        parallelism: int,
        max_parallelism: int,
        epoch: int,
        processing_time: int,
        job_parameters: dict,
        attempt: int = 0,
    ):
        self.job_id = job_id
        self.job_name = job_name
        self.stage_id = stage_id
        self.subtask_index = subtask_index
        self.parallelism = parallelism
        self.max_parallelism = max_parallelism
        self.epoch = epoch
        self.processing_time = processing_time
        self.job_parameters = job_parameters
        self.attempt = attempt
        self.batch = False  # RuntimeExecutionMode.BATCH: processing-time timers wait for the end of input
        self.metrics: dict[str, dict[str, int]] = {}
        self.user_metrics: dict[str, dict[str, Any]] = {}  # uid -> metric id -> metric (metric_group.py)
        self.metric_totals: dict[str, dict[str, int]] = {}  # uid -> metric id -> total so far (from the driver)

    def counter(self, uid: str, name: str, n: int = 1) -> None:
        m = self.metrics.setdefault(uid, {})
        m[name] = m.get(name, 0) + n


class OperatorRuntimeContext(RuntimeContext):
    """The ``RuntimeContext`` handed to user functions' ``open``."""

    def __init__(self, op: StreamOperator):
        self._op = op

    def get_task_name(self) -> str:
        return self._op.name

    def get_number_of_parallel_subtasks(self) -> int:
        return self._op.task.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._op.max_parallelism or self._op.task.max_parallelism

    def get_index_of_this_subtask(self) -> int:
        return self._op.task.subtask_index

    def get_attempt_number(self) -> int:
        return self._op.task.attempt

    def get_job_parameter(self, key: str, default_value: str) -> str:
        return self._op.task.job_parameters.get(key, default_value)

    def _keyed(self, descriptor: Any) -> Any:
        backend = getattr(self._op, "keyed_backend", None)
        if backend is None:
            raise StateError(
                f"operator {self._op.name!r} (uid {self._op.uid!r}) asked for keyed state {descriptor.name!r} "
                f"but is not on a keyed stream; use key_by(...) first, or operator state (CheckpointedFunction)"
            )
        return backend.get_partitioned_state(self._op.current_namespace(), descriptor)

    def get_state(self, state_descriptor: Any) -> Any:
        return self._keyed(state_descriptor)

    def get_list_state(self, state_descriptor: Any) -> Any:
        return self._keyed(state_descriptor)

    def get_map_state(self, state_descriptor: Any) -> Any:
        return self._keyed(state_descriptor)

    def get_reducing_state(self, state_descriptor: Any) -> Any:
        return self._keyed(state_descriptor)

    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        return self._keyed(state_descriptor)

    def get_metrics_group(self) -> Any:
        from sparkpoint.operators.metric_group import OperatorMetricGroup

        return OperatorMetricGroup(self._op)


class _InitContext:
    def __init__(self, store: DefaultOperatorStateStore):
        self._store = store

    def get_operator_state_store(self) -> DefaultOperatorStateStore:
        return self._store

    def is_restored(self) -> bool:
        return self._store.restored

    def get_keyed_state_store(self) -> None:
        return None


class _SnapshotContext:
    def __init__(self, epoch: int):
        self._epoch = epoch

    def get_checkpoint_id(self) -> int:
        return self._epoch

    def get_checkpoint_timestamp(self) -> int:
        return 0


class StreamOperator:
    """Base of runtime operators."""

    keyed = False
    routes_failures = False  # records its function raises on go to the FAILED_RECORDS side output
    max_parallelism: int | None = None  # what its functions are told (JobPlan.reported_max_parallelism)
    takes_coded = False  # process_batch takes a Coded batch of values from an exchange (else a list)

    def __init__(self, uid: str, name: str, function: Function | None = None):
        self.uid = uid
        self.name = name
        self.function = function
        self.task: TaskContext = None  # type: ignore[assignment]
        self.operator_state: DefaultOperatorStateStore | None = None
        self.watermark = MIN_WATERMARK

    def current_namespace(self) -> Any:
        return None

    # lifecycle -------------------------------------------------------------------------
    def setup(self, task: TaskContext, operator_state: dict | None) -> None:
        self.task = task
        fn = self.function
        if isinstance(fn, CheckpointedFunction):
            self.operator_state = DefaultOperatorStateStore(
                operator_state, f"operator {self.name!r} (uid {self.uid!r})"
            )
            fn.initialize_state(_InitContext(self.operator_state))

    def open(self) -> None:
        if isinstance(self.function, Function):
            self.function.open(OperatorRuntimeContext(self))

    def close(self) -> None:
        if isinstance(self.function, Function):
            self.function.close()

    # records and time ------------------------------------------------------------------
    def process_batch(self, values: list, timestamps: list, out: Output) -> None:
        raise NotImplementedError

    def process_watermark(self, watermark: int | None, out: Output) -> int | None:
        """Advance to ``watermark`` (``IDLE`` if all inputs are idle); returns the output watermark."""
        if watermark is not IDLE and watermark > self.watermark:
            self.watermark = watermark
        return watermark

    def process_processing_time(self, now: int, out: Output) -> None:
        pass

    # state -----------------------------------------------------------------------------
    def snapshot_operator_state(self) -> dict | None:
        """Non-keyed state that must survive this task (carried by the driver)."""
        fn = self.function
        if isinstance(fn, CheckpointedFunction) and self.operator_state is not None:
            fn.snapshot_state(_SnapshotContext(self.task.epoch))
            return self.operator_state.snapshot()
        return None

    def fail(self, record: Any, cause: BaseException) -> UserFunctionError:
        return UserFunctionError(self.uid, self.name, record, cause)

    def process_each(
        self, values: list, timestamps: list, out: Output, process: Callable[[list, list, Output], None] | None = None
    ) -> None:
        """:meth:`process_batch` (or ``process``, e.g. a second input's) record by record: a record the function
        raises on goes to the ``FAILED_RECORDS`` side output (with what it emitted dropped) and the next goes on."""
        process = process or self.process_batch
        for v, t in zip(values, timestamps):
            one = Output()
            try:
                process([v], [t], one)
            except UserFunctionError as e:
                self.task.counter(self.uid, "numFailedRecords", 1)
                out.collect_side(FAILED_RECORDS, FailedRecord(v, self.uid, self.name, e.cause_repr, self.task.epoch), t)
                continue
            out.values.extend(one.values)
            out.timestamps.extend(one.timestamps)
            for tag, (side_values, side_ts) in one.side.items():
                vs, ts = out.side.setdefault(tag, ([], []))
                vs.extend(side_values)
                ts.extend(side_ts)
