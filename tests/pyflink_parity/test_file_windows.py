"""Event-time windows over many small files, and ``RuntimeExecutionMode.BATCH``: no record is late.

``file_windows.py`` counts each key's lines per 5 s event-time window (1 s of out-of-orderness allowed).

* Three small files whose lines interleave in time: PyFlink 2.3.0 counts all 40 lines at parallelism 1, 2 and 3
  (``expected/file_windows.txt``, the same at each); so does sparkpoint, since a subtask is handed as many small
  files as fit in an epoch's bytes and reads them before its watermark moves. One file per epoch (each file
  runs 27 s ahead of the next one's start) dropped up to half of them as late.
* One file of 60 events in random order, read 10 lines an epoch: in ``STREAMING`` the watermark moves between
  epochs and drops late lines (a control: the test can fail); in ``BATCH`` (and ``AUTOMATIC`` over bounded input)
  the watermark holds until the input ends, no line is late, no periodic checkpoint is taken (one at the end,
  where sinks commit), and the counts are the hand count's; BATCH over an unbounded source is refused.
  (PyFlink 2.3.0's Python window operator deadlocks in BATCH mode on this job -- its window function's timers
  wait on its own bundle -- so the oracle there is the hand count alone.)
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pytest

from tests.pyflink_parity.test_parity import recorded, run_job

BASE_MS = 1_700_000_000_000


def hand_count(directory: Path) -> list[str]:
    """``key [start, end) count`` of every 5 s window of the input's lines, in the job's order, and the total."""
    counts: Counter = Counter()
    for path in sorted(directory.glob("*.csv")):
        for line in path.read_text().splitlines():
            ts, key = line.split(",")
            start = (int(ts) - BASE_MS) // 5_000 * 5_000
            counts[(start, key)] += 1
    lines = [f"{key} [{start}, {start + 5_000}) {n}" for (start, key), n in sorted(counts.items())]
    return lines + [f"total {sum(counts.values())}"]


def _run(tmp_path, monkeypatch, capsys, kind, parallelism, mode, runtime_mode, **config):
    from tests.pyflink_parity.file_windows import write_input

    directory = tmp_path / kind
    write_input(directory, kind)
    configuration = {"execution.target": "local", **config}
    monkeypatch.setattr("sys.argv", ["file_windows.py", str(directory), str(parallelism), runtime_mode])
    out, _ = run_job("file_windows", monkeypatch, capsys, tmp_path, configuration, mode=mode, keep_argv=True)
    return out, hand_count(directory)


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_many_small_files_are_read_before_the_watermark_moves(tmp_path, monkeypatch, capsys, mode, parallelism):
    out, by_hand = _run(tmp_path, monkeypatch, capsys, "interleaved", parallelism, mode, "STREAMING")
    assert out == recorded("file_windows")
    assert out == by_hand and out[-1] == "total 40"


def test_one_small_file_an_epoch_would_drop_lines_as_late(tmp_path, monkeypatch, capsys):
    """The control: with an epoch's bytes too few for two files, a subtask reads one file an epoch, and the
    watermark the first file left behind makes most of the others' lines late."""
    out, _ = _run(
        tmp_path, monkeypatch, capsys, "interleaved", 1, "epoch", "STREAMING", **{"execution.epoch.max-bytes": 1}
    )
    assert int(out[-1].split()[1]) < 40


@pytest.mark.parametrize("parallelism", [1, 2])
def test_in_batch_mode_no_record_is_late(tmp_path, monkeypatch, capsys, parallelism):
    small_epochs = {"execution.epoch.max-records": 10, "execution.checkpointing.interval": "1 ms"}
    streaming, by_hand = _run(
        tmp_path, monkeypatch, capsys, "shuffled", parallelism, "epoch", "STREAMING", **small_epochs
    )
    assert int(streaming[-1].split()[1]) < 60  # the control: read in epochs of 10 lines, late lines are dropped
    warnings: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warnings.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("sparkpoint.runtime.job_assembly").addHandler(handler)
    try:
        batch, _ = _run(tmp_path, monkeypatch, capsys, "shuffled", parallelism, "epoch", "BATCH", **small_epochs)
    finally:
        logging.getLogger("sparkpoint.runtime.job_assembly").removeHandler(handler)
    assert batch == by_hand and batch[-1] == "total 60"
    assert any("BATCH: no periodic checkpoints (every 1 ms is configured)" in m for m in warnings), warnings


def test_automatic_mode_over_bounded_input_runs_as_batch(tmp_path, monkeypatch, capsys, mode):
    out, by_hand = _run(
        tmp_path, monkeypatch, capsys, "shuffled", 2, mode, "AUTOMATIC", **{"execution.epoch.max-records": 10}
    )
    assert out == by_hand and out[-1] == "total 60"


def test_batch_mode_refuses_an_unbounded_source(make_env):
    from sparkpoint.common import WatermarkStrategy
    from sparkpoint.datastream.connectors.generator import DataGeneratorSource
    from sparkpoint.errors import JobGraphError

    env = make_env("local", **{"execution.runtime-mode": "BATCH"})
    env.from_source(DataGeneratorSource(lambda i: i, None), WatermarkStrategy.no_watermarks(), "endless").print()
    with pytest.raises(JobGraphError, match="BATCH needs bounded sources, and 'endless' is unbounded"):
        env.execute()
