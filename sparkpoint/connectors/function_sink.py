"""Adapts a legacy ``SinkFunction`` (``add_sink``) to the sink contract."""

from __future__ import annotations

from typing import Any

from sparkpoint.connectors.base import Sink, SinkWriter

__all__ = ["FunctionSink"]


class FunctionSink(Sink):
    name = "Sink: Function"

    def __init__(self, function: Any):
        self.function = function

    def create_writer(self, subtask: int, parallelism: int, job_id: str, epoch: int, state: Any) -> SinkWriter:
        return _Writer(self.function)


class _Writer(SinkWriter):
    def __init__(self, function: Any):
        self.function = function
        self.opened = False

    def write(self, values: list, timestamps: list) -> None:
        invoke = self.function.invoke if hasattr(self.function, "invoke") else self.function
        for v, t in zip(values, timestamps):
            invoke(v, _Context(t))

    def prepare_commit(self) -> list:
        return []


class _Context:
    def __init__(self, ts: Any):
        self.ts = ts

    def timestamp(self) -> Any:
        return self.ts
