"""Spark job groups of a job's epochs, set on the submitting thread only while it submits."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["in_job_group"]

# the thread-local properties setJobGroup sets
_KEYS = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


@contextmanager
def in_job_group(sc: Any, group: str, description: str) -> Iterator[None]:
    """Jobs submitted within go to job group ``group`` (cancelled together, their tasks interrupted); the thread's
    own group comes back after: a session the user passed in files their later jobs under none of the job's."""
    before = [sc.getLocalProperty(k) for k in _KEYS]
    sc.setJobGroup(group, description, interruptOnCancel=True)
    try:
        yield
    finally:
        for key, value in zip(_KEYS, before):
            sc.setLocalProperty(key, value)
