"""W1 before and after a change, with Spark's own engine as the peer, in one run.

A refactoring must not make the seed job slower. This script is :mod:`bench.compare` for W1
alone: it measures three things on the same input, interleaved so that a busy machine hurts
them alike:

* **spark** — Spark Structured Streaming's own windowed count (``bench.w1_spark``);
* **before** — sparkpoint's seed job (``examples/behavior_counts.py``) on the code of a
  git revision (``--before``, checked out into a temporary worktree) or of an existing
  checkout (``--before-tree``);
* **after** — the same job on the code of this checkout.

Each measurement runs in a fresh process (its own SparkSession, ``local[2]``) whose driver and
Python workers import the tree under test (:mod:`bench.compare_tree`), warms up on a small
input, then times ``env.execute()`` over the full input and checks the output against the
pandas oracle (``bench.w1_data.oracle_counts``; sparkpoint's exactly, Spark's on the windows
its final watermark closed). It prints every figure, the medians and the ratios after/before
and sparkpoint/spark.

Run::

    .venv/bin/python bench/w1_compare.py --before 4a73179 --events 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import compare  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    side = parser.add_mutually_exclusive_group()
    side.add_argument("--before", default="HEAD~1", help="git revision to compare against")
    side.add_argument("--before-tree", help="an existing checkout to compare against")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--max-records", type=int, default=250_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="also write every figure as JSON here")
    args = parser.parse_args(argv)
    before = ["--before-tree", args.before_tree] if args.before_tree else ["--before", args.before]
    return compare.main(
        [
            *before,
            "--workloads",
            "w1",
            "--w1-events",
            str(args.events),
            "--w1-files",
            str(args.files),
            "--w1-max-records",
            str(args.max_records),
            "--repeat",
            str(args.repeat),
            *(["--json", args.json] if args.json else []),
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())
