"""``RuntimeExecutionMode.BATCH``: a keyed operator takes its input sorted by key and timestamp, as in Flink.

In BATCH, Flink sorts a keyed operator's input before the operator sees any of it (``SortingDataInput``: by the
key's serialized bytes, then the record's timestamp; for two keyed inputs ``MultiInputSortingDataInput`` gives a
key's records of both inputs in timestamp order), and a broadcast input is read first, whole. So a "keep the
latest" reduce keeps the latest by event time, and a count window counts records in timestamp order, whatever
order the files held them in.

Here a keyed operator's records wait for the end of the input (its input watermark at +inf, which BATCH holds back
until then): the records of each epoch before it are sorted into a *run* in the operator's working directory on
the task's local disk, beside its keyed state (a run per epoch, an empty one too, so that a missing one is
noticed); the end's epoch merges the runs with its own records, and the operator takes them a group at a time
(consecutive records of one input), key after key. A broadcast input is taken as it comes: no keyed record has
been taken before the end. The order is: the key's stored bytes (:func:`~sparkpoint.state.canonical_keys.
keys_stored_bytes`), the timestamp (none: Long.MIN, as Flink's), then arrival. A retried task writes its epoch's
run again; a marker keeps the runs until the job's working directories go, so a retry of the end's epoch takes
them again and a later epoch does not.
"""

from __future__ import annotations

import heapq
import os
import pickle
import shutil
import socket
from collections.abc import Iterator
from typing import Any

from sparkpoint.errors import StateMissingError
from sparkpoint.state.canonical_keys import keys_stored_bytes

__all__ = ["SortedInputs", "NO_TIMESTAMP"]

NO_TIMESTAMP = -(2**63)  # where a record without a timestamp sorts: Flink's StreamRecord gives Long.MIN
_CHUNK = 65_536  # entries a run's pickle frame holds
_PICKLE = pickle.HIGHEST_PROTOCOL

# one record of a run: (stored key bytes, sort timestamp, epoch, arrival, input 1 or 2, value, timestamp)
Entry = tuple[bytes, int, int, int, int, Any, Any]


class SortedInputs:
    """One keyed operator's held-back input in one subtask: its epochs' sorted runs under ``directory``."""

    def __init__(self, directory: str, epoch: int, first_epoch: bool, what: str):
        self.dir, self.epoch, self.what = directory, epoch, what
        if first_epoch:  # the attempt's first epoch: nothing of an earlier attempt or job is taken
            shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory, exist_ok=True)
        if first_epoch:
            with open(self._first(), "w") as f:
                f.write(str(epoch))
        self.entries: list[Entry] = []

    def add(self, input_number: int, keys: list, values: list, timestamps: list) -> None:
        """Hold records of ``input_number`` with their ``keys`` (as the operator's key selector gives them)."""
        arrival = len(self.entries)
        stored = keys_stored_bytes(keys)[1]
        self.entries.extend(
            (kb, NO_TIMESTAMP if ts is None else ts, self.epoch, arrival + i, input_number, v, ts)
            for i, (kb, v, ts) in enumerate(zip(stored, values, timestamps))
        )

    def spill(self) -> None:
        """Write this epoch's records as its sorted run (an empty one too); a retried task writes it again."""
        self.entries.sort(key=_order)
        path = self._run(self.epoch)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:  # the records came over an exchange: they pickle
            for lo in range(0, len(self.entries), _CHUNK):
                pickle.dump(self.entries[lo : lo + _CHUNK], f, _PICKLE)
        os.replace(tmp, path)
        self.entries = []

    def merged(self) -> Iterator[tuple[int, list, list]]:
        """Every held record, the runs' and this epoch's, in order, as ``(input, values, timestamps)`` groups of
        consecutive records of one input (at most :data:`_CHUNK` each). The runs are marked as taken by this
        epoch: a later one (after the end) takes only its own records."""
        runs = []
        if _read_int(self._marker(), self.epoch) >= self.epoch:  # not taken, or taken by this epoch's earlier try
            runs = [_read_run(path) for path in self._runs()]
            with open(self._marker(), "w") as f:
                f.write(str(self.epoch))
        self.entries.sort(key=_order)
        group: tuple[int, list, list] | None = None
        for entry in heapq.merge(*runs, iter(self.entries), key=_order):
            if group is None or group[0] != entry[4] or len(group[1]) >= _CHUNK:
                if group is not None:
                    yield group
                group = (entry[4], [], [])
            group[1].append(entry[5])
            group[2].append(entry[6])
        if group is not None:
            yield group
        self.entries = []

    def _runs(self) -> list[str]:
        """The runs of the epochs before this one, each of which must be there."""
        names = sorted(n for n in os.listdir(self.dir) if n.startswith("run-") and not n.endswith(".tmp"))
        epochs = [int(n[4:]) for n in names]
        first = _read_int(self._first(), -1)
        if first < 0 or epochs != list(range(first, self.epoch)):
            missing = sorted(set(range(max(first, 0), self.epoch)) - set(epochs)) or "from the first"
            raise StateMissingError(
                f"BATCH: the sorted input of {self.what} for epochs {missing} is missing on host "
                f"{socket.gethostname()} (in {self.dir}): the task ran on an executor that does not hold it, or "
                f"the directory was wiped; the job runs again from the start"
            )
        return [os.path.join(self.dir, n) for n in names]

    def _run(self, epoch: int) -> str:
        return os.path.join(self.dir, f"run-{epoch:010d}")

    def _marker(self) -> str:
        return os.path.join(self.dir, "taken")

    def _first(self) -> str:
        return os.path.join(self.dir, "first")


def _read_int(path: str, default: int) -> int:
    try:
        with open(path) as f:
            return int(f.read())
    except (OSError, ValueError):
        return default


def _order(entry: Entry) -> tuple[bytes, int, int, int]:
    return entry[0], entry[1], entry[2], entry[3]


def _read_run(path: str) -> Iterator[Entry]:
    with open(path, "rb") as f:
        while True:
            try:
                chunk = pickle.load(f)
            except EOFError:
                return
            yield from chunk
