"""Test a job's exactly-once for real: SIGKILL it again and again, restore it, compare with an oracle.

The job under test is ``examples/running_counts.py`` (every record's count so far for its key,
to an exactly-once FileSink); put your own job file and its oracle in their place. This program

1. writes ``--events`` lines ``key\\tpayload`` into a few input files;
2. runs the job through ``sparkpoint run`` with :class:`sparkpoint.testing.KillLoop`:
   ``--kills`` rounds are SIGKILLed (by the loop at random moments, or by the job itself at a
   fault point of the checkpoint protocol), each next round restores the newest completed
   checkpoint, the last round runs to the end;
3. counts the input's keys in plain Python (the oracle, independent of the job: a key with
   ``c`` records must give the lines ``key\\t1`` .. ``key\\tc``, each once) and compares that
   with the committed output, read as any reader sees it
   (:func:`sparkpoint.testing.read_committed_lines`).

It exits with status 1 and says what differs when a line is missing or repeated. With
``--plain-dict`` the job keeps its counts outside keyed state, and the check catches that.

    python examples/exactly_once_check.py                          # 20,000 lines, 3 kills
    python examples/exactly_once_check.py --events 50000 --kills 8 --work /tmp/check
    python examples/exactly_once_check.py --plain-dict             # fails: counts lost on restore
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from sparkpoint.testing import KillLoop, read_committed_lines

JOB = str(Path(__file__).resolve().parent / "running_counts.py")


def write_input(directory: Path, n: int, files: int, seed: int) -> list[str]:
    """``n`` lines ``key\\tpayload`` (40 keys) in ``files`` files; the lines written."""
    rnd = random.Random(seed)
    lines = [f"user-{rnd.randrange(40):02d}\t{rnd.randrange(10**6)}" for _ in range(n)]
    directory.mkdir(parents=True, exist_ok=True)
    per_file = -(-n // files)
    now = int(time.time())
    for k in range(files):
        path = directory / f"part-{k:03d}.tsv"
        path.write_text("".join(line + "\n" for line in lines[k * per_file : (k + 1) * per_file]))
        os.utime(path, (now - files + k, now - files + k))  # the order the file source hands them out in
    return lines


def oracle(lines: list[str]) -> Counter:
    """What the job must commit: ``key\\tn`` once for n = 1 .. the key's number of records."""
    per_key = Counter(line.split("\t", 1)[0] for line in lines)
    return Counter(f"{key}\t{n}" for key, count in per_key.items() for n in range(1, count + 1))


def check(work: Path, events: int, kills: int, seed: int, plain_dict: bool = False) -> int:
    lines = write_input(work / "in", events, files=4, seed=seed)
    out, checkpoints = work / "out", work / "checkpoints"
    conf = {
        "execution.target": "local",
        "execution.checkpointing.interval": "500 ms",
        "state.checkpoints.dir": checkpoints.as_uri(),
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "execution.epoch.max-records": 500,  # per source subtask: 1,000 lines an epoch
        "parallelism.default": 2,
        "restart-strategy.type": "none",  # a failure ends the round; the loop restores
        "sparkpoint.local-state-dir": str(work / "local"),
    }
    job_args = ["--input", str(work / "in"), "--output", str(out), *(["--plain-dict"] if plain_dict else [])]
    loop = KillLoop(JOB, job_args, checkpoints, conf, kills=kills, seed=seed, epochs_per_round=3)
    result = loop.run()
    got, expected = Counter(read_committed_lines(out)), oracle(lines)
    print(
        f"{result.rounds} rounds, {result.kills} kills ({sum(result.fault_kills.values())} at fault points), "
        f"{sum(r is not None for r in result.restores)} restores from a checkpoint, {result.seconds:.1f} s"
    )
    if got != expected:
        missing, extra = expected - got, got - expected
        print(
            f"NOT exactly once: {sum(missing.values())} line(s) missing, {sum(extra.values())} extra; "
            f"e.g. missing {sorted(missing)[:3]}, extra {sorted(extra)[:3]}"
        )
        return 1
    print(f"exactly once: {len(expected)} lines, each committed once")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--events", type=int, default=20_000, help="input lines (1,000 an epoch): more than kills x 4 epochs are needed"
    )
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7, help="seeds the input and the kills")
    parser.add_argument("--plain-dict", action="store_true", help="test the job's broken variant")
    parser.add_argument("--work", help="a directory for input, output and checkpoints (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.work:
        return check(Path(args.work), args.events, args.kills, args.seed, args.plain_dict)
    with tempfile.TemporaryDirectory(prefix="exactly-once-") as work:
        return check(Path(work), args.events, args.kills, args.seed, args.plain_dict)


if __name__ == "__main__":
    sys.exit(main())
