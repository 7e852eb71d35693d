"""Cut file splits under a kill loop: the last files' parts in checkpoints, restored and read exactly once.

``tests/e2e/relist_job.py`` reads three files of about 2.4 MB with two subtasks through ``sparkpoint run``; the
first assignment leaves one subtask with two files and nothing to hand out, so the enumerator cuts one
(``sparkpoint.connectors.file_splits``) and the runs read, checkpoint and restore cut parts. The job is SIGKILLed
at random progress points and at fault points of the checkpoint protocol; every line must be committed once.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.checkpoint.loader import load_checkpoint
from sparkpoint.testing.kill_loop import KillLoop, kill_loop_conf, read_committed_lines
from tests.connectors.test_file_source_relist import write_files

ROOT = Path(__file__).resolve().parents[2]
JOB = str(ROOT / "tests" / "e2e" / "relist_job.py")


def _split_ids(checkpoints: Path) -> set[str]:
    """The source's split ids in the newest completed checkpoint under ``checkpoints`` (a killed run may leave
    one without ``_metadata``)."""
    completed = [p for p in checkpoints.glob("*/chk-*") if (p / "_metadata").exists()]
    newest = max(completed, key=lambda p: int(p.name.split("-")[1]))
    sources = load_checkpoint(str(newest)).driver_state["sources"]
    return {s.split_id for state in sources.values() for splits in state["splits"].values() for s in splits}


@pytest.mark.slow
def test_cut_file_splits_are_read_exactly_once_across_kills(tmp_path):
    written = write_files(tmp_path / "in", 0, 3, lines=130_000)  # ~2.4 MB a file
    seen_ids: set[str] = set()
    conf = kill_loop_conf(
        tmp_path / "ck",
        **{
            "execution.checkpointing.interval": "300 ms",
            "execution.epoch.max-records": 5_000,
            "sparkpoint.epoch.adaptive": "false",
            "sparkpoint.local-state-dir": str(tmp_path / "local"),
        },
    )
    loop = KillLoop(
        JOB,
        ["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out")],
        tmp_path / "ck",
        conf,
        kills=5,
        seed=31,
        fault_share=0.3,
        epochs_per_round=4,
        cwd=str(ROOT),
        before_restart=lambda _round: seen_ids.update(_split_ids(tmp_path / "ck")),
    )
    result = loop.run()
    assert result.kills == 5, result  # the kills really happened
    assert any(r is not None for r in result.restores[1:]), result.restores  # and rounds restored
    assert any("#" in split_id for split_id in seen_ids), seen_ids  # checkpoints held cut parts
    got = Counter(read_committed_lines(tmp_path / "out"))
    expected = Counter(line.upper() for line in written)
    assert got == expected, (
        f"{sum(got.values())} lines committed, {sum(expected.values())} expected; "
        f"missing {sum((expected - got).values())}, extra {sum((got - expected).values())}"
    )
