"""A task's failure across a real Spark job and back: what the driver raises is what the task sent.

Each case fails one Spark task with :func:`raise_for_driver` (as a sparkpoint task does) and reads
the job's error back with :func:`error_from`: a user function's error with its record's origin (a
record that does not pickle travels as its text), an unrecoverable error among its causes, an
epoch's deadline with its reason and where the task was, and errors that do not pickle.
"""

from __future__ import annotations

import threading

import pytest

from sparkpoint.errors import JobExecutionError, UnrecoverableError, UserFunctionError
from sparkpoint.runtime.spark.task_failures import error_from, raise_for_driver
from sparkpoint.runtime.task_interrupt import EpochInterrupted

pytestmark = pytest.mark.spark

EPOCH = 7


class Unpicklable:
    """A record that does not pickle (it holds a lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __repr__(self) -> str:
        return "Unpicklable(order 42)"


class QuotaExhausted(UnrecoverableError):
    """An unrecoverable error whose ``__init__`` takes other arguments than its ``args``."""

    def __init__(self, *, account: str, limit: int):
        super().__init__(f"account {account} is over its limit of {limit}")
        self.account, self.limit = account, limit


class HoldsALock(UnrecoverableError):
    """An unrecoverable error with an attribute that does not pickle."""

    def __init__(self, message: str):
        super().__init__(message)
        self.lock = threading.Lock()


def user_error(record: object, caused_by: BaseException) -> UserFunctionError:
    try:
        raise caused_by
    except BaseException as cause:  # noqa: BLE001 - as the operator wraps what the function raised
        error = UserFunctionError("parse", "Map", record, cause)
        error.__cause__ = cause
    error.origin = "/data/in/4.tsv:200"
    return error


def crossed(spark, make_error) -> BaseException:
    """What the driver raises for a Spark task of stage 1, subtask 0, epoch ``EPOCH`` failing with
    ``make_error()``."""

    def task(it):
        for _ in it:
            pass
        raise_for_driver(make_error(), 1, 0, EPOCH)
        yield  # a generator, as a task's output is

    with pytest.raises(Exception) as info:  # the job's Py4JJavaError
        spark.sparkContext.parallelize([0], 1).mapPartitions(task).collect()
    return error_from(info.value, EPOCH)


def test_a_user_error_crosses_with_its_record_origin_and_trace(spark):
    error = crossed(spark, lambda: user_error(Unpicklable(), ValueError("amount 'oops' is not a number")))
    assert type(error) is UserFunctionError
    assert (error.uid, error.operator_name, error.origin, error.epoch) == ("parse", "Map", "/data/in/4.tsv:200", EPOCH)
    assert error.record_text == "Unpicklable(order 42)"  # the record as text: it does not pickle
    assert "ValueError: amount 'oops' is not a number" in error.traceback_text()
    assert error.__cause__ is None  # nothing unrecoverable: the failover may restart


def test_an_unrecoverable_cause_crosses_as_its_class_and_attributes(spark):
    error = crossed(spark, lambda: user_error(("u1", 3), QuotaExhausted(account="acme", limit=10)))
    assert type(error) is UserFunctionError and error.record == ("u1", 3)
    cause = error.__cause__
    assert type(cause) is QuotaExhausted and (cause.account, cause.limit) == ("acme", 10)
    assert str(cause) == "account acme is over its limit of 10"


def test_an_unrecoverable_error_that_does_not_pickle_crosses_as_its_text(spark):
    error = crossed(spark, lambda: HoldsALock("the ledger is closed"))
    assert type(error) is UnrecoverableError
    assert str(error) == "HoldsALock: the ledger is closed"


def test_an_epoch_deadline_crosses_with_its_reason_and_where_the_task_was(spark):
    error = crossed(spark, lambda: EpochInterrupted("epoch 7 passed its bound of 5 s", "operator 'sum' (uid 'sum')"))
    assert type(error) is EpochInterrupted
    assert error.reason == "epoch 7 passed its bound of 5 s"
    assert error.where == "stage 1 subtask 0: operator 'sum' (uid 'sum')"


def test_any_other_error_crosses_as_spark_text(spark):
    error = crossed(spark, lambda: ValueError("a plain error", threading.Lock()))
    assert type(error) is JobExecutionError
    assert str(error).startswith(f"epoch {EPOCH} failed in a Spark task: ValueError: ('a plain error', "), str(error)
