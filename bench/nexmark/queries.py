"""Nexmark queries as PyFlink DataStream programs (imported from sparkpoint; with ``sparkpoint`` replaced by
``pyflink`` in the imports they run on PyFlink unchanged).

Every query reads the events of :mod:`bench.nexmark.generator` (parsed by :func:`parse`, event time with a
bounded out-of-orderness watermark) and writes tab-separated lines:

* q0 pass-through: ``auction bidder price channel date_time`` of every bid;
* q1 currency conversion: ``auction bidder euros date_time``, euros = ``0.908 * price`` (3 decimals);
* q2 selection: ``auction price`` of bids on auctions whose id is a multiple of 123;
* q3 local item suggestion: ``name city state auction`` of auctions of category 10 by sellers in OR, ID or CA
  (an incremental join of people and auctions);
* q4 average price per category: the winning (highest) bid of each auction among bids during its life, and
  per category a running ``category sum count`` of the winning prices (the average is sum / count);
* q5 hot items: per 10 s window sliding by 2 s, ``window_end auction count`` of the auctions with most bids;
* q7 highest bid: per 10 s tumbling window, ``window_end auction bidder price date_time`` of the highest bids;
* q8 monitor new users: ``person name window_start`` of people who opened an auction in the 10 s tumbling
  window they registered in (a window join);
* q11 user sessions: ``bidder bids start end`` per bidder's session of bids at most 10 s apart.
"""

from __future__ import annotations

from sparkpoint.common import Duration, Time, Types, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream.functions import (
    AggregateFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
)
from sparkpoint.datastream.state import ListStateDescriptor, ValueStateDescriptor
from sparkpoint.datastream.window import EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows

QUERIES = ("q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q11")
WINDOW_MS = 10_000
SLIDE_MS = 2_000


def parse(line):
    """A line as a tuple: ``("P", date_time, id, name, email, card, city, state)``, ``("A", date_time, id, item,
    initial_bid, reserve, expires, seller, category)`` or ``("B", date_time, auction, bidder, price, channel)``."""
    f = line.split("\t")
    if f[0] == "B":
        return "B", int(f[1]), int(f[2]), int(f[3]), int(f[4]), f[5]
    if f[0] == "A":
        return "A", int(f[1]), int(f[2]), f[3], int(f[4]), int(f[5]), int(f[6]), int(f[7]), int(f[8])
    return "P", int(f[1]), int(f[2]), f[3], f[4], f[5], f[6], f[7]


class EventTime(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


def events(env, source, disorder_ms, source_time=False):
    """The parsed events of ``source`` with event time and watermarks: taken from the parsed events, or with
    ``source_time`` (a Kafka topic whose messages carry the event time) from the source's timestamps, with
    watermarks per split (per partition), as Flink's ``from_source`` takes them."""
    bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(disorder_ms))
    if source_time:
        return env.from_source(source, bounded, "events").uid("source").map(parse).uid("parse")
    return (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
        .uid("source")
        .map(parse)
        .uid("parse")
        .assign_timestamps_and_watermarks(bounded.with_timestamp_assigner(EventTime()))
        .uid("event-time")
    )


def bids(stream):
    return stream.filter(lambda e: e[0] == "B").uid("bids")


def q0(stream):
    return bids(stream).map(lambda b: f"{b[2]}\t{b[3]}\t{b[4]}\t{b[5]}\t{b[1]}", output_type=Types.STRING())


def q1(stream):
    return bids(stream).map(lambda b: f"{b[2]}\t{b[3]}\t{0.908 * b[4]:.3f}\t{b[1]}", output_type=Types.STRING())


def q2(stream):
    return bids(stream).filter(lambda b: b[2] % 123 == 0).map(lambda b: f"{b[2]}\t{b[4]}", output_type=Types.STRING())


class JoinSellers(KeyedCoProcessFunction):
    """q3: people (kept as they qualify or not) and auctions waiting for their seller."""

    def open(self, ctx):
        self.person = ctx.get_state(ValueStateDescriptor("person", Types.PICKLED_BYTE_ARRAY()))
        self.waiting = ctx.get_list_state(ListStateDescriptor("waiting", Types.LONG()))

    def process_element1(self, p, ctx):
        who = (p[3], p[6], p[7]) if p[7] in ("OR", "ID", "CA") else ()
        self.person.update(who)
        if who:
            for auction in self.waiting.get():
                yield f"{who[0]}\t{who[1]}\t{who[2]}\t{auction}"
        self.waiting.clear()

    def process_element2(self, a, ctx):
        who = self.person.value()
        if who is None:
            self.waiting.add(a[2])
        elif who:
            yield f"{who[0]}\t{who[1]}\t{who[2]}\t{a[2]}"


def q3(stream):
    people = stream.filter(lambda e: e[0] == "P").uid("people")
    auctions = stream.filter(lambda e: e[0] == "A" and e[8] == 10).uid("category-10")
    return (
        people.connect(auctions)
        .key_by(lambda p: p[2], lambda a: a[7])
        .process(JoinSellers(), output_type=Types.STRING())
        .uid("join")
    )


