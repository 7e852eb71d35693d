"""Input data and an independent oracle for benchmark W1 (the seed job).

W1 reads tab-separated behaviour events ``ts\\tchannel\\tid\\tbehavior`` (``ts`` in
epoch milliseconds), assigns a 50 s bounded-out-of-orderness watermark, keys by
``(channel, behavior)`` and counts per 60 s tumbling event-time window.

This module

* writes the event stream to a directory of text files whose "modification time,
  then path" order equals sequence order (what a file-streaming source such as
  Spark's ``readStream.text`` needs to replay the stream in order), and
* computes the exact expected window counts with pandas/numpy only, so it can check
  any engine (Spark included) without depending on it.

Both work in chunks of :data:`CHUNK_EVENTS` events so memory stays bounded whatever
the number of events.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sparkpoint.connectors.events import BEHAVIORS, CHANNELS, EventSpec, generate_events

__all__ = ["CHUNK_EVENTS", "ORACLE_COLUMNS", "event_file_name", "file_ranges", "write_event_files", "oracle_counts"]

#: Events generated per call to :func:`generate_events`.
CHUNK_EVENTS: int = 500_000

#: Columns of the frame returned by :func:`oracle_counts`, in order.
ORACLE_COLUMNS: tuple[str, ...] = ("window_start", "window_end", "channel", "behavior", "count")


def event_file_name(index: int) -> str:
    """Name of the ``index``-th event file: ``events-00000.tsv``, ``events-00001.tsv``, ..."""
    return f"events-{index:05d}.tsv"


def file_ranges(n_events: int, n_files: int) -> list[tuple[int, int]]:
    """Split sequence numbers ``[0, n_events)`` into ``n_files`` contiguous ranges.

    The ranges are as even as possible (sizes differ by at most one) and in order.
    """
    if n_events < 0:
        raise ValueError(f"n_events must be >= 0, got {n_events}")
    if n_files < 1:
        raise ValueError(f"n_files must be >= 1, got {n_files}")
    bounds = [n_events * k // n_files for k in range(n_files + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def write_event_files(
    directory: str | os.PathLike[str], n_events: int, n_files: int, spec: EventSpec = EventSpec()
) -> list[Path]:
    """Write events ``0 .. n_events-1`` of ``spec`` into ``n_files`` text files.

    File ``k`` (``events-0000k.tsv``) holds the ``k``-th contiguous range of sequence
    numbers (see :func:`file_ranges`), one ``'\\n'``-terminated line per event.
    Events are generated :data:`CHUNK_EVENTS` at a time so memory stays low.

    Every file's modification time is set strictly increasing in file order (one
    second apart, ending at about "now"), so ordering the files by modification time
    and then by path gives the sequence order; files are written to a temporary name
    and renamed into place, so a directory watcher never sees a partial file.

    Args:
        directory: where to write; created if missing.
        n_events: total number of events.
        n_files: number of files (some may be empty if ``n_files > n_events``).
        spec: the event stream.

    Returns:
        The paths of the files written, in file (= sequence) order.
    """
    out_dir = Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    ranges = file_ranges(n_events, n_files)
    # Whole seconds, strictly increasing, none in the future.
    base_s = int(time.time()) - n_files - 1
    paths: list[Path] = []
    for k, (lo, hi) in enumerate(ranges):
        path = out_dir / event_file_name(k)
        tmp = out_dir / f".{path.name}.tmp"
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            for c_lo in range(lo, hi, CHUNK_EVENTS):
                lines, _ = generate_events(c_lo, min(hi, c_lo + CHUNK_EVENTS), spec)
                fh.write("\n".join(lines))
                fh.write("\n")
                del lines
        mtime_s = base_s + k
        os.utime(tmp, ns=(mtime_s * 1_000_000_000, mtime_s * 1_000_000_000))
        os.replace(tmp, path)
        paths.append(path)
    return paths


def _chunk_counts(start: int, stop: int, spec: EventSpec, window_ms: int) -> pd.DataFrame:
    """Counts per (window_start, channel, behavior) of events ``[start, stop)``."""
    lines, ts = generate_events(start, stop, spec)
    # Parse channel and behaviour back out of the text lines (the oracle checks what
    # was written, not the generator's internal codes).
    fields = pd.Series(lines, dtype=object).str.split("\t", n=3, expand=True)
    del lines
    parsed_ts = fields[0].astype(np.int64).to_numpy()
    if not np.array_equal(parsed_ts, ts):
        raise AssertionError("timestamps parsed from lines differ from generator timestamps")
    # Floor division: windows aligned to the epoch, as Flink's and Spark's tumbling windows.
    window_start = ts - np.mod(ts, window_ms)
    frame = pd.DataFrame(
        {"window_start": window_start, "channel": fields[1].to_numpy(), "behavior": fields[3].to_numpy()}
    )
    return frame.groupby(["window_start", "channel", "behavior"], sort=False).size().rename("count").reset_index()


def oracle_counts(n_events: int, spec: EventSpec = EventSpec(), window_ms: int = 60_000) -> pd.DataFrame:
    """Exact expected W1 output for events ``0 .. n_events-1`` of ``spec``.

    Events are out of order by at most ``spec.max_out_of_orderness_ms`` (10 s by
    default), less than the job's 50 s watermark delay, so no event is late and the
    expected output is a plain count per ``(tumbling window, channel, behavior)``.
    Computed with pandas/numpy only, :data:`CHUNK_EVENTS` events at a time.

    Returns:
        Columns ``window_start``, ``window_end`` (int64 epoch ms; end exclusive),
        ``channel``, ``behavior`` (str) and ``count`` (int64), one row per non-empty
        window and key, sorted by window_start, channel, behavior.
    """
    if window_ms <= 0:
        raise ValueError(f"window_ms must be > 0, got {window_ms}")
    if spec.max_out_of_orderness_ms >= 50_000:
        raise ValueError("oracle assumes no late events: max_out_of_orderness_ms must be < 50 s")
    partials = [
        _chunk_counts(lo, min(n_events, lo + CHUNK_EVENTS), spec, window_ms) for lo in range(0, n_events, CHUNK_EVENTS)
    ]
    if not partials:
        return pd.DataFrame(
            {
                "window_start": pd.Series(dtype=np.int64),
                "window_end": pd.Series(dtype=np.int64),
                "channel": pd.Series(dtype=object),
                "behavior": pd.Series(dtype=object),
                "count": pd.Series(dtype=np.int64),
            }
        )
    # Windows straddle chunk boundaries: sum the partial counts.
    counts = (
        pd.concat(partials, ignore_index=True)
        .groupby(["window_start", "channel", "behavior"], sort=True)["count"]
        .sum()
        .reset_index()
    )
    counts["window_start"] = counts["window_start"].astype(np.int64)
    counts["window_end"] = counts["window_start"] + np.int64(window_ms)
    counts["count"] = counts["count"].astype(np.int64)
    unknown = set(counts["channel"]) - set(CHANNELS) | set(counts["behavior"]) - set(BEHAVIORS)
    if unknown:
        raise AssertionError(f"unexpected channel/behavior values: {sorted(unknown)}")
    return counts[list(ORACLE_COLUMNS)].reset_index(drop=True)
