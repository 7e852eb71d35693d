"""The benchmarks wrap engine methods to time them; a wrapper must take what the engine passes."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

from sparkpoint.runtime.spark.executor import SparkEpochExecutor

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.w1 import spark_epoch_probe  # noqa: E402


def test_the_w1_epoch_probe_takes_the_parameters_of_the_executor_it_wraps():
    original = inspect.signature(SparkEpochExecutor.run_epoch).parameters
    with spark_epoch_probe([]):
        wrapped = inspect.signature(SparkEpochExecutor.run_epoch).parameters
    assert [(p.name, p.kind, p.default is p.empty) for p in wrapped.values()] == [
        (p.name, p.kind, p.default is p.empty) for p in original.values()
    ]
    assert SparkEpochExecutor.run_epoch.__qualname__ == "SparkEpochExecutor.run_epoch"  # put back


def test_the_w2_feed_links_a_pair_once_its_run_read_every_record_before_it(tmp_path):
    """W2 times one pair of files per epoch: a file source reads on past a file's end, so a run's directory gets
    the next pair only once the run read all it holds; a restored run reads on in the same directory."""
    from bench.w2 import Feed

    pairs = []
    for k in range(4):
        pair = [tmp_path / f"{k}-{part}.txt" for part in (0, 1)]
        for path in pair:
            path.write_text(f"{k}\n")
        pairs.append(pair)
    feed = Feed(tmp_path / "feed")

    def pairs_in() -> int:
        return len(list(feed.directory.iterdir())) // 2

    feed.begin(pairs[:3], [10, 20, 30])
    seen = []
    for read in (0, 9, 10, 29, 30, 59, 60, 80):
        feed.advance(read)
        seen.append(pairs_in())
    assert seen == [1, 1, 2, 2, 3, 3, 3, 3]
    feed.begin(pairs[3:], [5])  # the restored run: its records are counted from 0
    assert pairs_in() == 4 and (feed.directory / "3-1.txt").read_text() == "3\n"
