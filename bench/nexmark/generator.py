"""Nexmark's online-auction events, generated deterministically.

The model is the Nexmark generator's (Apache Beam's ``NexmarkGenerator``, which Flink's Nexmark suite runs):

* events are numbered; of every 50, 1 is a new ``Person``, 3 are new ``Auction``s and 46 are ``Bid``s;
* a person's id is ``1000 + n // 50``; auctions are numbered in order from 1000;
* an auction's seller is a *hot* seller (a multiple of 100 below the newest person) 3 times in 4, else one of
  the 1,000 newest people (or up to 10 not created yet); its category is one of 5 (10 .. 14), its initial
  bid and reserve are Nexmark's prices (``round(10 ** U(0, 6) * 100)``), and it expires 1 ms .. 20 s after it
  starts;
* a bid is on a *hot* auction (a multiple of 100 below the newest) half of the time, else on one of the 100
  newest auctions (or up to 10 not created yet); its bidder is hot (a multiple of 100, plus 1) 3 times in 4;
* event ``n`` happens at ``BASE_MS + n * 1e3 / rate`` ms (rate: events per second of event time); events are
  written out of order within groups of :data:`GROUP` events, so event time is out of order by less than
  ``GROUP * 1e3 / rate`` ms (:func:`disorder_ms`).

Every value depends only on the seed and the event's number (chunks of :data:`CHUNK` events each have their
own random stream), so any split into files gives the same events, and fewer events are a prefix of more (but
for the order within the last group).

Lines are tab-separated, the kind first, then the event time:

* ``P  date_time  id  name  email  credit_card  city  state``
* ``A  date_time  id  item_name  initial_bid  reserve  expires  seller  category``
* ``B  date_time  auction  bidder  price  channel``
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["BASE_MS", "CHUNK", "GROUP", "disorder_ms", "event_lines", "write_files", "write_topic", "file_names"]

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
CHUNK = 100_000
GROUP = 1_000
FIRST_ID = 1_000
HOT_RATIO = 100
FIRST_NAMES = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"]
LAST_NAMES = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"]
CITIES = ["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent"]
STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]
ITEMS = ["lamp", "vase", "clock", "chair", "rug", "print", "bowl", "radio", "desk", "kettle"]


def disorder_ms(rate: int) -> int:
    """An upper bound of how far event time goes back in the written order, in ms."""
    return int(np.ceil(GROUP * 1000 / rate)) + 1


def _last_person(n: np.ndarray) -> np.ndarray:
    return n // 50


def _last_auction(n: np.ndarray) -> np.ndarray:
    epoch, offset = n // 50, n % 50
    before = offset < 1
    return np.where(before, (epoch - 1) * 3 + 2, epoch * 3 + np.where(offset >= 4, 2, offset - 1))


def _next_person(rng: np.random.Generator, n: np.ndarray) -> np.ndarray:
    people = _last_person(n) + 1
    active = np.minimum(people, 1000)
    return people - active + (rng.random(len(n)) * (active + 10)).astype(np.int64)


def _next_auction(rng: np.random.Generator, n: np.ndarray) -> np.ndarray:
    last = np.maximum(_last_auction(n), 0)
    low = np.maximum(last - 100, 0)
    return low + (rng.random(len(n)) * (last - low + 1 + 10)).astype(np.int64)


def _price(rng: np.random.Generator, size: int) -> np.ndarray:
    return np.round(10.0 ** (rng.random(size) * 6.0) * 100.0).astype(np.int64)


def _chunk_lines(seed: int, chunk: int, rate: int, count: int) -> list[str]:
    """The lines of events ``chunk * CHUNK ..`` (at most ``count`` of them), in written order."""
    rng = np.random.default_rng([seed, chunk])
    n = np.arange(chunk * CHUNK, (chunk + 1) * CHUNK, dtype=np.int64)  # the whole chunk: the draws never depend
    # on how many of its events are wanted
    ts = BASE_MS + (n * 1000) // rate
    kind = n % 50
    size = len(n)
    hot_seller, hot_auction = rng.integers(4, size=size) > 0, rng.integers(2, size=size) > 0
    hot_bidder = rng.integers(4, size=size) > 0
    seller = np.where(hot_seller, (_last_person(n) // HOT_RATIO) * HOT_RATIO, _next_person(rng, n)) + FIRST_ID
    auction = np.where(hot_auction, (_last_auction(n) // HOT_RATIO) * HOT_RATIO, _next_auction(rng, n)) + FIRST_ID
    bidder = np.where(hot_bidder, (_last_person(n) // HOT_RATIO) * HOT_RATIO + 1, _next_person(rng, n)) + FIRST_ID
    price, second = _price(rng, size), _price(rng, size)
    first, last, city, state = (rng.integers(len(a), size=size) for a in (FIRST_NAMES, LAST_NAMES, CITIES, STATES))
    card, item = rng.integers(10**15, 10**16, size=size), rng.integers(len(ITEMS), size=size)
    category = 10 + rng.integers(5, size=size)
    length, channel = 1 + rng.integers(20_000, size=size), rng.integers(len(CHANNELS), size=size)
    lines = []
    for i in range(size):
        k, t = kind[i], ts[i]
        if k == 0:
            name = f"{FIRST_NAMES[first[i]]} {LAST_NAMES[last[i]]}"
            email = f"{name.replace(' ', '.').lower()}@example.com"
            lines.append(
                f"P\t{t}\t{FIRST_ID + n[i] // 50}\t{name}\t{email}\t{card[i]}\t{CITIES[city[i]]}\t{STATES[state[i]]}"
            )
        elif k < 4:
            aid = FIRST_ID + (n[i] // 50) * 3 + k - 1
            lines.append(
                f"A\t{t}\t{aid}\t{ITEMS[item[i]]}-{aid}\t{price[i]}\t{price[i] + second[i]}\t{t + length[i]}"
                f"\t{seller[i]}\t{category[i]}"
            )
        else:
            lines.append(f"B\t{t}\t{auction[i]}\t{bidder[i]}\t{price[i]}\t{CHANNELS[channel[i]]}")
    order = np.arange(size)
    for start in range(0, size, GROUP):  # out of order within each group, the same way for a given seed
        order[start : start + GROUP] = start + rng.permutation(GROUP)
    wanted = count - chunk * CHUNK
    return [lines[j] for j in order if j < wanted]


def event_lines(count: int, seed: int = 7, rate: int = 10_000, start: int = 0) -> Iterator[str]:
    """Events ``start .. count - 1`` (``start`` a multiple of :data:`CHUNK`), as lines in written order."""
    if start % CHUNK:
        raise ValueError(f"start must be a multiple of {CHUNK}, got {start}")
    for chunk in range(start // CHUNK, (count + CHUNK - 1) // CHUNK):
        yield from _chunk_lines(seed, chunk, rate, count)


def file_names(files: int) -> list[str]:
    """The names of the event files, in order."""
    return [f"events-{i:05d}.tsv" for i in range(files)]


def write_files(
    directory: str | os.PathLike[str], count: int, files: int, seed: int = 7, rate: int = 10_000
) -> list[Path]:
    """Write ``count`` events into ``files`` text files of whole chunks (as even as chunks allow), in order: file
    ``i``'s modification time is before file ``i + 1``'s, as a file-streaming source replays them."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    chunks = (count + CHUNK - 1) // CHUNK
    bounds = [CHUNK * (chunks * k // files) for k in range(files + 1)]
    paths = []
    stamp = 1_700_000_000
    for i, name in enumerate(file_names(files)):
        lo, hi = bounds[i], min(bounds[i + 1], count)
        path = out / name
        with open(path, "w") as f:
            for line in event_lines(hi, seed, rate, lo):
                f.write(line + "\n")
        os.utime(path, (stamp + i, stamp + i))
        paths.append(path)
    return paths


def write_topic(server: Any, topic: str, count: int, partitions: int, seed: int = 7, rate: int = 10_000) -> list[int]:
    """Produce ``count`` events to ``topic`` of ``server`` (a ``tests.servers.kafka_server.KafkaServer``; the topic
    made beforehand with ``partitions`` partitions): event ``i`` of the written order to partition
    ``i % partitions``, each message stamped with its event time. A partition holds a subsequence of the written
    order, so its event time is out of order by less than :func:`disorder_ms` too, and a source that takes
    watermarks per partition (Flink's per-split watermarks) sees no late event. Returns the messages per
    partition."""
    sent = []
    for p in range(partitions):
        lines = list(itertools.islice(event_lines(count, seed, rate), p, None, partitions))
        stamps = [int(line.split("\t", 2)[1]) for line in lines]
        sent.append(server.produce(topic, lines, partition=p, timestamps=stamps))
    return sent
