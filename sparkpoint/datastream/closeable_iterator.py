"""What ``DataStream.execute_and_collect()`` returns (PyFlink's ``CloseableIterator``, re-exported from
:mod:`sparkpoint.datastream.data_stream`)."""

from __future__ import annotations

from typing import Any

__all__ = ["CloseableIterator"]


class _CollectIterator(list):
    """A list that also behaves like PyFlink's closeable iterator."""

    def close(self) -> None:
        pass

    def __enter__(self) -> _CollectIterator:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


CloseableIterator = _CollectIterator  # PyFlink's name of what execute_and_collect() returns
