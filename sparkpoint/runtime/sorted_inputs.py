"""``RuntimeExecutionMode.BATCH``: a keyed operator takes each key's records in timestamp order, as in Flink.

In BATCH, Flink sorts a keyed operator's input before the operator sees any of it (``SortingDataInput``: by the
key's serialized bytes, then the record's timestamp; for two keyed inputs ``MultiInputSortingDataInput`` gives a
key's records of both inputs in timestamp order), and a broadcast input is read first, whole. So a "keep the
latest" reduce keeps the latest by event time, and a count window counts records in timestamp order, whatever
order the files held them in.

What a keyed operator computes depends only on the order of each key's records (its state, timers and windows are
the key's own), so here the records are put in timestamp order (then arrival order), which orders every key's
records as Flink's sort does, without calling the key selector or comparing keys: keys interleave, where Flink
takes them one after another. A keyed operator's records wait for the end of the input (its input watermark at
+inf, which BATCH holds back until then): the records of each epoch before it are sorted into a *run* in the
operator's working directory on the task's local disk, beside its keyed state (a run per epoch, an empty one too,
so that a missing one is noticed); the end's epoch orders the runs' timestamps with its own records' (one stable
``argsort``: earlier epochs first among equal timestamps) and streams the values from the runs in that order, a
group at a time (consecutive records of one input). A broadcast input is taken as it comes: no keyed record has
been taken before the end. A record stamped exactly Long.MIN comes out without a timestamp, the same thing to
Flink's windows. A retried task writes its epoch's run again; a marker keeps the runs until the job's working
directories go, so a retry of the end's epoch takes them again and a later epoch does not.
"""

from __future__ import annotations

import operator
import os
import pickle
import shutil
import socket
from collections.abc import Iterator
from typing import Any

import numpy as np

from sparkpoint.common.pickling import dumps
from sparkpoint.errors import StateMissingError
from sparkpoint.operators.coded import Coded

__all__ = ["SortedInputs", "NO_TIMESTAMP"]

NO_TIMESTAMP = -(2**63)  # where a record without a timestamp sorts: Flink's StreamRecord gives Long.MIN
_CHUNK = 16_384  # records a run's pickle frame holds, and a group taken at once at most
_FAN_IN = 8  # runs merged into one at a time
_PICKLE = pickle.HIGHEST_PROTOCOL


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
        self.values: list = []
        self.stamps: list[np.ndarray] = []
        self.inputs: list[np.ndarray] = []

    def add(self, input_number: int, values: Any, timestamps: Any) -> None:
        """Hold records of ``input_number`` (a list or a coded batch; timestamps a list or an int64 array)."""
        values = values.values() if type(values) is Coded else values
        if isinstance(timestamps, np.ndarray):
            stamps = timestamps.astype(np.int64, copy=False)
        else:
            stamps = np.fromiter(
                (NO_TIMESTAMP if t is None else t for t in timestamps), dtype=np.int64, count=len(values)
            )
        self.values.extend(values)
        self.stamps.append(stamps)
        self.inputs.append(np.full(len(values), input_number, dtype=np.int8))

    def _sorted(self) -> tuple[np.ndarray, np.ndarray, list]:
        """This epoch's records in timestamp order, then arrival order: ``(timestamps, inputs, values)``."""
        stamps = np.concatenate(self.stamps) if self.stamps else np.empty(0, np.int64)
        inputs = np.concatenate(self.inputs) if self.inputs else np.empty(0, np.int8)
        order = np.argsort(stamps, kind="stable")
        values = _taken(self.values, order)
        self.values, self.stamps, self.inputs = [], [], []
        return stamps[order], inputs[order], values

    def spill(self) -> None:
        """Write this epoch's records as its sorted run (an empty one too); a retried task writes it again. The
        earlier epochs' runs are merged first where :data:`_FAN_IN` of one size have gathered (:meth:`_compact`)."""
        self._compact()
        stamps, inputs, values = self._sorted()
        _write_run(self._run(self.epoch, self.epoch), stamps, inputs, [values])

    def _compact(self) -> None:
        """Merge the newest :data:`_FAN_IN` runs while that many cover about as many epochs (as many powers of
        ``_FAN_IN``): a run per epoch would keep a file open, and a chunk of values in memory, per epoch at the end;
        this way a run is written again about log(epochs) times. Only runs of epochs before this one are merged, so
        a retried task of this epoch writes its own run again, as its first try did."""
        while True:
            spans = [span for span in self._spans() if span[1] < self.epoch]  # a first try's own run stays apart
            tail = [spans[-1]] if spans else []
            for span in reversed(spans[:-1]):
                if _level(span) != _level(tail[0]) or len(tail) == _FAN_IN:
                    break
                tail.insert(0, span)
            if len(tail) < _FAN_IN:
                return
            paths = [self._run(*span) for span in tail]
            runs = [_Run(path) for path in paths]
            try:
                order = _Order(runs)
                chunks = (values for _, _, _, values in order.slices(runs))
                _write_run(self._run(tail[0][0], tail[-1][1]), order.stamps, order.inputs, chunks)
            finally:
                for run in runs:
                    run.close()
            for path in paths:
                os.remove(path)

    def merged(self) -> Iterator[tuple[int, list, list]]:
        """Every held record, the runs' and this epoch's, in order, as ``(input, values, timestamps)`` groups of
        consecutive records of one input (at most :data:`_CHUNK` each). The runs are marked as taken by this
        epoch: a later one (after the end) takes only its own records."""
        runs: list[_Run] = []
        if _read_int(self._marker(), self.epoch) >= self.epoch:  # not taken, or taken by this epoch's earlier try
            runs = [_Run(path) for path in self._runs()]
            with open(self._marker(), "w") as f:
                f.write(str(self.epoch))
        runs.append(_Run(None, self._sorted()))
        try:
            for _, input_of, stamps, values in _Order(runs).slices(runs):
                times = [None if t == NO_TIMESTAMP else t for t in stamps.tolist()]
                cuts = [0, *(np.flatnonzero(np.diff(input_of)) + 1).tolist(), len(values)]
                for a, b in zip(cuts, cuts[1:]):
                    yield int(input_of[a]), values[a:b], times[a:b]
        finally:
            for run in runs:
                run.close()

    def _spans(self) -> list[tuple[int, int]]:
        """The ``(first, last)`` epochs of every run here, in order."""
        names = (n.split("-") for n in os.listdir(self.dir) if n.startswith("run-") and not n.endswith(".tmp"))
        return sorted((int(first), int(last)) for _, first, last in names)

    def _runs(self) -> list[str]:
        """The runs of the epochs before this one, which must cover each of them once."""
        spans = self._spans()
        epochs = [e for first, last in spans for e in range(first, last + 1)]
        first = _read_int(self._first(), -1)
        if first < 0 or epochs != list(range(first, self.epoch)):
            missing = sorted(set(range(max(first, 0), self.epoch)) - set(epochs)) or "from the first"
            raise StateMissingError(
                f"BATCH: the sorted input of {self.what} for epochs {missing} is missing on host "
                f"{socket.gethostname()} (in {self.dir}): the task ran on an executor that does not hold it, or "
                f"the directory was wiped; the job runs again from the start"
            )
        return [self._run(*span) for span in spans]

    def _run(self, first: int, last: int) -> str:
        return os.path.join(self.dir, f"run-{first:010d}-{last:010d}")

    def _marker(self) -> str:
        return os.path.join(self.dir, "taken")

    def _first(self) -> str:
        return os.path.join(self.dir, "first")


