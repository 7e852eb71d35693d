"""The FileSource's re-listing under a kill loop: files keep arriving between crashes.

``tests/e2e/relist_job.py`` (a bounded FileSource, an exactly-once FileSink) runs through ``sparkpoint
run`` and is SIGKILLed at random progress points and at fault points of the checkpoint protocol; before each
restart from the newest completed checkpoint, new files are added to its input directory. Every line of
every file ever added must be committed exactly once: the restored source lists the directory again,
reads what it had not seen, and reads nothing twice. In continuous mode each file is dealt alone, on the request of
a source subtask running out of files between two barriers (a kill may land between such a deal and the next
checkpoint).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.testing.kill_loop import KillLoop, kill_loop_conf, read_committed_lines
from tests.connectors.test_file_source_relist import write_files

ROOT = Path(__file__).resolve().parents[2]
JOB = str(ROOT / "tests" / "e2e" / "relist_job.py")


MODES = {
    "epoch": {"execution.epoch.max-records": 20},
    "continuous": {
        "sparkpoint.execution.mode": "continuous",
        "execution.epoch.max-records": 100,  # a subtask's read between two barriers (each 200 ms)
        "execution.epoch.max-bytes": "1 kb",  # a file is ~3 kb: each deal gives a subtask one file
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(MODES))
def test_files_added_between_kills_are_read_exactly_once(tmp_path, mode):
    written = write_files(tmp_path / "in", 0, 40, lines=150)  # 6,000 lines, 40 a (2-subtask) epoch: 150 epochs
    added_after_restores: list[str] = []

    def add_files(round_number: int) -> None:
        new = write_files(tmp_path / "in", 100 * round_number, 3, lines=150)
        written.extend(new)
        added_after_restores.extend(new)

    conf = kill_loop_conf(
        tmp_path / "ck",
        **{
            "execution.checkpointing.interval": "500 ms",
            "sparkpoint.local-state-dir": str(tmp_path / "local"),
            **MODES[mode],
        },
    )
    loop = KillLoop(
        JOB,
        ["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--delay-ms", "2"],
        tmp_path / "ck",
        conf,
        kills=5,
        seed=17,
        fault_share=0.3,
        epochs_per_round=4,
        cwd=str(ROOT),
        before_restart=add_files,
    )
    result = loop.run()
    assert result.kills == 5, result  # the kills really happened
    assert any(r is not None for r in result.restores[1:]), result.restores  # and rounds restored
    assert added_after_restores
    got = Counter(read_committed_lines(tmp_path / "out"))
    expected = Counter(line.upper() for line in written)
    assert got == expected, (
        f"{sum(got.values())} lines committed, {sum(expected.values())} expected; "
        f"missing {sum((expected - got).values())}, extra {sum((got - expected).values())}"
    )