class WinningBids(KeyedCoProcessFunction):
    """q4: per auction, the highest price of the bids in its life, emitted as ``(category, price)`` when it
    expires; bids that come before their auction wait until the watermark passes them."""

    def open(self, ctx):
        self.auction = ctx.get_state(ValueStateDescriptor("auction", Types.PICKLED_BYTE_ARRAY()))
        self.best = ctx.get_state(ValueStateDescriptor("best", Types.LONG()))
        self.early = ctx.get_list_state(ListStateDescriptor("early", Types.PICKLED_BYTE_ARRAY()))

    def _bid(self, auction, ts, price):
        if auction[0] <= ts <= auction[1]:
            best = self.best.value()
            if best is None or price > best:
                self.best.update(price)

    def process_element1(self, a, ctx):
        auction = (a[1], a[6], a[8])
        self.auction.update(auction)
        for ts, price in self.early.get():
            self._bid(auction, ts, price)
        self.early.clear()
        ctx.timer_service().register_event_time_timer(a[6])
        return []

    def process_element2(self, b, ctx):
        auction = self.auction.value()
        if auction is not None:
            self._bid(auction, b[1], b[4])
        else:
            self.early.add((b[1], b[4]))
            ctx.timer_service().register_event_time_timer(b[1])
        return []

    def on_timer(self, timestamp, ctx):
        auction = self.auction.value()
        if auction is not None and timestamp == auction[1]:
            best = self.best.value()
            if best is not None:
                yield auction[2], best
            self.auction.clear()
            self.best.clear()
        elif auction is None:  # bids for an auction not seen by their time: it cannot win them any more
            self.early.update([(ts, price) for ts, price in self.early.get() if ts > timestamp])


class RunningAverage(KeyedProcessFunction):
    def open(self, ctx):
        self.total = ctx.get_state(ValueStateDescriptor("total", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value, ctx):
        total, count = self.total.value() or (0, 0)
        total, count = total + value[1], count + 1
        self.total.update((total, count))
        yield f"{value[0]}\t{total}\t{count}"


def q4(stream):
    auctions = stream.filter(lambda e: e[0] == "A").uid("auctions")
    return (
        auctions.connect(bids(stream))
        .key_by(lambda a: a[2], lambda b: b[2])
        .process(WinningBids())
        .uid("winning-bids")
        .key_by(lambda w: w[0])
        .process(RunningAverage(), output_type=Types.STRING())
        .uid("average")
    )


class Count(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + 1

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return a + b


class WithWindowEnd(ProcessWindowFunction):
    def process(self, key, context, counts):
        for n in counts:
            yield context.window().end, key, n


class MostBids(ProcessWindowFunction):
    def process(self, key, context, counted):
        counted = list(counted)
        top = max(n for _, _, n in counted)
        for end, auction, n in sorted(counted):
            if n == top:
                yield f"{end}\t{auction}\t{n}"


def q5(stream):
    return (
        bids(stream)
        .key_by(lambda b: b[2])
        .window(SlidingEventTimeWindows.of(Time.milliseconds(WINDOW_MS), Time.milliseconds(SLIDE_MS)))
        .aggregate(Count(), window_function=WithWindowEnd())
        .uid("bids-per-auction")
        .key_by(lambda c: c[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(SLIDE_MS)))
        .process(MostBids(), output_type=Types.STRING())
        .uid("hot-items")
    )


class HighestBids(AggregateFunction):
    def create_accumulator(self):
        return None, []

    def add(self, b, acc):
        top, found = acc
        if top is None or b[4] > top:
            return b[4], [b]
        if b[4] == top:
            found.append(b)
        return top, found

    def get_result(self, acc):
        return acc[1]

    def merge(self, a, b):
        if a[0] is None or (b[0] is not None and b[0] > a[0]):
            return b
        return a if b[0] is None or a[0] > b[0] else (a[0], a[1] + b[1])


class HighestLines(ProcessAllWindowFunction):
    def process(self, context, results):
        for found in results:
            for b in sorted(found):
                yield f"{context.window().end}\t{b[2]}\t{b[3]}\t{b[4]}\t{b[1]}"


def q7(stream):
    return (
        bids(stream)
        .window_all(TumblingEventTimeWindows.of(Time.milliseconds(WINDOW_MS)))
        .aggregate(HighestBids(), window_function=HighestLines(), output_type=Types.STRING())
        .uid("highest")
    )


class PersonAndAuction(AggregateFunction):
    def create_accumulator(self):
        return None, False

    def add(self, e, acc):
        return (e[3], acc[1]) if e[0] == "P" else (acc[0], True)

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return a[0] or b[0], a[1] or b[1]


class NewSellers(ProcessWindowFunction):
    def process(self, key, context, results):
        for name, sold in results:
            if name is not None and sold:
                yield f"{key}\t{name}\t{context.window().start}"


def q8(stream):
    return (
        stream.filter(lambda e: e[0] != "B")
        .uid("people-and-auctions")
        .key_by(lambda e: e[2] if e[0] == "P" else e[7])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(WINDOW_MS)))
        .aggregate(PersonAndAuction(), window_function=NewSellers(), output_type=Types.STRING())
        .uid("new-sellers")
    )


class Session(ProcessWindowFunction):
    def process(self, key, context, counts):
        w = context.window()
        for n in counts:
            yield f"{key}\t{n}\t{w.start}\t{w.end}"


def q11(stream):
    return (
        bids(stream)
        .key_by(lambda b: b[3])
        .window(EventTimeSessionWindows.with_gap(Time.milliseconds(WINDOW_MS)))
        .aggregate(Count(), window_function=Session(), output_type=Types.STRING())
        .uid("sessions")
    )
