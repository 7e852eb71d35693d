"""File splits: a whole file, or a byte range of one cut at a line start, and how the enumerator balances them.

A file source reads a file as one split (Flink's ``FileSource`` does not split a file read with a stream format).
Once every file is handed out, what is left is the unread part of the files the subtasks hold, and a subtask
whose files end first sits idle while another reads on: with 12 files over 2 subtasks, the last epochs of a run
went on one core for a file's length. So in epoch mode, when no file is left to hand out, :func:`balance` cuts
the largest unread split of the most loaded subtask in two at a line start and gives the second part to the
least loaded one, until the loads differ by less than two pieces of :data:`MIN_PIECE` bytes.

A cut split keeps its id (the path) and gets an ``end`` (the byte its lines stop before); the second part is a
new split (id ``path#offset``, ``path`` in its info) starting at that line with the number of lines before it,
so error locations (``path:line``) and a CSV header (line 1) stay what they were. Cutting needs the driver to
know where every split is read to, which it does between epochs (the tasks' reports); a long-running task of
continuous mode reads on past what the driver knows, so nothing is cut there.
"""

from __future__ import annotations

from fsspec.core import url_to_fs

from sparkpoint.connectors.base import SourceSplit

__all__ = ["MIN_PIECE", "balance", "split_path", "split_end", "unread_bytes"]

MIN_PIECE = 1 << 20  # bytes: a part smaller than this is not worth a cut


def split_path(split: SourceSplit) -> str:
    """The file a split reads (its id, unless it is the second part of a cut file)."""
    return str(split.info.get("path", split.split_id))


def split_end(split: SourceSplit) -> int | None:
    """The byte a cut split's lines stop before; None for a whole file."""
    end = split.info.get("end")
    return None if end is None else int(end)


def unread_bytes(split: SourceSplit) -> int:
    """What is left of a file split: its end (or the file's size) less the offset read to."""
    offset = split.position[0] if split.position else 0
    end = split_end(split)
    return max(0, (int(split.info.get("size", 0)) if end is None else end) - offset)


def balance(taken: dict[int, list[SourceSplit]]) -> None:
    """Cut splits until no subtask holds two :data:`MIN_PIECE` more unread bytes than another (see the module);
    ``taken`` (each subtask's unfinished splits) is changed in place."""
    while len(taken) > 1:
        load = {i: sum(map(unread_bytes, splits)) for i, splits in taken.items()}
        light, heavy = min(load, key=load.__getitem__), max(load, key=load.__getitem__)
        gap = load[heavy] - load[light]
        if gap < 2 * MIN_PIECE:
            return
        largest = max(taken[heavy], key=unread_bytes)
        if unread_bytes(largest) < 2 * MIN_PIECE:
            return
        parts = _cut(largest, unread_bytes(largest) - min(gap // 2, unread_bytes(largest) // 2))
        if parts is None:
            return  # no line starts in the second half: one long line
        head, tail = parts
        taken[heavy] = [head if s is largest else s for s in taken[heavy]]
        taken[light].append(tail)


def _cut(split: SourceSplit, keep: int) -> tuple[SourceSplit, SourceSplit] | None:
    """``split`` in two at the first line start at least ``keep`` bytes past where it is read to: the first part
    (the split, ending there) and the second (a new split from there), or None if no line starts there before
    its end."""
    offset, lines_read = split.position or (0, 0)
    end = split_end(split)
    stop = int(split.info.get("size", 0)) if end is None else end
    path = split_path(split)
    fs, fs_path = url_to_fs(path)
    with fs.open(fs_path, "rb") as f:
        f.seek(offset)
        first = f.read(keep)
        cut = offset + len(first) + len(f.readline())  # past the line the cut falls in
    if cut >= stop or len(first) < keep:
        return None
    lines_before = lines_read + first.count(b"\n") + 1
    head = split.with_(info={**split.info, "end": cut})
    tail = SourceSplit(f"{path}#{cut}", (cut, lines_before), info={**split.info, "path": path, "end": stop})
    return head, tail
