"""File splits: a whole file, or a byte range of one cut at a line start, and how the enumerator balances them.

A file source reads a file as one split (Flink's ``FileSource`` does not split a file read with a stream format).
Once every file is handed out, what is left is the unread part of the files the subtasks hold, and a subtask
whose files end first sits idle while another reads on: with 12 files over 2 subtasks, the last epochs of a run
went on one core for a file's length. So in epoch mode, when no file is left to hand out, :func:`balance` cuts
the largest unread split of the most loaded subtask in two at a line start and gives the second part to the
least loaded one, until the loads differ by less than two pieces of :data:`MIN_PIECE` bytes. Only subtasks
still reading take part: one that holds nothing may have ended its input (sent the end of event time).

Where an operator after the source assigns timestamps and watermarks, its subtask's watermark follows what that
subtask has read, and a part of a file read after a later file would come late there. Such a source cuts in order
(``frontier``): a part goes only to a subtask that was given nothing after it in the hand-out order (modification
time, path, byte), so every subtask still reads its input in that order, as without cuts.

A cut split keeps its id (the path) and gets an ``end`` (the byte its lines stop before); the second part is a
new split (id ``path#offset``, ``path`` in its info) starting at that line with the number of lines before it,
so error locations (``path:line``) and a CSV header (line 1) stay what they were. Cutting needs the driver to
know where every split is read to, which it does between epochs (the tasks' reports); a long-running task of
continuous mode reads on past what the driver knows, so nothing is cut there.
"""

from __future__ import annotations

import logging

from fsspec.core import url_to_fs

from sparkpoint.connectors.base import SourceSplit

__all__ = ["MIN_PIECE", "Frontier", "balance", "compression_of", "order_key", "split_path", "split_end", "unread_bytes"]

MIN_PIECE = 1 << 20  # bytes: a part smaller than this is not worth a cut
_BLOCK = 4 << 20  # bytes read at a time to count the lines before a cut

logger = logging.getLogger(__name__)

#: per subtask, the :func:`order_key` of the last split it was given
Frontier = dict[int, tuple[float, str, int]]
_NONE = (float("-inf"), "", -1)  # before every split: a subtask given nothing yet


def split_path(split: SourceSplit) -> str:
    """The file a split reads (its id, unless it is the second part of a cut file)."""
    return str(split.info.get("path", split.split_id))


#: file name endings a source decompresses, as Flink's stream formats do (``StandardDeCompressors``), by fsspec codec
COMPRESSIONS = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".xz": "xz"}


def compression_of(path: str) -> str | None:
    """The codec a file is read through, by its name's ending (None: read as it is). A compressed file's position
    counts bytes of what it holds, decompressed, and it is never cut."""
    lower = path.lower()
    return next((codec for ending, codec in COMPRESSIONS.items() if lower.endswith(ending)), None)


def split_end(split: SourceSplit) -> int | None:
    """The byte a cut split's lines stop before; None for a whole file."""
    end = split.info.get("end")
    return None if end is None else int(end)


def order_key(split: SourceSplit) -> tuple[float, str, int]:
    """Where a split's lines start in the order files are handed out: modification time, path, byte."""
    start = split.info.get("start")
    if start is None and "path" in split.info and "#" in split.split_id:  # a part cut before parts had a start
        start = split.split_id.rsplit("#", 1)[1]
    return float(split.info.get("mtime", 0.0)), split_path(split), int(start or 0)


def unread_bytes(split: SourceSplit) -> int:
    """What is left of a file split: its end (or the file's size) less the offset read to."""
    offset = split.position[0] if split.position else 0
    end = split_end(split)
    return max(0, (int(split.info.get("size", 0)) if end is None else end) - offset)


def balance(taken: dict[int, list[SourceSplit]], frontier: Frontier | None = None) -> None:
    """Cut splits until no subtask holds two :data:`MIN_PIECE` more unread bytes than another (see the module);
    ``taken`` (each subtask's unfinished splits) is changed in place. With a ``frontier`` (cuts in order), only a
    split that starts after the last one the receiving subtask was given is cut, and the frontier follows."""
    while len(taken) > 1:
        load = {i: sum(map(unread_bytes, splits)) for i, splits in taken.items()}
        reading = [i for i in load if load[i]]  # a subtask with nothing left may have ended its input (+inf)
        if len(reading) < 2:
            return
        light, heavy = min(reading, key=load.__getitem__), max(reading, key=load.__getitem__)
        gap = load[heavy] - load[light]
        if gap < 2 * MIN_PIECE:
            return
        after = [
            s
            for s in taken[heavy]
            if (frontier is None or order_key(s) > frontier.get(light, _NONE)) and compression_of(split_path(s)) is None
        ]
        largest = max(after, key=unread_bytes, default=None)
        if largest is None or unread_bytes(largest) < 2 * MIN_PIECE:
            return
        try:
            parts = _cut(largest, unread_bytes(largest) - min(gap // 2, unread_bytes(largest) // 2))
        except OSError as e:  # the file is read whole then; a task that cannot read it says so
            logger.warning("cannot cut %s: %s: %s", split_path(largest), type(e).__name__, e)
            return
        if parts is None:
            return  # no line starts in the second half: one long line
        head, tail = parts
        taken[heavy] = [head if s is largest else s for s in taken[heavy]]
        taken[light].append(tail)
        if frontier is not None:
            frontier[light] = order_key(tail)


def _cut(split: SourceSplit, keep: int) -> tuple[SourceSplit, SourceSplit] | None:
    """``split`` in two at the first line start at least ``keep`` bytes past where it is read to: the first part
    (the split, ending there) and the second (a new split from there), or None if no line starts there before
    its end."""
    offset, lines_read = split.position or (0, 0)
    end = split_end(split)
    stop = int(split.info.get("size", 0)) if end is None else end
    path = split_path(split)
    fs, fs_path = url_to_fs(path)
    lines_before, skipped = lines_read, 0
    with fs.open(fs_path, "rb") as f:
        f.seek(offset)
        while skipped < keep:  # the lines before the cut counted a block at a time (a file may be large)
            block = f.read(min(_BLOCK, keep - skipped))
            if not block:
                return None
            skipped += len(block)
            lines_before += block.count(b"\n")
        line = f.readline()  # the rest of the line the cut falls in
    cut = offset + skipped + len(line)
    if cut >= stop or not line.endswith(b"\n"):
        return None
    head = split.with_(info={**split.info, "end": cut})
    # the second part waits, perhaps behind another split, with the watermark the first part has reached: its
    # lines come after those (or would be read after them, unsplit)
    tail = SourceSplit(
        f"{path}#{cut}",
        (cut, lines_before + 1),
        generator=split.generator,
        watermark=split.watermark,
        info={**split.info, "path": path, "start": cut, "end": stop},
    )
    return head, tail
