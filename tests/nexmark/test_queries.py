"""The Nexmark queries (bench/nexmark) give exactly the pandas oracle's results: every query through the CLI as
a user runs it (in-process executor), two of them on Spark with exactly-once checkpoints, and the generator's
events are the model's."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from bench.nexmark import oracle
from bench.nexmark.generator import BASE_MS, CHUNK, GROUP, disorder_ms, event_lines, write_files
from bench.nexmark.queries import QUERIES

ROOT = Path(__file__).resolve().parents[2]
EVENTS = 150_000


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    directory = tmp_path_factory.mktemp("nexmark") / "events"
    write_files(directory, EVENTS, 3)
    return directory, oracle.load(directory)


def test_the_generator_follows_the_model(events):
    directory, frames = events
    assert {k: len(f) for k, f in frames.items()} == {"P": EVENTS // 50, "A": 3 * EVENTS // 50, "B": 46 * EVENTS // 50}
    people, auctions, bids = frames["P"], frames["A"], frames["B"]
    assert sorted(people.id) == list(range(1000, 1000 + len(people)))
    assert sorted(auctions.id) == list(range(1000, 1000 + len(auctions)))
    assert set(auctions.category) == set(range(10, 15))
    assert (auctions.expires > auctions.ts).all() and (auctions.expires - auctions.ts <= 20_000).all()
    # hot auctions: about half of the bids are on a multiple of 100; hot bidders about 3 in 4
    hot = (bids.auction % 100 == 0).mean()
    assert 0.45 < hot < 0.6, hot
    assert 0.7 < (bids.bidder % 100 == 1).mean() < 0.85
    # event time is out of order by less than the bound, and the same events come in any split into files
    lines = [line for f in sorted(directory.iterdir()) for line in f.read_text().splitlines()]
    times = [int(line.split("\t")[1]) for line in lines]
    late = max(max(times[: i + 1]) - t for i, t in enumerate(times[:20_000]))
    assert 0 < late < disorder_ms(10_000) and min(times) >= BASE_MS
    assert lines[CHUNK : CHUNK + GROUP] == list(event_lines(CHUNK + GROUP, start=CHUNK))  # a prefix, from a chunk
    assert Counter(lines) == Counter(event_lines(EVENTS))


@pytest.mark.slow
@pytest.mark.parametrize("query", QUERIES)
def test_each_query_through_the_cli_equals_the_oracle(events, query, tmp_path):
    directory, frames = events
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "sparkpoint.cli",
        "run",
        "-D",
        "execution.target=local",
        "-D",
        "parallelism.default=2",
        "-D",
        "execution.epoch.max-records=20000",
        str(ROOT / "bench" / "nexmark" / "job.py"),
        "--query",
        query,
        "--input",
        str(directory),
        "--output",
        str(out),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    want = oracle.expected(query, frames)
    assert len(want) > 0
    assert oracle.check(query, oracle.output_lines(out), want) is None


@pytest.mark.slow
@pytest.mark.parametrize("query", ["q4", "q5"])
def test_on_spark_with_exactly_once_checkpoints(spark, make_env, events, query, tmp_path):
    from bench.nexmark import queries
    from sparkpoint.common import Encoder
    from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat

    directory, frames = events
    env = make_env(
        "spark",
        **{
            "execution.checkpointing.interval": "1 s",
            "execution.checkpointing.mode": "EXACTLY_ONCE",
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
            "execution.epoch.max-records": 25_000,
        },
    )
    env.set_parallelism(2)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(directory)).build()
    result = getattr(queries, query)(queries.events(env, source, disorder_ms(10_000)))
    result.sink_to(FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build())
    env.execute(f"nexmark-{query}")
    assert oracle.check(query, oracle.output_lines(tmp_path / "out"), oracle.expected(query, frames)) is None
