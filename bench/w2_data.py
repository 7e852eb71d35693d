"""Input and oracle for benchmark W2 (large keyed state, small change per epoch).

The input is text files of one key per line (the key is a decimal number, ``"0"`` to
``"N-1"``), written in **pairs**: with parallelism 2 every source subtask of sparkpoint's
``FileSource`` takes one new file per epoch, and Spark's file source with
``maxFilesPerTrigger=2`` takes the same two files per micro-batch, so one pair is one
epoch in both engines. Modification times are set in sequence (both engines hand files
out in modification-time order).

* **load**: every key once, ``load_records`` keys per pair (in key order);
* **hot**: ``hot_epochs`` pairs of ``hot_records`` records each; each hot epoch picks
  ``touch_fraction * N`` distinct keys at random and draws its records from them (each
  picked key at least once when there are enough records);
* **restore**: one more hot pair, written only after the main run (the job restored
  from its last checkpoint reads it in its first epoch).

The oracle counts every key by hand with numpy (:class:`W2Input.counts_after`);
the jobs emit ``(key, running count)`` only for the *sample* keys (keys ending in
``"000"``, one key in a thousand) and the checks compare those with the oracle.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SAMPLE_SUFFIX = "000"
#: Modification times of the input files start here and grow by one second per file.
MTIME_BASE = 1_700_000_000


def is_sample(key: int) -> bool:
    """The oracle's twin of ``str(key).endswith(SAMPLE_SUFFIX)``."""
    return str(key).endswith(SAMPLE_SUFFIX)


@dataclass
class W2Input:
    """The files of one key count, and the arrays they were written from."""

    directory: Path
    keys: int
    load_pairs: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    hot_pairs: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    restore_pair: tuple[np.ndarray, np.ndarray] | None = None
    files: int = 0
    pair_paths: list[list[Path]] = field(default_factory=list)  # the files of each pair written, in order
    _changed: list[int] | None = None

    @property
    def main_records(self) -> int:
        return sum(len(a) + len(b) for a, b in self.load_pairs + self.hot_pairs)

    @property
    def max_file_records(self) -> int:
        return max(max(len(a), len(b)) for a, b in self.load_pairs + self.hot_pairs)

    def counts_after(self, with_restore: bool) -> np.ndarray:
        """The oracle: how often each key occurs in the main input (and the restore pair)."""
        pairs = self.load_pairs + self.hot_pairs + ([self.restore_pair] if with_restore and self.restore_pair else [])
        counts = np.zeros(self.keys, dtype=np.int64)
        for a, b in pairs:
            counts += np.bincount(a, minlength=self.keys) + np.bincount(b, minlength=self.keys)
        return counts

    def sample_totals(self, with_restore: bool = False, only: np.ndarray | None = None) -> dict[str, int]:
        """Oracle counts of the sample keys that occur (in ``only``, if given)."""
        counts = self.counts_after(with_restore)
        keys = np.flatnonzero(counts) if only is None else np.unique(only)
        return {str(k): int(counts[k]) for k in keys.tolist() if is_sample(k)}

    def changed_entry_bytes(self) -> list[int]:
        """Per hot epoch, the bytes of the state entries it changed, counted from the input: each distinct key
        of the epoch's pair is one entry, as the rocksdb backend stores a ``ValueState``'s (database key: key
        group, state id, length and the key's text; value: ``pickle((key, None, count))`` with the count at
        the end of the epoch). Issue 8's "bytes that changed" for the incremental checkpoints' target."""
        if self._changed is None:
            counts = np.zeros(self.keys, dtype=np.int64)
            for a, b in self.load_pairs:
                counts += np.bincount(a, minlength=self.keys) + np.bincount(b, minlength=self.keys)
            self._changed = []
            for a, b in self.hot_pairs:
                arr = np.concatenate([a, b])
                counts += np.bincount(arr, minlength=self.keys)
                touched = np.unique(arr)
                self._changed.append(
                    sum(
                        8 + len(text) + len(pickle.dumps((text, None, count), pickle.HIGHEST_PROTOCOL))
                        for text, count in zip(map(str, touched.tolist()), counts[touched].tolist())
                    )
                )
        return self._changed

    def write_restore_pair(self) -> list[Path]:
        """Write the restore pair (after the main run, which must not see it)."""
        assert self.restore_pair is not None
        return self._write_pair("restore", self.restore_pair)

    def _write_pair(self, tag: str, pair: tuple[np.ndarray, np.ndarray]) -> list[Path]:
        paths = []
        for part, arr in enumerate(pair):
            path = self.directory / f"{self.files:05d}-{tag}-{part}.txt"
            path.write_bytes(("\n".join(map(str, arr.tolist())) + "\n").encode())
            mtime = MTIME_BASE + self.files
            os.utime(path, (mtime, mtime))
            self.files += 1
            paths.append(path)
        self.pair_paths.append(paths)
        return paths


def _split(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    half = (len(arr) + 1) // 2
    return arr[:half], arr[half:]


def hot_keys(rng: np.random.Generator, keys: int, records: int, touch_fraction: float) -> np.ndarray:
    """One hot epoch's records: ``touch_fraction`` of the keys, drawn at random, each at least once."""
    touched = rng.choice(keys, size=max(1, min(keys, round(keys * touch_fraction))), replace=False)
    if records >= len(touched):
        extra = rng.choice(touched, size=records - len(touched))
        arr = np.concatenate([touched, extra])
    else:
        arr = rng.choice(touched, size=records)
    rng.shuffle(arr)
    return arr


def write_input(
    directory: Path,
    keys: int,
    load_records: int,
    hot_epochs: int,
    hot_records: int,
    touch_fraction: float,
    seed: int = 7,
) -> W2Input:
    """Write the load and hot pairs of ``keys`` keys into ``directory`` (the restore pair is kept back)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    inp = W2Input(directory, keys)
    for start in range(0, keys, load_records):
        pair = _split(np.arange(start, min(keys, start + load_records), dtype=np.int64))
        inp.load_pairs.append(pair)
        inp._write_pair("load", pair)
    for _ in range(hot_epochs):
        pair = _split(hot_keys(rng, keys, hot_records, touch_fraction))
        inp.hot_pairs.append(pair)
        inp._write_pair("hot", pair)
    inp.restore_pair = _split(hot_keys(rng, keys, hot_records, touch_fraction))
    return inp


def check_sample(
    emitted: list[tuple[str, int]], expected: dict[str, int], start: dict[str, int] | None = None
) -> dict[str, Any]:
    """Every sample key's emitted running counts must be exactly ``start+1 .. expected`` (no gap, no
    duplicate) and nothing else may be emitted; ``start`` = counts before the run (restore)."""
    seen: dict[str, list[int]] = {}
    for key, n in emitted:
        seen.setdefault(key, []).append(int(n))
    wrong = []
    for key, total in expected.items():
        first = (start or {}).get(key, 0) + 1
        got = sorted(seen.get(key, []))
        if got != list(range(first, total + 1)):
            wrong.append(key)
    extra = sorted(set(seen) - set(expected))
    return {
        "ok": not wrong and not extra,
        "sample_keys": len(expected),
        "emitted": len(emitted),
        "wrong_keys": wrong[:10],
        "n_wrong": len(wrong),
        "extra_keys": extra[:10],
        "n_extra": len(extra),
    }


def du(path: Path) -> int:
    """Bytes of the files under ``path``."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(root, name))
    return total


def now() -> float:
    return time.perf_counter()