class _Run:
    """One sorted run: its timestamps and inputs at once, its values read a chunk at a time as they are taken
    (``held``: this epoch's, in memory)."""

    def __init__(self, path: str | None, held: tuple[np.ndarray, np.ndarray, list] | None = None):
        self.file: Any = None
        if held is not None:
            self.stamps, self.inputs, self.buffer = held
        elif path is not None:
            self.file = open(path, "rb")  # noqa: SIM115 - read as the merge goes, closed by merged()
            self.stamps, self.inputs = pickle.load(self.file)
            self.buffer = []
        self.at = 0  # where in the buffer the next value is

    def take(self, n: int) -> list:
        """The run's next ``n`` values."""
        out: list = []
        while len(out) < n:
            if self.at >= len(self.buffer):
                self.buffer, self.at = pickle.load(self.file), 0
            more = self.buffer[self.at : self.at + n - len(out)]
            out.extend(more)
            self.at += len(more)
        return out

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


class _Order:
    """The merged order of some runs: their timestamps sorted with one stable ``argsort`` (runs in epoch order, so
    equal timestamps keep arrival order), and which run each record comes from."""

    def __init__(self, runs: list[_Run]):
        every = np.concatenate([r.stamps for r in runs])
        order = np.argsort(every, kind="stable")
        self.run_of = np.repeat(np.arange(len(runs)), [len(r.stamps) for r in runs])[order]
        self.inputs = np.concatenate([r.inputs for r in runs])[order]
        self.stamps = every[order]

    def slices(self, runs: list[_Run]) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, list]]:
        """``(runs, inputs, timestamps, values)`` of the merged records, :data:`_CHUNK` at a time, the values
        taken from their runs as they come."""
        for lo in range(0, len(self.run_of), _CHUNK):
            run_of = self.run_of[lo : lo + _CHUNK]
            values: list = [None] * len(run_of)
            for r in np.unique(run_of).tolist():
                where = np.flatnonzero(run_of == r).tolist()
                for i, v in zip(where, runs[r].take(len(where))):
                    values[i] = v
            yield run_of, self.inputs[lo : lo + _CHUNK], self.stamps[lo : lo + _CHUNK], values


def _write_run(path: str, stamps: np.ndarray, inputs: np.ndarray, chunks: Any) -> None:
    """A run: its timestamps and inputs, then its values (``chunks``: lists, in order) in frames of at most
    :data:`_CHUNK`; under a temporary name first, so a run is there whole or not at all."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        pickle.dump((stamps, inputs), f, _PICKLE)
        for values in chunks:
            for lo in range(0, len(values), _CHUNK):  # as the exchange pickles records: cloudpickle where pickle cannot
                f.write(dumps(values[lo : lo + _CHUNK], sticky="sorted-inputs"))
    os.replace(tmp, path)


def _level(span: tuple[int, int]) -> int:
    """How many times :data:`_FAN_IN` runs were merged into one covering this many epochs, about."""
    epochs, level = span[1] - span[0] + 1, 0
    while epochs >= _FAN_IN:
        epochs //= _FAN_IN
        level += 1
    return level


def _taken(values: list, order: np.ndarray) -> list:
    """``values`` in ``order``."""
    if len(order) == 0:
        return []
    if len(order) == 1:
        return [values[int(order[0])]]
    return list(operator.itemgetter(*order.tolist())(values))


def _read_int(path: str, default: int) -> int:
    try:
        with open(path) as f:
            return int(f.read())
    except (OSError, ValueError):
        return default
