"""Event-time session windows aggregated locally, under a kill loop: exactly once across kills and restores.

Nexmark's q11 (``bench/nexmark``: per bidder, sessions of bids at most 10 s apart, counted) runs through
``sparkpoint run`` with small epochs, so sessions span many epochs and checkpoints. Upstream tasks send session
partials for the keys none of whose records can be late (``sparkpoint.windows.combiners.SessionCombiner``),
against the driver's watermark bound, which a restored round does not know until its tasks report. The job is
SIGKILLed at random progress points and at fault points of the checkpoint protocol; the committed lines must be
the pandas oracle's, each once. In continuous mode an upstream subtask bounds its consumers' watermark by what it
sent, with a floor of where they started (a restored attempt's from its windows' first reports).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench.nexmark import oracle, queries
from bench.nexmark.generator import write_files
from sparkpoint.common import Encoder
from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat
from sparkpoint.testing.kill_loop import KillLoop, kill_loop_conf, read_committed_lines

ROOT = Path(__file__).resolve().parents[2]
JOB = str(ROOT / "bench" / "nexmark" / "job.py")
EVENTS = 150_000
SMALL_EPOCHS = {"execution.epoch.max-records": 2_500, "sparkpoint.epoch.adaptive": "false"}
MODES = {"epoch": {}, "continuous": {"sparkpoint.execution.mode": "continuous"}}


def _partials_merged(make_env, directory: Path, out: Path, mode: str) -> int:
    """The session partials the window operator merged in one run of the job's configuration without kills (the
    kill loop's rounds run it in other processes)."""
    env = make_env("local", parallelism_default=2, **SMALL_EPOCHS, **MODES[mode])
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(directory)).build()
    sessions = queries.q11(queries.events(env, source, 101))
    sessions.sink_to(FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build())
    metrics = env.execute("q11").metrics
    return sum(m.get("numLocalAggregatesIn", 0) for m in metrics.values())


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(MODES))
def test_session_partials_are_exactly_once_across_kills(make_env, tmp_path, mode):
    directory = tmp_path / "events"
    write_files(directory, EVENTS, 3)
    want = Counter(oracle.expected("q11", oracle.load(directory)))
    assert _partials_merged(make_env, directory, tmp_path / "once", mode) > 1_000  # the combiner is at work here
    conf = kill_loop_conf(
        tmp_path / "ck",
        **{"execution.checkpointing.interval": "300 ms", "sparkpoint.local-state-dir": str(tmp_path / "local")},
        **SMALL_EPOCHS,
        **MODES[mode],
    )
    loop = KillLoop(
        JOB,
        ["--query", "q11", "--input", str(directory), "--output", str(tmp_path / "out")],
        tmp_path / "ck",
        conf,
        kills=5,
        seed=11,
        fault_share=0.3,
        epochs_per_round=4,
        cwd=str(ROOT),
    )
    result = loop.run()
    assert result.kills == 5, result  # the kills really happened
    assert sum(r is not None for r in result.restores[1:]) >= 4, result.restores  # and rounds restored
    got = Counter(read_committed_lines(tmp_path / "out"))
    assert got == want, (
        f"{sum(got.values())} lines committed, {sum(want.values())} expected; "
        f"missing {sorted(want - got)[:5]}, extra {sorted(got - want)[:5]}"
    )
