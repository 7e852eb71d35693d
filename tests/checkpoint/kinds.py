"""What kind of keyed state a checkpoint holds, from its metadata (shared by the changelog, kill-loop and
cluster tests; imports nothing of the tests, so any test module may use it)."""

from __future__ import annotations

from sparkpoint.checkpoint.loader import load_checkpoint


def checkpoint_kinds(chk: str) -> set:
    """The formats of a checkpoint's keyed-state files (``changelog`` or ``rocksdb``), from its metadata."""
    meta = load_checkpoint(chk, verify_files=False).metadata
    return {f.format for op in meta.operators.values() for f in op.keyed_state}
