"""One keyed task's epochs in-process: the prefetch, the records loop and the commit, timed apart.

A ``KeyedProcessFunction``-shaped loop (set the key, read a ``ValueState`` count, write it back, emit the key
at its 5th record) over one keyed backend, as ``KeyedProcessOperator`` runs it, without Spark: it shows
where a keyed task's time goes per record and per distinct key, with less noise than a whole job. Thread CPU
time per epoch, the cycle collector off (as in a task); prints the minimum and the median of each part.

* ``--shape w3``: W3's keyed task, epochs of 250,000 records drawn from ~1M keys (~222,000 distinct);
* ``--shape w2``: W2's hot epoch at 5M keys on one of two tasks: 2.5M keys loaded first, then epochs of
  100,000 records over 25,000 distinct keys;
* ``--shape w2-small``: the same at 50,000 keys: 25,000 keys loaded, epochs over 250 distinct keys;
* ``--shape w2-hot``: as ``w2``, every epoch over the same 25,000 keys (a hot set).

    PYTHONPATH=. .venv/bin/python bench/keyed_loop.py --backend rocksdb --shape w3
"""

from __future__ import annotations

import argparse
import gc
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sparkpoint.datastream.state import ValueStateDescriptor  # noqa: E402
from sparkpoint.operators.base import Output  # noqa: E402
from sparkpoint.state.backend_loader import load_state_backend  # noqa: E402
from sparkpoint.state.key_groups import KeyGroupRange  # noqa: E402

SHAPES = {  # key space, records per epoch, distinct keys per epoch (None: drawn at random), epochs left out
    "w3": (1 << 20, 250_000, None, 4),
    "w2": (2_500_000, 100_000, 25_000, 0),
    "w2-small": (25_000, 100_000, 250, 2),
    "w2-hot": (2_500_000, 100_000, -25_000, 0),  # negative: the same distinct keys every epoch (a hot set)
}


class _Context:
    ts: int | None = None


def _epoch_keys(rng: random.Random, space: int, records: int, distinct: int | None) -> list[str]:
    if distinct is None:
        return [f"{rng.randrange(space):05x}" for _ in range(records)]
    if distinct < 0:  # the hot set: the first -distinct keys of a fixed shuffle, every epoch
        chosen = [str(k) for k in random.Random(1).sample(range(space), -distinct)]
        distinct = -distinct
    else:
        chosen = [str(k) for k in rng.sample(range(space), distinct)]
    keys = chosen + [rng.choice(chosen) for _ in range(records - distinct)]
    rng.shuffle(keys)
    return keys


def run(backend_name: str, shape: str, epochs: int, seed: int = 7) -> dict[str, list[float]]:
    """Seconds of thread CPU per epoch: ``prefetch``, ``loop`` (the records, without the prefetch), ``commit``."""
    space, records, distinct, skipped = SHAPES[shape]
    rng = random.Random(seed)
    work = tempfile.mkdtemp(prefix="keyed-loop-")
    backend = load_state_backend(backend_name).create_keyed_backend(KeyGroupRange(0, 127), 128, working_dir=work)
    count = backend.get_partitioned_state(None, ValueStateDescriptor("count"))

    def process(key: str, ctx: Any) -> Any:
        n = (count.value() or 0) + 1
        count.update(n)
        if n == 5:
            yield key

    def epoch(number: int, keys: list[str]) -> tuple[float, float, float]:
        out, ctx, prefetch = Output(), _Context(), 0.0
        start = time.thread_time()
        step = backend.prefetch_limit()
        for lo in range(0, len(keys), step):
            t = time.thread_time()
            backend.prefetch(keys[lo : lo + step])
            prefetch += time.thread_time() - t
            for key in keys[lo : lo + step]:
                backend.set_current_key(key)
                out.emit_all(process(key, ctx), None)
        looped = time.thread_time()
        if backend.keeps_working_state:  # hashmap: nothing to commit (its state stays on the heap)
            backend.commit(number)
        return prefetch, looped - start - prefetch, time.thread_time() - looped

    gc.disable()
    try:
        number = 0
        if distinct is not None:  # load every key once, in epochs of 250,000
            everything = [str(k) for k in range(space)]
            rng.shuffle(everything)
            for lo in range(0, space, 250_000):
                number += 1
                epoch(number, everything[lo : lo + 250_000])
        times: dict[str, list[float]] = {"prefetch": [], "loop": [], "commit": []}
        for i in range(epochs + skipped):
            number += 1
            parts = epoch(number, _epoch_keys(rng, space, records, distinct))
            if i >= skipped:
                for name, seconds in zip(times, parts):
                    times[name].append(seconds)
        return times
    finally:
        gc.enable()
        backend.dispose()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="rocksdb", help="hashmap or rocksdb")
    p.add_argument("--shape", default="w3", choices=sorted(SHAPES))
    p.add_argument("--epochs", type=int, default=12, help="timed epochs")
    args = p.parse_args(argv)
    times = run(args.backend, args.shape, args.epochs)
    total = [sum(parts) for parts in zip(*times.values())]
    print(f"{args.backend}, shape {args.shape}, {args.epochs} epochs (ms of thread CPU per epoch, min / median):")
    for name, seconds in [*times.items(), ("total", total)]:
        print(f"  {name:9s} {min(seconds) * 1000:7.0f} / {statistics.median(seconds) * 1000:7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
